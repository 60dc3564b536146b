"""Where a node's GPU readings come from: over SSH (nvidia-smi), or from a Prometheus that
scrapes NVIDIA's dcgm-exporter (leases.telemetry.promread). The fields a node and a
provider carry for it, their checks, and the selector built from a label-matcher list.

The URL and the matchers are pasted text that ends up in an HTTP request: the URL is http
or https with no user:password (a token goes in a file, never the ledger), no query or
fragment; the matchers are read with a strict grammar (`name="v"`, `name!="v"`,
`name=~"re"`, `name!~"re"`, comma-separated, values in double quotes with only `\\"` and
`\\\\` escapes) and the selector is always rebuilt from what was read, quoted again: no
text of the user's reaches Prometheus raw. Whether the host is a link-local or cloud
metadata address is judged where the network is (leases.app.nodes, and the reader's
resolver): the ledger never acts.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, NamedTuple

from leases.core.errors import InputError, Problems
from leases.core.i18n import N_, _
from leases.core.recordfields import cli
from leases.core.secrets import refuse_secret
from leases.core.textsafe import is_clean, visible


class ReadingSource(StrEnum):
    SSH = "ssh"
    PROMETHEUS = "prometheus"


# The dataclass metadata of the fields (leases.core.models Node and Provider).
SOURCE = cli(
    "--source",
    N_(
        "where GPU readings come from: {values} (a Prometheus fed by dcgm-exporter); a node"
        " without one takes its provider's; default ssh"
    ),
)
URL = cli("--url", N_("the Prometheus URL for --source prometheus (http or https, no password)"))
MATCH = cli(
    "--match",
    N_(
        "PromQL label matchers picking this node's GPUs: 'Hostname=\"gpu-07\"' (default for a"
        ' node: its provider\'s matchers and Hostname="NODE")'
    ),
)
TOKEN_FILE = cli("--token-file", N_("a file holding the bearer token for --url (never the token)"))

MAX_URL = 300
MAX_MATCH = 1000
MAX_MATCHERS = 16
# `, Hostname="NAME"` for the longest node name (63 characters that need no escape).
_HOSTNAME_ROOM = 80
MAX_VALUE = 256
MAX_PATH = 500
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
_OPS = ("!=", "=~", "!~", "=")  # two-character ones first
_PATH_RE = re.compile(r"[A-Za-z0-9._~/-]*")
_HOST_RE = re.compile(r"[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\]")
# The label dcgm-exporter names the machine by; a node's default matcher.
HOSTNAME_LABEL = "Hostname"


class Matcher(NamedTuple):
    name: str
    op: str
    value: str

    def promql(self) -> str:
        """The matcher as PromQL, its value quoted again (never the text as typed)."""
        return f"{self.name}{self.op}{quote(self.value)}"


def quote(value: str) -> str:
    """A PromQL double-quoted string holding value exactly."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _refuse(text: str, why: str) -> InputError:
    """A refusal naming the text as typed in plain words (no quoted repr of it: a matcher
    is full of quotes, and a repr of one nests them)."""
    return InputError(
        "prom_match", None, _("{why}; in: {text}").format(why=why, text=visible(text, 120))
    )


def example(node: str = "") -> str:
    """A matcher to show in a refusal: with the node's own name when known."""
    return f"{HOSTNAME_LABEL}={quote(node or 'gpu-07')}"


# PromQL's quotes: "..." and '...' take backslash escapes of themselves and of a
# backslash (zuka takes no other escape); `...` is raw (no escapes, no backquote inside).
_QUOTES = ('"', "'", "`")


def _string(text: str, at: int, ex: str) -> tuple[str, int]:
    """The quoted string starting at text[at]: its value and the index after it."""
    if at >= len(text) or text[at] not in _QUOTES:
        raise _refuse(
            text,
            _(
                "a value goes in quotes after the operator, as in {ex} (at character {value})"
            ).format(ex=ex, value=at + 1),
        )
    mark = text[at]
    out: list[str] = []
    i = at + 1
    while i < len(text):
        c = text[i]
        if c == mark:
            if len(out) > MAX_VALUE:
                raise _refuse(
                    text,
                    _("a value longer than {MAX_VALUE} characters").format(MAX_VALUE=MAX_VALUE),
                )
            return "".join(out), i + 1
        if c == "\\" and mark != "`":
            nxt = text[i + 1 : i + 2]
            if nxt not in (mark, "\\"):
                raise _refuse(
                    text,
                    _(
                        "a backslash in a value may only come before its quote or another"
                        " backslash (at "
                        "character {value})"
                    ).format(value=i + 1),
                )
            out.append(nxt)
            i += 2
            continue
        if not c.isprintable():
            raise _refuse(
                text, _("a control character in a value (at character {value})").format(value=i + 1)
            )
        out.append(c)
        i += 1
    raise _refuse(text, _("a value's closing quote is missing, as in {ex}").format(ex=ex))


def parse_matchers(
    text: str, node: str = "", *, hostname_added: bool = False
) -> tuple[Matcher, ...]:
    """A PromQL label-matcher list as pasted (`Hostname="gpu-07", gpu=~"0|1"`, braces
    allowed around it; values in double, single or back quotes as PromQL takes them),
    strictly: anything else is refused naming what was wrong, with an example (using the
    node's name when known). hostname_added: the list may hold, beyond the bounds, the
    Hostname matcher zuka added to a provider's (leases.telemetry.promtarget)."""
    ex = example(node)
    most, longest = MAX_MATCHERS, MAX_MATCH
    if hostname_added:
        most, longest = most + 1, longest + _HOSTNAME_ROOM
    if len(text) > longest:
        raise InputError(
            "prom_match", None, _("longer than {MAX_MATCH} characters").format(MAX_MATCH=MAX_MATCH)
        )
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    matchers: list[Matcher] = []
    i = 0
    while True:
        while i < len(body) and body[i] in " \t":
            i += 1
        if i >= len(body):
            break
        name = _NAME_RE.match(body, i)
        if name is None:
            raise _refuse(
                text,
                _(
                    "expected a label name (letters, digits and _) at character {value}, as in {ex}"
                ).format(value=i + 1, ex=ex),
            )
        i = name.end()
        while i < len(body) and body[i] in " \t":
            i += 1
        op = next((o for o in _OPS if body.startswith(o, i)), None)
        if op is None:
            raise _refuse(
                text,
                _("expected =, !=, =~ or !~ after {group}, as in {ex}").format(
                    group=name.group(), ex=ex
                ),
            )
        i += len(op)
        while i < len(body) and body[i] in " \t":
            i += 1
        value, i = _string(body, i, ex)
        if name.group() == "__name__":
            raise _refuse(text, _("__name__ is zuka's to choose (the dcgm-exporter metrics)"))
        if op in ("=~", "!~"):
            _regex(text, value)
        matchers.append(Matcher(name.group(), op, value))
        if len(matchers) > most:
            raise _refuse(
                text, _("more than {MAX_MATCHERS} matchers").format(MAX_MATCHERS=MAX_MATCHERS)
            )
        while i < len(body) and body[i] in " \t":
            i += 1
        if i < len(body):
            if body[i] != ",":
                raise _refuse(
                    text,
                    _(
                        "expected a comma between matchers at character {value}, as in {ex},"
                        " gpu=~{value2}"
                    ).format(value=i + 1, ex=ex, value2=quote("0|1")),
                )
            i += 1
    if not matchers:
        raise _refuse(text, _("no matcher: give one, as in {ex}").format(ex=ex))
    return tuple(matchers)


def _regex(text: str, value: str) -> None:
    try:
        re.compile(value)
    except re.error as exc:
        raise _refuse(text, _("not a regular expression: {exc}").format(exc=exc)) from None
    said = re2_refusal(value)
    if said is not None:
        raise _refuse(
            text, _("Prometheus's regular expressions (RE2) have no {said}").format(said=said)
        )


# What follows "(?" in Python's syntax that RE2 (Prometheus's) refuses.
_RE2_GROUPS = (
    ("<=", N_("lookbehind (?<=...)")),
    ("<!", N_("lookbehind (?<!...)")),
    ("=", N_("lookahead (?=...)")),
    ("!", N_("lookahead (?!...)")),
    (">", N_("atomic group (?>...)")),
    ("(", N_("conditional (?(...)...)")),
    ("P=", N_("backreference (?P=name)")),
    ("#", N_("comment (?#...)")),
)
_RE2_FLAGS = frozenset("imsU-")


def re2_refusal(pattern: str) -> str | None:
    """What Python's re takes in pattern that RE2 refuses (lookaround, backreferences,
    atomic groups, possessive quantifiers, conditionals, comments, flags RE2 lacks), in
    words; None when there is none. Run after re.compile (the syntax is sound)."""
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1 : i + 2]
            if not in_class and nxt and (nxt in "123456789" or nxt == "g"):
                return _("backreference \\{nxt}").format(nxt=nxt)
            if nxt == "Z":
                return _("\\Z (use $ or \\z)")
            if nxt in ("u", "U", "N"):  # Python's \uXXXX, \UXXXXXXXX, \N{NAME}
                return _("escape \\{nxt} (write the character itself, or \\x{{...}})").format(
                    nxt=nxt
                )
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "^":
                i += 1
            if pattern[i + 1 : i + 2] == "]":
                i += 1  # a ] first in a class is a character
        elif c == "(" and pattern[i + 1 : i + 2] == "?":
            rest = pattern[i + 2 :]
            for start, what in _RE2_GROUPS:
                if rest.startswith(start):
                    return _(what)
            flags = re.match(r"[A-Za-z-]*", rest)
            named = rest.startswith(("P<", "<"))  # (?P<name>...), (?<name>...): RE2 has them
            if flags and not named and not set(flags.group()) <= _RE2_FLAGS:
                return _("flag (?{group}) (RE2 knows i, m, s and U)").format(group=flags.group())
        elif c in "*+?}" and pattern[i + 1 : i + 2] == "+":
            return _("possessive quantifier {c}+").format(c=c)
        elif c == "{" and re.match(r"\{,\d+\}", pattern[i:]):
            return _("quantifier {,n} (RE2 reads it as text: write {0,n})")
        i += 1
    return None


def check_match(text: str, node: str = "") -> str:
    """The matchers as stored: re-written from what was read (one canonical spelling,
    values in double quotes)."""
    return ", ".join(m.promql() for m in parse_matchers(text, node))


def check_url(text: str) -> str:
    """A Prometheus base URL: http or https, a host, an optional port and path; no
    user:password, query or fragment. Returned without a trailing slash."""
    field = "prom_url"
    if len(text) > MAX_URL or not is_clean(text) or " " in text:
        raise InputError(
            field,
            visible(text, 120),
            _("a URL of at most {MAX_URL} characters, no spaces").format(MAX_URL=MAX_URL),
        )
    if "@" in text:
        raise InputError(
            field, "(hidden)", _("no user or password in the URL: put a token in --token-file")
        )
    refuse_secret(field, text)
    scheme = text.split(":", 1)[0].lower() if ":" in text else ""
    if "://" not in text or scheme not in ("http", "https"):
        raise InputError(field, text, _("give the scheme: http://HOST:9090 or https://HOST"))
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise InputError(field, text, _("not a URL: {exc}").format(exc=exc)) from None
    if "@" in parts.netloc:
        raise InputError(
            field, "(hidden)", _("no user or password in the URL: put a token in --token-file")
        )
    if parts.query or parts.fragment or "?" in text or "#" in text:
        raise InputError(field, text, _("no ?query or #fragment: the base URL only"))
    host = parts.netloc.rsplit(":", 1)[0] if port is not None else parts.netloc
    if not parts.hostname or not _HOST_RE.fullmatch(host):
        raise InputError(field, text, _("the URL needs a host name or address"))
    if not _PATH_RE.fullmatch(parts.path) or "/../" in parts.path + "/":
        raise InputError(field, text, _("a path of letters, digits and . _ ~ / - only"))
    return f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}"


def check_token_file(text: str) -> str:
    if len(text) > MAX_PATH or not is_clean(text) or not text.strip():
        raise InputError("prom_token_file", visible(text, 120), _("a file path on one line"))
    refuse_secret("prom_token_file", text)
    return text.strip()


def _opt(check: Any, value: Any) -> Any:
    return "" if value is None or str(value).strip() == "" else check(str(value))


def _source(value: Any) -> ReadingSource | None:
    if value is None or str(value).strip() == "":
        return None
    try:
        return ReadingSource(str(value).strip().lower())
    except ValueError:
        raise InputError("reading_source", str(value), _("must be ssh or prometheus")) from None


def record_fields(p: Problems, rec: Mapping[str, Any], node: str = "") -> dict[str, Any]:
    """The four fields of a node or provider record, checked (records.node_from and
    provider_from), each refusal kept in p. node: the node's name, for the examples."""
    return {
        "reading_source": p(None, _source, rec.get("reading_source")),
        "prom_url": p("", _opt, check_url, rec.get("prom_url")),
        "prom_match": p("", _opt, lambda v: check_match(v, node), rec.get("prom_match")),
        "prom_token_file": p("", _opt, check_token_file, rec.get("prom_token_file")),
    }


class PromTarget(NamedTuple):
    """Where one node's readings are read: the base URL, the matchers, the token file."""

    url: str
    matchers: tuple[Matcher, ...]
    token_file: str = ""

    def selector_matchers(self) -> str:
        return ", ".join(m.promql() for m in self.matchers)

    def shown(self) -> str:
        """`Prometheus http://prom:9090 {Hostname="gpu-07"}` for the node's detail."""
        return f"Prometheus {masked(self.url)} {{{self.selector_matchers()}}}"


def plain_token_refusal(url: str) -> str | None:
    """Why a bearer token must not be sent to url: plain http to a host other than this
    machine would carry it in the clear. None: https, or a loopback host."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return _("the URL does not read")
    if parts.scheme.lower() == "https":
        return None
    host = (parts.hostname or "").lower()
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        return None
    return _(
        "a bearer token is sent over https only (or to this machine: 127.0.0.1, [::1], "
        "localhost): {url} would carry it in the clear"
    ).format(url=masked(url))


def masked(url: str) -> str:
    """The URL as shown: scheme, host, port and path (nothing else is ever stored)."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.netloc.rsplit("@", 1)[-1]
    except ValueError:
        return "(unreadable URL)"
    return visible(f"{parts.scheme}://{host}{parts.path}", 200)
