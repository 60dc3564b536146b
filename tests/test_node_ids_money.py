"""Issue 17, item 7: a released node's name reused by a new node never moves money between
the two. Every money path (`zuka report`, `zuka cost`, the dashboard's month column and
header, `zuka plan`) knows a node by its id; the name is only shown. Figures are worked
out by hand here, from the prices and the hours written."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from conftest import Cli

from leases import fields
from leases.config import Config
from leases.fleetdata import FleetReader, ReadRequest
from leases.history import GpuHour, NodeHour
from leases.ledger import Ledger
from leases.rollups import HistoryStore
from tui.fleetview import build

D = Decimal


def t(text: str) -> datetime:
    return fields.moment("at", text)  # Shanghai time


def ok(cli: Cli, *args: str) -> str:
    r = cli(*args)
    assert r.code == 0, (args, r.err)
    return r.out


def _hours(path: Path, node: str, start: datetime, n: int, cards: int, busy: int) -> None:
    """n whole hours from start, `cards` cards all read, `busy` of them busy (written to the
    live node of that name)."""
    with Ledger.open(path) as ledger:
        h0 = int(start.timestamp()) // 3600
        HistoryStore(ledger).write_hours(
            NodeHour(node, h0 + k, tuple(
                GpuHour(i, 60, 60 if i < busy else 0, 50.0, 90.0, 1000.0, 300.0)
                for i in range(cards)
            ))
            for k in range(n)
        )  # fmt: skip


def _reused(cli: Cli, path: Path) -> None:
    """n (8 A100 at platform P) rented by the card-hour Mar 1-11, released; then a new n
    (2 cards at cloud Q) by the card-hour from Mar 21. Neither lease records --cards: the
    cards billed are the node's GPUs."""
    ok(cli, "node", "add", "n", "--ssh", "ssh root@10.0.0.1", "--provider", "P", "--channel",
       "platform", "--gpus", "8", "--gpu-model", "A100")  # fmt: skip
    ok(cli, "lease", "add", "n", "--billing", "card_hour", "--price", "2", "--start",
       "2026-03-01T00:00")  # fmt: skip
    _hours(path, "n", t("2026-03-01T00:00"), 240, cards=8, busy=8)  # the old n: all busy
    ok(cli, "lease", "end", "n", "--at", "2026-03-11T00:00")
    ok(cli, "node", "archive", "n")
    ok(cli, "node", "add", "n", "--ssh", "ssh root@10.0.0.2", "--provider", "Q", "--channel",
       "cloud", "--gpus", "2", "--gpu-model", "RTX 4090")  # fmt: skip
    ok(cli, "lease", "add", "n", "--billing", "card_hour", "--price", "3", "--start",
       "2026-03-21T00:00")  # fmt: skip
    _hours(path, "n", t("2026-03-21T00:00"), 48, cards=2, busy=0)  # the new n: idle


# The old n: 8 cards x 2.00 x 240 h (Mar 1 - 11) = 3,840.00
OLD = D(8) * 2 * 240
# The new n: 2 cards x 3.00 x 264 h (Mar 21 - Apr 1) = 1,584.00
NEW = D(2) * 3 * 264


def test_a_reused_name_keeps_each_nodes_lease_under_its_own_provider_and_cards(
    cli: Cli, ledger_path: Path
) -> None:
    _reused(cli, ledger_path)
    doc = json.loads(ok(cli, "report", "--month", "2026-03", "--json"))
    rows = sorted(doc["leases"], key=lambda r: r["start"])
    assert [(r["node"], r["provider"], r["channel"]) for r in rows] == [
        ("n", "P", "platform"),
        ("n", "Q", "cloud"),
    ]
    assert [D(r["cost"]) for r in rows] == [OLD, NEW]
    # 8 x 240 = 1,920 paid card-hours, all busy; 2 x 264 = 528 paid, 96 read idle.
    assert [D(r["paid_card_hours"]) for r in rows] == [1920, 528]
    assert [D(r["busy_card_hours"]) for r in rows] == [1920, 0]
    assert D(rows[1]["idle_card_hours"]) == 96
    assert D(doc["total"]["cost"]) == OLD + NEW  # 5,424.00
    assert doc["by_provider"]["Q"]["cost"] == f"{NEW:.2f}"


def test_zuka_cost_prices_the_new_node_not_the_released_one_of_its_name(
    cli: Cli, ledger_path: Path
) -> None:
    _reused(cli, ledger_path)
    for args in (("cost", "--json"), ("cost", "n", "--json")):
        doc = json.loads(ok(cli, *args))
        (c,) = doc["leases"]
        at = datetime.fromisoformat(doc["at"])
        # 2 cards x 3.00 an hour since Mar 21 (not the released node's 8 cards)
        hours = D(str((at - t("2026-03-21T00:00")).total_seconds())) / 3600
        assert abs(D(c["to_date"]) - 2 * 3 * hours) < D("0.01"), args


def test_the_dashboards_month_column_and_header_key_by_node_id(cli: Cli, ledger_path: Path) -> None:
    _reused(cli, ledger_path)
    now = datetime(2026, 3, 31, 15, tzinfo=UTC)  # Mar 31 23:00 in Shanghai
    with Ledger.open(ledger_path) as ledger:
        old_id, new_id = sorted(n.id or 0 for n in ledger.nodes())
        data = FleetReader(ledger, Config()).read(ReadRequest(now))
    assert data.money is not None
    # The new n so far: 2 cards x 3.00 x 263 h (Mar 21 00:00 - Mar 31 23:00) = 1,578.00
    so_far = D(2) * 3 * 263
    assert data.money.by_node == {old_id: OLD, new_id: so_far}
    assert data.money.cost == OLD + so_far  # 5,418.00: each node once, at its own cards
    refreshed = build(data, None, {}, now, now - timedelta(minutes=5), "l.db")
    (row,) = [r for r in refreshed.rows if r.facts.name == "n"]
    assert row.cells["cost"].plain == "¥1,578"
    assert "¥5,418 this month" in refreshed.header


def test_a_lease_of_a_released_node_reads_its_own_history_and_storage(
    cli: Cli, ledger_path: Path
) -> None:
    """Both leases start on Mar 1 (the new node's back-dated): a disk of the old lease and
    each node's history stay with their own lease, not with (name, start)."""
    ok(cli, "node", "add", "n", "--ssh", "ssh root@10.0.0.1", "--gpus", "8")
    ok(cli, "lease", "add", "n", "--billing", "card_hour", "--price", "2", "--start",
       "2026-03-01T00:00")  # fmt: skip
    ok(cli, "resource", "add", "n", "--kind", "disk", "--id", "d-old", "--price", "310",
       "--price-per", "month")  # fmt: skip
    _hours(ledger_path, "n", t("2026-03-01T00:00"), 240, cards=8, busy=8)
    ok(cli, "lease", "end", "n", "--at", "2026-03-11T00:00")
    ok(cli, "resource", "edit", "n", "--kind", "disk", "--id", "d-old", "--deleted",
       "2026-03-11T00:00")  # fmt: skip
    ok(cli, "node", "archive", "n")
    ok(cli, "node", "add", "n", "--ssh", "ssh root@10.0.0.2", "--gpus", "2")
    ok(cli, "lease", "add", "n", "--billing", "card_hour", "--price", "3", "--start",
       "2026-03-01T00:00")  # fmt: skip
    _hours(ledger_path, "n", t("2026-03-01T00:00"), 744, cards=2, busy=0)
    doc = json.loads(ok(cli, "report", "--month", "2026-03", "--json"))
    rows = sorted(doc["leases"], key=lambda r: D(r["paid_card_hours"]))
    # new n: 2 cards x 744 h = 1,488 paid, all idle; old n: 8 x 240 = 1,920, all busy.
    assert [D(r["paid_card_hours"]) for r in rows] == [1488, 1920]
    assert [D(r["busy_card_hours"]) for r in rows] == [0, 1920]
    # The disk: 310 a month for 10 of March's 31 days = 100.00, on the old lease only.
    assert [D(r["storage"]) for r in rows] == [0, 100]
