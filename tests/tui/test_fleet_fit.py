"""The fleet table at 80x24 and 120x36 as a user reads it: the columns that matter stay,
headers whole, values shortened by word, group headings one line, the ledger path shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from leases.core.models import Node, Provider, ProviderKind, SshTarget
from leases.fleet.header import short_path
from leases.ledger.store import Ledger
from tests.support.fleetledger import NOW, frozen_ledger
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.screens.fleetview import (
    CELL_PADDING,
    COLUMNS,
    Column,
    fit_header,
    shorten,
    visible_columns,
)
from tui.widgets.fleet_table import FleetTable

SIZES = [(80, 24), (120, 36)]


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.db"
    frozen_ledger(path)
    with Ledger.open(path) as ledger:
        idc = Provider(ProviderKind("colo"), "Jiangning IDC 江苏南京 platform")
        ledger.add_node(Node("a800-long", ssh=SshTarget(host="10.0.0.9", user="root"),
                             provider=idc.name, gpu_count=8, gpu_model="A800 80GB SXM"),
                        new_provider=idc)  # fmt: skip
    return path


async def screen_lines(app: ZukaApp, pilot: Pilot[None]) -> list[str]:
    await wait_until(lambda: app._reads >= 3, what="the third read")
    await app.workers.wait_for_complete()
    await pilot.pause()
    table = app.screen.query_one("#fleet", FleetTable)
    return ["".join(s.text for s in table.render_line(y)) for y in range(table.size.height)]


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x36"])
async def test_headers_whole_and_the_cards_shown(ledger_file: Path, size: tuple[int, int]) -> None:
    app = ZukaApp(ledger_file, clock=lambda: NOW, poll=False, refresh_s=3600)
    async with app.run_test(size=size) as pilot:
        lines = await screen_lines(app, pilot)
        table = app.screen.query_one("#fleet", FleetTable)
        shown = [c.key for c in table.shown_columns]
        # The cards stay at 80 columns; power and offboard (no plan in force) do not.
        assert {"node", "state", "gpus", "util", "ends", "alerts"} <= set(shown)
        assert "power" not in shown and "offboard" not in shown
        for c in table.shown_columns:
            assert f" {c.label} " in lines[0] + " "  # every header whole
        row = next(line for line in lines if "a800-long" in line)
        assert "8×A800 80GB" in row and "8×A800 80GB S " not in row + " "
        header = str(app.screen.query_one("#fleet-header").render())
        assert header.endswith("/fleet.db") and "…" in header
        assert len(header) <= size[0]


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x36"])
async def test_a_group_heading_is_one_line_across_the_row(
    ledger_file: Path, size: tuple[int, int]
) -> None:
    app = ZukaApp(ledger_file, clock=lambda: NOW, poll=False, refresh_s=3600)
    async with app.run_test(size=size) as pilot:
        await screen_lines(app, pilot)
        await pilot.press("g", "g")  # by provider
        lines = await screen_lines(app, pilot)
        assert any("▾ Jiangning IDC 江苏南京 platform (1)" in line for line in lines), lines
        assert any("▾ GpuShare 恒源云 (1)" in line for line in lines), lines


def test_values_are_shortened_by_word_never_mid_word() -> None:
    ends = next(c for c in COLUMNS if c.key == "ends")
    assert shorten("starts in 1 day", 14, ends.short) == "in 1 day"
    assert shorten("starts in 12 days", 8, ends.short) == "in 12 d"
    assert shorten("8×A800 80GB SXM", 12) == "8×A800 80GB"
    assert shorten("8×A800 80GB SXM", 6) == "8×A800"
    assert shorten("colo-njidc-a800", 8) == "colo-nj…"  # one word too long: marked
    assert shorten("训练节点 一号", 9) == "训练节点"


def test_a_new_column_slots_in_by_its_priority() -> None:
    # A column another part adds ranks by its own number: nothing else changes.
    extra = Column("disk", "Disk", 6, 5.5)
    cols = visible_columns(78, 18)
    assert [c.key for c in cols][:3] == ["node", "gpus", "state"]
    # A header is never cut: a label wider than the values takes the column's padding too.
    assert Column("x", "Processes", 3, 1).width + CELL_PADDING == len("Processes")
    assert extra.priority < next(c.priority for c in COLUMNS if c.key == "hour")


def test_the_header_keeps_the_ledger_path_whole() -> None:
    line = (
        "38/62 GPUs busy (16 not read) · CNY 25,889 this month · CNY 10,414 idle · /tmp/z/demo.db"
    )
    assert fit_header(line, 60).endswith(" · /tmp/z/demo.db") and len(fit_header(line, 60)) <= 60
    assert "…" in fit_header(line, 60)
    assert fit_header(line, 200) == line
    assert short_path("/home/ann/labs/zuka.db", home="/home/ann") == "~/labs/zuka.db"
    assert short_path("/home/annex/z.db", home="/home/ann") == "/home/annex/z.db"


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x36"])
async def test_the_help_screens_why_column_wraps(ledger_file: Path, size: tuple[int, int]) -> None:
    from textual.widgets import DataTable

    app = ZukaApp(ledger_file, clock=lambda: NOW, poll=False, refresh_s=3600)
    async with app.run_test(size=size) as pilot:
        await screen_lines(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        table = app.screen.query_one("#help-keys", DataTable)
        assert sum(c.get_render_width(table) for c in table.ordered_columns) <= size[0]
        why = table.ordered_columns[-1]
        row = table.rows[next(k for k in table.rows if k.value == "fleet-filter")]
        tooltip = (
            "Filter: text, channel:X provider:X state:X model:X tag:X ending:7d idle busy alert"
        )
        assert row.height == -(-len(tooltip) // why.width) or row.height > 1  # wrapped, whole
        lines = ["".join(s.text for s in table.render_line(y)) for y in range(table.size.height)]
        shown = " ".join(line.strip() for line in lines)
        assert "idle busy alert" in shown


def test_the_node_screens_gpu_table_fits_80_columns_with_procs_whole() -> None:
    """'Procs' was cut to 'Pro' at 80 columns: the vendor prefix every card carries is
    left out of the name, so the widest readings leave every header whole."""
    from rich.cells import cell_len

    from leases.core.models import GpuSample, NodeHealth, NodeStatus
    from tui.screens.nodeview import GPU_COLUMNS, gpu_rows

    worst = GpuSample("n", NOW, 7, uuid="GPU-7", name="NVIDIA A100-SXM4-80GB", util_gpu=100.0,
                      mem_used_mib=81920.0, mem_total_mib=81920.0, temp_c=100.0,
                      power_w=400.0, power_limit_w=400.0, pstate="P0")  # fmt: skip
    rows = gpu_rows(NodeStatus("n", NodeHealth.OK, "", checked=NOW, samples=(worst,)))
    widths = [max(cell_len(h), *(cell_len(r[i]) for r in rows)) for i, h in enumerate(GPU_COLUMNS)]
    assert rows[0][1] == "A100-SXM4-80GB"
    assert sum(w + 2 for w in widths) <= 80 - 2  # the screen's edge and the scroll bar


def test_procs_not_read_is_a_dash_never_0() -> None:
    """A node read from Prometheus has no processes read: its GPU rows say "-" (unknown),
    an SSH node's say how many it has (0 when none)."""
    from leases.core.models import GpuSample, NodeHealth, NodeStatus
    from tui.screens.nodeview import gpu_rows

    sample = GpuSample("n", NOW, 0, uuid="GPU-0", name="NVIDIA H100 80GB HBM3")
    status = NodeStatus("n", NodeHealth.OK, "", checked=NOW, samples=(sample,))
    assert gpu_rows(status)[0][-1] == "0"
    assert gpu_rows(status, processes_read=False)[0][-1] == "-"
