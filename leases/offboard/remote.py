"""Offboarding on the node, over SSH: the steps (plan_remote) and their driver ("ssh").

In order: GPU processes still running (the checklist waits for the user's consent when
any are), each declared path's file-system facts (with where shred cannot guarantee
erasure), shred of the declared scratch paths file by file, the declared histories, caches
and credentials in the login user's home, the lab's key out of authorized_keys (the last
SSH step), and a fresh login with that key refused (the proof).

Every value that reaches a command is checked at its one entry (leases.offboard.paths,
authkeys) and quoted, after `--`; the node's own names never come back into a command:
find hands them to shred as arguments on the node itself, with no shell in between, and
never follows a symbolic link (-P) nor crosses into another file system (-xdev); a path
with a bind mount of its own file system inside (which -xdev cannot see) is refused. What the
node prints is evidence, kept as it came; shown to a person only through `visible`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import asyncssh

from leases import nvsmi
from leases.errors import InputError
from leases.models import Node, NodeHealth, ResourceKind
from leases.offboard import authkeys, erasure, paths, presets
from leases.offboard.steps import Outcome, Phase, PlanInput, Step, params
from leases.ssh import CommandResult, NodeSession, SshError, SshOptions
from leases.textsafe import visible

# Shredding a data disk file by file takes as long as writing it twice (one random pass,
# one of zeros): hours for a large disk.
SHRED_TIMEOUT_S = 12 * 3600.0
# Evidence kept per command: the end of what it printed (where errors are).
EVIDENCE_MAX = 64 * 1024
_LISTED = 50  # names of what a shred left behind, for the evidence

# Exit statuses of the scripts below (0: done; 1: not done, see output).
_REFUSED_LINK = 3
_REFUSED_ELSEWHERE = 4
_FAILED = 5
_REFUSED_KIND = 6
_UNSEEN = 7
_REFUSED_MOUNT = 8
_WHY = {
    _REFUSED_LINK: "is a symbolic link: refused, not followed",
    _REFUSED_ELSEWHERE: "resolves elsewhere (a symbolic link on the way): refused",
    _FAILED: "the command failed on the node",
    _REFUSED_KIND: "is neither a regular file nor a directory: refused",
    _UNSEEN: "the login user may not look there (a directory on the way): not proven",
    _REFUSED_MOUNT: "has a bind mount of its own file system inside (find -xdev would follow "
    "it out): refused; unmount it, or declare the paths beside it",
}


class Runner(Protocol):
    """What the driver needs of a node's SSH session (leases.ssh.NodeSession)."""

    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult: ...


@dataclasses.dataclass(frozen=True)
class LoginAttempt:
    refused: bool  # the node itself refused authentication: the only proof that counts
    words: str


STILL_WORKS = "the login still works"
# Tries a fresh login offering only the key named by the step (param key_path).
LoginProbe = Callable[[Step], Awaitable[LoginAttempt]]


# -- the plan ---------------------------------------------------------------------


def plan_remote(facts: PlanInput) -> list[Step]:
    """The SSH steps for one node, from the ledger's facts and the presets. Raises
    InputError naming a declared path that may not be shredded (nothing is planned)."""
    node = facts.node
    if node.local:
        return []  # read through NVML here: there is no node to log in to
    preset = presets.preset_for(facts.provider)
    roots = scratch_roots(facts)
    declared: dict[str, int | None] = {p: None for p in preset.paths}
    for res in facts.resources:
        if res.kind is ResourceKind.SCRATCH_PATH:
            paths.check_scratch_path(
                res.native_id, roots, field=f"scratch_path resource {visible(res.native_id, 80)}"
            )
            declared[res.native_id] = res.id
    for path in declared:
        paths.check_scratch_path(path, roots)
    shred_paths = sorted(declared)
    looked_at = sorted({*shred_paths, *preset.shared})

    steps = [
        Step(
            key="gpu-processes",
            phase=Phase.PROCESSES,
            driver="ssh",
            action="gpu-processes",
            target=node.name,
            destructive=False,
            describe=nvsmi.APPS_COMMAND,
        )
    ]
    for path in looked_at:
        shared = path in preset.shared
        steps.append(
            Step(
                key=f"facts:{path}",
                phase=Phase.FACTS,
                driver="ssh",
                action="fs-facts",
                target=path,
                destructive=False,
                describe=f"findmnt -T {paths.quoted(path)}; lsblk -s (file system, mount "
                "options, disk)" + (f"; outlives the instance: {preset.note}" if shared else ""),
                params=params(path=path, shared="yes" if shared else "no"),
            )
        )
    for path in shred_paths:
        outer = next((o for o in shred_paths if o != path and paths.under(path, o)), None)
        # A path inside another is a declared resource (preset paths do not nest): its
        # step stays, as the one that marks that resource deleted once read back.
        inside = (
            ""
            if outer is None
            else f" (inside {outer}, shredded by that step first: this one reads back what"
            " is left and marks the ledger's resource deleted)"
        )
        steps.append(
            Step(
                key=f"shred:{path}",
                phase=Phase.SHRED,
                driver="ssh",
                action="shred",
                target=path,
                destructive=True,
                describe=f"find -P {paths.quoted(path)} -xdev -type f -execdir shred -n 1 -z -u "
                "-- {} + (symbolic links refused, never followed)" + inside,
                params=params(path=path, root=paths.root_of(path, roots)),
                resource_id=declared[path],
            )
        )
    for rel in presets.HOME_ENTRIES:
        steps.append(
            Step(
                key=f"clear:~/{rel}",
                phase=Phase.CLEAR,
                driver="ssh",
                action="clear",
                target=f"~/{rel}",
                destructive=True,
                describe=f"shred -n 1 -z -u -- {paths.home_word(rel)} (file by file)",
                params=params(home=rel),
            )
        )
    steps += _key_steps(facts)
    return steps


def scratch_roots(facts: PlanInput) -> tuple[str, ...]:
    """Where declared paths may lie on this node: its provider's preset and the config's
    [offboard] scratch_roots (what RemoteDriver checks every path against again)."""
    preset = presets.preset_for(facts.provider)
    return tuple(dict.fromkeys((*preset.roots, *facts.config.offboard.scratch_roots)))


def _key_steps(facts: PlanInput) -> list[Step]:
    """Revoke, then prove, for each ssh_key resource (by fingerprint), else for the key
    the node's login names (key_path); without either, a revoke step that says so."""
    key_path = facts.node.ssh.key_path or ""
    keys: list[tuple[str, str, int | None]] = []  # (fingerprint, key_path, resource id)
    for res in facts.resources:
        if res.kind is ResourceKind.SSH_KEY:
            fp = authkeys.check_fingerprint(
                res.native_id, f"ssh_key resource {visible(res.native_id, 80)}"
            )
            keys.append((fp, key_path, res.id))
    if not keys:
        keys.append(("", key_path, None))
    keys_file = presets.KEYS_FILE
    where = paths.home_word(keys_file, keys=True)
    steps = []
    for fp, path, res_id in keys:
        name = fp or path or "unknown"
        steps.append(
            Step(
                key=f"revoke-key:{name}",
                phase=Phase.REVOKE,
                driver="ssh",
                action="revoke-key",
                target=name,
                destructive=True,
                describe=f"grep -v -F -e KEY -- {where} > TMP; mv -f -- TMP {where} (the"
                f" lines of ~/{keys_file} holding {_holder(fp, path)})",
                params=params(fingerprint=fp, key_path=path, keys_file=keys_file),
                resource_id=res_id,
            )
        )
        steps.append(
            Step(
                key=f"prove-refused:{name}",
                phase=Phase.PROVE,
                driver="ssh",
                action="prove-refused",
                target=name,
                destructive=False,
                describe=f"a fresh login offering only {name}: must be refused",
                params=params(fingerprint=fp, key_path=path),
            )
        )
    return steps


def _holder(fingerprint: str, key_path: str) -> str:
    """The key a revoke step removes, as a person reads it in the plan."""
    if fingerprint:
        return f"the public key {fingerprint}"
    if key_path:
        return f"the public key of {key_path} (its fingerprint is in the evidence)"
    return "the lab's key: none recorded (the step says so when it runs)"


# -- the scripts (one quoted value each; everything else is fixed text) ------------------


def _guard(word: str) -> str:
    """Sets p, refuses a symbolic link or a path that resolves elsewhere; absent is done."""
    return (
        f"p={word}\n"
        f'if [ -L "$p" ]; then echo "refused: a symbolic link"; exit {_REFUSED_LINK}; fi\n'
        # `-e` is also false where a directory on the way may not be searched: absent only
        # when the nearest existing ancestor is a directory this user may search.
        'if [ ! -e "$p" ]; then\n'
        '  d=$(dirname -- "$p"); while [ ! -e "$d" ]; do d=$(dirname -- "$d"); done\n'
        '  if [ -d "$d" ] && [ -x "$d" ]; then echo "absent"; exit 0; fi\n'
        f'  echo "refused: cannot look inside a directory on the way"; exit {_UNSEEN}\n'
        "fi\n"
        f'r=$(readlink -f -- "$p") || exit {_FAILED}\n'
        f'if [ "$r" != "$p" ]; then echo "refused: resolves elsewhere"; '
        f"exit {_REFUSED_ELSEWHERE}; fi\n"
    )


def _home(rel: str) -> str:
    """Sets p to a path in the login user's real home (never / or a relative one)."""
    return (
        f'h=$(readlink -f -- "$HOME") || exit {_FAILED}\n'
        f'case "$h" in /?*) ;; *) echo "refused: the home directory is $h"; '
        f"exit {_FAILED} ;; esac\n" + _guard('"$h"/' + paths.quoted(paths.check_home_entry(rel)))
    )


# find's words that skip every .ssh directory below the path (and all in it).
_NOT_SSH = "-name .ssh -type d -prune -o"

_SHRED_BODY = (
    # A regular file: shred it; one with other names (hard links) is only unlinked, or
    # shred would overwrite a file outside the root through its other name.
    'if [ -f "$p" ]; then\n'
    '  if [ "$(stat -c %h -- "$p")" = 1 ]; then shred -n 1 -z -u -- "$p" '
    f'|| exit {_FAILED}; else rm -f -- "$p" || exit {_FAILED}; echo \'unlinked only: other '
    "hard links'; fi\n"
    "  exit 0\n"
    "fi\n"
    f'[ -d "$p" ] || {{ echo "refused: not a file or directory"; exit {_REFUSED_KIND}; }}\n'
    # A mount inside on the same device (a bind mount) looks like a plain directory to
    # -xdev: refuse, naming it. One whose device cannot be read counts as the same.
    f'd=$(stat -c %d -- "$p") || exit {_FAILED}\n'
    'same=$(P="$p/" awk \'index($5, ENVIRON["P"]) == 1 { print $5 }\' /proc/self/mountinfo '
    '2>/dev/null | while IFS= read -r m; do s=$(stat -c %d -- "$m" 2>/dev/null); '
    '[ -n "$s" ] && [ "$s" != "$d" ] || echo "$m"; done)\n'
    'if [ -n "$same" ]; then echo "refused: mounted inside from the same file system:"; '
    f'printf "%s\\n" "$same" | head -n {_LISTED}; exit {_REFUSED_MOUNT}; fi\n'
    # -execdir: each command runs in the directory find itself entered (checked to be the
    # one it listed), on ./NAME; a full path would follow a directory on the way that was
    # swapped for a symbolic link after find listed it.
    # find -execdir refuses a PATH that holds the current directory ("", "." or any
    # relative entry): keep only absolute entries.
    'PATH=$(printf "%s" "$PATH" | tr ":" "\\n" | grep "^/" | paste -s -d ":" -)\n'
    '[ -n "$PATH" ] || PATH=/usr/bin:/bin\n'
    # An .ssh directory below (someone's home) is kept: keys have their own step.
    f'find -P "$p" -xdev {_NOT_SSH} -type f -links 1 -execdir shred -n 1 -z -u -- {{}} +; s=$?\n'
    f'find -P "$p" -xdev {_NOT_SSH} -type f -links +1 -print -execdir rm -f -- {{}} + '
    '| sed "s/^/unlinked only: /"\n'
    'find -P "$p" -xdev -mindepth 1 -depth -type d -empty -delete\n'
    'find -P "$p" -xdev -mindepth 1 -name .ssh -type d -print -prune '
    '| sed "s/^/kept (keys have their own step): /"\n'
    f'find -P "$p" -xdev -mindepth 1 {_NOT_SSH} ! -type d -print | head -n {_LISTED} '
    '| sed "s/^/left: /"\n'
    f"[ $s = 0 ] || exit {_FAILED}\n"
)
_GONE_BODY = (
    # Verified gone: no regular file left (symbolic links are listed, never followed). A
    # directory find could not read hides what is in it: that is not "none left".
    'if [ -f "$p" ]; then echo "still there"; exit 1; fi\n'
    f'left=$( {{ find -P "$p" -xdev {_NOT_SSH} -type f -print || '
    'echo "find could not look everywhere"; } '
    f"| head -n {_LISTED})\n"
    'if [ -z "$left" ]; then echo "no regular file left"; exit 0; fi\n'
    'printf "%s\\n" "$left"; exit 1\n'
)


def shred_script(path: str, roots: Sequence[str]) -> str:
    return _guard(paths.quoted(paths.check_scratch_path(path, roots))) + _SHRED_BODY


def gone_script(path: str, roots: Sequence[str]) -> str:
    return _guard(paths.quoted(paths.check_scratch_path(path, roots))) + _GONE_BODY


def facts_script(path: str) -> str:
    """Prints `path`, `mount`, `disk` and `inside` lines (leases.offboard.erasure)."""
    return (
        f"t={paths.quoted(path)}\n"
        'while [ ! -e "$t" ] && [ "$t" != / ]; do t=$(dirname -- "$t"); done\n'
        'echo "path $t"\n'
        'findmnt -n -r -o TARGET,SOURCE,FSTYPE,OPTIONS -T "$t" | head -n 1 '
        f'| sed "s/^/{erasure.MOUNT} /"\n'
        'src=$(findmnt -n -r -o SOURCE -T "$t" | head -n 1)\n'
        'case "$src" in /dev/*) lsblk -n -s -r -o TYPE,ROTA,MODEL -- "$src" 2>/dev/null '
        f'| sed "s/^/{erasure.DISK} /" ;; esac\n'
        f'findmnt -n -r -o TARGET | sed "s/^/{erasure.INSIDE} /"\n'
    )


def revoke_script(keys_file: str, blobs: Sequence[str]) -> str:
    """Rewrites the keys file without the lines holding these blobs, atomically (a
    temporary file beside it, its mode and owner, then mv)."""
    patterns = " ".join(f"-e {paths.quoted(authkeys.check_blob(b))}" for b in blobs)
    return (
        f"f={paths.home_word(keys_file, keys=True)}\n"
        f'if [ -L "$f" ]; then echo "refused: a symbolic link"; exit {_REFUSED_LINK}; fi\n'
        'if [ ! -e "$f" ]; then echo "absent"; exit 0; fi\n'
        f't=$(mktemp -- "$f.zuka.XXXXXX") || exit {_FAILED}\n'
        f'grep -v -F {patterns} -- "$f" > "$t"; s=$?\n'
        f'if [ $s -gt 1 ]; then rm -f -- "$t"; exit {_FAILED}; fi\n'
        'chmod --reference="$f" -- "$t" 2>/dev/null; chown --reference="$f" -- "$t" 2>/dev/null\n'
        f'mv -f -- "$t" "$f" || {{ rm -f -- "$t"; exit {_FAILED}; }}\n'
        'echo "rewritten without the key"\n'
    )


def keys_file_script(keys_file: str) -> str:
    return (
        f"f={paths.home_word(keys_file, keys=True)}\n"
        'if [ -e "$f" ]; then cat -- "$f"; else echo "#absent"; fi\n'
    )


# -- the driver -------------------------------------------------------------------


def _evidence(result: CommandResult) -> str:
    text = f"exit {result.exit_status}\n{result.stdout}"
    if result.stderr:
        text += f"\nstderr:\n{result.stderr}"
    return text[-EVIDENCE_MAX:]


class RemoteDriver:
    """Carries out and verifies the "ssh" steps on one node through its session."""

    name = "ssh"

    def __init__(
        self,
        session: Runner,
        *,
        roots: Sequence[str],
        login: LoginProbe,
        shred_timeout_s: float = SHRED_TIMEOUT_S,
        fingerprint_of: Callable[[str], str] = authkeys.fingerprint_of,
    ) -> None:
        self.session = session
        self.roots = tuple(roots)
        self.login = login
        self.shred_timeout_s = shred_timeout_s
        self._fingerprint_of = fingerprint_of

    async def run(self, step: Step) -> Outcome:
        return await self._do(step, verify=False)

    async def verify(self, step: Step, *, patient: bool = True) -> Outcome:
        return await self._do(step, verify=True)

    async def _do(self, step: Step, *, verify: bool) -> Outcome:
        try:
            if step.action == "gpu-processes":
                return await self._processes(verify=verify)
            if step.action == "fs-facts":
                return await self._facts(step)
            if step.action in ("shred", "clear"):
                return await self._shred(step, verify=verify)
            if step.action == "revoke-key":
                return await self._revoke(step, verify=verify)
            if step.action == "prove-refused":
                return await self._prove(step)
        except SshError as exc:
            return await self._unreachable(step, exc)
        except InputError as exc:
            return Outcome(False, str(exc), f"refused: {visible(exc, 300)}")
        return Outcome(False, "", f"the ssh driver has no action {visible(step.action, 60)!r}")

    async def _unreachable(self, step: Step, exc: SshError) -> Outcome:
        if step.action == "revoke-key" and exc.health is NodeHealth.AUTH_FAILED:
            # A rerun after the key went (the process was killed before it recorded so)
            # can no longer log in to read the file: the node refusing the key is the proof.
            attempt = await self.login(step)
            if attempt.refused:
                return Outcome(True, attempt.words, "the node refuses a login with the key")
        words = f"SSH failed: {visible(exc, 300)}"
        if exc.health is NodeHealth.AUTH_FAILED:
            words += " (after the lab's key is revoked, nothing on the node can be checked)"
        return Outcome(False, str(exc), words)

    async def _processes(self, *, verify: bool) -> Outcome:
        result = await self.session.run(nvsmi.APPS_COMMAND)
        if not result.ok:
            health = nvsmi.classify_failure(result.exit_status, result.stdout, result.stderr)
            words = f"GPU processes unknown: {nvsmi.human_reason(health)}"
            # Unknown is not none: the user decides whether to go on.
            return Outcome(False, _evidence(result), words, needs_consent=not verify)
        try:
            found = nvsmi.parse_compute_apps(result.stdout, "node")
        except nvsmi.NvsmiParseError as exc:
            return Outcome(
                False, _evidence(result), f"GPU processes unknown: {exc}", needs_consent=not verify
            )
        if not found:
            return Outcome(True, _evidence(result), "no GPU process running")
        listed = ", ".join(f"{p.pid} {visible(p.process_name, 60)}" for p in found[:10])
        words = f"{len(found)} GPU process(es) still running: {listed}"
        facts = {"gpu_processes": str(len(found))}
        if verify:
            return Outcome(False, _evidence(result), words, facts)
        return Outcome(True, _evidence(result), words, facts, needs_consent=True)

    async def _facts(self, step: Step) -> Outcome:
        path = step.param("path")
        result = await self.session.run(facts_script(path))
        if not result.ok:
            return Outcome(False, _evidence(result), "the node did not give its file-system facts")
        found = erasure.parse_facts(path, result.stdout)
        facts = found.as_facts()
        if step.param("shared") == "yes":
            facts["outlives_instance"] = "yes"
        said = facts["caveats"] or "no known limit to shred here"
        where = f"{found.fstype or '?'} ({found.options or '?'}) on {found.source or '?'}"
        return Outcome(True, _evidence(result), f"{where}: {visible(said, 400)}", facts)

    async def _shred(self, step: Step, *, verify: bool) -> Outcome:
        if step.action == "shred":
            word = paths.quoted(paths.check_scratch_path(step.param("path"), self.roots))
            script = _guard(word)
        else:
            script = _home(step.param("home"))
        script += _GONE_BODY if verify else _SHRED_BODY
        timeout = None if verify else self.shred_timeout_s
        result = await self.session.run(script, timeout)
        status = result.exit_status
        if status == 0:
            return Outcome(True, _evidence(result), _done_words(result.stdout, verify))
        why = _WHY.get(status or 0, "files are still there" if verify else "not done")
        return Outcome(False, _evidence(result), f"{step.target}: {why}")

    async def _fingerprint(self, step: Step) -> str:
        fp = step.param("fingerprint")
        if fp:
            return authkeys.check_fingerprint(fp)
        key_path = step.param("key_path")
        if not key_path:
            raise InputError(
                "ssh_key",
                "",
                "no key recorded for this node: add its key path, or an ssh_key resource "
                "with the key's SHA256 fingerprint",
            )
        return await asyncio.to_thread(self._fingerprint_of, key_path)

    async def _revoke(self, step: Step, *, verify: bool) -> Outcome:
        fp = await self._fingerprint(step)
        keys_file = step.param("keys_file", presets.KEYS_FILE)
        listed = await self.session.run(keys_file_script(keys_file))
        if not listed.ok:
            return Outcome(False, _evidence(listed), f"cannot read {keys_file}")
        found = authkeys.find_key(listed.stdout, fp)
        facts = {"fingerprint": fp, "keys_file": keys_file}
        if found.unread and (verify or not found.lines):
            # The key may be in the part not read: neither clean nor revoked.
            why = f"~/{keys_file} has {found.unread} more lines than zuka reads: not read, "
            return Outcome(False, _evidence(listed), why + "so not proven; trim the file")
        if not found.lines:
            return Outcome(True, _evidence(listed), f"{fp} is not in ~/{keys_file}", facts)
        if verify:
            return Outcome(False, _evidence(listed), f"{fp} is still in ~/{keys_file}", facts)
        result = await self.session.run(revoke_script(keys_file, found.blobs))
        if not result.ok:
            why = _WHY.get(result.exit_status or 0, "not done")
            return Outcome(False, _evidence(result), f"~/{keys_file}: {why}", facts)
        return Outcome(True, _evidence(result), f"{found.lines} line(s) with {fp} removed", facts)

    async def _prove(self, step: Step) -> Outcome:
        attempt = await self.login(step)
        if attempt.refused:
            return Outcome(True, attempt.words, "a fresh login with the key was refused")
        words = f"not proven: {visible(attempt.words, 300)}"
        if attempt.words == STILL_WORKS:
            words += (
                " (the key may be authorised elsewhere: sshd's AuthorizedKeysFile, another "
                "user, or a platform that puts it back)"
            )
        return Outcome(False, attempt.words, words)


def _done_words(stdout: str, verify: bool) -> str:
    if "absent" in stdout.splitlines()[:1]:
        # Read back after a shred, absent is the proof, not a sign nothing was there.
        return "not there: nothing left" if verify else "already gone"
    left = sum(1 for line in stdout.splitlines() if line.startswith("left: "))
    unlinked = sum(1 for line in stdout.splitlines() if line.startswith("unlinked only"))
    if verify:
        return "no regular file left"
    words = "shredded file by file"
    if unlinked:
        words += f"; {unlinked} with other hard links unlinked, not overwritten"
    if left:
        words += f"; {left} symbolic link(s) or special file(s) left in place, never followed"
    if any(line.startswith("kept (keys") for line in stdout.splitlines()):
        words += "; .ssh directories kept (keys have their own step)"
    return words


def fresh_login(node: Node, options: SshOptions) -> LoginProbe:
    """A probe that opens a new connection to node offering only the step's key file (no
    agent, no other key), and reports whether the node itself refused it."""

    async def probe(step: Step) -> LoginAttempt:
        key_path = step.param("key_path")
        if not key_path:
            return LoginAttempt(False, "no key file recorded to try a login with")
        wanted = step.param("fingerprint")
        if wanted:
            # Another key being refused would prove nothing about this one.
            try:
                have = await asyncio.to_thread(authkeys.fingerprint_of, key_path)
            except InputError as exc:
                return LoginAttempt(False, visible(exc, 400))
            if have != wanted:
                return LoginAttempt(
                    False, f"{visible(key_path, 200)} holds {have}, not {wanted}: no proof"
                )
        opts = dataclasses.replace(options, client_keys=[], agent_path=None)
        ssh = dataclasses.replace(node.ssh, key_path=key_path)
        session = NodeSession(dataclasses.replace(node, ssh=ssh), opts)
        try:
            await session.run("true")
        except SshError as exc:
            return LoginAttempt(login_refused(exc), visible(exc, 400))
        finally:
            await session.close()
        return LoginAttempt(False, STILL_WORKS)

    return probe


def login_refused(exc: SshError) -> bool:
    """Whether the node itself refused authentication (not a jump host, a timeout, or a
    key file zuka could not read): asyncssh's PermissionDenied from the node's connect."""
    if exc.health is not NodeHealth.AUTH_FAILED:
        return False
    hop = exc.__cause__
    # leases.ssh wraps a node's connect failure in words that start "node ", a jump
    # host's in "jump host ...".
    return (
        hop is not None
        and str(hop).startswith("node ")
        and isinstance(hop.__cause__, asyncssh.PermissionDenied)
    )
