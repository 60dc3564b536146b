"""The shapes acceptance results take: a check's status, the evidence it rests on, and the
verdict of one run. Every string a node printed stays as it came (evidence is kept raw);
it reaches a person only through `leases.core.textsafe.visible`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class Level(StrEnum):
    """How far a run goes: quick (read-only, seconds), standard (+ short GPU work: torch,
    dcgmi -r 2, nvbandwidth, nccl-tests), burn (+ a bounded burn-in)."""

    QUICK = "quick"
    STANDARD = "standard"
    BURN = "burn"


class Status(StrEnum):
    PASSED = "passed"
    WARNED = "warned"  # worth a look, not a reason to return the node
    FAILED = "failed"  # the node is not what was sold, or is unsafe: evidence for the provider
    SKIPPED = "skipped"  # could not run here (tool missing, not allowed, not at this level)
    NOT_CHECKED = "not_checked"  # the node could not be reached or read: never "passed"


# The order a run's verdict takes: the worst status of its checks, skipped ones aside.
SEVERITY: dict[Status, int] = {
    Status.PASSED: 0,
    Status.SKIPPED: 0,
    Status.WARNED: 1,
    Status.NOT_CHECKED: 2,
    Status.FAILED: 3,
}


def worse(a: Status, b: Status) -> Status:
    """The more severe of two statuses (by SEVERITY; the first on a tie)."""
    return b if SEVERITY[b] > SEVERITY[a] else a


@dataclass(frozen=True)
class Evidence:
    """One command zuka ran on the node, and what came back, exactly (bounded in size)."""

    key: str  # stable name of the probe: "query-gpu", "topo", "sshd-T", ...
    command: str  # the command line as sent (zuka's own words, never a node's)
    exit_status: int | None  # None: no status came back (timeout, channel closed)
    stdout: str
    stderr: str
    seconds: float = 0.0
    # Set when the command could not run at all (SSH down, timeout): the words why.
    failure: str = ""


@dataclass(frozen=True)
class CheckResult:
    """One check's finding: what was expected, what was found, in words a provider accepts."""

    check: str  # stable id, "family.name": "inventory.vram", "links.nvlink", "sshd.password"
    title: str  # short title a person reads: "VRAM per GPU"
    status: Status
    words: str  # the finding: "GPU 3 reports 24564 MiB; an A100 80GB has 81920 MiB (±3 %)"
    expected: str = ""
    found: str = ""
    evidence: tuple[str, ...] = ()  # Evidence.key values this finding rests on


@dataclass(frozen=True)
class Verdict:
    """One acceptance run of one node."""

    node: str
    level: Level
    started: datetime
    finished: datetime
    results: tuple[CheckResult, ...]
    evidence: tuple[Evidence, ...]

    @property
    def status(self) -> Status:
        """FAILED if any check failed; NOT_CHECKED if nothing could be read; WARNED if any
        warned or could not be checked; else PASSED (skipped checks never fail a run, and
        never make it pass: a run with only skipped checks is NOT_CHECKED)."""
        if not self.results or all(r.status is Status.SKIPPED for r in self.results):
            return Status.NOT_CHECKED
        if all(r.status in (Status.NOT_CHECKED, Status.SKIPPED) for r in self.results):
            return Status.NOT_CHECKED
        worst = max(self.results, key=lambda r: SEVERITY[r.status]).status
        if worst is Status.NOT_CHECKED:
            return Status.WARNED
        return Status.PASSED if worst is Status.SKIPPED else worst

    def counts(self) -> dict[Status, int]:
        out = dict.fromkeys(Status, 0)
        for r in self.results:
            out[r.status] += 1
        return out
