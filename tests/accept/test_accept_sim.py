"""Every trap of a rented node, end to end: the simulated node prints it in the real tools'
formats over SSH, the real checks (leases.accept.registry) judge it through the use case
(leases.app.acceptance), and the stored verdict names it. A clean node of the same fleet
passes. The simulated node's load follows the clock, so what is asserted is what a trap
makes whatever the load: a failure (or a warning, a skip) of the check meant to catch it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from leases.app import acceptance
from leases.config.sections import Config
from leases.core.acceptance import Level, Status, Verdict
from leases.ledger.store import Ledger
from leases.sim.ledger import register_sim_nodes, serve_ledger_nodes


@dataclass(frozen=True)
class Case:
    tags: tuple[str, ...]  # sim:SCENARIO and sim-trap:TRAP tags given to the node
    check: str  # the finding's id, or its prefix before ":" (host.disk:/)
    statuses: frozenset[Status]
    said: str = ""  # words the finding carries
    changes: tuple[tuple[str, object], ...] = ()  # what the ledger says was sold


def _case(tags: str, check: str, *statuses: Status, said: str = "", **changes: object) -> Case:
    return Case(tuple(tags.split()), check, frozenset(statuses), said, tuple(changes.items()))


F, W, S = Status.FAILED, Status.WARNED, Status.SKIPPED
# By node index: register_sim_nodes cycles through its kinds (0 8x RTX 4090, 1 8x A100 SXM,
# 2 8x H800, 3 8x A800, 4 1x A10, 5 4x RTX 4090, 6 8x V100, 7 1x A100 fake VRAM).
CASES: dict[int, Case] = {
    0: _case(
        "sim:busy sim-trap:password_sshd", "sshd.password", F, said="PasswordAuthentication yes"
    ),
    26: _case("sim:busy sim-trap:password_sshd", "sshd.proof", F, said="password"),
    8: _case("sim:busy sim-trap:open_jupyter", "sshd.services", F, said="8888"),
    16: _case("sim:busy sim-trap:stranger_key", "sshd.keys", F, said="did not expect"),
    24: _case("sim:busy sim-trap:no_tools", "heavy.torch", S, said="python3"),
    1: _case("sim:busy sim-trap:pcie_only", "links.topo", F, nvlinks=12),
    9: _case("sim:busy sim-trap:dead_link", "links.nvlink", F),
    17: _case("sim:busy sim-trap:mig", "sharing.mig", F),
    2: _case("sim:busy sim-trap:ib_down", "links.ib", F, ib_gbps=400),
    10: _case("sim:busy sim-trap:no_ib", "links.ib", F, ib_gbps=400),
    18: _case("sim:busy sim-trap:slow_gpu", "heavy.torch", F, said="TFLOPS"),
    3: _case("sim:busy sim-trap:remapped_rows", "health.memory", F),
    11: _case("sim:busy sim-trap:xid", "health.xid", F, said="79"),
    19: _case("sim:busy sim-trap:dcgm_fail", "heavy.dcgmi", F),
    4: _case("sim:busy sim-trap:power_capped", "health.power", F),
    12: _case("sim:busy sim-trap:throttled", "health.throttle", W),
    20: _case("sim:busy sim-trap:no_torch", "heavy.torch", S, said="torch is not installed"),
    5: _case("sim:busy sim-trap:tenant", "sharing.tenants", F, said="another container"),
    13: _case("sim:busy sim-trap:ghost_memory", "sharing.memory", F, W),
    21: _case("sim:busy sim-trap:small_disk", "host.disk", W),
    7: _case("sim:fake_vram", "inventory.vram", F, said="24564 MiB"),
    15: _case("sim:busy sim-trap:hami", "sharing.limiter", F, said="libvgpu"),
    23: _case("sim:busy sim-trap:vgpu", "sharing.vgpu", F, said="VGPU"),
}
CLEAN = 25  # an 8x A100 SXM box as sold, nothing wrong with it


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Verdict]]:
    path: Path = tmp_path_factory.mktemp("accept") / "ledger.db"
    with Ledger.open(path) as ledger:
        nodes = register_sim_nodes(ledger, 27, datetime.now(UTC))
        for i, case in CASES.items():
            ledger.update_node(nodes[i].name, {"tags": list(case.tags), **dict(case.changes)})
        ledger.update_node(nodes[CLEAN].name, {"tags": ["sim:busy"], "nvlinks": 12})
        nodes = [ledger.node(n.name) for n in nodes]
        runner = serve_ledger_nodes(ledger, path, nodes)
        try:
            names = {i: nodes[i].name for i in (*CASES, CLEAN)}

            async def every() -> list[acceptance.Stored]:
                return list(
                    await asyncio.gather(
                        *(
                            acceptance.accept(
                                ledger, names[i], Config(), level=Level.STANDARD,
                                clock=lambda: datetime.now(UTC),
                            )
                            for i in names
                        )
                    )
                )  # fmt: skip

            stored = asyncio.run(every())
            yield {i: s.verdict for i, s in zip(names, stored, strict=True)}
        finally:
            runner.stop()


def _findings(verdict: Verdict, check: str) -> list[tuple[Status, str]]:
    return [
        (r.status, r.words)
        for r in verdict.results
        if r.check == check or r.check.partition(":")[0] == check
    ]


@pytest.mark.parametrize("index", sorted(CASES))
def test_each_trap_is_caught_by_its_check(verdicts: dict[int, Verdict], index: int) -> None:
    case, verdict = CASES[index], verdicts[index]
    found = _findings(verdict, case.check)
    assert found, f"{case.tags}: no {case.check} finding in {[r.check for r in verdict.results]}"
    hit = [(s, w) for s, w in found if s in case.statuses]
    assert hit, f"{case.tags}: {case.check} said {found}"
    assert any(case.said in w for _, w in hit), f"{case.tags}: {hit}"
    # A failure fails the run: the node is not what was sold.
    if Status.FAILED in case.statuses and all(s is Status.FAILED for s, _ in hit):
        assert verdict.status is Status.FAILED


def test_a_clean_node_passes_and_every_command_left_evidence(
    verdicts: dict[int, Verdict],
) -> None:
    verdict = verdicts[CLEAN]
    failed = [(r.check, r.words) for r in verdict.results if r.status is Status.FAILED]
    assert failed == []
    assert verdict.status in (Status.PASSED, Status.WARNED)
    checks = {r.check.partition(":")[0] for r in verdict.results}
    # Every family ran, the heavy tools included (standard level).
    assert {"inventory.vram", "links.topo", "links.nvlink", "sshd.proof", "host.disk",
            "heavy.torch", "heavy.dcgmi", "heavy.nvbw", "heavy.nccl"} <= checks  # fmt: skip
    passed = {r.check for r in verdict.results if r.status is Status.PASSED}
    assert {"inventory.vram", "links.topo", "links.nvlink", "heavy.torch", "heavy.pcie"} <= passed
    keys = {e.key for e in verdict.evidence}
    for r in verdict.results:
        assert set(r.evidence) <= keys, r
