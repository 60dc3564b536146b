"""The nvidia-smi probe kept per node in the ledger (leases.telemetry.probecache): a cold
poll with it is a connect and one command a node; it is dropped when the driver changes or a
reading does not parse; a row edited behind zuka's back is never trusted into a command.
Commands are counted on an in-process asyncssh server answering as a simulated node."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import asyncssh
import pytest

from leases.core.models import Node, NodeHealth
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.sim import Scenario, SimNode
from leases.ssh.pool import SshPool
from leases.ssh.posixsh import unwrap_sh
from leases.telemetry import nvsmi
from leases.telemetry.nvsmiprobe import checked_probe
from leases.telemetry.owners import APPS_OWNERS_COMMAND
from leases.telemetry.poller import Poller
from leases.telemetry.probecache import Probe, ProbeCache
from leases.telemetry.rollups import HistoryStore
from tests.support.sshfixtures import FakeNode, TestKeys, default_handler, node_options

KEYS = TestKeys.generate()
T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
SIM_DRIVER = "550.54.15"  # what leases.sim prints as driver_version
# A probe as an old driver leaves it: the required fields and the driver's own.
SMALL = ("index", "uuid", "name", "memory.total", "utilization.gpu", "memory.used")
SMALL_WITH_DRIVER = (*SMALL, "driver_version")


class Clock:
    def __call__(self) -> datetime:
        return T0


@dataclass
class Rig:
    tmp: Path
    node: FakeNode
    ledger: Ledger
    added: Node
    commands: list[str] = field(default_factory=list)
    refuse: set[str] = field(default_factory=set)  # fields the node's nvidia-smi refuses
    garbage: bool = False  # the query prints what no parser reads

    def poller(self, **kwargs: object) -> Poller:
        options = node_options(KEYS, self.tmp, [self.node], command_timeout=5.0)
        return Poller(
            [self.added],
            pool=SshPool(options),
            clock=Clock(),
            store=HistoryStore(self.ledger),
            probes=ProbeCache(self.ledger),
            kept_shell=False,
            **{"reuse_probes": True, **kwargs},  # type: ignore[arg-type]
        )

    def query_fields(self, command: str) -> tuple[str, ...]:
        start = command.index("--query-gpu=") + len("--query-gpu=")
        return tuple(command[start:].split(" ", 1)[0].split(","))

    def queries(self) -> list[tuple[str, ...]]:
        return [self.query_fields(c) for c in self.commands if "--query-gpu=" in c]

    def kept(self) -> list[tuple[str, str]]:
        return self.ledger.conn.execute("SELECT fields, driver FROM node_probe").fetchall()


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    sim = SimNode("n0", "A100", 2, Scenario.BUSY, seed=4)
    holder: list[Rig] = []

    async def handler(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
        r = holder[0]
        cmd = process.command or ""
        cmd = unwrap_sh(cmd) or cmd  # an exec hands its command to sh (leases.ssh.posixsh)
        r.commands.append(cmd)
        refused = [f for f in r.refuse if "--query-gpu=" in cmd and f in r.query_fields(cmd)]
        if refused:
            process.stdout.write(f'Field "{refused[0]}" is not a valid field to query.\n\n')
            process.exit(2)
        elif r.garbage and "--query-gpu=" in cmd:
            process.stdout.write("this is not, a csv, row\n")
            process.exit(0)
        else:
            await default_handler(process, node)

    node = await FakeNode(KEYS, handler=handler, sim=sim, sim_clock=lambda: T0).start()
    ledger = Ledger.open(tmp_path / "l.db")
    record = records.node_record(node.as_node("n0"))
    added = ledger.add_node(records.node_from({**record, "gpu_count": 2}))
    r = Rig(tmp_path, node, ledger, added)
    holder.append(r)
    yield r
    await node.stop()
    ledger.close()


async def sweep(rig: Rig, **kwargs: object) -> NodeHealth:
    poller = rig.poller(**kwargs)
    try:
        statuses = await poller.sweep()
    finally:
        await poller.close()
    return statuses["n0"].health


def keep(rig: Rig, fields: tuple[str, ...], driver: str) -> None:
    ProbeCache(rig.ledger).save({rig.added.id or 0: (rig.added, Probe(fields, driver))}, T0)


# -- the cold poll: one command a node --------------------------------------------------


async def test_a_node_that_knows_every_field_is_probed_and_read_in_one_command(rig: Rig) -> None:
    assert await sweep(rig, processes=False) is NodeHealth.OK
    assert len(rig.commands) == 1 and rig.node.channels.total == 1
    assert rig.queries() == [nvsmi.QUERY_FIELDS]
    assert rig.kept() == [(json.dumps(list(nvsmi.QUERY_FIELDS)), SIM_DRIVER)]


async def test_a_kept_probe_is_used_the_next_process_one_exec(rig: Rig) -> None:
    keep(rig, SMALL_WITH_DRIVER, SIM_DRIVER)
    assert await sweep(rig, processes=False) is NodeHealth.OK
    assert rig.node.channels.total == 1  # one exec: no probe before the query
    assert rig.queries() == [SMALL_WITH_DRIVER]
    assert rig.kept() == [(json.dumps(list(SMALL_WITH_DRIVER)), SIM_DRIVER)]


async def test_a_long_lived_poller_probes_afresh_and_keeps_what_it_found(rig: Rig) -> None:
    # A row edited behind zuka's back to the required fields only, no driver_version (so no
    # driver change would ever drop it): the collector and the dashboard do not start from
    # it, and what their probe found replaces it for the next `zuka poll`.
    bare = ("index", "uuid", "name", "memory.total", "utilization.gpu", "memory.used")
    keep(rig, bare, "")
    assert await sweep(rig, processes=False, reuse_probes=False) is NodeHealth.OK
    assert rig.queries() == [nvsmi.QUERY_FIELDS]
    assert rig.kept() == [(json.dumps(list(nvsmi.QUERY_FIELDS)), SIM_DRIVER)]


async def test_processes_are_read_only_when_asked(rig: Rig) -> None:
    assert await sweep(rig, processes=False) is NodeHealth.OK
    assert not any(APPS_OWNERS_COMMAND in c for c in rig.commands)
    rig.commands.clear()
    assert await sweep(rig) is NodeHealth.OK  # the collector's and dashboard's default
    # With the probe kept by the sweep before: the GPU query and the owner query in one
    # command, one round trip (leases.telemetry.gpuread.with_apps).
    (command,) = rig.commands
    assert APPS_OWNERS_COMMAND in command and len(rig.queries()) == 1


async def test_a_node_probed_in_this_sweep_reads_its_processes_after(rig: Rig) -> None:
    # No fields known: the probe's query is the reading, the owner query follows it.
    assert await sweep(rig) is NodeHealth.OK
    assert len(rig.commands) == 2 and rig.commands[1].startswith(APPS_OWNERS_COMMAND)
    assert APPS_OWNERS_COMMAND not in rig.commands[0]


async def test_a_probe_that_drops_a_refused_field_is_kept_without_it(rig: Rig) -> None:
    rig.refuse = {"clocks_throttle_reasons.active"}
    assert await sweep(rig, processes=False) is NodeHealth.OK
    wanted = tuple(f for f in nvsmi.QUERY_FIELDS if f not in rig.refuse)
    assert rig.queries() == [nvsmi.QUERY_FIELDS, wanted]
    assert rig.kept() == [(json.dumps(list(wanted)), SIM_DRIVER)]
    rig.commands.clear()
    assert await sweep(rig, processes=False) is NodeHealth.OK
    assert rig.queries() == [wanted]  # the next process: no probe


# -- when the kept probe is dropped ------------------------------------------------------


async def test_another_driver_drops_the_kept_probe(rig: Rig) -> None:
    keep(rig, SMALL_WITH_DRIVER, "535.104.05")  # the node was upgraded since
    assert await sweep(rig, processes=False) is NodeHealth.OK  # the reading itself is good
    assert rig.queries() == [SMALL_WITH_DRIVER]
    assert rig.kept() == []  # dropped: the new driver may know more fields
    rig.commands.clear()
    assert await sweep(rig, processes=False) is NodeHealth.OK
    assert rig.queries() == [nvsmi.QUERY_FIELDS]  # probed afresh, and kept again
    assert rig.kept() == [(json.dumps(list(nvsmi.QUERY_FIELDS)), SIM_DRIVER)]


async def test_a_reading_that_does_not_parse_drops_the_kept_probe(rig: Rig) -> None:
    keep(rig, nvsmi.QUERY_FIELDS, SIM_DRIVER)
    rig.garbage = True
    assert await sweep(rig, processes=False) is NodeHealth.GARBAGE
    assert rig.kept() == []
    rig.garbage = False
    rig.commands.clear()
    assert await sweep(rig, processes=False) is NodeHealth.OK
    assert rig.queries() == [nvsmi.QUERY_FIELDS]


async def test_a_kept_field_the_node_now_refuses_is_probed_in_the_same_reading(rig: Rig) -> None:
    keep(rig, nvsmi.QUERY_FIELDS, SIM_DRIVER)
    rig.refuse = {"fan.speed"}  # a driver downgrade, say
    assert await sweep(rig, processes=False) is NodeHealth.OK
    wanted = tuple(f for f in nvsmi.QUERY_FIELDS if f != "fan.speed")
    # The kept fields, refused; the probe from the full set, refused; without the field.
    assert rig.queries() == [nvsmi.QUERY_FIELDS, nvsmi.QUERY_FIELDS, wanted]
    assert rig.kept() == [(json.dumps(list(wanted)), SIM_DRIVER)]


async def test_a_refused_kept_field_with_the_processes_due_still_reads_them(rig: Rig) -> None:
    # The command carrying both is refused whole (no marker came back): nothing of it is
    # taken for the GPU query's answer, which is asked alone, refused; probed; then the
    # owner query on its own.
    keep(rig, nvsmi.QUERY_FIELDS, SIM_DRIVER)
    rig.refuse = {"fan.speed"}
    poller = rig.poller()
    try:
        assert (await poller.sweep())["n0"].health is NodeHealth.OK
        assert poller.statuses["n0"].processes
    finally:
        await poller.close()
    wanted = tuple(f for f in nvsmi.QUERY_FIELDS if f != "fan.speed")
    assert rig.queries() == [nvsmi.QUERY_FIELDS, nvsmi.QUERY_FIELDS, nvsmi.QUERY_FIELDS, wanted]
    assert APPS_OWNERS_COMMAND in rig.commands[0] and rig.commands[-1] == APPS_OWNERS_COMMAND


async def test_a_probe_kept_for_another_login_is_not_used(rig: Rig) -> None:
    keep(rig, SMALL_WITH_DRIVER, SIM_DRIVER)
    rig.added = rig.ledger.update_node(rig.added.name, {"ssh_user": "gpu"})  # another login
    assert await sweep(rig, processes=False) is NodeHealth.OK
    assert rig.queries() == [nvsmi.QUERY_FIELDS]


# -- a row edited behind zuka's back ----------------------------------------------------

JUNK_ROWS = [
    '["index", "uuid", "name", "memory.total", "utilization.gpu", "memory.used", '
    '"power.draw;reboot"]',  # a field no nvidia-smi has, made to reach the shell
    '["index", "uuid", "name", "memory.total", "utilization.gpu", "memory.used", '
    '"power.draw $(reboot)"]',
    '["index", "uuid", "name", "memory.total", "utilization.gpu"]',  # a required one missing
    '["index", "index", "uuid", "name", "memory.total", "utilization.gpu", "memory.used"]',
    '["index", "uuid", "name", "memory.total", "utilization.gpu", "memory.used", 7]',
    '{"fields": ["index"]}',
    "not json at all",
    "[" * 100_000,  # nested past the parser's depth, and longer than a probe is
    "",
]


@pytest.mark.parametrize("junk", JUNK_ROWS)
async def test_a_junk_row_is_ignored_and_probed_again(rig: Rig, junk: str) -> None:
    keep(rig, SMALL_WITH_DRIVER, SIM_DRIVER)
    with rig.ledger.transaction() as conn:
        conn.execute("UPDATE node_probe SET fields = ?", [junk])
    assert await sweep(rig, processes=False) is NodeHealth.OK
    assert rig.queries() == [nvsmi.QUERY_FIELDS]  # nothing of the row in a command
    assert not any("reboot" in c for c in rig.commands)
    assert rig.kept() == [(json.dumps(list(nvsmi.QUERY_FIELDS)), SIM_DRIVER)]


async def test_a_junk_driver_is_ignored(rig: Rig) -> None:
    keep(rig, SMALL_WITH_DRIVER, SIM_DRIVER)
    with rig.ledger.transaction() as conn:
        conn.execute("UPDATE node_probe SET driver = ?", ["550; reboot"])
    assert await sweep(rig, processes=False) is NodeHealth.OK
    assert rig.queries() == [nvsmi.QUERY_FIELDS]


def test_checked_probe_takes_only_a_probe_of_known_fields() -> None:
    ok = list(SMALL_WITH_DRIVER)
    assert checked_probe(ok, SIM_DRIVER) == SMALL_WITH_DRIVER
    assert checked_probe([*ok, "clocks_event_reasons.active"], "570.1") is not None
    # Without driver_version, or with no driver read, no driver change would ever drop it.
    assert checked_probe(list(SMALL), "") is None
    assert checked_probe(list(SMALL), SIM_DRIVER) is None
    assert checked_probe(ok, "") is None
    assert checked_probe([*ok, "made.up"], SIM_DRIVER) is None
    assert checked_probe([*ok, "INDEX"], SIM_DRIVER) is None  # nvsmi's names are lower case
    assert checked_probe(ok[1:], SIM_DRIVER) is None
    assert checked_probe(tuple(ok), SIM_DRIVER) is None  # JSON gives lists
    assert checked_probe([], SIM_DRIVER) is None
    assert checked_probe(ok, "550.54.15\n") is None
    assert checked_probe(ok, "v550") is None
    assert checked_probe(ok, None) is None
    assert checked_probe(ok, "5" * 40) is None


async def test_a_deleted_node_takes_its_kept_probe_with_it(rig: Rig) -> None:
    keep(rig, SMALL_WITH_DRIVER, SIM_DRIVER)
    rig.ledger.delete_node(rig.added.name, force=True)
    assert rig.kept() == []
    keep(rig, SMALL_WITH_DRIVER, SIM_DRIVER)  # a poller still reading it: nothing kept
    assert rig.kept() == []
