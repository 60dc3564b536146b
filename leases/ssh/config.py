"""The user's ~/.ssh/config, read by zuka itself for the few options it honours.

asyncssh would read the config on its own and run a ProxyCommand it finds there, with the
node's host substituted for %h (the bug class of OpenSSH's CVE-2023-51385), and would open
a ProxyJump with its own defaults, outside zuka's trust store and connect limits. So zuka
connects with `config=[]` and resolves a node here instead: HostName, Port, User,
IdentityFile, ProxyJump, IdentitiesOnly and ConnectTimeout are honoured; an option that
would make ssh connect elsewhere or run something locally (ProxyCommand, HostKeyAlias,
LocalCommand with PermitLocalCommand, ...) makes the node refused, with a message, rather
than connected some other way than the user's ssh would. `Match exec` is never run: a Match
block zuka cannot evaluate refuses the nodes it might set such options for.
"""

from __future__ import annotations

import getpass
import glob
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from leases.core.errors import InputError
from leases.ssh.login import check_port
from leases.ssh.speech import N_, _

# The most of a config file (or of all Includes together) zuka reads.
_MAX_CONFIG_BYTES = 1 << 20
_MAX_INCLUDE_DEPTH = 8

HONOURED = frozenset(
    {"hostname", "port", "user", "identityfile", "proxyjump", "identitiesonly", "connecttimeout"}
)
# Options that change where ssh connects, which key it checks, or run a local command.
_REFUSED = {
    "proxycommand": N_("{keyword} runs a local command to connect, which zuka does not do"),
    "proxyusefdpass": N_(
        "{keyword} hands the connection to a local command, which zuka does not do"
    ),
    "hostkeyalias": N_("{keyword} checks the host key under another name, which zuka does not do"),
    "canonicalizehostname": N_("{keyword} rewrites the host name, which zuka does not do"),
    "knownhostscommand": N_("{keyword} runs a local command for host keys, which zuka does not do"),
    "localcommand": N_("{keyword} runs a local command after connecting, which zuka does not do"),
    "remotecommand": N_("{keyword} replaces the command run on the node, which zuka does not do"),
}
# Values that mean the option is off.
_OFF = {"none", "no", "false"}


class ConfigRefused(Exception):
    """The config (or a value it resolves to) is one zuka will not connect with."""


@dataclass(frozen=True)
class HostConfig:
    """What the config says about one host (first value wins, as in ssh)."""

    hostname: str | None = None
    port: int | None = None
    user: str | None = None
    identity_files: tuple[str, ...] = ()
    proxy_jump: str | None = None  # "none" disables a jump
    identities_only: bool = False
    refusals: tuple[str, ...] = ()


@dataclass
class _Acc:
    options: dict[str, list[str]] = field(default_factory=dict)
    refusals: list[str] = field(default_factory=list)


def _tokens(line: str) -> list[str]:
    line = line.strip()
    if not line or line.startswith("#"):
        return []
    keyword, sep, rest = line.partition("=") if re.match(r"^\w+\s*=", line) else ("", "", "")
    if sep:
        return [keyword.strip(), *shlex.split(rest, comments=True)]
    return shlex.split(line, comments=True)


def _pattern_matches(pattern: str, value: str) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.IGNORECASE) is not None


def _list_matches(patterns: Iterable[str], value: str) -> bool:
    """ssh's pattern-list rule: some positive pattern matches and no negated one does."""
    matched = False
    for raw in ",".join(patterns).split(","):
        if not raw:
            continue
        if raw.startswith("!"):
            if _pattern_matches(raw[1:], value):
                return False
        elif _pattern_matches(raw, value):
            matched = True
    return matched


def _match_line(args: list[str], host: str, user: str) -> bool | None:
    """Evaluate a Match line: True, False, or None when zuka cannot tell (exec, ...)."""
    result: bool | None = True
    i = 0
    while i < len(args):
        word = args[i].lower()
        negate = word.startswith("!")
        word = word.lstrip("!")
        if word == "all":
            value: bool | None = True
            i += 1
        elif word in {"host", "originalhost", "user", "localuser"} and i + 1 < len(args):
            subject = {"host": host, "originalhost": host, "user": user}.get(word)
            value = _list_matches([args[i + 1]], subject or getpass.getuser())
            i += 2
        else:
            # exec, localnetwork, canonical, final, tagged: never run, never guessed.
            value = None
            i += 2 if word not in {"canonical", "final"} else 1
        if value is not None and negate:
            value = not value
        if value is False:
            return False
        if value is None:
            result = None
    return result


def _read(path: Path, budget: list[int]) -> list[str]:
    try:
        if not path.is_file():
            return []
        with path.open("rb") as f:
            data = f.read(budget[0] + 1)
    except OSError:
        return []
    if len(data) > budget[0]:
        raise ConfigRefused(
            _("{path} is larger than {limit} bytes").format(path=path, limit=_MAX_CONFIG_BYTES)
        )
    budget[0] -= len(data)
    return data.decode("utf-8", "replace").splitlines()


def _walk(
    path: Path, host: str, acc: _Acc, active: bool | None, depth: int, budget: list[int]
) -> None:
    if depth > _MAX_INCLUDE_DEPTH:
        raise ConfigRefused(
            _("{path}: Include nested more than {depth} deep").format(
                path=path, depth=_MAX_INCLUDE_DEPTH
            )
        )
    for number, line in enumerate(_read(path, budget), 1):
        try:
            words = _tokens(line)
        except ValueError as exc:
            raise ConfigRefused(
                _("{path} line {line}: cannot read it ({why})").format(
                    path=path, line=number, why=exc
                )
            ) from None
        if not words:
            continue
        keyword, args = words[0].lower(), words[1:]
        if keyword == "host":
            active = _list_matches(args, host)
        elif keyword == "match":
            user = (acc.options.get("user") or [""])[0]
            active = _match_line(args, host, user)
        elif keyword == "include":
            if active is False:
                continue
            for arg in args:
                pattern = str(Path(arg).expanduser())
                if not Path(pattern).is_absolute():
                    pattern = str(Path("~/.ssh").expanduser() / pattern)
                for found in sorted(glob.glob(pattern)):
                    _walk(Path(found), host, acc, active, depth + 1, budget)
        elif active is True:
            if keyword in acc.options and keyword != "identityfile":
                continue  # the first value wins
            acc.options.setdefault(keyword, []).extend(args[:1] if args else [""])
        elif active is None and (keyword in HONOURED or keyword in _REFUSED):
            acc.refusals.append(
                _(
                    "{path} line {line}: a Match block zuka cannot evaluate (it never runs"
                    " `Match exec`) may set {keyword} for this host"
                ).format(path=path, line=number, keyword=words[0])
            )


def host_config(host: str, paths: Sequence[Path]) -> HostConfig:
    """Resolve host through the config files in order. Raises ConfigRefused for a file
    zuka cannot read safely (too big, unbalanced quotes, Includes too deep)."""
    acc = _Acc()
    budget = [_MAX_CONFIG_BYTES]
    for path in paths:
        _walk(Path(path).expanduser(), host, acc, True, 0, budget)
    opts = {k: v[0] for k, v in acc.options.items() if v}
    refusals = list(acc.refusals)
    for keyword, why in _REFUSED.items():
        value = opts.get(keyword)
        if value is None or value.lower() in _OFF:
            continue
        if keyword == "localcommand" and opts.get("permitlocalcommand", "no").lower() != "yes":
            continue  # ssh itself would not run it
        refusals.append(_(why).format(keyword=keyword))
    port: int | None = None
    if "port" in opts:
        try:
            port = check_port(opts["port"], "Port")  # the ledger's own rule
        except InputError:
            refusals.append(_("Port {port!r} is not a port number").format(port=opts["port"]))
    hostname = opts.get("hostname")
    if hostname is not None:
        # ssh expands %h (the name given) and %% in HostName; zuka expands nothing else.
        expanded = hostname.replace("%%", "\0").replace("%h", host)
        if "%" in expanded:
            words = _("HostName {value!r} uses a % token zuka does not expand")
            refusals.append(words.format(value=hostname))
        hostname = expanded.replace("\0", "%")
    files = []
    for raw in acc.options.get("identityfile", []):
        if raw.lower() == "none":
            continue
        spec = raw.replace("%d", str(Path.home())).replace("%u", getpass.getuser())
        if "%" in spec.replace("%%", ""):
            words = _("IdentityFile {value!r} uses a % token zuka does not expand")
            refusals.append(words.format(value=raw))
            continue
        files.append(str(Path(spec.replace("%%", "%")).expanduser()))
    return HostConfig(
        hostname=hostname,
        port=port,
        user=opts.get("user"),
        identity_files=tuple(files),
        proxy_jump=opts.get("proxyjump"),
        identities_only=opts.get("identitiesonly", "no").lower() == "yes",
        refusals=tuple(refusals),
    )


def default_config_paths() -> tuple[Path, ...]:
    """What ssh reads: the user's config, then the system-wide one."""
    return (Path("~/.ssh/config").expanduser(), Path("/etc/ssh/ssh_config"))
