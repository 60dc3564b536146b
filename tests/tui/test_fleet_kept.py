"""What the fleet's refresh keeps between builds (issue 23: the dashboard's CPU while idle)
is exactly what a fresh build makes: a row's hour cell kept while its hour is the same
tuple, the header's next lease end from ends sorted once per billing, the same rows handed
on when nothing changed, a new status or hour built again at once."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from leases.config.sections import Config
from leases.core.models import GpuSample, NodeHealth, NodeStatus
from leases.fleet.data import FleetData, FleetReader, ReadRequest
from leases.fleet.header import Ends, next_end
from leases.sim.demoledger import build_demo_ledger
from tui.screens.fleetview import FleetRow, RowMemo, build
from tui.widgets.fleet_table import same_rows

NOW = datetime(2026, 11, 30, 9, 30, 20, tzinfo=UTC)


def _data(tmp_path: Path) -> FleetData:
    with build_demo_ledger(tmp_path / "demo.db", date(2026, 11, 30)) as ledger:
        return FleetReader(ledger, Config()).read(ReadRequest(NOW))


def _shown(rows: list[FleetRow]) -> list[tuple[object, ...]]:
    return [(r.key, r.sig, dict(r.sort), r.facts) for r in rows]


def _ok(name: str, util: float) -> NodeStatus:
    sample = GpuSample(name, NOW, 0, util_gpu=util, mem_used_mib=9000.0, power_w=300.0)
    return NodeStatus(name, NodeHealth.OK, "", NOW, NOW, (sample,))


def test_kept_rows_are_what_a_fresh_build_makes(tmp_path: Path) -> None:
    data = _data(tmp_path)
    memo: RowMemo = {}
    first = build(data, NOW, "demo.db", memo=memo)
    again = build(data, NOW, "demo.db", memo=memo)
    assert same_rows(again.rows, first.rows)  # nothing new: the very same rows, nothing to draw
    node = data.facts.nodes[0]
    assert node.id is not None
    hour = (10.0, None, 50.0) + (80.0,) * 9
    # A new reading, the hour the same tuple: the hour's cell is kept, the rest built anew.
    for statuses, hours in (
        ({**data.statuses, node.id: _ok(node.name, 90.0)}, data.hour),
        ({**data.statuses, node.id: _ok(node.name, 10.0)}, data.hour),
        ({**data.statuses, node.id: _ok(node.name, 10.0)}, {**data.hour, node.id: hour}),
        ({**data.statuses, node.id: _ok(node.name, 55.0)}, {**data.hour, node.id: hour}),
        ({**data.statuses, node.id: _ok(node.name, 55.0)}, {**data.hour, node.id: hour[::-1]}),
    ):
        changed = dataclasses.replace(data, statuses=statuses, hour=hours)
        kept = build(changed, NOW, "demo.db", memo=memo)
        fresh = build(changed, NOW, "demo.db")
        assert _shown(kept.rows) == _shown(fresh.rows)
        assert kept.header == fresh.header
        assert not same_rows(kept.rows, first.rows)
    (row,) = [r for r in kept.rows if r.key == node.name]
    assert row.cells["util"].plain == " 55%" and row.cells["hour"].plain == "▇" * 9 + "▅ ▂"
    # A minute later the countdowns move: every row is built again.
    later = build(data, NOW + timedelta(minutes=1), "demo.db", memo=memo)
    fresh = build(data, NOW + timedelta(minutes=1), "demo.db")
    assert _shown(later.rows) == _shown(fresh.rows) and later.header == fresh.header


def test_the_next_end_from_ends_sorted_once_is_next_ends(tmp_path: Path) -> None:
    fleet = _data(tmp_path)
    nodes, billing = fleet.facts.nodes, fleet.facts.billing
    named = {n.name: billing[n.id] for n in nodes if n.id is not None and n.id in billing}
    ends = [b.paid_until or b.lease.end for b in named.values() if b.bills]
    assert len([e for e in ends if e is not None]) > 1  # the demo's leases end
    kept = Ends.of(nodes, billing)
    # Around every end (just before, at, just after) and far from them all.
    for end in [e for e in ends if e is not None]:
        for s in (-86400 * 400, -1, 0, 1, 86400 * 400):
            now = end + timedelta(seconds=s)
            assert kept.next(now) == next_end(named, now)
    assert Ends.of(nodes, billing) is kept  # the same fleet: sorted once
    assert Ends.of(nodes, dict(billing)) is not kept  # billing read again: sorted again
    assert Ends.of([], {}).next(NOW) is None
