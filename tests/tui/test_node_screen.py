"""The node screen (Enter on the fleet), driven by Pilot on a real ledger file with a day of
minute roll-ups (a gap in it), a month of hour roll-ups and a hostile process name."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import DataTable, Static, TabbedContent

from leases.config.sections import Config
from leases.core.models import GpuProcess, GpuSample, NodeHealth, NodeStatus
from leases.ledger.store import Ledger
from leases.sim.demoledger import demo_records
from leases.telemetry.history import GpuHour, GpuMinute, NodeHour, NodeMinute
from leases.telemetry.rollups import HistoryStore
from leases.telemetry.series import Span
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.screens import nodeview
from tui.screens.node import NodeScreen
from tui.widgets.charts import HistoryChart

NOW = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)
NODE = "a100-monthly-1"  # renewed once: a chain of two leases
HOSTILE = "\x1b[2J[bold red]evil[/]\x07"


def _gpu_minute(m: int, g: int) -> GpuMinute:
    util = float((m * 7 + g * 5) % 100)
    return GpuMinute(g, 12, util, 100.0, 20_000.0 + 1000 * g, 150.0 + (m % 50) * 4, 400.0)


def _history(ledger: Ledger) -> None:
    store = HistoryStore(ledger)
    gpus = 8
    this_minute = int(NOW.timestamp()) // 60
    minutes = [
        NodeMinute(NODE, m, tuple(_gpu_minute(m, g) for g in range(gpus)))
        for m in range(this_minute - 24 * 60, this_minute)
        if not 30 <= this_minute - m < 45  # a quarter of an hour unread, 30-45 min ago
    ]
    store.write_minutes(minutes)
    first_hour = int(datetime(2026, 11, 1, tzinfo=UTC).timestamp()) // 3600
    store.write_hours(
        NodeHour(NODE, h, tuple(GpuHour(g, 60, 40, 55.0, 100.0, 30_000.0, 250.0) for g in range(gpus)))
        for h in range(first_hour, this_minute // 60 - 24)
        if not 100 <= h - first_hour < 148  # two days unread
    )  # fmt: skip
    samples = tuple(
        GpuSample(NODE, NOW, g, uuid=f"GPU-{g}", name="NVIDIA A100-SXM4-80GB", util_gpu=90.0 + g,
                  mem_used_mib=40_000.0, mem_total_mib=81_920.0, power_w=300.0,
                  power_limit_w=400.0, temp_c=61.0, pstate="P0")
        for g in range(gpus)
    )  # fmt: skip
    procs = (
        GpuProcess(NODE, "GPU-0", 4242, "python train.py", 38_000.0, "alice"),
        GpuProcess(NODE, "GPU-1", 4243, HOSTILE, 1_000.0, "uid:1002"),
    )
    store.write_latest(
        [NodeStatus(NODE, NodeHealth.OK, "", checked=NOW, samples=samples, processes=procs)]
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo fleet recorded at NOW (audit times fixed), with history; built once."""
    path = tmp_path_factory.mktemp("node") / "node.db"
    with Ledger.open(path, clock=lambda: NOW, actor="tester") as ledger:
        ledger.import_records(demo_records(date(2026, 11, 30)))
        _history(ledger)
    return path


@pytest.fixture
def ledger_file(built: Path, tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "node.db"
    shutil.copy(built, path)
    yield path


def app_on(path: Path) -> ZukaApp:
    return ZukaApp(path, clock=lambda: NOW, poll=False, refresh_s=3600, config=Config())


def rows(screen: NodeScreen, table_id: str) -> list[list[str]]:
    table: DataTable[Text] = screen.query_one(f"#{table_id}", DataTable)
    return [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]


def text_of(screen: NodeScreen, static_id: str) -> str:
    return str(screen.query_one(f"#{static_id}", Static).render())


async def opened(app: ZukaApp, pilot: object, name: str = NODE) -> NodeScreen:
    # The fleet's reads run off the UI loop: the live status comes from the first, the
    # alerts (evaluated on read: nobody polls) with the third, after the first paint's two.
    await wait_until(lambda: app._reads >= 3, what="the fleet's first reads")
    screen = NodeScreen(name)
    await app.push_screen(screen)
    await wait_until(lambda: screen.facts is not None or screen.problem, what="the first read")
    await app.workers.wait_for_complete()
    await pilot.pause()  # type: ignore[attr-defined]
    return screen


async def test_gpus_and_processes_now(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot)
        assert "a100-monthly-1 · ok · 8× A100 80GB SXM" in text_of(screen, "node-title")
        gpus = rows(screen, "node-gpus")
        assert len(gpus) == 8 and gpus[3][2] == "93%"
        procs = rows(screen, "node-procs")
        assert [p[:3] for p in procs] == [["0", "4242", "alice"], ["1", "4243", "uid:1002"]]
        # Shown, never obeyed: no escape byte and no markup reaches the terminal.
        assert "\x1b" not in procs[1][3] and "[bold red]evil[/]" in procs[1][3]
        assert "processes (2)" in text_of(screen, "node-procs-caption")
        await pilot.press("escape")
        assert not isinstance(app.screen, NodeScreen)


async def test_range_keys_switch_the_charts(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot)
        util = screen.query_one("#chart-util", HistoryChart)
        # (key, span, what the title says of gaps, stretches drawn): the quarter of an hour
        # unread 30-45 minutes ago, and the minute (or ten) in progress not rolled up yet;
        # the week's hours are all read; the lease's life has hours from Nov 1 only and two
        # days unread.
        for key, span, gaps, lines in (("h", Span.HOUR, "16 of 60", 2), ("d", Span.DAY, "2 of 144", 2),
                                       ("w", Span.WEEK, "mean", 1), ("f", Span.LEASE, "slices unread", 2)):  # fmt: skip
            await pilot.press(key)
            await wait_until(
                lambda span=span: (
                    screen.facts
                    and screen.facts.series
                    and screen.facts.series.span is span
                    and util.chart is not None
                    and util.chart.title.startswith("utilisation")
                ),
                what=f"the {span} series",
            )
            await pilot.pause()
            assert screen.query_one("#node-tabs", TabbedContent).active == "tab-history"
            assert util.chart is not None and gaps in util.chart.title
            assert len(util.chart.lines) == lines  # a gap splits the line
        # The lease's life starts at the chain's first lease (2026-10-15 in Shanghai).
        assert screen.facts is not None and screen.facts.life is not None
        assert screen.facts.life[0] == datetime(2026, 10, 14, 16, tzinfo=UTC)
        assert "date, over the lease's life" in text_of(screen, "node-span")


async def test_a_node_without_a_lease_says_so_on_the_lease_chart(ledger_file: Path) -> None:
    with Ledger.open(ledger_file, clock=lambda: NOW) as ledger:
        ledger.delete_lease("matpool-a100-x", "2026-11-29 20:00", force=True)
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot, "matpool-a100-x")
        await pilot.press("f")
        await wait_until(lambda: "no lease recorded" in text_of(screen, "node-span"))
        assert not screen.query_one("#chart-util", HistoryChart).display
        await pilot.press("h")
        await wait_until(lambda: screen.query_one("#chart-util", HistoryChart).display)
        assert "bills now: no lease" in text_of(screen, "node-billing")


async def test_cards_with_less_memory_than_leased_are_said(ledger_file: Path) -> None:
    """The demo's matpool-a100-x is sold as an A100 80GB; its card reports 24 GiB."""
    name = "matpool-a100-x"
    with Ledger.open(ledger_file, clock=lambda: NOW) as ledger:
        sample = GpuSample(name, NOW, 0, uuid="GPU-0", name="NVIDIA A100-SXM4-80GB",
                           util_gpu=10.0, mem_used_mib=22_000.0, mem_total_mib=24_564.0)  # fmt: skip
        HistoryStore(ledger).write_latest(
            [NodeStatus(name, NodeHealth.OK, "", checked=NOW, samples=(sample,))]
        )
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot, name)
        await wait_until(lambda: "cards report" in text_of(screen, "node-title"), what="a title")
        assert "cards report 24 GiB of memory, leased as 80 GiB" in text_of(screen, "node-title")
    assert nodeview.vram_mismatch(80, [81_920.0] * 8) is None
    assert (
        nodeview.vram_mismatch(24, [24_564.0]) is None and nodeview.vram_mismatch(None, []) is None
    )


async def test_lease_chain_cost_and_resources(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("3")
        assert screen.query_one("#node-tabs", TabbedContent).active == "tab-lease"
        leases = rows(screen, "node-leases")
        assert [r[5] for r in leases] == ["renewed", "billing now"]
        assert leases[0][3] == "CNY 52,000.00" and leases[1][4] == "CNY 50,000.00"
        billing = text_of(screen, "node-billing")
        assert (
            "bills now: monthly CNY 50,000.00" in billing
            and "cost: CNY 102,000.00 to date" in billing
        )
        assert "resources: none recorded" in text_of(screen, "node-resources-caption")
        await pilot.press("escape")
        other = await opened(app, pilot, "aliyun-a10-burst")
        kinds = sorted(r[1] for r in rows(other, "node-resources"))
        assert kinds == ["bucket", "disk", "snapshot"]


async def test_acceptance_alerts_and_audit_log(ledger_file: Path) -> None:
    app = app_on(ledger_file)  # not polling: it evaluates alerts on read
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot, "colo-njidc-4090")  # its lease ends tomorrow
        await pilot.press("4")
        assert "no acceptance check recorded" in text_of(screen, "node-acceptance")
        alerts = rows(screen, "node-alerts")
        assert alerts and any("lease" in a[1] for a in alerts)
        await pilot.press("5")
        log = rows(screen, "node-log")
        with Ledger.open(ledger_file, readonly=True) as ledger:
            entries = ledger.history("colo-njidc-4090")
        assert [r[0] for r in log] == [str(e.id) for e in reversed(entries)]
        assert log[-1][3] == "node.add" and log[-1][1] == "2026-11-30 17:30"  # Shanghai


async def test_reload_reads_what_another_process_wrote(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot)
        assert len(rows(screen, "node-leases")) == 2
        before = len(rows(screen, "node-log"))
        other = Ledger.open(ledger_file, clock=lambda: NOW, actor="alice", origin="ssh 203.0.113.7")
        with other:
            other.update_node(NODE, {"notes": "re-cabled"})
        await pilot.press("r")
        await wait_until(lambda: len(rows(screen, "node-log")) == before + 1)
        assert rows(screen, "node-log")[0][3] == "node.edit"
        # Who wrote it, and from where.
        assert rows(screen, "node-log")[0][2] == "alice from 203.0.113.7"


async def test_a_node_gone_from_the_ledger_is_said_plainly(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot, "no-such-node")
        assert "no such node in the ledger" in text_of(screen, "node-title")
        await pilot.press("escape")


async def test_live_status_refreshes_the_gpu_table(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, pilot)
        app._statuses.pop(NODE)  # the fleet lost its reading (a restart, say)
        screen.show_live()
        await pilot.pause()
        assert rows(screen, "node-gpus") == []
        assert "no reading yet" in text_of(screen, "node-title")
        assert "processes: not read yet" in text_of(screen, "node-procs-caption")


async def test_an_in_memory_ledger_is_read_on_its_own_thread() -> None:
    """An in-memory ledger has one connection, usable only where it was made: read there."""
    app = ZukaApp(None, clock=lambda: NOW, poll=False, refresh_s=3600, config=Config())
    async with app.run_test(size=(120, 36)) as pilot:
        assert app.ledger is not None
        app.ledger.import_records(demo_records(date(2026, 11, 30)))
        screen = await opened(app, pilot)
        assert [r[5] for r in rows(screen, "node-leases")] == ["renewed", "billing now"]


def _snap(ledger_file: Path, keys: tuple[str, ...]):  # type: ignore[no-untyped-def]
    app = app_on(ledger_file)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await opened(app, pilot)
        if keys:
            await pilot.press(*keys)
            await app.workers.wait_for_complete()
            await pilot.pause()

    return app, run_before


@pytest.mark.parametrize("size", [(120, 36), (80, 24)], ids=["120x36", "80x24"])
@pytest.mark.parametrize("keys", [(), ("h",), ("3",)], ids=["gpus", "history", "lease"])
def test_node_screen_snapshot(snap_compare, ledger_file: Path, monkeypatch, size, keys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(ledger_file.parent)
    app, run_before = _snap(ledger_file, keys)
    assert snap_compare(app, run_before=run_before, terminal_size=size)


def test_the_audit_tab_names_its_zone() -> None:
    """The node's audit log reads in the billing zone, as `zuka log` does, and says so."""
    from datetime import UTC, datetime

    from tui.screens.nodeview import log_columns

    at = datetime(2026, 12, 2, 19, 30, tzinfo=UTC)
    assert log_columns("Asia/Shanghai", at)[1] == "When (CST)"
    assert log_columns("UTC", at)[1] == "When (UTC)"
    assert log_columns("America/New_York", datetime(2026, 7, 1, tzinfo=UTC))[1] == "When (EDT)"


async def test_a_node_read_from_prometheus_says_so_and_why_no_processes(
    ledger_file: Path,
) -> None:
    with Ledger.open(ledger_file, clock=lambda: NOW, actor="tester") as ledger:
        ledger.update_node(NODE, {"reading_source": "prometheus", "prom_url": "http://prom:9090"})
    app = app_on(ledger_file)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = await opened(app, pilot)
        await wait_until(lambda: "Prometheus" in text_of(screen, "node-host"), what="the source")
        said = text_of(screen, "node-host")
        assert f'readings: Prometheus http://prom:9090 {{Hostname="{NODE}"}}' in said
        assert "read over SSH" in said
