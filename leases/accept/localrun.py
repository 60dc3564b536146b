"""Acceptance of a `--local` node: zuka's own commands run on the machine zuka runs on
(`/bin/sh -c`, bounded output, a timeout), and NVML's facts recorded as evidence.

Only zuka's own command strings are run here (the checks' fixed commands); nothing a
node printed ever becomes words of one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from leases.accept.probe import MAX_KEPT
from leases.accept.words import _
from leases.core.acceptance import Evidence
from leases.ssh.stream import CommandResult
from leases.telemetry.nvml import NvmlUnavailable, read_local
from leases.telemetry.nvsmi import EXTRA_DRIVER_VERSION

_READ_CHUNK = 64 * 1024
NVML_KEY = "nvml"
NVML_COMMAND = "(NVML on this host)"


class LocalRunner:
    """Runs a command with /bin/sh -c here; each stream kept up to `limit` characters
    (the rest read and dropped, so the command never blocks on a full pipe)."""

    def __init__(self, *, limit: int = MAX_KEPT + 1, shell: str = "/bin/sh") -> None:
        self._limit = limit
        self._shell = shell

    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
        proc = await asyncio.create_subprocess_exec(
            self._shell,
            "-c",
            cmd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        assert proc.stdout is not None and proc.stderr is not None
        try:
            out, err = await asyncio.wait_for(
                asyncio.gather(self._read(proc.stdout), self._read(proc.stderr)), timeout
            )
            status = await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: the command's children too
            with contextlib.suppress(ProcessLookupError):
                await proc.wait()
            raise
        return CommandResult(status, out, err)

    async def _read(self, stream: asyncio.StreamReader) -> str:
        kept = bytearray()
        while chunk := await stream.read(_READ_CHUNK):
            room = self._limit * 4 - len(kept)  # bytes: up to 4 per character
            if room > 0:
                kept += chunk[:room]
        return kept.decode("utf-8", errors="replace")[: self._limit]


def nvml_evidence(
    nvml: Any = None, now: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> Evidence:
    """NVML's facts of this host as evidence (key "nvml", a JSON body: count, names,
    memory totals in MiB, driver); a host without NVML gives evidence whose failure says
    "no NVML on this host", so the checks resting on it are skipped with that reason."""
    try:
        samples = read_local("local", now(), nvml)
    except NvmlUnavailable as exc:
        return Evidence(NVML_KEY, NVML_COMMAND, None, "", "", 0.0, str(exc)[:400])
    except ImportError:
        return Evidence(NVML_KEY, NVML_COMMAND, None, "", "", 0.0, _("no NVML on this host"))
    driver = next((s.extra[EXTRA_DRIVER_VERSION] for s in samples
                   if EXTRA_DRIVER_VERSION in s.extra), "")  # fmt: skip
    body = {
        "count": len(samples),
        "names": [s.name for s in samples],
        "memory_total_mib": [s.mem_total_mib for s in samples],
        "driver": driver,
    }
    return Evidence(NVML_KEY, NVML_COMMAND, 0, json.dumps(body), "", 0.0)
