"""The node screen's and the acceptance screen's last English, under zh_CN: disk labels
(stored in English, shown in words), the charts' axis, a process's run time, nvidia-smi's
virtualization mode "None" (a whole GPU, not a value missing), the help's Id column, and
a run in the dashboard told in Chinese once it ends (not the stored English verdict)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import DataTable

from leases.accept.checks.sharing import judge_virtualisation
from leases.accept.facts import GpuQuery, SmiQuery
from leases.accept.words import DISCARDED
from leases.app.acceptance import told
from leases.app.processes import elapsed_words
from leases.config.sections import Config
from leases.core.acceptance import CheckResult, Evidence, Status
from leases.core.i18n import EN, ZH, using
from leases.core.textsafe import visible
from leases.ledger.store import Ledger
from leases.sim.ledger import register_sim_nodes, serve_ledger_nodes
from leases.telemetry import series
from leases.telemetry.hoststats import MOUNT_LABELS, mount_label
from tests.i18n import zhfleet
from tests.i18n.test_zh_accept import NODE_WORDS
from tests.support.english import stray_english
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.screens import hostview
from tui.screens.acceptance import AcceptanceScreen
from tui.screens.acceptview import WORDS_MAX, detail_lines
from tui.screens.help import COLUMNS
from tui.widgets.charts import fit_lines
from tui.widgets.form import LABEL_CELLS, clear_of, said_under
from tui.widgets.valuewords import elapsed_cell

CJK = re.compile(r"[\u4e00-\u9fff]")


def test_disk_labels_are_said_in_chinese_and_stored_in_english() -> None:
    labels = [label for _path, label, _kind in MOUNT_LABELS] + [mount_label("/data")[0]]
    assert "root fs" in labels and "data disk" in labels  # stored (readings, --json): English
    with using(ZH):
        lines = hostview.host_lines(zhfleet.HOST)
    text = "\n".join(lines)
    assert "系统盘 /" in text and "共享内存 /dev/shm" in text and "数据盘 /data" in text
    assert "AutoDL 数据盘 /root/autodl-tmp" in text
    fs = [m.fs_type for m in zhfleet.HOST.mounts]
    assert stray_english(text, data=fs) == []
    with using(EN):
        english = "\n".join(hostview.host_lines(zhfleet.HOST))
    assert "root fs /" in english and "AutoDL data disk /root/autodl-tmp" in english


@pytest.mark.parametrize("span", list(series.Span))
def test_the_chart_axis_is_said_in_chinese(span: series.Span) -> None:
    label = series.axis(span).label
    with using(ZH):
        from leases.core.i18n import _

        said = _(label)
    assert CJK.search(said) and stray_english(said) == []


@pytest.mark.parametrize("seconds", [None, 0, 7, 59, 60, 3332, 3600, 7505, 86399, 86400, 277_200])
def test_a_run_time_is_compact_in_each_language(seconds: int | None) -> None:
    with using(EN):
        assert elapsed_cell(seconds) == elapsed_words(seconds)  # English as it was
    with using(ZH):
        said = elapsed_cell(seconds)
    assert stray_english(said) == [] and not re.search(r"\d[dhms]", said)


def test_a_run_time_in_chinese() -> None:
    with using(ZH):
        assert elapsed_cell(55 * 60 + 32) == "55分32秒"
        assert elapsed_cell(2 * 3600 + 5 * 60) == "2时05分"
        assert elapsed_cell(3 * 86400 + 4 * 3600) == "3天04时"


def _smi(mode: str) -> SmiQuery:
    return SmiQuery(gpus=tuple(GpuQuery(index=i, virtualization_mode=mode) for i in range(8)))


@pytest.mark.parametrize("mode", ["None", "Pass-Through", ""])
def test_the_virtualization_mode_never_reads_as_python_none(mode: str) -> None:
    with using(ZH):
        found = judge_virtualisation(_smi(mode), ()).found
    assert "None" not in found and stray_english(found) == [], found
    assert {"None": "无（整卡）", "Pass-Through": "直通", "": "未知"}[mode] in found
    with using(EN):  # English keeps nvidia-smi's words; a mode not read is "unknown"
        english = judge_virtualisation(_smi(mode), ()).found
    assert english == f"all 8 GPUs: {mode or 'unknown'}"


def test_the_help_id_column_is_chinese() -> None:
    from leases.core.i18n import _

    with using(ZH):
        labels = [_(c) for c in COLUMNS]
    assert stray_english(" ".join(labels)) == []


@pytest.fixture
def sim_ledger(ledger_path: Path) -> Iterator[Path]:
    with Ledger.open(ledger_path) as ledger:
        nodes = register_sim_nodes(ledger, 1, datetime.now(UTC))
        runner = serve_ledger_nodes(ledger, ledger_path, nodes)
    yield ledger_path
    runner.stop()


async def test_a_run_in_the_dashboard_stays_chinese_when_it_ends(sim_ledger: Path) -> None:
    """The findings told in Chinese as they came stay once the run is stored (the stored
    verdict is English: it is not what is shown)."""
    with using(ZH):
        app = ZukaApp(sim_ledger, poll=False, refresh_s=3600, config=Config())
        async with app.run_test(size=(120, 36)) as pilot:
            screen = AcceptanceScreen("sim-001")
            await app.push_screen(screen)
            await pilot.press("enter")
            await wait_until(lambda: not screen.busy, what="the run to end", timeout=120)
            await pilot.pause()
            assert screen.stored is not None
            table: DataTable[Text] = screen.query_one("#accept-rows", DataTable)
            shown = [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]
            words = [row[2] for row in shown if row[2]]
            # Each cut to its row (tui.screens.acceptview.rows).
            assert words == [visible(r.words, WORDS_MAX) for r in told(screen.stored)]
            assert words != [visible(r.words, WORDS_MAX) for r in screen.stored.verdict.results]
            titles = " ".join(row[1] for row in shown)
            assert stray_english(titles, data=NODE_WORDS) == []


def test_a_finding_in_full_is_chinese() -> None:
    ev = Evidence("throughput", f"head -c 64 /dev/zero ({DISCARDED})", 0, "64 bytes/s\n", "")
    with using(ZH):
        result = CheckResult("host.throughput", "传输速度", Status.PASSED, "很快", "", "",
                             ("throughput",))  # fmt: skip
        text = "\n".join(detail_lines(result, [ev]))
    assert text.startswith("通过：传输速度（host.throughput）")
    assert "经节点的 SSH 连接读取后丢弃" in text
    assert stray_english(text, extra=["head", "zero", "dev", "stdout", "bytes"]) == []
    with using(EN):
        english = "\n".join(detail_lines(result, [ev]))
    assert english.startswith("passed: 传输速度 (host.throughput)")
    assert "(read and discarded over the node's SSH connection)" in english


def test_a_chinese_chart_title_fits_its_width() -> None:
    """plotext pads a title a character a cell: its Chinese line gives the cells back."""
    title = "利用率 %（8 张 GPU 的平均） · 平均 91 · 最高 96"
    pad = (80 - len(title)) // 2
    drawn = Text(f"{' ' * pad}{title}{' ' * (80 - pad - len(title))}\n100┤" + "x" * 76)
    fitted = fit_lines(drawn, 80)
    lines = fitted.split("\n", allow_blank=True)
    assert all(line.cell_len <= 80 for line in lines)
    assert title in lines[0].plain and lines[1].plain == drawn.plain.split("\n")[1]


async def test_the_form_keys_line_keeps_every_chinese_character(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The edit-lease form at 80x24: its keys' line, docked over a field's label and input,
    said whole (a character split where the input begins was blanked)."""
    monkeypatch.chdir(tmp_path)
    zhfleet.build(Path("zh.db"))
    with using(ZH):
        app = ZukaApp(Path("zh.db"), clock=lambda: zhfleet.NOW, poll=False, refresh_s=3600,
                      config=Config())  # fmt: skip
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: app._reads >= 3, what="the fleet's first reads")
            app.fleet.go_to(zhfleet.NODE)
            await pilot.pause()
            await pilot.press("L")
            for _i in range(3):
                await app.workers.wait_for_complete()
                await pilot.pause()
            text = zhfleet.svg_text(app.export_screenshot())
    assert "下一项" in text.replace("\n", "")
    assert clear_of("ctrl+s save · esc cancel · tab next", LABEL_CELLS) == (
        "ctrl+s save · esc cancel · tab next"
    )


def test_a_form_names_a_refused_field_in_words() -> None:
    """A positional field (NAME) the CLI names by its key: the form, under the field, in
    words; English as the CLI says it."""
    from leases.app.flags import describe_error
    from leases.core.errors import InputError

    error = InputError("name", "", "must be 1-63 letters")
    with using(ZH):
        said = said_under(error)
    assert said.startswith("名称："), said
    with using(EN):
        assert said_under(error) == describe_error(error)
        priced = InputError("unit_price", "x", "not a number")
        assert said_under(priced) == describe_error(priced)
