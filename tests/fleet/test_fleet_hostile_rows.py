"""A hostile value stored in the ledger (a file edited by hand, imported, or written by an
older zuka) costs its own row, never the dashboard: every good node still shows, the bad
node shows refused with its problem, and a bad lease or provider row is left out and said.
Real ledger files (the demo fleet) edited with raw SQL; the CHECK constraints are switched
off as a hand edit with the sqlite3 shell can do."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from leases.config.sections import Config
from leases.core.models import NodeHealth
from leases.core.textsafe import visible
from leases.fleet.data import FleetData, FleetReader, ReadRequest
from leases.ledger.store import Ledger
from leases.sim.demoledger import build_demo_ledger
from tests.support.cli import Cli
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.widgets.fleet_table import GROUP_PREFIX, FleetTable

NOW = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)
GOOD = "autodl-4090-b"  # a demo node whose rows the tests spoil


def _ledger(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.db"
    build_demo_ledger(path, date(2026, 11, 30)).close()
    return path


def _sql(path: Path, *statements: tuple[str, tuple[Any, ...]]) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    with conn:
        for sql, params in statements:
            conn.execute(sql, params)
    conn.close()


def _add_node(name: str, **values: Any) -> tuple[str, tuple[Any, ...]]:
    """A copy of GOOD's node row under another name, with some columns replaced."""
    cols = ["provider_id", "ssh_host", "ssh_port", "ssh_user", "gpu_model", "gpu_count",
            "vram_gib", "interconnect", "tags", "state", "notes"]  # fmt: skip
    picked = [f"? AS {c}" if c in values else c for c in cols]
    return (
        f"INSERT INTO nodes (name, {', '.join(cols)})"
        f" SELECT ?, {', '.join(picked)} FROM nodes WHERE name = ?",
        (name, *(values[c] for c in cols if c in values), GOOD),
    )


def _add_lease(node: str, start: str = "2026-11-20T00:00:00+08:00", **values: Any
               ) -> tuple[str, tuple[Any, ...]]:  # fmt: skip
    """A copy of GOOD's lease on `node`, with some columns replaced."""
    cols = ["billing_type", "unit_price", "currency", "cards_billed", "end", "billing_tz"]
    picked = [f"? AS {c}" if c in values else f'l."{c}"' for c in cols]
    return (
        f"INSERT INTO leases (node_id, start, {', '.join(f'{chr(34)}{c}{chr(34)}' for c in cols)})"
        f" SELECT (SELECT id FROM nodes WHERE name = ?), ?, {', '.join(picked)}"
        " FROM leases l JOIN nodes n ON n.id = l.node_id WHERE n.name = ?",
        (node, start, *(values[c] for c in cols if c in values), GOOD),
    )


def _spoil_lease(**values: Any) -> tuple[str, tuple[Any, ...]]:
    sets = ", ".join(f'"{c}" = ?' for c in values)
    return (
        f"UPDATE leases SET {sets} WHERE node_id = (SELECT id FROM nodes WHERE name = ?)",
        (*values.values(), GOOD),
    )


def _read(path: Path) -> FleetData:
    ledger = Ledger.open(path, create=False, clock=lambda: NOW)
    try:
        return FleetReader(ledger, Config()).read(ReadRequest(NOW, reload=True))
    finally:
        ledger.close()


def _row_problems(data: FleetData) -> list[str]:
    """The problems about the bad row itself. A row written behind zuka's back also keeps
    the month's cost off the header (leases.ledger.rowaudit): said once, naming what changed."""
    month = [p for p in data.problems if p.startswith("month's cost not computed")]
    assert len(month) == 1 and "outside zuka" in month[0] and _safe(month[0]), data.problems
    assert data.money is None
    return [p for p in data.problems if p not in month]


def _safe(text: str) -> bool:
    """Said as it is safe to print: no control character, no huge value."""
    return text == visible(text) and len(text) < 1000


@pytest.fixture
def clean(tmp_path: Path) -> tuple[Path, FleetData]:
    path = _ledger(tmp_path)
    return path, _read(path)


HOSTILE_NODES = {
    "markup": "zz[/]",
    "bold": "[bold]big",
    "escape": "esc\x1b]0;pwned\x07\x1b[31m",
    "control": "nul\x00bell\x07",
    "long": "n" * 10_000,
}


@pytest.mark.parametrize("name", HOSTILE_NODES.values(), ids=HOSTILE_NODES.keys())
def test_a_node_with_a_refused_name_costs_only_itself(
    clean: tuple[Path, FleetData], name: str
) -> None:
    path, before = clean
    _sql(path, _add_node(name), _add_lease(name))
    data = _read(path)
    assert data.reloaded
    assert [n.name for n in data.facts.polled] == [n.name for n in before.facts.polled]
    (bad,) = data.facts.refused
    assert bad.name == name and "name" in bad.problem
    assert data.facts.billing == before.facts.billing
    assert data.facts.channels == before.facts.channels
    (said,) = _row_problems(data)  # its lease, once, naming the row
    assert "lease" in said and "not read" in said and _safe(said)


@pytest.mark.parametrize("column", ["name", "notes", "gpu_model", "tags"])
def test_a_node_row_whose_text_is_not_utf8_costs_only_itself(
    clean: tuple[Path, FleetData], column: str
) -> None:
    path, before = clean
    # sqlite3 raises on reading such text by default: every read of the table failed.
    _sql(path, _add_node("bad-utf8"),
         (f"UPDATE nodes SET {column} = CAST(X'66ff6f' AS TEXT) WHERE name = 'bad-utf8'", ()))  # fmt: skip
    data = _read(path)
    good = [n.name for n in before.facts.polled]
    shown = [n.name for n in data.facts.nodes]
    assert set(good) <= set(shown) and len(shown) == len(good) + 1
    (odd,) = [n for n in data.facts.nodes if n.name not in good]
    assert "\ufffd" in f"{odd.name}{odd.notes}{odd.gpu_model}{odd.tags}" or odd.problem


# Each: a node row value the ledger refuses; the node is refused with that field named.
HOSTILE_NODE_VALUES = {
    "tags not JSON": ({"tags": "not json"}, "tags"),
    "negative GPU count": ({"gpu_count": -3}, "gpu_count"),
    "unknown state": ({"state": "zombie"}, "state"),
    "unknown interconnect": ({"interconnect": "warp"}, "interconnect"),
    "escape in the model": ({"gpu_model": "A100\x1b[2J"}, "gpu_model"),
    "a huge note": ({"notes": "x" * 10_000}, "notes"),
    "a blob for a count": ({"gpu_count": b"\x00\xff"}, "gpu_count"),
}


@pytest.mark.parametrize(("values", "field"), HOSTILE_NODE_VALUES.values(),
                         ids=HOSTILE_NODE_VALUES.keys())  # fmt: skip
def test_a_node_row_with_a_refused_value_is_refused_the_rest_polled(
    clean: tuple[Path, FleetData], values: dict[str, Any], field: str
) -> None:
    path, before = clean
    _sql(path, _add_node("odd-node", **values))
    data = _read(path)
    assert [n.name for n in data.facts.polled] == [n.name for n in before.facts.polled]
    (bad,) = data.facts.refused
    assert bad.name == "odd-node" and bad.problem.startswith(field), bad.problem
    assert _safe(bad.problem)
    assert data.facts.billing == before.facts.billing


# Each: a value in GOOD's lease row; that lease is left out and said, the rest bills.
HOSTILE_LEASE_VALUES = {
    "a bad date": {"start": "the day after tomorrow"},
    "a negative price": {"unit_price": "-5"},
    "a price not a number": {"unit_price": "[bold]free"},
    "an empty price": {"unit_price": ""},
    "an unknown billing type": {"billing_type": "per_vibe"},
    "an unknown zone": {"billing_tz": "Mars/Olympus"},
    "an escape in the currency": {"currency": "\x1b[31mCNY"},
    "no cards billed": {"cards_billed": 0},
    "a blob for a price": {"unit_price": b"\x00\x01"},
}


@pytest.mark.parametrize("values", HOSTILE_LEASE_VALUES.values(), ids=HOSTILE_LEASE_VALUES.keys())
def test_a_lease_row_with_a_refused_value_is_left_out_and_said(
    clean: tuple[Path, FleetData], values: dict[str, Any]
) -> None:
    path, before = clean
    good = next(n.id for n in before.facts.nodes if n.name == GOOD)
    assert good in before.facts.billing
    _sql(path, _spoil_lease(**values))
    data = _read(path)
    assert data.facts.polled == before.facts.polled  # the node itself is fine
    assert data.facts.billing == {k: v for k, v in before.facts.billing.items() if k != good}
    (said,) = _row_problems(data)
    assert f"of node '{GOOD}' not read" in said and _safe(said)


HOSTILE_PROVIDER_VALUES = {
    "an unknown kind": {"kind": "spaceship"},
    "a huge name": {"name": "p" * 10_000},
    "an escape in the name": {"name": "cloud\x1b[2J"},
    "an empty name": {"name": ""},
}


@pytest.mark.parametrize("values", HOSTILE_PROVIDER_VALUES.values(),
                         ids=HOSTILE_PROVIDER_VALUES.keys())  # fmt: skip
def test_a_provider_row_with_a_refused_value_is_left_out_and_said(
    clean: tuple[Path, FleetData], values: dict[str, Any]
) -> None:
    path, before = clean
    sets = ", ".join(f"{c} = ?" for c in values)
    _sql(path, ("INSERT INTO providers (kind, name) VALUES ('colo', 'spare')", ()),
         (f"UPDATE providers SET {sets} WHERE name = 'spare'", tuple(values.values())))  # fmt: skip
    data = _read(path)
    assert data.facts.channels == before.facts.channels  # no node refers to it
    assert data.facts.polled == before.facts.polled
    (said,) = _row_problems(data)
    assert said.startswith("provider ") and "not read" in said and _safe(said)


HOSTILE_RESOURCE_VALUES = {
    "an unknown kind": {"kind": "wormhole"},
    "a bad date": {"created": "yesterday-ish"},
    "an escape in the id": {"native_id": "vol-\x1b[2J"},
}


@pytest.mark.parametrize("values", HOSTILE_RESOURCE_VALUES.values(),
                         ids=HOSTILE_RESOURCE_VALUES.keys())  # fmt: skip
def test_a_resource_row_with_a_refused_value_is_left_out_and_said(
    clean: tuple[Path, FleetData], values: dict[str, Any]
) -> None:
    path, before = clean
    row = {"kind": "disk", "native_id": "vol-1", **values}
    marks = ", ".join("?" * len(row))
    _sql(path, (f"INSERT INTO resources (lease_id, {', '.join(row)}) SELECT l.id, {marks}"
                " FROM leases l JOIN nodes n ON n.id = l.node_id WHERE n.name = ?",
                (*row.values(), GOOD)))  # fmt: skip
    data = _read(path)
    assert data.facts.polled == before.facts.polled
    assert data.facts.billing == before.facts.billing
    (said,) = _row_problems(data)
    assert said.startswith("resource ") and f"of node '{GOOD}'" in said and _safe(said)


def test_the_problems_are_said_on_every_read_while_they_stand(
    clean: tuple[Path, FleetData],
) -> None:
    """Said on every read, not only when the facts are read again: the dashboard tells
    a problem once, and again only after it was cleared."""
    path, _ = clean
    _sql(path, _spoil_lease(unit_price="-5"))
    ledger = Ledger.open(path, create=False, clock=lambda: NOW)
    try:
        reader = FleetReader(ledger, Config())
        first = reader.read(ReadRequest(NOW, reload=True))
        second = reader.read(ReadRequest(NOW))
    finally:
        ledger.close()
    assert first.reloaded and not second.reloaded
    assert first.problems == second.problems and len(_row_problems(first)) == 1


async def test_the_dashboard_shows_every_good_node_and_the_bad_one_refused(
    tmp_path: Path,
) -> None:
    path = _ledger(tmp_path)
    _sql(path, _add_node("zz[/]"), _add_lease("zz[/]"), _spoil_lease(unit_price="-5"),
         ("INSERT INTO providers (kind, name) VALUES ('spaceship', '[bold]odd')", ()))  # fmt: skip
    app = ZukaApp(path, clock=lambda: NOW, poll=False, refresh_s=3600, config=Config())
    async with app.run_test(size=(120, 36)):
        await wait_until(lambda: app._reads >= 3, what="the third read (with history)")
        table = app.query_one("#fleet")
        assert table.row_count == 13  # type: ignore[attr-defined]
        assert app.refused == {"zz[/]": app.refused["zz[/]"]}
        assert "name" in app.refused["zz[/]"]
        assert len(app.nodes) == 13
        status = app.status_of("zz[/]")
        assert status is not None and status.health is NodeHealth.REFUSED
        cells = [getattr(c, "plain", str(c)) for c in table.get_row("zz[/]")]  # type: ignore[attr-defined]
        assert "zz[/]" in cells  # the name as stored, not read as markup
        assert status.health.value in " ".join(cells)
        good = table.get_row(GOOD)  # type: ignore[attr-defined]
        assert GOOD in [getattr(c, "plain", str(c)) for c in good]
        told = [str(n.message) for n in app._notifications]
        assert any("lease" in m and "zz[/]" in m for m in told), told
        assert any(f"of node '{GOOD}'" in m for m in told), told
        assert any("provider" in m and "spaceship" in m for m in told), told


async def test_a_node_named_like_a_group_heading_is_its_own_row(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    _sql(path, _add_node("\x00group:platform"))
    app = ZukaApp(path, clock=lambda: NOW, poll=False, refresh_s=3600, config=Config())
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app._reads >= 3, what="the third read (with history)")
        table = app.query_one("#fleet", FleetTable)
        await pilot.press("g")  # by channel: the platform heading, and the odd node apart
        await wait_until(lambda: table.row_count == 13 + 3, what="three headings")
        keys = [str(r.key.value) for r in table.ordered_rows]
        assert "\x00group:platform" in keys
        assert sum(k.startswith(GROUP_PREFIX) for k in keys) == 3


@pytest.mark.parametrize("as_json", [False, True])
def test_zuka_node_list_shows_the_rest_and_says_the_bad_rows(cli: Cli, ledger_path: Path,
                                                            as_json: bool) -> None:  # fmt: skip
    build_demo_ledger(ledger_path, date(2026, 11, 30)).close()
    before = cli("node", "list", "--json")
    _sql(ledger_path, _add_node("zz[/]"), _add_lease("zz[/]"), _spoil_lease(unit_price="-5"),
         ("INSERT INTO providers (kind, name) VALUES ('spaceship', '[bold]odd')", ()))  # fmt: skip
    done = cli("node", "list", *(["--json"] if as_json else []))
    assert done.code == 0, done.err
    said = done.err.splitlines()
    assert len(said) == 3 and all(_safe(line) for line in said), said
    assert any(f"of node '{GOOD}' not read" in line for line in said)
    if as_json:
        listed = {n["name"]: n for n in json.loads(done.out)}
        was = {n["name"]: n for n in json.loads(before.out)}
        assert set(listed) == {*was, "zz[/]"}
        assert "name" in listed["zz[/]"]["problem"]
        assert listed[GOOD]["lease"] is None and was[GOOD]["lease"] is not None
        assert all(listed[k] == v for k, v in was.items() if k != GOOD)
    else:
        assert "zz[/]" in done.out and GOOD in done.out
