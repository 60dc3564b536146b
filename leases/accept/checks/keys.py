"""authorized_keys for the sshd family: every file sshd's AuthorizedKeysFile names, read
with `cat` of a path checked at this one entry (a strict allow-list; %h is the home; other
%-tokens, `..` and absolute paths outside where keys live are not read, and said), judged
against the keys the lab expects; and where else sshd may take keys from (a command, a CA,
a Match block), which zuka cannot list.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from leases.accept.parse.sshdconf import SshdConfig
from leases.accept.probe import why_unread
from leases.accept.words import _
from leases.core.acceptance import CheckResult, Evidence, Status
from leases.core.textsafe import visible
from leases.offboard.authkeys import AuthorizedKey, keys_in

_SHOWN = 8  # items named in one finding; the rest counted


def _where(conf: SshdConfig, key: str) -> str:
    return visible(conf.source_of(key), 120)


DEFAULT_KEYS_FILES = ("~/.ssh/authorized_keys", "~/.ssh/authorized_keys2")  # sshd's own
MAX_KEYS_FILES = 8
_SAFE_PATH = re.compile(r"[A-Za-z0-9._/%@+-]{1,200}")
# Where an absolute AuthorizedKeysFile may be read from (or any path through a .ssh
# folder): keys live there; /etc/shadow and /proc/self/environ are not read into evidence.
_KEYS_ROOTS = ("/etc/ssh/", "/home/", "/root/", "/var/lib/")


def keys_files(conf: SshdConfig | None) -> tuple[list[str], list[str]]:
    """(the files sshd reads keys from, as paths for the login's shell: "~/..." or
    absolute; the AuthorizedKeysFile words zuka will not read, shown as they are). %h is
    the home (~), %% a %; another %-token (%u, %U) or a word outside a strict allow-list
    is not read, and said. Without sshd's settings, OpenSSH's default two files."""
    if conf is None:
        return list(DEFAULT_KEYS_FILES), []
    paths: list[str] = []
    skipped: list[str] = []
    words = conf.value("authorizedkeysfile").split()
    for word in words[:MAX_KEYS_FILES]:
        if word.lower() == "none":
            continue
        path = word.replace("%%", "\0")
        if path.startswith("%h/"):
            path = "~/" + path[3:]
        if not _SAFE_PATH.fullmatch(word) or "%" in path or ".." in path.split("/"):
            skipped.append(word)
            continue
        path = path.replace("\0", "%")
        path = path if path.startswith(("/", "~/")) else "~/" + path
        if path.startswith("/") and not (path.startswith(_KEYS_ROOTS) or "/.ssh/" in path):
            skipped.append(word)  # /etc/shadow, /proc/...: never read into the evidence
            continue
        paths.append(path)
    skipped += words[MAX_KEYS_FILES:]
    return list(dict.fromkeys(paths)), skipped


def cat_command(path: str) -> str:
    """`cat` of a keys file: ~/ left for the shell to expand, the rest quoted."""
    if path.startswith("~/"):
        return "cat ~/" + shlex.quote(path[2:])
    return "cat " + shlex.quote(path)


def judge_keys(
    ev: Evidence, expected: tuple[str, ...], also: Sequence[Evidence] = ()
) -> CheckResult:
    """The keys of ~/.ssh/authorized_keys (ev) and of the other files sshd reads by default
    (also: authorized_keys2) against the fingerprints the lab expects. A file that is absent
    authorises nothing; one the node will not show is never a pass."""
    check, title = "sshd.keys", "authorized_keys"
    want = _("only the keys the lab expects")
    files = (ev, *also)
    evidence = tuple(f.key for f in files)
    keys: list[tuple[str, AuthorizedKey]] = []
    unread = 0
    hidden: list[str] = []  # files the node would not show: never a pass, never hiding a fail
    for number, f in enumerate(files):
        name = f.command.removeprefix("cat ").strip()
        if why := why_unread(f):
            if "no such file" in f.stderr.lower() and not f.failure:
                continue
            line = _("{path} could not be read ({why})")
            hidden.append(line.format(path=visible(name, 80), why=why))
            continue
        found_keys, bad_lines = keys_in(f.stdout)
        unread += bad_lines
        # Lines of the first file are "line N" as before; of the others, with their name.
        where = "" if number == 0 else f"{visible(name.rsplit('/', 1)[-1], 40)} "
        keys += [(where, k) for k in found_keys]
    if hidden and (not expected or all(k.fingerprint in expected for _w, k in keys)):
        words = _("not checked: {why}").format(why=_("; ").join(hidden))
        return CheckResult(check, title, Status.NOT_CHECKED, words, want, words, evidence)
    if all("no such file" in f.stderr.lower() for f in files):
        # zuka logged in with a key, so sshd took it from somewhere else.
        names = ", ".join(visible(f.command.removeprefix("cat "), 80) for f in files)
        words = _("not checked: none of {paths} exists, yet zuka logged in with a key: sshd"
                  " reads keys from elsewhere (AuthorizedKeysCommand, a certificate)")  # fmt: skip
        words = words.format(paths=names)
        return CheckResult(check, title, Status.NOT_CHECKED, words, want, _("absent"), evidence)
    if not expected:
        found = _("{count} key(s): {keys}").format(
            count=len(keys), keys=", ".join(k.fingerprint for _w, k in keys[:_SHOWN])
        )
        words = _("skipped, because no key is recorded as expected for this node ({found})")
        words = words.format(found=found)
        return CheckResult(check, title, Status.SKIPPED, words, want, found, evidence)
    strangers = [(w, k) for w, k in keys if k.fingerprint not in expected and not k.forced]
    forced = [(w, k) for w, k in keys if k.fingerprint not in expected and k.forced]
    for bad, status, what in (
        (strangers, Status.FAILED, _("{count} key(s) the lab did not expect can log in (a"
         " provider's or a previous tenant's): {keys}")),
        (forced, Status.WARNED, _("{count} key(s) the lab did not expect are restricted to a"
         " forced command (no shell of their own; ask the provider what they run): {keys}")),
    ):  # fmt: skip
        if not bad:
            continue
        shown = _("; ").join(
            _("{file}line {line}: {kind} {fingerprint} {comment}").format(
                file=w,
                line=k.line,
                kind=k.kind,
                fingerprint=k.fingerprint,
                comment=visible(k.comment, 60) or _("(no comment)"),
            )
            for w, k in bad[:_SHOWN]
        )
        if len(bad) > _SHOWN:
            shown = _("{listed} and {count} more").format(listed=shown, count=len(bad) - _SHOWN)
        words = what.format(count=len(bad), keys=shown)
        if hidden:
            words = _("{words} (also: {hidden})").format(words=words, hidden=_("; ").join(hidden))
        if status is Status.WARNED and hidden:
            status = Status.NOT_CHECKED  # a file it could not read may hold worse
        return CheckResult(check, title, status, words, want, shown, evidence)
    found = _("{count} key(s), all expected").format(count=len(keys))
    if unread:
        found = _("{found}; {count} line(s) not read as keys (they authorise nothing)").format(
            found=found, count=unread
        )
    return CheckResult(check, title, Status.PASSED, found, want, found, evidence)


_KEY_SOURCE_LABELS = {
    "authorizedkeysfile": "AuthorizedKeysFile",
    "authorizedkeyscommand": "AuthorizedKeysCommand",
    "trustedusercakeys": "TrustedUserCAKeys",
}


def judge_key_sources(
    conf: SshdConfig | None, evidence: tuple[str, ...], skipped: Sequence[str] = ()
) -> CheckResult:
    """Where else sshd takes keys from: AuthorizedKeysFile words zuka did not read, a
    command, a CA. Any of them is a way in that zuka did not see."""
    check, title = "sshd.keysources", _("Where sshd takes keys from")
    want = _("only the AuthorizedKeysFile files zuka read")
    if conf is None:
        words = _("not checked: sshd's settings could not be read")
        return CheckResult(check, title, Status.NOT_CHECKED, words, want, evidence=evidence)
    others: list[str] = []
    if conf.value("authorizedkeysfile").lower() == "none":
        others.append(_("AuthorizedKeysFile none: sshd reads no keys file"))
    if skipped:
        shown = visible(" ".join(skipped), 160)
        others.append(
            _("AuthorizedKeysFile names {paths}, which zuka did not read").format(paths=shown)
        )
    for key, label in (("authorizedkeyscommand", "AuthorizedKeysCommand"),
                       ("trustedusercakeys", "TrustedUserCAKeys")):  # fmt: skip
        value = conf.value(key)
        if value and value.lower() != "none":
            others.append(f"{label} {visible(value, 120)} ({_where(conf, key)})")
    # A Match block's key source applies to the users or addresses it names (the login
    # may be one of them): sshd -T without -C does not show it, the config files do.
    for setting in conf.matched:
        if setting.key in _KEY_SOURCE_LABELS:
            line = _("{setting} {value} for Match {condition} ({source})")
            others.append(
                line.format(
                    setting=_KEY_SOURCE_LABELS[setting.key],
                    value=visible(setting.value, 120),
                    condition=visible(setting.condition, 80),
                    source=visible(setting.source, 100),
                )
            )
    if others:
        said = _("; ").join(others)
        words = _("{sources}: keys zuka did not see can log in; ask the provider")
        return CheckResult(
            check, title, Status.WARNED, words.format(sources=said), want, said, evidence
        )
    files = visible(conf.value("authorizedkeysfile"), 160)
    words = _("keys come only from {files} ({where}), all read")
    words = words.format(files=files, where=_where(conf, "authorizedkeysfile"))
    return CheckResult(check, title, Status.PASSED, words, want, files, evidence)
