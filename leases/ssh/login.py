"""Reading the SSH login command a rental platform hands out, and the one validator of SSH
targets that every way in uses (the `--ssh` option, `node add/edit`, JSON and CSV import,
rows read back from the ledger through records.node_from).

Accepts what people paste: ``ssh -p 30022 root@connect.westb.seetacloud.com``,
``ssh root@region-9.autodl.pro -p 41234``, ``ssh -i ~/.ssh/lab -J bastion user@10.0.0.7``,
``ssh -o Port=2222 -l ubuntu host``, ``ssh://root@host:2200``, an ~/.ssh/config alias, and
console pastes with a label before ``ssh`` (``登录指令：ssh -p 6666 root@host``) or a
password line after it (``密码：xxxx``): the password is dropped, never stored nor echoed.

Values are allow-listed, so none can become extra words of a ProxyCommand, an ssh option or
a line of known_hosts: a host is a DNS name, an IPv4 address, an IPv6 address (bracketed in
a command) or a config alias; a user a POSIX user name; a jump comma-separated
``[user@]host[:port]`` hops, each checked the same way (``none`` means no jump). Nothing
starts with ``-``; no whitespace, quotes, ``%``, shell metacharacters or control characters.

ssh options zuka honours: ``-p``, ``-i``, ``-J``, ``-l`` and ``-o`` with Port, User,
IdentityFile or ProxyJump. Port forwards (``-L``, ``-R``, ``-D``, as InternStudio's and Vast's
commands carry them) are kept as the node's tunnels, each checked here (check_tunnel): shown
and stored, used by nothing unless asked (SshTarget.command(tunnels=True)). An unquoted
word starting with ``#`` ends the command: it and the rest are a comment (Featurize's
``ssh -p 20022 featurize@workspace.featurize.cn  # 密码见控制台``).
Accepted and dropped because they change nothing about which machine is reached or how it
is trusted: the flags in _FLAGS (verbosity, compression, TTY,
forwarding of agent/X11 that zuka never asks for, backgrounding) and ``-o`` with
ServerAliveInterval, ServerAliveCountMax, ConnectTimeout, TCPKeepAlive, Compression or
LogLevel (zuka sets its own keepalives and timeouts), and StrictHostKeyChecking (any of its
values) or UserKnownHostsFile=/dev/null, which consoles add to weaken host-key checking:
zuka never honours them and checks every host key against its own trust store. Every other
option (ProxyCommand, HostName, LocalCommand, another UserKnownHostsFile, ``-F``, ``-W``...)
is refused with a message that says zuka does not honour it: never silently dropped.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from leases.core.errors import InputError
from leases.core.models import SshTarget
from leases.core.secrets import HIDDEN, looks_like_key_text, token_kind
from leases.core.textsafe import is_clean
from leases.ssh import loginwords
from leases.ssh.hostcheck import MAX_KEY_PATH as MAX_KEY_PATH
from leases.ssh.hostcheck import QUARANTINED_HOST as QUARANTINED_HOST
from leases.ssh.hostcheck import check_host as check_host
from leases.ssh.hostcheck import check_key_path as check_key_path
from leases.ssh.hostcheck import check_port as check_port
from leases.ssh.hostcheck import check_user as check_user
from leases.ssh.hostcheck import shown_value as _shown
from leases.ssh.pasted import PASSWORD_INLINE_RE, PASSWORD_LINE_RE
from leases.ssh.speech import _

FIELD = "ssh"
MAX_COMMAND = 4096
MAX_HOPS = 8
MAX_TUNNELS = 16
MAX_TUNNEL = 300  # characters of one forward
NO_JUMP = "none"

# Options that take an argument and that zuka honours.
_HONOURED = set("pilJo")
# Flags harmless for a login target: accepted and dropped (see the module docstring).
_FLAGS = set("46AaCfgKkMNnqsTtvXxYy")
_HARMLESS_OPTIONS = frozenset(
    {"serveraliveinterval", "serveralivecountmax", "connecttimeout", "tcpkeepalive",
     "compression", "loglevel"}
)  # fmt: skip
# Used with fullmatch: `$` would let a trailing newline through.
_OPTION_NAME_RE = re.compile(r"[A-Za-z]{1,40}")
_HARMLESS_VALUE_RE = re.compile(r"[A-Za-z0-9]{1,16}")
# A console's label before the command: `登录指令：ssh ...`, `SSH: ssh ...`.
# No `#` in a label: the label of a comment (`ssh h # see: ssh evil`) is not one.
_LABELLED_RE = re.compile(r"^(?:[^\s#][^\n#]*?[:：]\s*)?((?:/usr/bin/)?ssh(?:\s.*)?|ssh://\S*)$")
# Anything that may carry a password: then no refusal shows the line it came from.
_PASSWORDY_RE = re.compile(r"sshpass|[^\s@/:]+:[^\s@]*@")


@dataclass(frozen=True)
class JumpHop:
    """One hop of a ProxyJump / -J value."""

    host: str
    port: int | None = None
    user: str | None = None

    def spec(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port is not None else ""
        return f"{user}{host}{port}"


# -- single values -----------------------------------------------------------------------


def _userinfo(user: str, field: str) -> str:
    if ":" in user:
        raise InputError(
            field, HIDDEN, _("holds a password (user:password@): zuka never stores passwords")
        )
    return check_user(user, field)


def parse_jump_hops(value: str, field: str = "ssh_jump") -> list[JumpHop]:
    """The hops of a -J / ProxyJump value, each checked; [] for `none`."""
    if value == NO_JUMP:
        return []
    raw_hops = value.split(",")
    if len(raw_hops) > MAX_HOPS:
        raise InputError(
            field, _shown(value), _("has more than {count} hops").format(count=MAX_HOPS)
        )
    hops: list[JumpHop] = []
    for raw in raw_hops:
        hop = raw.removeprefix("ssh://").removesuffix("/")
        user_part, at, hostport = hop.rpartition("@")
        user = _userinfo(user_part, field) if at else None
        port: int | None = None
        if hostport.startswith("["):
            host, _sep, rest = hostport[1:].partition("]")
            if rest:
                if not rest.startswith(":"):
                    raise InputError(
                        field,
                        _shown(value),
                        _("cannot read the hop {hop!r}").format(hop=_shown(raw)),
                    )
                port = check_port(rest[1:], field)
            host = check_host(f"[{host}]", field)
        else:
            host, colon, port_text = hostport.partition(":")
            if colon:
                port = check_port(port_text, field)
            host = check_host(host, field)
        hops.append(JumpHop(host, port, user))
    return hops


def check_jump(value: str, field: str = "ssh_jump") -> str | None:
    """A jump value in its normal form, or None for `none` (no jump)."""
    hops = parse_jump_hops(value, field)
    return ",".join(h.spec() for h in hops) or None


_TUNNEL_PART_RE = re.compile(r"(\[[^\]]*\]|[^:\[\]]*)(:?)")


def _tunnel_parts(spec: str, field: str) -> list[str]:
    """A forward's parts split at `:`, an IPv6 address in brackets kept whole."""
    parts: list[str] = []
    rest = spec
    while True:
        m = _TUNNEL_PART_RE.match(rest)
        assert m is not None  # the pattern matches the empty text
        parts.append(m.group(1))
        rest = rest[m.end() :]
        if not m.group(2):
            if rest:
                raise InputError(field, _shown(spec), _("cannot be read as a port forward"))
            return parts


def _tunnel_host(value: str, spec: str, field: str, *, bind: bool) -> str:
    """A host of a forward by the one host check, IPv6 bracketed again; `*` binds to all."""
    if bind and value == "*":
        return value
    host = check_host(value, field)
    return f"[{host}]" if ":" in host else host


def check_tunnel(value: object, field: str = "ssh_tunnels") -> str:
    """One port forward in its normal form, `-L [bind_address:]port:host:hostport`,
    `-R [bind_address:]port:host:hostport` or `-D [bind_address:]port`; InputError for
    anything else (a socket path, port 0, a host the host check refuses)."""
    if not isinstance(value, str):
        raise InputError(field, _shown(value), _("a tunnel is text such as -L 8080:localhost:8080"))
    if len(value) > MAX_TUNNEL or not is_clean(value):
        raise InputError(field, _shown(value), _("is not a port forward"))
    kind, _sep, spec = value.strip().partition(" ")
    letter = kind.removeprefix("-")
    spec = spec.strip()
    if not kind.startswith("-") or letter not in loginwords.TUNNELS or not spec or " " in spec:
        raise InputError(
            field,
            _shown(value),
            _("a tunnel is -L or -R [bind_address:]port:host:hostport, or -D [bind_address:]port"),
        )
    if "/" in spec:
        raise InputError(field, _shown(value), _("forwards to or from a socket path are refused"))
    parts = _tunnel_parts(spec, field)
    wanted = (1, 2) if letter == "D" else (3, 4)
    if len(parts) not in wanted:
        form = "[bind_address:]port" if letter == "D" else "[bind_address:]port:host:hostport"
        raise InputError(
            field, _shown(value), _("-{letter} takes {form}").format(letter=letter, form=form)
        )
    bind = _tunnel_host(parts[0], value, field, bind=True) if len(parts) in (2, 4) else None
    rest = parts[1:] if bind is not None else parts
    out = [str(check_port(rest[0], field))]
    if letter != "D":
        out += [_tunnel_host(rest[1], value, field, bind=False), str(check_port(rest[2], field))]
    return f"-{letter} " + ":".join(([bind] if bind is not None else []) + out)


def check_tunnels(value: object, field: str = "ssh_tunnels") -> tuple[str, ...]:
    """A node's tunnels in their normal form: a list of forwards (or one text of them, one
    a line or comma-separated, as a CSV cell holds them); duplicates dropped, at most
    MAX_TUNNELS."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        items: list[object] = [v for v in re.split(r"[\n,]", value) if v.strip()]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise InputError(field, _shown(value), _("must be a list of port forwards"))
    if len(items) > MAX_TUNNELS:
        raise InputError(
            field, f"{len(items)} forwards", _("at most {count} tunnels").format(count=MAX_TUNNELS)
        )
    return tuple(dict.fromkeys(check_tunnel(v, field) for v in items))


def check_target(target: SshTarget) -> SshTarget:
    """Every field of a target checked (as stored: IPv6 hosts unbracketed)."""
    return SshTarget(
        host=check_host(target.host),
        port=None if target.port is None else check_port(target.port),
        user=None if target.user is None else check_user(target.user),
        key_path=None if target.key_path is None else check_key_path(target.key_path),
        jump=None if target.jump is None else check_jump(target.jump),
        alias=target.alias,
        tunnels=check_tunnels(target.tunnels),
    )


# -- the pasted command ------------------------------------------------------------------


def _login_line(command: str) -> tuple[str, bool]:
    """The one line that holds the login command, its label and any password cut off;
    and whether a password was seen (then no refusal may show the paste itself)."""
    if len(command) > MAX_COMMAND:
        raise InputError(
            FIELD, _shown(command), _("is longer than {count} characters").format(count=MAX_COMMAND)
        )
    lines = [line.strip() for line in command.splitlines() if line.strip()]
    kept = [line for line in lines if not PASSWORD_LINE_RE.match(line)]
    had_password = len(kept) != len(lines)
    if not kept:
        raise InputError(FIELD, HIDDEN if had_password else command, _("is empty"))
    if len(kept) > 1:
        # Not shown: the other lines may hold a secret in any form.
        raise InputError(
            FIELD,
            HIDDEN,
            _(
                "has more than one line: paste one login command (a password line after it is"
                " ignored)"
            ),
        )
    line = kept[0]
    inline = PASSWORD_INLINE_RE.search(line)
    if inline:
        line, had_password = line[: inline.start()].strip(), True
    labelled = _LABELLED_RE.match(line)
    if labelled:
        line = labelled.group(1)
    if not line:
        raise InputError(FIELD, HIDDEN, _("has no ssh command"))
    kind = token_kind(line)
    if kind is not None:
        raise InputError(
            FIELD,
            HIDDEN,
            _("holds what looks like {kind}: zuka never stores one").format(kind=kind),
        )
    return line, had_password


def _destination(dest: str, line: str) -> tuple[str | None, str, int | None]:
    port: int | None = None
    if dest.startswith("ssh://"):
        rest = dest.removeprefix("ssh://").removesuffix("/")
        user_part, at, hostport = rest.rpartition("@")
        user = _userinfo(user_part, FIELD) if at else None
        m = re.match(r"^(\[[^\]]*\]|[^:]*)(?::([^:]*))?$", hostport)
        if not m:
            raise InputError(
                FIELD, _shown(line), _("cannot read the URL {url!r}").format(url=_shown(dest))
            )
        if m.group(2) is not None:
            port = check_port(m.group(2), FIELD)
        return user, check_host(m.group(1), FIELD), port
    user = None
    if "@" in dest:
        user_part, _sep, dest = dest.rpartition("@")
        user = _userinfo(user_part, FIELD)
    if dest.startswith("[") and dest.endswith("]"):
        return user, check_host(dest, FIELD), port
    if ":" in dest:
        raise InputError(
            FIELD, _shown(line), _("host:port is not an ssh destination; use -p PORT or ssh://")
        )
    return user, check_host(dest, FIELD), port


def _refuse_option(name: str, line: str) -> InputError:
    reason = _(loginwords.OPTION_REASONS.get(name.lower(), loginwords.REMOVE_IT))
    words = _("zuka does not honour the ssh option {option}: {why}")
    return InputError(FIELD, _shown(line), words.format(option=_shown(name), why=reason))


def parse_ssh_command(command: str, known_aliases: frozenset[str] = frozenset()) -> SshTarget:
    """Parse a login command or alias into an SshTarget; InputError if it is not one."""
    if not command.strip():
        raise InputError(FIELD, command, _("is empty"))
    if looks_like_key_text(command):
        raise InputError(FIELD, HIDDEN, _("holds private key text: give the key's path with -i"))
    line, had_password = _login_line(command)
    try:
        return _parse_line(line, known_aliases)
    except InputError as exc:
        # A refusal that shows the line (or part of it) must not show a password in it.
        if exc.value != HIDDEN and (had_password or _PASSWORDY_RE.search(line)):
            raise InputError(
                FIELD,
                HIDDEN,
                _(
                    "holds what may be a password (not shown; zuka never stores one), and is"
                    " refused: give the login command without it"
                ),
            ) from None
        raise


def without_comment(line: str) -> str:
    """The line up to an unquoted word that starts with `#` (as a shell reads it)."""
    quote = ""
    escaped = False
    for i, ch in enumerate(line):
        if escaped:
            escaped = False
        elif quote:
            if ch == quote:
                quote = ""
            elif ch == "\\" and quote == '"':
                escaped = True
        elif ch == "\\":
            escaped = True
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line


def _parse_line(line: str, known_aliases: frozenset[str]) -> SshTarget:
    try:
        words = shlex.split(without_comment(line))
    except ValueError as exc:
        why = _(str(exc)) if str(exc) in loginwords.SHLEX_WORDS else str(exc)
        raise InputError(
            FIELD, _shown(line), _("cannot be split into words: {why}").format(why=why)
        ) from None
    if words and words[0] == "sshpass":
        raise InputError(
            FIELD,
            HIDDEN,
            _(
                "sshpass carries a password: zuka never stores one; give the ssh command alone"
                " (without sshpass and its password) and log in with a key (ssh -i KEY)"
            ),
        )
    if words and words[0] in {"ssh", "/usr/bin/ssh"}:
        words = words[1:]
    elif len(words) != 1 or words[0].startswith("-"):
        raise InputError(
            FIELD, _shown(line), _("must start with 'ssh' or be a single ~/.ssh/config alias")
        )
    # As in OpenSSH, the first value given for a setting wins.
    settings: dict[str, str] = {}
    tunnels: list[str] = []
    dest: str | None = None
    options_done = False
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not options_done and word == "--":
            options_done = True
            continue
        if options_done or not word.startswith("-") or word == "-":
            if dest is not None:
                # The words after the destination are not repeated: a console's paste may
                # have put a password there ("root@h 密码 SECRET").
                raise InputError(
                    FIELD,
                    _shown(" ".join(["ssh", *words[: i - 1], "…"])),
                    _(
                        "has words after the login (a remote command, or a password: not"
                        " shown): give only the login part"
                    ),
                )
            dest = word
            continue
        j = 1
        while j < len(word):
            opt = word[j]
            j += 1
            if opt in _FLAGS:
                continue
            if opt in loginwords.REFUSED_FLAGS:
                raise InputError(
                    FIELD,
                    _shown(line),
                    _("-{option} ({what}) is not a login").format(
                        option=opt, what=_(loginwords.REFUSED_FLAGS[opt])
                    ),
                )
            if (
                opt not in _HONOURED
                and opt not in loginwords.REFUSED_WITH_ARG
                and opt not in loginwords.TUNNELS
            ):
                raise InputError(
                    FIELD,
                    _shown(line),
                    _("unknown ssh option -{option}").format(option=_shown(opt)),
                )
            if opt in loginwords.REFUSED_WITH_ARG:
                raise InputError(
                    FIELD,
                    _shown(line),
                    _(
                        "zuka does not honour the ssh option -{option} ({what}): give only the"
                        " login part"
                    ).format(option=opt, what=_(loginwords.REFUSED_WITH_ARG[opt])),
                )
            if j < len(word):
                arg = word[j:]
            elif i < len(words):
                arg, i = words[i], i + 1
            else:
                raise InputError(
                    FIELD, _shown(line), _("option -{option} needs a value").format(option=opt)
                )
            j = len(word)
            if opt in loginwords.TUNNELS:
                tunnels.append(check_tunnel(f"-{opt} {arg}", FIELD))
                continue
            name, value = _option(arg, line) if opt == "o" else (_SETTING_OF[opt], arg)
            if name is not None:
                # Every value is checked, even one a first value overrides.
                settings.setdefault(name, _SETTING_CHECKS[name](value))
    if dest is None:
        raise InputError(FIELD, _shown(line), _("has no host"))
    dest_user, host, url_port = _destination(dest, line)
    port = url_port or (int(settings["port"]) if "port" in settings else None)
    user = dest_user or settings.get("user")
    jump = settings.get("proxyjump")
    alias = host in known_aliases and port is None and user is None
    return SshTarget(
        host=host,
        port=port,
        user=user,
        key_path=settings.get("identityfile"),
        jump=None if jump == NO_JUMP else jump,
        alias=alias,
        tunnels=check_tunnels(tunnels, FIELD),
    )


_SETTING_OF = {"p": "port", "i": "identityfile", "J": "proxyjump", "l": "user"}
# Each checks a value and returns it in its normal form, as text.
_SETTING_CHECKS: dict[str, Callable[[str], str]] = {
    "port": lambda v: str(check_port(v, FIELD)),
    "user": lambda v: check_user(v, FIELD),
    "identityfile": lambda v: check_key_path(v, FIELD),
    "proxyjump": lambda v: check_jump(v, FIELD) or NO_JUMP,
}


def _option(arg: str, line: str) -> tuple[str | None, str]:
    """An -o Option=value: (setting, value) for one zuka honours, (None, '') for a harmless
    one it drops; InputError for any other."""
    name, sep, value = arg.replace("=", " ", 1).partition(" ")
    name, value = name.strip(), value.strip()
    if not sep or not value:
        raise InputError(
            FIELD, _shown(line), _("-o {value!r} is not Option=value").format(value=_shown(arg))
        )
    if not _OPTION_NAME_RE.fullmatch(name):
        raise InputError(
            FIELD,
            _shown(line),
            _("-o {value!r} is not an ssh option name").format(value=_shown(name)),
        )
    key = name.lower()
    if key in _SETTING_CHECKS:
        return key, value
    if key in _HARMLESS_OPTIONS and _HARMLESS_VALUE_RE.fullmatch(value):
        return None, ""
    trust = _TRUST_OPTIONS.get(key)
    if trust is not None and trust.fullmatch(value):
        return None, ""
    raise _refuse_option(name, line)


# Options with which a console's command weakens OpenSSH's host-key checking (InternStudio's
# `-o StrictHostKeyChecking=no`). zuka never honours them: it always checks the host key
# against its own trust store and asks before trusting a new one; dropping them keeps
# that, so the line is accepted as pasted. Any other value is refused as before.
_TRUST_OPTIONS = {
    "stricthostkeychecking": re.compile(r"(?i:yes|no|ask|accept-new|off)"),
    "userknownhostsfile": re.compile(r"/dev/null"),
}


def ssh_config_aliases(text: str) -> frozenset[str]:
    """Host names (without wildcards) declared in an ssh_config text."""
    names: set[str] = set()
    for line in text.splitlines():
        parts = line.strip().split()
        if len(parts) >= 2 and parts[0].lower() == "host":
            names.update(p for p in parts[1:] if not any(c in p for c in "*?!"))
    return frozenset(names)
