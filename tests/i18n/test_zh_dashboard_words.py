"""The dashboard's tables of bad input again under zh_CN (key remaps, `zuka web`'s host,
port and session cap), and its pure view words: each message Chinese, with no English
left but data (the key or value as typed, binding ids, options)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from rich.cells import cell_len

from leases.core.errors import ConfigError, InputError
from leases.core.i18n import ZH, _, using
from tests.support.english import stray_english
from tui.dashboard.keymap import MODIFIERS, NAMED_KEYS, check_keys, key_problem, known_bindings
from tui.dashboard.source import Source, source_words
from tui.dashboard.titles import status_line
from tui.screens import fleetview, processesview
from tui.screens.alertwords import KINDS, kind_words
from tui.web.guard import check_max_sessions
from tui.web.serve import check_host, check_port, exposure_warning

KNOWN = known_bindings()
# The bad keys of tests/tui/test_key_problem.
BAD_KEYS = ["", " ", "\x1b", "ctlr+f", "slsh", "f99", "ctrl+"]


@pytest.mark.parametrize("key", BAD_KEYS)
def test_a_bad_key_is_refused_in_chinese(key: str) -> None:
    with using(ZH):
        said = key_problem(key)
    assert said is not None
    # The key as typed, and the key names a "did you mean" offers, are the user's words.
    assert stray_english(said, data=key.split("+"), extra=[*NAMED_KEYS, *MODIFIERS]) == []
    assert any("\u4e00" <= c <= "\u9fff" for c in said)


def test_bad_remaps_are_refused_in_chinese() -> None:
    with using(ZH), pytest.raises(ConfigError) as err:
        check_keys({"app-help": "f1", "nope": "x", "alerts-ack": "k,bogus", "alerts-bak": "b"})
    problems = err.value.problems
    assert problems == (
        "keys.nope：没有此 id 的按键绑定",
        "keys.alerts-ack：'bogus' 是未知按键 'bogus'",
        "keys.alerts-bak：没有此 id 的按键绑定 （是否想输入 alerts-back？）",
    )
    with using(ZH), pytest.raises(ConfigError) as clash:
        check_keys({"alerts-ack": "x", "alerts-snooze": "x"})
    (line,) = clash.value.problems
    ids = sorted(KNOWN, key=len, reverse=True)
    assert stray_english(line, data=["AlertsScreen", *(f"keys.{i}" for i in ids), *ids]) == []


@pytest.mark.parametrize("host", ["-oProxyCommand=x", "a b", "$(id)", "", "host;rm"])
def test_a_bad_host_is_refused_in_chinese(host: str) -> None:
    with using(ZH), pytest.raises(InputError) as err:
        check_host(host)
    assert err.value.reason == "不是可监听的 IP 地址或主机名"


@pytest.mark.parametrize("port", [0, -1, 65536])
def test_a_bad_port_is_refused_in_chinese(port: int) -> None:
    with using(ZH), pytest.raises(InputError) as err:
        check_port(port)
    assert err.value.reason == "TCP 端口为 1 到 65535"


@pytest.mark.parametrize("cap", [0, -1, 65])
def test_a_bad_session_cap_is_refused_in_chinese(cap: int) -> None:
    with using(ZH), pytest.raises(InputError) as err:
        check_max_sessions(cap)
    assert stray_english(err.value.reason) == [] and "看板" in err.value.reason


def test_the_exposure_warning_in_chinese() -> None:
    with using(ZH):
        said = exposure_warning("0.0.0.0", 8000)
    assert said is not None and "令牌" in said
    assert stray_english(said, extra=["THIS-HOST"]) == []


@pytest.mark.parametrize(
    "source",
    [
        Source(5.0, None, True, None, False, False),
        Source(None, "boom", True, None, False, False),
        Source(None, None, True, None, False, False),
        Source(None, None, False, 42, True, False),
        Source(None, None, False, -1, True, False),
        Source(None, None, False, None, True, False),
        Source(None, None, False, 42, False, False),
        Source(None, None, False, None, False, True),
        Source(None, None, False, None, False, False),
    ],
)
def test_who_polls_in_chinese(source: Source) -> None:
    with using(ZH):
        said = source_words(source)
    assert stray_english(said, data=["boom"]) == [], said


def test_the_status_line_counts_in_chinese() -> None:
    with using(ZH):
        assert (
            status_line(12, "10 ok", 3, "未在采集") == "12 个节点 · 10 ok · 3 条告警 (a) · 未在采集"
        )
    assert status_line(1, "1 ok", 1, "not polling") == "1 nodes · 1 ok · 1 alert (a) · not polling"


def test_every_alert_kind_has_words() -> None:
    from leases.alerts.alert import AlertKind

    assert {k.value for k in AlertKind} == set(KINDS)
    with using(ZH):
        for kind in KINDS:
            assert stray_english(kind_words(kind)) == [], kind


def test_columns_are_measured_in_cells() -> None:
    """A Chinese label is two cells a character: its column and padding are never
    narrower (a label wider than the values is drawn over the padding: FleetTable)."""
    with using(ZH):
        shown = fleetview.visible_columns(200, 16)
        for c in shown:
            assert c.label == _(next(x.label for x in fleetview.COLUMNS if x.key == c.key))
            assert c.width + fleetview.CELL_PADDING >= cell_len(c.label)
        for col in processesview.columns(80):
            assert col.width >= cell_len(col.heading)
    english = {c.key: c.label for c in fleetview.visible_columns(200, 16)}
    assert english["ends"] == "Lease end"


def test_a_lease_end_reads_as_iso_in_chinese() -> None:
    now = datetime(2026, 11, 30, tzinfo=UTC)
    with using(ZH):
        assert fleetview.end_day(datetime(2026, 12, 16, tzinfo=UTC), now) == "12-16"
        assert fleetview.end_day(datetime(2028, 6, 2, tzinfo=UTC), now) == "2028-06"
    assert fleetview.end_day(datetime(2026, 12, 16, tzinfo=UTC), now) == "16 Dec"


def test_a_chinese_cell_is_cut_by_cells() -> None:
    cut = fleetview.shorten("训练集群四号机器", 9)
    assert cell_len(cut) <= 9 and cut.endswith("…")
