"""sshd, its keys and the node's open ports: can anyone but the lab get in?

- sshd's settings, read with `sshd -T` where allowed, else sshd_config and the Include
  files the node's own shell expands (a fixed script; Include patterns only under /etc/ssh
  through a strict allow-list): password and keyboard-interactive login off, root not by
  password. A Match block's values apply only to what it matches, and say so.
- The remote proof: a fresh login offering no key must never be asked for a password or a
  keyboard-interactive answer (`ctx.password_proof`, leases.ssh.passwordprobe).
- authorized_keys of the login user against the keys the lab expects (Sold.expected_keys).
- Listening ports against the expected ones; any service on all interfaces is asked for
  `/api/kernels` from the node itself, and one answering 200 without a token fails
  (leases.accept.checks.ports).
"""

from __future__ import annotations

from dataclasses import replace

from leases.accept.checks.keys import cat_command, judge_key_sources, judge_keys, keys_files
from leases.accept.checks.ports import check_ports
from leases.accept.engine import Check, Context, LoginOffer
from leases.accept.parse import sshdconf
from leases.accept.parse.sshdconf import SshdConfig
from leases.accept.probe import Probe, why_unread
from leases.core.acceptance import CheckResult, Evidence, Level, Status
from leases.core.textsafe import visible

MAX_INCLUDE_ROUNDS = 3
_SHOWN = 8  # items named in one finding; the rest counted


# -- reading sshd's settings ----------------------------------------------------------


def include_script(patterns: list[str]) -> str:
    """A fixed script printing each file the node's shell finds for the patterns, after a
    `==> PATH <==` line; only allow-listed patterns (sshdconf.include_allowed) go in, as
    words the shell expands and nothing else. Private host keys, id_* keys and moduli are
    never read. A file it does not print whole gets a `==! PATH <== WHY` line instead
    (sshdconf.MARKS): a path with /../ or /./ (skipped), a symlink (not followed), no such
    file (missing: a glob that matched nothing), unreadable, or longer than 64 KiB (cut)."""
    words = " ".join(p for p in patterns if sshdconf.include_allowed(p))
    return (
        f'for f in {words}; do case "$f" in '
        "*/../*|*/..|*/./*|*/.) printf '==! %s <== skipped\\n' \"$f\"; continue;; "
        "*_key|*/moduli) continue;; */id_*) continue;; esac; "
        'if [ -L "$f" ]; then printf \'==! %s <== symlink\\n\' "$f"; continue; fi; '
        'if [ ! -e "$f" ]; then printf \'==! %s <== missing\\n\' "$f"; continue; fi; '
        '[ -f "$f" ] || continue; '
        'if [ ! -r "$f" ]; then printf \'==! %s <== unreadable\\n\' "$f"; continue; fi; '
        'printf \'==> %s <==\\n\' "$f"; head -c 65536 -- "$f"; echo; '
        'if [ "$(wc -c < "$f")" -gt 65536 ]; then printf \'==! %s <== cut\\n\' "$f"; fi; '
        "done"
    )


_MARK_WORDS = {
    "unreadable": "exists but could not be read (permission denied)",
    "cut": "longer than 64 KiB: only its start was read",
    "symlink": "is a symlink: not followed",
    "skipped": "a path outside /etc/ssh: not read",
}


def _answered(pattern: str, files: dict[str, str], marks: dict[str, str]) -> bool:
    """Whether the include script said anything of the pattern: a file it matched, or a
    mark on it (or on a file it matched)."""
    seen = {**dict.fromkeys(files, ""), **marks}
    return pattern in seen or bool(sshdconf.expand(pattern, seen))


# sshd -T -C: the connection spec of this login, from the node's own shell (its user, and
# the address it sees zuka come from; with SSH_CLIENT unset only Match User blocks can
# match). Where sshd refuses it, the plain -T stands.
MATCH_THIS_LOGIN = ' -C "user=$(id -un),host=${SSH_CLIENT%% *},addr=${SSH_CLIENT%% *}"'


async def read_settings(probe: Probe) -> tuple[SshdConfig | None, tuple[str, ...], str]:
    """sshd's settings, the evidence keys they rest on, and the words of how they were read
    (or, with None, why they could not be)."""
    keys: list[str] = []
    tried: list[str] = []
    for key, command in (("sshd-T", "sshd -T"), ("sshd-T-sbin", "/usr/sbin/sshd -T")):
        ev = await probe.run(key, command)
        keys.append(key)
        if ev.failure:
            return None, tuple(keys), ev.failure
        if ev.exit_status == 0:
            conf = sshdconf.parse_sshd_t(ev.stdout)
            if conf.values:
                # Plain -T applies no Match block; -C with this login's user and address
                # applies the ones that match it (a key source for "Match User ubuntu").
                matched = await probe.run(key + "-C", command + MATCH_THIS_LOGIN)
                keys.append(matched.key)
                if matched.exit_status == 0 and not matched.failure:
                    conf_c = sshdconf.parse_sshd_t(matched.stdout)
                    if conf_c.values:
                        how = f"read with `{command}`, Match blocks applied for this login (-C)"
                        return conf_c, tuple(keys), how
                return conf, tuple(keys), f"read with `{command}`"
        tried.append(f"`{command}`: {why_unread(ev) or 'printed no settings'}")
    ev = await probe.run("sshd-config", f"cat {sshdconf.MAIN}")
    keys.append(ev.key)
    if ev.failure or ev.exit_status != 0:
        return None, tuple(keys), "; ".join([*tried, f"`{ev.command}`: {why_unread(ev)}"])
    files = {sshdconf.MAIN: ev.stdout}
    marks: dict[str, str] = {}
    asked: list[str] = []
    problems: list[str] = []

    def wanted() -> list[str]:
        found = [
            p
            for text in list(files.values())
            for p in sshdconf.includes_of(text)
            if sshdconf.include_allowed(p) and p not in asked
        ]
        return list(dict.fromkeys(found))

    for round_ in range(1, MAX_INCLUDE_ROUNDS + 1):
        now = wanted()[:16]
        if not now:
            break
        asked.extend(now)
        ev = await probe.run(f"sshd-includes-{round_}", include_script(now))
        keys.append(ev.key)
        if ev.failure:
            return None, tuple(keys), ev.failure
        got, got_marks = sshdconf.split_output(ev.stdout)
        for path, text in got.items():
            files.setdefault(path, text)
        for path, why in got_marks.items():
            marks.setdefault(path, why)
        if not got and not got_marks and ev.exit_status != 0:
            problems.append(f"the Include files could not be listed ({why_unread(ev)})")
    if left := wanted():
        problems.append(
            f"Include nested deeper than {MAX_INCLUDE_ROUNDS} levels (or more than 16 a "
            "level): not read: " + ", ".join(left[:_SHOWN])
        )
    problems += [
        f"Include {p} was asked for and the node printed nothing of it"
        for p in asked
        if not _answered(p, files, marks)
    ]
    problems += [f"{path} {_MARK_WORDS[why]}" for path, why in marks.items() if why in _MARK_WORDS]
    conf = sshdconf.parse_config(files)
    if problems:
        joined = [*conf.problems, *problems]
        conf = replace(conf, problems=tuple(dict.fromkeys(joined))[: sshdconf.MAX_PROBLEMS])
    how = f"read from {sshdconf.MAIN}"
    if len(conf.files) > 1:
        how += f" and {len(conf.files) - 1} Include file(s)"
    how += " (sshd -T was not allowed: " + "; ".join(tried) + ")"
    return conf, tuple(keys), how


def _requires_key(methods: str) -> bool:
    """Whether AuthenticationMethods makes every login need a key first."""
    lists = methods.split()
    return bool(lists) and methods != "any" and all("publickey" in x.split(",") for x in lists)


def _where(conf: SshdConfig, key: str) -> str:
    return visible(conf.source_of(key), 120)


def judge_settings(conf: SshdConfig, evidence: tuple[str, ...], how: str) -> list[CheckResult]:
    """Password, keyboard-interactive and root login from sshd's settings."""
    out: list[CheckResult] = []
    key_first = _requires_key(conf.value("authenticationmethods"))
    note = (
        f" (AuthenticationMethods {visible(conf.value('authenticationmethods'), 80)} asks "
        "for a key first)"
        if key_first
        else ""
    )

    # What was not read may hold the first value of a keyword (the one sshd takes): a pass
    # then rests on part of the settings, and is only a warning naming what was missed.
    unread = "; ".join(visible(p, 160) for p in conf.problems[:_SHOWN])
    doubt = {
        key: bool(conf.problems) and (conf.source != "sshd -T" or key not in conf.values)
        for key in ("passwordauthentication", "kbdinteractiveauthentication", "permitrootlogin")
    }
    keys_of = {"password": "passwordauthentication", "kbdint": "kbdinteractiveauthentication",
               "rootlogin": "permitrootlogin"}  # fmt: skip

    def result(check: str, title: str, status: Status, words: str, exp: str, found: str) -> None:
        if status is Status.PASSED and doubt.get(keys_of.get(check, ""), False):
            status = Status.WARNED
            words = (
                f"{words}; but not every file of sshd's settings was read, and what was "
                f"missed may set it first: {unread}"
            )
        out.append(CheckResult(f"sshd.{check}", title, status, words, exp, found, evidence))

    pw = conf.value("passwordauthentication")
    found = f"PasswordAuthentication {visible(pw, 40)} ({_where(conf, 'passwordauthentication')})"
    if pw != "no" and not key_first:
        result(
            "password",
            "Password login",
            Status.FAILED,
            f"sshd lets anyone with a password log in: {found}; {how}",
            "PasswordAuthentication no",
            found,
        )
    else:
        result(
            "password",
            "Password login",
            Status.PASSED,
            f"password login is off: {found}{note}; {how}",
            "PasswordAuthentication no",
            found,
        )

    kbd = conf.value("kbdinteractiveauthentication")
    pam = conf.value("usepam")
    found = (
        f"KbdInteractiveAuthentication {visible(kbd, 40)} "
        f"({_where(conf, 'kbdinteractiveauthentication')}), UsePAM {visible(pam, 20)}"
    )
    if kbd == "no" or key_first:
        result(
            "kbdint",
            "Keyboard-interactive login",
            Status.PASSED,
            f"keyboard-interactive login is off: {found}{note}",
            "KbdInteractiveAuthentication no",
            found,
        )
    elif pam == "yes":
        result(
            "kbdint",
            "Keyboard-interactive login",
            Status.FAILED,
            f"sshd asks PAM for a typed password over keyboard-interactive: {found}",
            "KbdInteractiveAuthentication no",
            found,
        )
    else:
        result(
            "kbdint",
            "Keyboard-interactive login",
            Status.WARNED,
            f"keyboard-interactive login is on, without PAM to ask a password: {found}; "
            "turn it off",
            "KbdInteractiveAuthentication no",
            found,
        )

    root = conf.value("permitrootlogin")
    found = f"PermitRootLogin {visible(root, 40)} ({_where(conf, 'permitrootlogin')})"
    if root == "yes":
        result(
            "rootlogin",
            "Root login",
            Status.FAILED,
            f"root may log in with a password: {found}",
            "PermitRootLogin prohibit-password or no",
            found,
        )
    else:
        result(
            "rootlogin",
            "Root login",
            Status.PASSED,
            f"root cannot log in by password: {found}",
            "PermitRootLogin prohibit-password or no",
            found,
        )

    risky = [
        s
        for s in conf.matched
        if (s.key in ("passwordauthentication", "kbdinteractiveauthentication") and s.value != "no")
        or (s.key == "permitrootlogin" and s.value == "yes")
    ]
    if risky:
        shown = "; ".join(
            f"{s.key} {visible(s.value, 30)} applies only to Match {visible(s.condition, 80)} "
            f"({visible(s.source, 100)})"
            for s in risky[:_SHOWN]
        )
        result(
            "match",
            "Match blocks",
            Status.WARNED,
            f"a Match block turns password or root login back on for some logins: {shown}",
            "no Match block turns password or root login on",
            shown,
        )
    if conf.problems:
        shown = "; ".join(visible(p, 160) for p in conf.problems[:_SHOWN])
        result(
            "config-unread",
            "sshd settings not read",
            Status.WARNED,
            f"part of sshd's settings could not be read: {shown}",
            "every setting read",
            shown,
        )
    return out


# -- the remote proof ------------------------------------------------------------------


def judge_proof(offer: LoginOffer | None) -> CheckResult:
    title = "Password-only login refused"
    check = "sshd.proof"
    expected = "refused, offering publickey only"
    if offer is None:
        return CheckResult(
            check,
            title,
            Status.SKIPPED,
            "skipped, because no remote login can be tried here (a local node)",
            expected,
            "",
            ("password-proof",),
        )
    methods = ", ".join(visible(m, 40) for m in offer.methods) or "none named"
    found = f"methods offered: {methods}"
    ev = ("password-proof",)
    if "password" in offer.methods:
        return CheckResult(
            check,
            title,
            Status.FAILED,
            f"the node asked for a password on a login offering no key ({found})",
            expected,
            found,
            ev,
        )
    if "keyboard-interactive" in offer.methods:
        return CheckResult(
            check,
            title,
            Status.FAILED,
            f"the node asked for a keyboard-interactive answer (a typed "
            f"password) on a login offering no key ({found})",
            expected,
            found,
            ev,
        )
    if not offer.refused and "none" in offer.methods:
        return CheckResult(
            check,
            title,
            Status.FAILED,
            "the node let a login in with no key and no password",
            expected,
            found,
            ev,
        )
    if not offer.refused:
        why = visible(offer.words, 300)
        return CheckResult(
            check,
            title,
            Status.NOT_CHECKED,
            f"not checked: the login attempt did not reach a refusal ({why})",
            expected,
            why,
            ev,
        )
    return CheckResult(
        check,
        title,
        Status.PASSED,
        f"a login offering no key was refused without a password being asked ({found})",
        expected,
        found,
        ev,
    )


async def prove(ctx: Context) -> CheckResult:
    if ctx.password_proof is None:
        return judge_proof(None)
    offer = await ctx.password_proof()
    ctx.probe.record(
        Evidence(
            "password-proof",
            "ssh login offering no key and no agent (zuka's own, never a password)",
            None,
            f"refused: {offer.refused}\nmethods: {','.join(offer.methods)}\n",
            offer.words,
        )
    )
    return judge_proof(offer)


# -- the check --------------------------------------------------------------------------


async def run(ctx: Context) -> list[CheckResult]:
    out: list[CheckResult] = []
    conf, keys, how = await read_settings(ctx.probe)
    if conf is None:
        out.append(
            CheckResult(
                "sshd.settings",
                "sshd settings",
                Status.NOT_CHECKED,
                f"not checked: sshd's settings could not be read ({visible(how, 400)})",
                evidence=keys,
            )
        )
    else:
        out += judge_settings(conf, keys, how)
    out.append(await prove(ctx))
    paths, skipped = keys_files(conf)
    read = [
        await ctx.probe.run("authorized-keys" + (str(i + 1) if i else ""), cat_command(path))
        for i, path in enumerate(paths)
    ]
    if read:
        out.append(judge_keys(read[0], ctx.sold.expected_keys, read[1:]))
    else:  # AuthorizedKeysFile none, or only words zuka will not read
        named = visible(conf.value("authorizedkeysfile") if conf else "", 160)
        out.append(CheckResult("sshd.keys", "authorized_keys", Status.NOT_CHECKED,
                               f"not checked: sshd reads no keys file zuka could read "
                               f"(AuthorizedKeysFile {named})", "only the keys the lab expects",
                               evidence=keys))  # fmt: skip
    out.append(judge_key_sources(conf, keys, skipped))
    out += await check_ports(ctx)
    return out


CHECK = Check("sshd", "sshd, keys and open ports", Level.QUICK, run, cost=4)
