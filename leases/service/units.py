"""The systemd units of `zuka collect` and `zuka web`, rendered by pure functions.

A system unit (`--system`, a lab install) runs as the lab's service user in the lab's viewers
group, with the collector's own SSH key and no SSH agent, hardened as far as SSH and SQLite
allow. A user unit (`--user`) runs in the user's own service manager on the user's own
ledger; it keeps running after logout only where `loginctl enable-linger USER` was run.

Every value written into a unit is checked first (absolute paths, no control characters)
and quoted as systemd.syntax(7) says: a word with a space or a quote in double quotes, `\\`
and `"` escaped, `%` written `%%` (a specifier otherwise) and `$` written `$$` in a command
line (a variable otherwise).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from leases.core.errors import InputError
from leases.core.i18n import _

# The first line of every unit zuka writes: a file without it is not zuka's to change.
MARKER = "# Written by `zuka service install`; `zuka service uninstall` removes it."
COLLECT = "zuka-collect"
WEB = "zuka-web"
# Folders ProtectHome= hides; a path under one of them needs ProtectHome=read-only.
HOME_FOLDERS = (PurePosixPath("/home"), PurePosixPath("/root"), PurePosixPath("/run/user"))
# Folders PrivateTmp= replaces with the unit's own: a path there is not the one zuka meant.
TMP_FOLDERS = (PurePosixPath("/tmp"), PurePosixPath("/var/tmp"))
RESTART_SEC = 10
# A word systemd takes as it is: nothing that would need quotes or escapes.
_PLAIN = re.compile(r"[A-Za-z0-9_./:@+=,-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Mode(enum.Enum):
    SYSTEM = "system"
    USER = "user"


@dataclass(frozen=True)
class Runtime:
    """How this zuka is started: its interpreter (absolute) and, when the `tui` package is
    not installed where that interpreter finds it, the folder that holds it (PYTHONPATH)."""

    python: Path
    pythonpath: Path | None = None
    # What the interpreter reads when it starts beside its own path: the file a venv's
    # python links to and the base installation's standard library (a pyenv build lives
    # under /root or /home), and the packages' folder. ProtectHome= must not hide them.
    needs: tuple[Path, ...] = ()


@dataclass(frozen=True)
class UnitSpec:
    """What one unit runs, as whom, and what it may write."""

    mode: Mode
    name: str  # zuka-collect or zuka-web
    description: str
    args: tuple[str, ...]  # zuka's own words after `python -m tui.cli.main`
    runtime: Runtime
    home: Path  # HOME of the service: where it finds its config
    writable: tuple[Path, ...]  # ReadWritePaths= (the ledger's folder)
    user: str | None = None  # system units only
    group: str | None = None

    @property
    def file_name(self) -> str:
        return f"{self.name}.service"


def check_path(what: str, path: Path) -> Path:
    """An absolute path with no control characters, else InputError: it goes into a unit."""
    text = str(path)
    if not path.is_absolute():
        raise InputError(what, text, _("must be an absolute path in a systemd unit"))
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise InputError(what, text, _("holds a control character"))
    return path


def quote_word(word: str, *, command: bool = True) -> str:
    """One word as systemd.syntax(7) reads it back unchanged."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in word):
        raise InputError("unit word", word, _("holds a control character"))
    escaped = word.replace("%", "%%")
    if command:
        escaped = escaped.replace("$", "$$")
    if _PLAIN.fullmatch(escaped):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def command_line(words: Sequence[str]) -> str:
    return " ".join(quote_word(w) for w in words)


def _env(name: str, value: str) -> str:
    if not _ENV_NAME.fullmatch(name):
        raise InputError("environment", name, _("is not a variable name"))
    return "Environment=" + quote_word(f"{name}={value}", command=False)


def under(paths: Sequence[Path], folders: Sequence[PurePosixPath]) -> list[Path]:
    """The paths that lie under one of these folders (those ProtectHome= or PrivateTmp=
    hide)."""
    return [p for p in paths if any(PurePosixPath(p).is_relative_to(f) for f in folders)]


def _unless_under(
    setting: str, hiding: str, folders: Sequence[PurePosixPath], paths: Sequence[Path]
) -> list[str]:
    """`NAME=hiding` (setting's name), or, where a path the unit needs lies under a folder
    that would hide, setting itself (the value that keeps the path) after a comment
    naming the path."""
    name = setting.split("=")[0]
    hidden = under(paths, folders)
    if not hidden:
        return [f"{name}={hiding}"]
    where = " or ".join(str(f) for f in folders)
    return [
        f"# {setting}, not {hiding}: {', '.join(str(p) for p in hidden)} lies under {where},"
        f" which {name}={hiding} would hide.",
        setting,
    ]


def plain_path(path: Path) -> str:
    """A path for a setting systemd reads whole (WorkingDirectory=): `%` escaped, no quotes."""
    text = str(check_path("path", path))
    return text.replace("%", "%%")


def exec_words(spec: UnitSpec) -> list[str]:
    return [str(spec.runtime.python), "-m", "tui.cli.main", *spec.args]


def _service_lines(spec: UnitSpec) -> list[str]:
    lines = ["Type=exec"]
    if spec.user:
        lines.append(f"User={quote_word(spec.user)}")
    if spec.group:
        lines.append(f"Group={quote_word(spec.group)}")
    lines.append(f"ExecStart={command_line(exec_words(spec))}")
    lines += [
        "Restart=on-failure",
        f"RestartSec={RESTART_SEC}",
        "StandardOutput=journal",
        "StandardError=journal",
        f"SyslogIdentifier={spec.name}",
        # A path setting takes the rest of the line as it is (quotes would be part of it):
        # only its specifiers are escaped.
        f"WorkingDirectory={plain_path(spec.home)}",
        # Never a person's agent: the service logs in with its own key only.
        "UnsetEnvironment=SSH_AUTH_SOCK SSH_AGENT_PID",
        _env("ZUKA_SERVICE", spec.name),
        _env("HOME", str(spec.home)),
        _env("PYTHONUNBUFFERED", "1"),
    ]
    if spec.runtime.pythonpath is not None:
        lines.append(_env("PYTHONPATH", str(spec.runtime.pythonpath)))
    return lines


def _hardening(spec: UnitSpec) -> list[str]:
    common = [
        "NoNewPrivileges=yes",
        # SSH to the nodes, the ledger's and the metrics' Unix sockets; nothing else.
        "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
        "LockPersonality=yes",
        "RestrictRealtime=yes",
        "SystemCallArchitectures=native",
        # The lab's files are the group's (viewers read): what the service makes, too.
        "UMask=0027",
    ]
    if spec.mode is Mode.USER:
        return [
            *common,
            "# A user's service manager applies the namespace options (ProtectSystem=,",
            "# PrivateTmp=, ProtectHome=) only with unprivileged user namespaces: left out.",
        ]
    paths = [spec.runtime.python, *spec.runtime.needs, *spec.writable, spec.home]
    if spec.runtime.pythonpath is not None:
        paths.append(spec.runtime.pythonpath)
    protect = _unless_under("ProtectHome=read-only", "yes", HOME_FOLDERS, paths)
    private_tmp = _unless_under("PrivateTmp=no", "yes", TMP_FOLDERS, paths)
    return [
        *common,
        "SystemCallFilter=@system-service",
        "SystemCallErrorNumber=EPERM",
        "ProtectSystem=strict",
        "ReadWritePaths=" + " ".join(quote_word(str(p), command=False) for p in spec.writable),
        *protect,
        *private_tmp,
        "PrivateDevices=yes",
        "ProtectKernelTunables=yes",
        "ProtectKernelModules=yes",
        "ProtectKernelLogs=yes",
        "ProtectControlGroups=yes",
        "ProtectClock=yes",
        "ProtectHostname=yes",
        "RestrictNamespaces=yes",
        "RestrictSUIDSGID=yes",
        "CapabilityBoundingSet=",
        "AmbientCapabilities=",
        "# No MemoryDenyWriteExecute=: Python's ctypes and cffi callbacks need it off.",
    ]


def render(spec: UnitSpec) -> str:
    """The unit file's text (pure)."""
    check_path("interpreter", spec.runtime.python)
    check_path("home", spec.home)
    for path in spec.writable:
        check_path("writable folder", path)
    if spec.runtime.pythonpath is not None:
        check_path("PYTHONPATH", spec.runtime.pythonpath)
    wanted = "multi-user.target" if spec.mode is Mode.SYSTEM else "default.target"
    unit = [
        MARKER,
        "[Unit]",
        f"Description={spec.description}",
    ]
    if spec.mode is Mode.SYSTEM:
        unit += ["Wants=network-online.target", "After=network-online.target"]
    else:
        unit += [
            "# A user's services stop at logout unless `loginctl enable-linger USER` was run.",
        ]
    text = [
        *unit,
        "",
        "[Service]",
        *_service_lines(spec),
        *_hardening(spec),
        "",
        "[Install]",
        f"WantedBy={wanted}",
    ]
    return "\n".join(text) + "\n"


def collect_args(ledger: Path, identity: Path | None) -> tuple[str, ...]:
    """`zuka collect`'s words in a unit: the ledger, and the service's own key."""
    check_path("ledger", ledger)
    args = ["collect", "--ledger", str(ledger)]
    if identity is not None:
        args += ["--identity", str(check_path("identity", identity))]
    return tuple(args)


def web_args(ledger: Path, host: str, port: int) -> tuple[str, ...]:
    check_path("ledger", ledger)
    if not 0 < port < 65536:
        raise InputError("port", port, _("must be between 1 and 65535"))
    if not host or not _PLAIN.fullmatch(host):
        raise InputError("host", host, _("is not an address to listen on"))
    return ("web", "--ledger", str(ledger), "--host", host, "--port", str(port))


def parse_words(value: str) -> list[str]:
    """A command line or an assignment list of a unit read back as systemd reads it (the
    quoting quote_word writes): for tests and `zuka service status`."""
    words: list[str] = []
    i, n = 0, len(value)
    while i < n:
        while i < n and value[i] == " ":
            i += 1
        if i >= n:
            break
        word: list[str] = []
        if value[i] == '"':
            i += 1
            while i < n and value[i] != '"':
                if value[i] == "\\" and i + 1 < n:
                    i += 1
                word.append(value[i])
                i += 1
            i += 1
        else:
            while i < n and value[i] != " ":
                word.append(value[i])
                i += 1
        words.append("".join(word).replace("$$", "$").replace("%%", "%"))
    return words


def settings(text: str) -> dict[str, list[str]]:
    """Every `Key=value` of a unit's text, by key, in order (pure)."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line or line.startswith(("#", ";", "[")) or "=" not in line:
            continue
        key, _, value = line.partition("=")
        out.setdefault(key.strip(), []).append(value.strip())
    return out
