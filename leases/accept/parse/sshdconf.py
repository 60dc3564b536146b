"""sshd's settings as a node shows them: `sshd -T` (the effective values, lower-case keys,
one a line) or, where sshd -T is not allowed, the sshd_config text with its Include files
and Match blocks.

Only the settings acceptance judges are kept (KEYS). As in sshd, the first value of a
keyword wins; a value inside a Match block applies only to the connections it matches,
so it is kept apart (`matched`), never taken as the default. A keyword no file sets has
OpenSSH's own default, said as such. The text is hostile: nothing here raises on it, and
what could not be read is named in `problems`.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from leases.accept.words import _

KEYS = (
    "passwordauthentication",
    "kbdinteractiveauthentication",
    "permitrootlogin",
    "pubkeyauthentication",
    "authenticationmethods",
    "usepam",
    # Where keys come from besides ~/.ssh/authorized_keys (acceptance reads only the two
    # default files): recorded, never required of `sshd -T`.
    "authorizedkeysfile",
    "authorizedkeyscommand",
    "trustedusercakeys",
)
# Values that are paths or commands keep their case (the rest are yes/no words).
_KEEP_CASE = frozenset({"authorizedkeysfile", "authorizedkeyscommand", "trustedusercakeys"})
_OPTIONAL = frozenset(
    {"authenticationmethods", "authorizedkeysfile", "authorizedkeyscommand", "trustedusercakeys"}
)
# OpenSSH 8.7 made ChallengeResponseAuthentication an alias of KbdInteractiveAuthentication;
# before it, the latter defaulted to the former: either way they are one setting here.
ALIASES = {"challengeresponseauthentication": "kbdinteractiveauthentication"}
# OpenSSH's defaults (sshd_config(5)) where no file sets the keyword.
DEFAULTS = {
    "passwordauthentication": "yes",
    "kbdinteractiveauthentication": "yes",
    "permitrootlogin": "prohibit-password",
    "pubkeyauthentication": "yes",
    "authenticationmethods": "any",
    "usepam": "no",
    "authorizedkeysfile": ".ssh/authorized_keys .ssh/authorized_keys2",
    "authorizedkeyscommand": "none",
    "trustedusercakeys": "none",
}
MAIN = "/etc/ssh/sshd_config"
SSH_DIR = "/etc/ssh"
MAX_DEPTH = 16  # sshd's own READCONF_MAX_DEPTH
MAX_LINES = 20_000  # of all files together: more than any real config
_MAX_VALUE = 200
MAX_PROBLEMS = 20

# An Include pattern zuka will ask the node's shell to expand: under /etc/ssh, plain
# characters and the glob characters * and ? only (no quotes, spaces, $, brackets, ..).
_INCLUDE_OK = re.compile(r"/etc/ssh(/[A-Za-z0-9._*?-]+)+")


@dataclass(frozen=True)
class Setting:
    key: str  # lower case, aliases folded: "kbdinteractiveauthentication"
    value: str  # lower case as sshd compares it: "yes", "prohibit-password"
    source: str  # "sshd -T", "/etc/ssh/sshd_config line 12", "OpenSSH's default"
    condition: str = ""  # for a Match block's value: "User alice" (as written)


@dataclass(frozen=True)
class SshdConfig:
    source: str  # "sshd -T" or "sshd_config"
    values: dict[str, Setting] = field(default_factory=dict)  # effective defaults, KEYS each
    matched: tuple[Setting, ...] = ()  # values that apply only to what a Match block matches
    files: tuple[str, ...] = ()  # the files read, in order
    includes: tuple[str, ...] = ()  # Include patterns met (as written, resolved to /etc/ssh)
    problems: tuple[str, ...] = ()

    def source_of(self, key: str) -> str:
        """Where the effective value of key came from ("sshd -T", "FILE line N")."""
        setting = self.values.get(key)
        return setting.source if setting else _("OpenSSH's default")

    def value(self, key: str) -> str:
        setting = self.values.get(key)
        return setting.value if setting else DEFAULTS.get(key, "")


def _words(line: str) -> list[str]:
    """The words of a config line as sshd's argv_split sees them (enough for our keys):
    `Key value`, `Key=value`, quoted words, a word starting with # ends the line."""
    line = line.strip()
    m = re.match(r"([A-Za-z]+)\s*=\s*(.*)", line)
    if m:
        line = f"{m.group(1)} {m.group(2)}"
    words: list[str] = []
    for m in re.finditer(r'"([^"]*)"|(\S+)', line):
        word = m.group(1) if m.group(1) is not None else m.group(2)
        if m.group(2) is not None and word.startswith("#"):
            break
        words.append(word)
    return words


def parse_sshd_t(text: str) -> SshdConfig:
    """`sshd -T`: `key value...` a line, every keyword once, already effective."""
    values: dict[str, Setting] = {}
    problems: list[str] = []
    lines = text.split("\n")
    for raw in lines[:MAX_LINES]:
        words = raw.split()
        if not words:
            continue
        key = ALIASES.get(words[0].lower(), words[0].lower())
        if key in KEYS and key not in values:
            value = " ".join(words[1:])[:_MAX_VALUE]
            values[key] = Setting(key, value if key in _KEEP_CASE else value.lower(), "sshd -T")
    missing = [k for k in KEYS if k not in values and k not in _OPTIONAL]
    if not values:
        problems.append(_("sshd -T printed none of the settings looked for"))
    elif missing:
        problems.append(_("sshd -T did not print {settings}").format(settings=", ".join(missing)))
    return SshdConfig("sshd -T", values, problems=tuple(problems))


def include_pattern(arg: str) -> str:
    """An Include argument as sshd resolves it: relative ones are under /etc/ssh."""
    return arg if arg.startswith("/") else posixpath.join(SSH_DIR, arg)


# A path part that could name "." or ".." once the shell expands it: only dots and glob
# characters with a dot among them (`..`, `.?`, `?.`, `.*`), or a dot then a glob
# character (`.?*`, `.*.conf`): dash's `.?` matches `..`, and so may bash's.
_DOTS_RE = re.compile(r"(?=[.*?]*\.)[.*?]+|\.[*?].*")


def include_allowed(pattern: str) -> bool:
    """Whether zuka may hand this pattern to the node's shell to expand (see _INCLUDE_OK):
    under /etc/ssh, and no part that is or may expand to "." or ".."."""
    return (
        len(pattern) <= 200
        and _INCLUDE_OK.fullmatch(pattern) is not None
        and not any(_DOTS_RE.fullmatch(part) for part in pattern.split("/")[3:])
    )


def _glob_match(pattern: str, path: str) -> bool:
    """glob(3) semantics on whole components: * and ? never cross a /; a leading dot in a
    name is matched only by a leading dot in the pattern."""
    pp, ps = pattern.split("/"), path.split("/")
    if len(pp) != len(ps):
        return False
    for p, s in zip(pp, ps, strict=True):
        if s.startswith(".") and not p.startswith("."):
            return False
        if not fnmatch.fnmatchcase(s, p):
            return False
    return True


def expand(pattern: str, files: Mapping[str, str]) -> list[str]:
    """The files of `files` an Include pattern names, sorted as glob(3) sorts them."""
    if not any(c in pattern for c in "*?["):
        return [pattern] if pattern in files else []
    return sorted(p for p in files if _glob_match(pattern, p))


def includes_of(text: str) -> list[str]:
    """The Include patterns one file's text names (resolved to /etc/ssh), in order."""
    out: list[str] = []
    for raw in text.split("\n")[:MAX_LINES]:
        words = _words(raw)
        if len(words) >= 2 and words[0].lower() == "include":
            out += [include_pattern(w) for w in words[1:]]
    return out


class _Reader:
    def __init__(self, files: Mapping[str, str]) -> None:
        self.files = files
        self.values: dict[str, Setting] = {}
        self.matched: list[Setting] = []
        self.read: list[str] = []
        self.includes: list[str] = []
        self.problems: list[str] = []
        self.lines = 0

    def note(self, problem: str) -> None:
        """A problem, once, and at most MAX_PROBLEMS of them."""
        if problem not in self.problems and len(self.problems) < MAX_PROBLEMS:
            self.problems.append(problem)

    def file(self, path: str, condition: str, depth: int) -> str:
        """Read one file in the Match context `condition`; returns the context it ends in
        (a Match in an included file goes on after it, as in sshd)."""
        self.read.append(path)
        for number, raw in enumerate(self.files[path].split("\n"), 1):
            self.lines += 1
            if self.lines > MAX_LINES:
                self.note(_("more than {count} lines: the rest not read").format(count=MAX_LINES))
                return condition
            words = _words(raw)
            if not words:
                continue
            keyword = words[0].lower()
            if keyword == "match":
                rest = " ".join(words[1:])[:_MAX_VALUE]
                condition = "" if rest.lower() == "all" else (rest or "?")
                continue
            if keyword == "include":
                self._include(path, number, words[1:], condition, depth)
                continue
            key = ALIASES.get(keyword, keyword)
            if key not in KEYS:
                continue
            where = _("{path} line {line}").format(path=path, line=number)
            if len(words) < 2:
                self.note(
                    _("{where}: {keyword} has no value").format(where=where, keyword=words[0][:40])
                )
                continue
            value = " ".join(words[1:])[:_MAX_VALUE]
            value = value if key in _KEEP_CASE else value.lower()
            if condition:
                self.matched.append(Setting(key, value, where, condition))
            elif key not in self.values:
                self.values[key] = Setting(key, value, where)
        return condition

    def _include(self, path: str, number: int, args: list[str], condition: str, depth: int) -> None:
        if depth >= MAX_DEPTH:
            self.note(
                _("{path} line {line}: Include nested too deep: not followed").format(
                    path=path, line=number
                )
            )
            return
        for arg in args:
            pattern = include_pattern(arg)
            self.includes.append(pattern)
            if not include_allowed(pattern):
                self.note(
                    _(
                        "{path} line {line}: Include {pattern!r} is outside what zuka reads"
                        " (files under /etc/ssh): not read"
                    ).format(path=path, line=number, pattern=pattern[:80])
                )
                continue
            for found in expand(pattern, self.files):
                # An included file's Match context does not leak out (sshd resets it).
                self.file(found, condition, depth + 1)


def parse_config(files: Mapping[str, str], main: str = MAIN) -> SshdConfig:
    """The effective settings of sshd_config `main` and the Include files it names, from
    the texts `files` holds (path -> text, as the node printed them)."""
    if main not in files:
        return SshdConfig("sshd_config", problems=(f"{main} was not read",))
    reader = _Reader(files)
    reader.file(main, "", 0)
    values = dict(reader.values)
    for key in KEYS:
        if key not in values:
            values[key] = Setting(key, DEFAULTS[key], "OpenSSH's default")
    return SshdConfig(
        "sshd_config",
        values,
        tuple(reader.matched),
        tuple(reader.read),
        tuple(reader.includes),
        tuple(reader.problems),
    )


_HEADER_RE = re.compile(r"==> (/etc/ssh/[^\n]{1,300}) <==")
# The include script's word on a file it did not print whole: `==! PATH <== WHY`.
MARKS = ("unreadable", "cut", "symlink", "missing", "skipped")
_MARK_RE = re.compile(r"==! (/etc/ssh/[^\n]{1,300}) <== (" + "|".join(MARKS) + ")")


def split_files(text: str) -> dict[str, str]:
    """The files a fixed `cat` script printed, each after a `==> PATH <==` line."""
    return split_output(text)[0]


def split_output(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """The files the include script printed (path -> text), and its marks on the files it
    did not print whole (path -> one of MARKS: exists but unreadable, cut at 64 KiB, a
    symlink not followed, matched nothing, a path refused)."""
    files: dict[str, str] = {}
    marks: dict[str, str] = {}
    current: str | None = None
    chunks: list[str] = []
    for line in text.split("\n"):
        mark = _MARK_RE.fullmatch(line)
        header = _HEADER_RE.fullmatch(line)
        if mark is None and header is None:
            if current is not None:
                chunks.append(line)
            continue
        if current is not None:  # a mark or a header ends the file before it
            files[current] = "\n".join(chunks)
        current, chunks = (header.group(1) if header else None), []
        if mark is not None:
            marks.setdefault(mark.group(1), mark.group(2))
    if current is not None:
        files[current] = "\n".join(chunks)
    return files, marks
