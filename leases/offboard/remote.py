"""Offboarding on the node, over SSH: the driver ("ssh") of the steps leases.offboard.remoteplan
plans, through the node's session, with the scripts of leases.offboard.nodescripts, reading
what the node printed with leases.offboard.nodeoutput.

Every value that reaches a command is checked at its one entry (leases.offboard.paths,
authkeys) and quoted, after `--`; the node's own names never come back into a command.
Shred and read-back run zuka's walker (nodewalk.py) with the node's python3: it never
follows a link, writes a file only if it is the one listed, only unlinks a hard-linked
file, refuses mounts inside, and spares only the login's own ~/.ssh. Without python3, find
-P -xdev hands names to shred on the node itself, only where no other user may rename
anything. What the node prints is evidence, kept as it came; shown to a person only
through `visible`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import asyncssh

from leases.core.errors import InputError
from leases.core.i18n import N_
from leases.core.models import Node, NodeHealth
from leases.core.textsafe import visible
from leases.offboard import authkeys, erasure, paths
from leases.offboard.nodeoutput import (
    as_evidence,
    done_words,
    iso_utc,
    node_lines,
    split_keys_files,
)
from leases.offboard.nodescripts import (
    GONE_BODY,
    INSPECT_BODY,
    RUN_DIR_GONE,
    SHARED_STORAGE,
    SHRED_BODY,
    WHY,
    facts_script,
    guard,
    home_dir,
    home_path,
    job_tag,
    keys_files_script,
    own_paths,
    remote_job,
    revoke_script,
    shared_home_check,
)
from leases.offboard.nodewalk import KEPT as _KEPT
from leases.offboard.steps import Outcome, Sighting, Step
from leases.ssh.errors import SshError
from leases.ssh.faults import HopFailed
from leases.ssh.options import SshOptions
from leases.ssh.posixsh import under_sh
from leases.ssh.session import NodeSession
from leases.ssh.stream import CommandResult
from leases.telemetry import nvsmi, owners

# Shredding a data disk file by file takes as long as writing it twice (one random pass,
# one of zeros): hours for a large disk.
SHRED_TIMEOUT_S = 12 * 3600.0


class Runner(Protocol):
    """What the driver needs of a node's SSH session (leases.ssh.session.NodeSession)."""

    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult: ...


@dataclasses.dataclass(frozen=True)
class LoginAttempt:
    refused: bool  # the node itself refused authentication: the only proof that counts
    words: str


STILL_WORKS = N_("the login still works")
# Tries a fresh login offering only the key named by the step (param key_path).
LoginProbe = Callable[[Step], Awaitable[LoginAttempt]]


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
        host: str = "",
    ) -> None:
        self.session = session
        self.roots = tuple(roots)
        self.login = login
        self.shred_timeout_s = shred_timeout_s
        self._fingerprint_of = fingerprint_of
        # Where inspect looked, for a person checking the facts (NodeSession's node name).
        self._host = host or str(getattr(session, "name", ""))

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
            return Outcome(False, str(exc), N_("refused: {why}").format(why=visible(exc, 300)))
        return Outcome(
            False,
            "",
            N_("the ssh driver has no action '{action}'").format(action=visible(step.action, 60)),
        )

    async def _unreachable(self, step: Step, exc: SshError) -> Outcome:
        if step.action == "revoke-key" and exc.health is NodeHealth.AUTH_FAILED:
            # A rerun after the key went (the process was killed before it recorded so)
            # can no longer log in to read the file: the node refusing the key is the proof.
            attempt = await self.login(step)
            if attempt.refused:
                return Outcome(True, attempt.words, N_("the node refuses a login with the key"))
        if exc.health is NodeHealth.AUTH_FAILED:
            words = N_(
                "SSH failed: {error} (after the lab's key is revoked, nothing on the node can be"
                " checked)"
            ).format(error=visible(exc, 300))
        else:
            words = N_("SSH failed: {error}").format(error=visible(exc, 300))
        return Outcome(False, str(exc), words)

    async def _processes(self, *, verify: bool) -> Outcome:
        """The GPU processes still running, each with its owner and command line (the
        poller's owner query: nvidia-smi names no process, /proc and ps do)."""
        result = await self.session.run(under_sh(owners.APPS_OWNERS_COMMAND))  # any login
        apps, status, _ = owners.split_answer(result.stdout)
        if status != 0:  # None: no marker
            if status is None and result.exit_status == 0:
                why = N_("the node's shell printed no end marker")
            else:
                code = status if status is not None else result.exit_status
                why = nvsmi.human_reason(nvsmi.classify_failure(code, apps, result.stderr))
            # Unknown is not none: the user decides whether to go on.
            words = N_("GPU processes unknown: {why}").format(why=why)
            return Outcome(False, as_evidence(result), words, needs_consent=not verify)
        try:
            reading = owners.parse_apps_owners(result.stdout, "node")
        except nvsmi.NvsmiParseError as exc:
            return Outcome(
                False,
                as_evidence(result),
                N_("GPU processes unknown: {why}").format(why=exc),
                needs_consent=not verify,
            )
        found = reading.processes or ()
        if not found:
            return Outcome(True, as_evidence(result), N_("no GPU process running"))
        listed = ", ".join(
            f"{p.pid} {p.owner or '?'} {visible(p.cmdline or p.process_name or '?', 60)}"
            for p in found[:10]
        )
        words = N_("{count} GPU process(es) still running: {listed}").format(
            count=len(found), listed=listed
        )
        facts = {"gpu_processes": str(len(found))}
        if verify:
            return Outcome(False, as_evidence(result), words, facts)
        return Outcome(True, as_evidence(result), words, facts, needs_consent=True)

    async def _facts(self, step: Step) -> Outcome:
        path = step.param("path")
        result = await self.session.run(facts_script(path))
        if not result.ok:
            return Outcome(
                False, as_evidence(result), N_("the node did not give its file-system facts")
            )
        found = erasure.parse_facts(path, result.stdout)
        facts = found.as_facts()
        if step.param("shared") == "yes":
            facts["outlives_instance"] = "yes"
        said = facts["caveats"] or N_("no known limit to shred here")
        words = N_("{fstype} ({options}) on {source}: {caveats}").format(
            fstype=found.fstype or "?",
            options=found.options or "?",
            source=found.source or "?",
            caveats=visible(said, 400),
        )
        return Outcome(True, as_evidence(result), words, facts)

    def _target(self, step: Step) -> str:
        """The script's head for a shred or clear step: sets p (and own) after the guard."""
        if step.action == "shred":
            word = paths.quoted(paths.check_scratch_path(step.param("path"), self.roots))
            own = [paths.check_scratch_path(x, self.roots) for x in _inside(step)]
            return guard(word) + own_paths(own)
        return home_path(step.param("home")) + own_paths(())

    async def _shred(self, step: Step, *, verify: bool) -> Outcome:
        # The file system's facts are read on every run and read-back of a shred (the facts
        # step ran once, maybe long ago: the mount table may have changed since).
        script = self._target(step)  # checks the path before anything reaches the node
        facts: dict[str, str] = {}
        if step.action == "shred":
            read = await self.session.run(facts_script(step.param("path")))
            if read.ok:
                facts = erasure.parse_facts(step.param("path"), read.stdout).as_facts()
        if step.action == "clear" and not verify:
            script += shared_home_check()
        script += GONE_BODY if verify else SHRED_BODY
        timeout = None if verify else self.shred_timeout_s
        result = await self.session.run(remote_job(job_tag(step.key), script), timeout)
        status = result.exit_status
        if status == 0:
            return Outcome(True, as_evidence(result), done_words(result.stdout, verify), facts)
        if status == SHARED_STORAGE:
            said = next(
                (ln for ln in node_lines(result.stdout) if ln.startswith("shared storage: ")),
                "shared storage: unknown",  # the node's words (nodescripts)
            ).removeprefix("shared storage: ")
            words = N_(
                "{target} is on shared or network storage ({said}): every machine that mounts"
                " it would lose it; not cleared. Clear it by hand where it belongs, then go on"
                " (--go-on)"
            ).format(target=step.target, said=visible(said, 200))
            return Outcome(False, as_evidence(result), words, {"home_fs": said}, needs_consent=True)
        why = WHY.get(status or 0, N_("files are still there") if verify else N_("not done"))
        words = N_("{target}: {why}").format(target=step.target, why=why)
        return Outcome(False, as_evidence(result), words, facts)

    async def inspect(self, step: Step) -> Sighting:
        """What is at a destructive step's target now: never changes anything."""
        try:
            if step.action in ("shred", "clear"):
                return await self._inspect_path(step)
            if step.action == "revoke-key":
                return await self._inspect_key(step)
        except SshError as exc:
            return Sighting(
                None, str(exc), N_("could not look: {why}").format(why=visible(exc, 300))
            )
        except InputError as exc:
            return Sighting(None, str(exc), N_("refused: {why}").format(why=visible(exc, 300)))
        return Sighting(
            None,
            "",
            N_("the ssh driver cannot inspect '{action}'").format(action=visible(step.action, 60)),
        )

    async def _inspect_path(self, step: Step) -> Sighting:
        if step.action == "shred":
            head = f"p={paths.quoted(paths.check_scratch_path(step.param('path'), self.roots))}\n"
        else:
            rel = paths.quoted(paths.check_home_entry(step.param("home")))
            head = home_dir() + f'p="$h"/{rel}\n'
        result = await self.session.run(head + own_paths(()) + INSPECT_BODY)
        facts: dict[str, str] = {"host": self._host, "path": step.target}
        exists: bool | None = None
        for line in node_lines(result.stdout)[:200]:
            word, _, rest = line.partition(" ")
            if word == "exists":
                exists = {"yes": True, "no": False}.get(rest)
            elif word in ("files", "bytes"):
                facts[word] = visible(rest, 40)
            elif word == "newest":
                facts[word] = iso_utc(rest)
            elif line.startswith(_KEPT + ": "):
                facts["kept"] = visible(line[len(_KEPT) + 2 :], 300)
            elif word == "fs":
                fstype, _, more = rest.partition(" ")
                facts["fstype"] = visible(fstype, 80)
                facts["mount"] = visible(more, 300)
            elif word == "kind":
                facts["kind"] = visible(rest, 80)
            elif line.startswith("mounted inside: "):
                facts["mounts_inside"] = (
                    facts.get("mounts_inside", "") + " " + visible(line[16:], 300)
                ).strip()
            elif line.startswith("partial: "):
                facts["partial"] = "yes"
        if exists is None:
            return Sighting(
                None, as_evidence(result), N_("the node did not say whether it is there")
            )
        if not exists:
            return Sighting(
                False, as_evidence(result), N_("not found: {path}").format(path=step.target), facts
            )
        said = N_("{files} file(s), {bytes} bytes").format(
            files=facts.get("files", "?"), bytes=facts.get("bytes", "?")
        )
        if "fstype" in facts:
            said = N_("{said} on {fstype}").format(said=said, fstype=facts["fstype"])
        if "mounts_inside" in facts:
            said = N_("{said}; mounted inside: {mounts}").format(
                said=said, mounts=facts["mounts_inside"]
            )
        return Sighting(True, as_evidence(result), said, facts)

    async def _inspect_key(self, step: Step) -> Sighting:
        fp = await self._fingerprint(step)
        listed, files = await self._keys_files(step)
        if not listed.ok or not files:
            return Sighting(None, as_evidence(listed), N_("cannot read the authorized keys files"))
        holding: list[str] = []
        unread = False
        for name, text in files:
            found = authkeys.find_key(text, fp)
            unread = unread or bool(found.unread)
            if found.lines:
                holding.append(
                    N_("{file} ({count} line(s))").format(
                        file=visible(name, 200), count=found.lines
                    )
                )
        facts = {"host": self._host, "fingerprint": fp, "in": ", ".join(holding)}
        if holding:
            said = N_("the key is in {files}").format(files=", ".join(holding))
            return Sighting(True, as_evidence(listed), said, facts)
        if unread:
            return Sighting(None, as_evidence(listed), N_("a keys file is longer than zuka reads"))
        return Sighting(
            False, as_evidence(listed), N_("not found: the key is in no keys file"), facts
        )

    async def _fingerprint(self, step: Step) -> str:
        fp = step.param("fingerprint")
        if fp:
            return authkeys.check_fingerprint(fp)
        key_path = step.param("key_path")
        if not key_path:
            raise InputError(
                "ssh_key",
                "",
                N_(
                    "no key recorded for this node: add its key path, or an ssh_key resource "
                    "with the key's SHA256 fingerprint"
                ),
            )
        return await asyncio.to_thread(self._fingerprint_of, key_path)

    async def _keys_files(self, step: Step) -> tuple[CommandResult, list[tuple[str, str]]]:
        mark = f"zuka-keys-{secrets.token_hex(8)}"
        listed = await self.session.run(keys_files_script(step.param("keys_file"), mark))
        return listed, split_keys_files(listed.stdout, mark) if listed.ok else []

    async def _revoke(self, step: Step, *, verify: bool) -> Outcome:
        fp = await self._fingerprint(step)
        cleaned = ""
        if not verify:
            # The last step that can still log in: zuka's run directory goes before the
            # key does. A rerun's first job makes it again (remote_job's mkdir -p).
            gone = await self.session.run(RUN_DIR_GONE)
            cleaned = as_evidence(gone)[-4096:] + "\n"
        listed, files = await self._keys_files(step)
        if not listed.ok or not files:
            words = N_("cannot read the authorized keys files")
            return Outcome(False, cleaned + as_evidence(listed), words)
        # The step's words never hold the fingerprint: they end up in the ledger's notes,
        # where a random-looking word is refused as a secret (the facts keep it).
        facts = {"fingerprint": fp, "keys_files": " ".join(visible(n, 200) for n, _t in files)}
        blobs: list[str] = []
        holding: list[str] = []
        for name, text in files:
            found = authkeys.find_key(text, fp)
            if found.unread and (verify or not found.lines):
                # The key may be in the part not read: neither clean nor revoked.
                why = N_(
                    "{file} has {count} more lines than zuka reads: not read, so not proven;"
                    " trim it"
                ).format(file=visible(name, 200), count=found.unread)
                return Outcome(False, as_evidence(listed), why)
            if found.lines:
                holding.append(visible(name, 200))
                blobs += [b for b in found.blobs if b not in blobs]
        names = ", ".join(visible(n, 200) for n, _t in files)
        if not holding:
            words = N_("the key is in none of {files}").format(files=names)
            return Outcome(True, cleaned + as_evidence(listed), words, facts)
        if verify:
            words = N_("the key is still in {files}").format(files=", ".join(holding))
            return Outcome(False, as_evidence(listed), words, facts)
        result = await self.session.run(revoke_script(step.param("keys_file"), blobs))
        if not result.ok:
            why = WHY.get(result.exit_status or 0, N_("not done"))
            words = N_("{target}: {why}").format(target=", ".join(holding), why=why)
            return Outcome(False, cleaned + as_evidence(result), words, facts)
        words = N_("the key's lines removed from {files}").format(files=", ".join(holding))
        return Outcome(True, cleaned + as_evidence(result), words, facts)

    async def _prove(self, step: Step) -> Outcome:
        attempt = await self.login(step)
        if attempt.refused:
            return Outcome(True, attempt.words, N_("a fresh login with the key was refused"))
        if attempt.words == STILL_WORKS:
            words = N_(
                "not proven: {why} (the key may be authorised elsewhere: sshd's"
                " AuthorizedKeysFile, another user, or a platform that puts it back)"
            ).format(why=visible(attempt.words, 300))
        else:
            words = N_("not proven: {why}").format(why=visible(attempt.words, 300))
        return Outcome(False, attempt.words, words)


def _inside(step: Step) -> list[str]:
    """The declared paths inside a shred step's path (each its own step)."""
    return [x for x in step.param("inside").split("\n") if x]


def fresh_login(node: Node, options: SshOptions) -> LoginProbe:
    """A probe that opens a new connection to node offering only the step's key file (no
    agent, no other key), and reports whether the node itself refused it."""

    async def probe(step: Step) -> LoginAttempt:
        key_path = step.param("key_path")
        if not key_path:
            return LoginAttempt(False, N_("no key file recorded to try a login with"))
        wanted = step.param("fingerprint")
        if wanted:
            # Another key being refused would prove nothing about this one.
            try:
                have = await asyncio.to_thread(authkeys.fingerprint_of, key_path)
            except InputError as exc:
                return LoginAttempt(False, visible(exc, 400))
            if have != wanted:
                return LoginAttempt(
                    False,
                    N_("{path} holds {have}, not {wanted}: no proof").format(
                        path=visible(key_path, 200), have=have, wanted=wanted
                    ),
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
    # leases.ssh.connect marks a node's own connect failure (a jump host's is not marked).
    return (
        isinstance(hop, HopFailed)
        and hop.at_node
        and isinstance(hop.__cause__, asyncssh.PermissionDenied)
    )
