"""The node's host beyond its GPUs on the node screen (Pilot) and as fleet columns: CPU,
load per core, memory, each disk with its label and a bar, /dev/shm, network; a hostile
mount path shown, never obeyed."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

from leases.core.host import GIB, KIB, HostStats, Mount, MountKind
from leases.core.models import NodeHealth, NodeStatus
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.telemetry.rollups import HistoryStore
from tests.tui.test_node_screen import NODE, NOW, app_on, built, ledger_file, opened, text_of  # noqa: F401
from tui.screens import hostview
from tui.screens.fleetview import COLUMNS, fleet_row, visible_columns

G = GIB // KIB
HOST = HostStats(
    cpu_pct=37.4,
    cpus=64,
    load1=12.5,
    load5=11.0,
    load15=9.75,
    mem_total_kib=512 * G,
    mem_available_kib=128 * G,
    mounts=(
        Mount("/", "overlay", 30 * G, 18 * G, 12 * G, "root fs", MountKind.ROOT),
        Mount("/dev/shm", "tmpfs", 64 * G, 1 * G, 63 * G, "shared memory", MountKind.SHM),
        Mount("/root/autodl-tmp", "xfs", 50 * G, int(47.5 * G), int(2.5 * G),
              "AutoDL data disk", MountKind.DATA),
        Mount("/data\x1b[2J[red]x[/]", "xfs", 100 * G, 10 * G, 90 * G, "data disk",
              MountKind.DATA),
    ),
    net_rx_bps=21_500_000.0,
    net_tx_bps=2_700.0,
)  # fmt: skip


def _with_host(path: Path, host: HostStats | None) -> None:
    with Ledger.open(path, clock=lambda: NOW) as ledger:
        store = HistoryStore(ledger)
        (status,) = [s for s in store.latest_by_id().values() if s.node == NODE]
        store.write_latest([replace(status, host=host)])


async def test_the_node_screen_shows_the_host(ledger_file: Path) -> None:  # noqa: F811
    _with_host(ledger_file, HOST)
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot)
        text = text_of(screen, "node-host")
        assert "CPU 37 % of 64 cores · load 12.50 11.00 9.75" in text
        assert "memory" in text and "384.0/512.0 GiB" in text
        line = next(x for x in text.splitlines() if "autodl-tmp" in x)
        assert line.startswith("AutoDL data disk /root/autodl-tmp")
        assert "███████████░  95 %  47.5/50.0 GiB  xfs" in line
        assert "shared memory /dev/shm" in text
        assert "network in 21.5 MB/s · out 2.7 kB/s" in text
        assert "\x1b" not in text and "[red]x[/]" in text  # shown, not obeyed


async def test_a_node_not_read_yet_says_so(ledger_file: Path) -> None:  # noqa: F811
    _with_host(ledger_file, None)
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot)
        assert text_of(screen, "node-host").startswith("host: not read yet")


def test_host_lines_name_what_was_not_read() -> None:
    lines = hostview.host_lines(HostStats(problems=("memory not read (/proc/meminfo)",)))
    assert lines[0] == "CPU ? of ? cores · load ?"
    assert "memory: ?" in lines and "disks: ?" in lines
    assert lines[-1] == "not read: memory not read (/proc/meminfo)"
    assert hostview.bar(0) == "░" * 12 and hostview.bar(150) == "█" * 12
    assert hostview.rate(None) == "?" and hostview.rate(999) == "999 B/s"


def test_fleet_columns_disk_and_ram() -> None:
    node = records.node_from({"name": "n1", "ssh_host": "10.0.0.9", "ssh_user": "root"})
    status = NodeStatus("n1", NodeHealth.OK, checked=NOW, at=NOW, host=HOST)
    row = fleet_row(node, status, None, [], NOW)
    assert row.cells["disk"].plain == "95%"  # the fullest data disk, not the root fs
    assert row.cells["disk"].style == "red"
    assert row.cells["ram"].plain == "75%"
    assert row.sort["disk"] == 95.0
    bare = fleet_row(node, NodeStatus("n1"), None, [], NOW)
    assert bare.cells["disk"].plain == "-" and bare.sort["disk"] is None
    # The least important columns: at 80 columns they give way first.
    keys = [c.key for c in visible_columns(80, 16)]
    assert "disk" not in keys and "ram" not in keys
    assert {"disk", "ram"} <= {c.key for c in visible_columns(400, 16)}
    assert max(c.priority for c in COLUMNS) == next(c for c in COLUMNS if c.key == "ram").priority


def test_every_optional_figure_missing_on_its_own_shows_as_a_question_mark() -> None:
    """A record read back may hold load1 without load5 (leases.core.host.host_from keeps
    each figure that reads): each one missing is `?`, the others still shown."""
    lines = hostview.host_lines(replace(HOST, load5=None, load15=None))
    assert lines[0] == "CPU 37 % of 64 cores · load 12.50 ? ?"
    assert hostview.host_lines(replace(HOST, load1=None))[0].endswith("load ? 11.00 9.75")
    swap = hostview.host_lines(replace(HOST, swap_total_kib=8 * G, swap_free_kib=None))
    assert "swap ? GiB used" in swap[1]
    optional = [f for f in fields(HostStats) if f.name not in ("mounts", "problems", "mem_cgroup")]
    swapping = replace(HOST, swap_total_kib=8 * G, swap_free_kib=6 * G)
    for f in optional:
        lines = hostview.host_lines(replace(swapping, **{f.name: None}))
        if f.name != "swap_total_kib":  # (no swap total: no swap part)
            assert len(lines) >= 4 and "?" in "\n".join(lines), f.name
    lines = hostview.host_lines(HostStats(load15=0.5, swap_total_kib=G, mem_available_kib=5))
    assert lines[0] == "CPU ? of ? cores · load ? ? 0.50" and "memory: ?" in lines
