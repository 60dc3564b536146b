"""Running commands on the node for acceptance: each probe runs at most once per run, and
what came back is kept as evidence, exactly, bounded in size.

The runner is injected (a `leases.ssh.session.NodeSession` over SSH, a local runner for a
`--local` node, a simulated node in tests). A command that could not run at all (SSH down,
timeout) is evidence too, with `failure` set: the checks resting on it are "not checked".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

from leases.accept.words import _
from leases.core.acceptance import Evidence
from leases.core.textsafe import visible
from leases.ssh.errors import CommandTimeout, SshError
from leases.ssh.faults import said_again
from leases.ssh.stream import CommandResult

# What is kept of one stream of one command: `nvidia-smi -q -x` of 8 GPUs is ~150 KB.
MAX_KEPT = 512 * 1024
CUT = "\n[zuka: output cut at 512 KiB]\n"


class Runner(Protocol):
    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult: ...


def _kept(text: str) -> str:
    return text if len(text) <= MAX_KEPT else text[:MAX_KEPT] + CUT


class Probe:
    """Runs named commands through the runner, once each, and keeps their evidence."""

    def __init__(self, runner: Runner, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._runner = runner
        self._clock = clock
        self._done: dict[str, Evidence] = {}
        self._running: dict[str, asyncio.Future[Evidence]] = {}
        # Set by the first command that could not run because the node is unreachable:
        # the engine then marks every check left "not checked" without trying more.
        self.unreachable: str = ""

    @property
    def evidence(self) -> tuple[Evidence, ...]:
        return tuple(self._done.values())

    async def run(self, key: str, command: str, timeout: float = 30.0) -> Evidence:
        """The evidence of `command`, run once under `key` (a second call with the same key
        returns the first result, whatever its command)."""
        if key in self._done:
            return self._done[key]
        if key in self._running:
            return await self._running[key]
        future: asyncio.Future[Evidence] = asyncio.get_running_loop().create_future()
        self._running[key] = future
        try:
            ev = await self._run(key, command, timeout)
            future.set_result(ev)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            del self._running[key]
        self._done[key] = ev
        return ev

    async def _run(self, key: str, command: str, timeout: float) -> Evidence:
        if self.unreachable:
            return Evidence(key, command, None, "", "", 0.0, self.unreachable)
        began = self._clock()
        try:
            result = await self._runner.run(command, timeout=timeout)
        except SshError as exc:
            words = visible(exc.message, 400)
            # A command that did not finish in time fails the checks resting on it; the
            # connection is kept, so the rest still run (a hung dmesg must not spare sshd).
            if exc.health.value in _UNREACHABLE and not isinstance(exc, CommandTimeout):
                self.unreachable = words
            return Evidence(key, command, None, "", "", self._clock() - began, words)
        except TimeoutError:
            words = _("no answer within {seconds:g} s").format(seconds=timeout)
            return Evidence(key, command, None, "", "", self._clock() - began, words)
        return Evidence(
            key,
            command,
            result.exit_status,
            _kept(result.stdout),
            _kept(result.stderr),
            round(self._clock() - began, 3),
        )

    def record(self, evidence: Evidence) -> None:
        """Keep evidence gathered another way (a login attempt, a transfer timed)."""
        self._done[evidence.key] = evidence


# NodeHealth values after which no further command is worth trying on this run.
_UNREACHABLE = frozenset(
    {"unreachable", "timeout", "auth_failed", "untrusted", "hostkey_changed", "refused"}
)


def missing_tool(ev: Evidence) -> bool:
    """Whether the shell said the command does not exist (exit 127, "not found")."""
    return ev.exit_status == 127 or (
        ev.exit_status is not None
        and ev.exit_status != 0
        and "not found" in ev.stderr.lower()
        and len(ev.stderr) < 400
    )


def why_unread(ev: Evidence) -> str:
    """Why a command gave nothing to read, in words ("" when it did): why it could not run,
    that it is not on the node, no exit status, else the first line it printed (shown
    through visible) or its exit status."""
    if ev.failure:
        return said_again(ev.failure)
    if missing_tool(ev):
        return _("{tool}: not found").format(tool=ev.command.split(" ", 1)[0])
    if ev.exit_status is None:
        return _("no exit status came back: the connection ended before the command did")
    if ev.exit_status != 0:
        said = (ev.stderr or ev.stdout).strip().split("\n", 1)[0].strip()
        return visible(said, 160) or _("exit status {status}").format(status=ev.exit_status)
    return ""
