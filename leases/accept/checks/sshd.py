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
from leases.accept.words import N_, _
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
    "unreadable": N_("{path} exists but could not be read (permission denied)"),
    "cut": N_("{path} longer than 64 KiB: only its start was read"),
    "symlink": N_("{path} is a symlink: not followed"),
    "skipped": N_("{path} a path outside /etc/ssh: not read"),
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
                        how = _("read with `{command}`, Match blocks applied for this login (-C)")
                        return conf_c, tuple(keys), how.format(command=command)
                return conf, tuple(keys), _("read with `{command}`").format(command=command)
        why = why_unread(ev) or _("printed no settings")
        tried.append(f"`{command}`: {why}")
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
            line = _("the Include files could not be listed ({why})")
            problems.append(line.format(why=why_unread(ev)))
    if left := wanted():
        line = _("Include nested deeper than {rounds} levels (or more than 16 a level): not read:"
                 " {paths}")  # fmt: skip
        problems.append(line.format(rounds=MAX_INCLUDE_ROUNDS, paths=", ".join(left[:_SHOWN])))
    problems += [
        _("Include {pattern} was asked for and the node printed nothing of it").format(pattern=p)
        for p in asked
        if not _answered(p, files, marks)
    ]
    problems += [
        _(_MARK_WORDS[why]).format(path=path) for path, why in marks.items() if why in _MARK_WORDS
    ]
    conf = sshdconf.parse_config(files)
    if problems:
        joined = [*conf.problems, *problems]
        conf = replace(conf, problems=tuple(dict.fromkeys(joined))[: sshdconf.MAX_PROBLEMS])
    if len(conf.files) > 1:
        how = _("read from {path} and {count} Include file(s) (sshd -T was not allowed: {tried})")
    else:
        how = _("read from {path} (sshd -T was not allowed: {tried})")
    how = how.format(path=sshdconf.MAIN, count=len(conf.files) - 1, tried="; ".join(tried))
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
        _(" (AuthenticationMethods {methods} asks for a key first)").format(
            methods=visible(conf.value("authenticationmethods"), 80)
        )
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
            words = _(
                "{words}; but not every file of sshd's settings was read, and what was"
                " missed may set it first: {unread}"
            ).format(words=words, unread=unread)
        out.append(CheckResult(f"sshd.{check}", _(title), status, words, exp, found, evidence))

    pw = conf.value("passwordauthentication")
    found = f"PasswordAuthentication {visible(pw, 40)} ({_where(conf, 'passwordauthentication')})"
    if pw != "no" and not key_first:
        result(
            "password",
            N_("Password login"),
            Status.FAILED,
            _("sshd lets anyone with a password log in: {found}; {how}").format(
                found=found, how=how
            ),
            "PasswordAuthentication no",
            found,
        )
    else:
        result(
            "password",
            N_("Password login"),
            Status.PASSED,
            _("password login is off: {found}{note}; {how}").format(
                found=found, note=note, how=how
            ),
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
            N_("Keyboard-interactive login"),
            Status.PASSED,
            _("keyboard-interactive login is off: {found}{note}").format(found=found, note=note),
            "KbdInteractiveAuthentication no",
            found,
        )
    elif pam == "yes":
        result(
            "kbdint",
            N_("Keyboard-interactive login"),
            Status.FAILED,
            _("sshd asks PAM for a typed password over keyboard-interactive: {found}").format(
                found=found
            ),
            "KbdInteractiveAuthentication no",
            found,
        )
    else:
        result(
            "kbdint",
            N_("Keyboard-interactive login"),
            Status.WARNED,
            _(
                "keyboard-interactive login is on, without PAM to ask a password: {found}; turn it"
                " off"
            ).format(found=found),
            "KbdInteractiveAuthentication no",
            found,
        )

    root = conf.value("permitrootlogin")
    found = f"PermitRootLogin {visible(root, 40)} ({_where(conf, 'permitrootlogin')})"
    if root == "yes":
        result(
            "rootlogin",
            N_("Root login"),
            Status.FAILED,
            _("root may log in with a password: {found}").format(found=found),
            _("PermitRootLogin prohibit-password or no"),
            found,
        )
    else:
        result(
            "rootlogin",
            N_("Root login"),
            Status.PASSED,
            _("root cannot log in by password: {found}").format(found=found),
            _("PermitRootLogin prohibit-password or no"),
            found,
        )

    risky = [
        s
        for s in conf.matched
        if (s.key in ("passwordauthentication", "kbdinteractiveauthentication") and s.value != "no")
        or (s.key == "permitrootlogin" and s.value == "yes")
    ]
    if risky:
        shown = _("; ").join(
            _("{key} {value} applies only to Match {condition} ({source})").format(
                key=s.key,
                value=visible(s.value, 30),
                condition=visible(s.condition, 80),
                source=visible(s.source, 100),
            )
            for s in risky[:_SHOWN]
        )
        words = _("a Match block turns password or root login back on for some logins: {found}")
        result(
            "match",
            N_("Match blocks"),
            Status.WARNED,
            words.format(found=shown),
            _("no Match block turns password or root login on"),
            shown,
        )
    if conf.problems:
        shown = "; ".join(visible(p, 160) for p in conf.problems[:_SHOWN])
        result(
            "config-unread",
            N_("sshd settings not read"),
            Status.WARNED,
            _("part of sshd's settings could not be read: {problems}").format(problems=shown),
            _("every setting read"),
            shown,
        )
    return out


# -- the remote proof ------------------------------------------------------------------


def judge_proof(offer: LoginOffer | None) -> CheckResult:
    title = _("Password-only login refused")
    check = "sshd.proof"
    expected = _("refused, offering publickey only")
    if offer is None:
        return CheckResult(
            check,
            title,
            Status.SKIPPED,
            _("skipped, because no remote login can be tried here (a local node)"),
            expected,
            "",
            ("password-proof",),
        )
    methods = ", ".join(visible(m, 40) for m in offer.methods) or _("none named")
    found = _("methods offered: {methods}").format(methods=methods)
    ev = ("password-proof",)
    if "password" in offer.methods:
        return CheckResult(
            check,
            title,
            Status.FAILED,
            _("the node asked for a password on a login offering no key ({found})").format(
                found=found
            ),
            expected,
            found,
            ev,
        )
    if "keyboard-interactive" in offer.methods:
        return CheckResult(
            check,
            title,
            Status.FAILED,
            _(
                "the node asked for a keyboard-interactive answer (a typed password) on a login"
                " offering no key ({found})"
            ).format(found=found),
            expected,
            found,
            ev,
        )
    if not offer.refused and "none" in offer.methods:
        return CheckResult(
            check,
            title,
            Status.FAILED,
            _("the node let a login in with no key and no password"),
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
            _("not checked: the login attempt did not reach a refusal ({why})").format(why=why),
            expected,
            why,
            ev,
        )
    return CheckResult(
        check,
        title,
        Status.PASSED,
        _("a login offering no key was refused without a password being asked ({found})").format(
            found=found
        ),
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
                _("sshd settings"),
                Status.NOT_CHECKED,
                _("not checked: sshd's settings could not be read ({why})").format(
                    why=visible(how, 400)
                ),
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
        words = _("not checked: sshd reads no keys file zuka could read (AuthorizedKeysFile"
                  " {named})").format(named=named)  # fmt: skip
        out.append(CheckResult("sshd.keys", "authorized_keys", Status.NOT_CHECKED, words,
                               _("only the keys the lab expects"), evidence=keys))  # fmt: skip
    out.append(judge_key_sources(conf, keys, skipped))
    out += await check_ports(ctx)
    return out


CHECK = Check("sshd", N_("sshd, keys and open ports"), Level.QUICK, run, cost=4)
