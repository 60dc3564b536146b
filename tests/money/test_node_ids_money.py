"""Issue 17, item 7: a released node's name reused by a new node never moves money between
the two. Every money path (`zuka report`, `zuka cost`, the dashboard's month column and
header, `zuka plan`) knows a node by its id; the name is only shown. Figures are worked
out by hand here, from the prices and the hours written."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from leases.config.sections import Config
from leases.core import fields
from leases.core.models import OwnerHour
from leases.fleet.data import FleetReader, ReadRequest
from leases.ledger.store import Ledger
from leases.money import renewals
from leases.telemetry.history import GpuHour, NodeHour
from leases.telemetry.rollups import HistoryStore
from tests.support.cli import Cli
from tui.screens.fleetview import build

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
    refreshed = build(data, now, "l.db")
    (row,) = [r for r in refreshed.rows if r.facts.name == "n"]
    assert row.cells["cost"].plain == "CNY 1,578"
    assert "CNY 5,418 this month" in refreshed.header


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


# -- storage: in the cash column, and a row of its own in --by user|project ---------------


def _with_storage(cli: Cli, path: Path, folder: Path) -> Path:
    """s: 8 cards by the card-hour at 2.00, Mar 1-11, with a 310-a-month disk deleted with
    it; alice busy on 4 cards all along, bob on 2 for the first 120 hours. i: 1 card by the
    hour at 10.00 for Mar 1, no history. Returns the config (alice's project: llm)."""
    ok(cli, "node", "add", "s", "--ssh", "ssh root@10.0.0.1", "--gpus", "8")
    ok(cli, "lease", "add", "s", "--billing", "card_hour", "--price", "2", "--cards", "8",
       "--start", "2026-03-01T00:00")  # fmt: skip
    ok(cli, "resource", "add", "s", "--kind", "disk", "--id", "d-1", "--price", "310",
       "--price-per", "month")  # fmt: skip
    ok(cli, "lease", "end", "s", "--at", "2026-03-11T00:00")
    ok(cli, "resource", "edit", "s", "--kind", "disk", "--id", "d-1", "--deleted",
       "2026-03-11T00:00")  # fmt: skip
    ok(cli, "node", "add", "i", "--ssh", "ssh root@10.0.0.2", "--gpus", "1")
    ok(cli, "lease", "add", "i", "--billing", "hourly", "--price", "10", "--start",
       "2026-03-01T00:00")  # fmt: skip
    ok(cli, "lease", "end", "i", "--at", "2026-03-02T00:00")
    start = t("2026-03-01T00:00")
    _hours(path, "s", start, 120, cards=8, busy=6)
    _hours(path, "s", start + timedelta(hours=120), 120, cards=8, busy=4)
    h0 = int(start.timestamp()) // 3600
    with Ledger.open(path) as ledger:
        HistoryStore(ledger).write_owner_hours(
            [OwnerHour("s", "alice", h0 + k, 240.0) for k in range(240)]
            + [OwnerHour("s", "bob", h0 + k, 120.0) for k in range(120)]
        )
    config = folder / "zuka.toml"
    config.write_text('[projects]\nalice = "llm"\n')
    config.chmod(0o600)
    return config


# s: 8 x 2.00 x 240 h = 3,840.00; busy 120 x 6 + 120 x 4 = 1,200 card-hours, 3.20 each
# alice 4 x 240 = 960 h x 3.20 = 3,072.00; bob 2 x 120 = 240 h x 3.20 = 768.00
# the disk: 310 x 10/31 = 100.00; i: 24 h x 10.00 = 240.00, no busy hour (unattributed)
# by lease: 3,840 + 100 + 240 = 4,180.00 = 3,072 + 768 + 100 + 240
def test_storage_is_in_the_cash_column_and_a_row_of_its_own_by_user_and_project(
    cli: Cli, ledger_path: Path, tmp_path: Path
) -> None:
    config = _with_storage(cli, ledger_path, tmp_path)
    month = ("report", "--month", "2026-03")
    doc = json.loads(ok(cli, *month, "--json"))
    by = {r["node"]: r for r in doc["leases"]}
    assert (by["s"]["cost"], by["s"]["storage"]) == ("3840.00", "100.00")
    # Cash: the card-hours as they ran, and the disk as it ran.
    assert by["s"]["charged_in_month"] == "3940.00"
    assert doc["total"]["charged_in_month"] == doc["total"]["total"] == "4180.00"
    for who, rows in (("user", {"alice": "3072.00", "bob": "768.00"}),
                      ("project", {"llm": "3072.00", "unassigned": "768.00"})):  # fmt: skip
        att = json.loads(ok(cli, "--config", str(config), *month, "--by", who, "--json"))
        assert {r["name"]: r["yuan"] for r in att["rows"]} == rows, who
        assert (att["yuan"], att["storage_yuan"], att["unattributed_yuan"]) == (
            "3840.00", "100.00", "240.00")  # fmt: skip
        assert att["leases_total"] == "4180.00" == doc["total"]["total"]
        text = ok(cli, "--config", str(config), *month, "--by", who, "--format", "csv")
        crows = list(csv.DictReader(io.StringIO(text)))
        kinds = {r["row"]: r for r in crows if r["row"] != who}
        assert kinds["storage"]["yuan"] == "100.00" and kinds["storage"]["nodes"] == "s"
        assert kinds["unattributed"]["yuan"] == "240.00"
        assert kinds["total"]["yuan"] == "4180.00"
        assert sum(D(r["yuan"]) for r in crows if r["row"] != "total") == D("4180.00")
        md = ok(cli, "--config", str(config), *month, "--by", who)
        cells = [[c.strip() for c in ln.strip("|").split(" | ")]
                 for ln in md.splitlines() if ln.startswith("| ")][1:]  # fmt: skip
        assert ["*storage lines*", "", "", "", "100.00", "s"] in cells, md
        assert cells[-1][0] == "**Total**" and cells[-1][4] == "4,180.00"
        assert sum(D(r[4].replace(",", "")) for r in cells[:-1]) == D("4180.00")


# -- plans: each GPU model planned on its own; plan buy counts the cards rented now --------


def _month_start(months_back: int) -> str:
    """The first day of a month `months_back` before this one, in Shanghai (a lease from
    then runs over the plans' 30-day window; whole months, so a valid monthly lease)."""
    today = datetime.now(UTC).astimezone(fields.timezone("Asia/Shanghai", "tz")).date()
    n = today.year * 12 + today.month - 1 - months_back
    return f"{n // 12:04d}-{n % 12 + 1:02d}-01"


def _last_hours(path: Path, node: str, n: int, cards: int, busy: int) -> None:
    """The n whole clock hours before this one."""
    top = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    _hours(path, node, top - timedelta(hours=n), n, cards, busy)


def test_plan_hybrid_plans_each_gpu_model_of_the_fleet(cli: Cli, ledger_path: Path) -> None:
    start, end = _month_start(2), _month_start(-2)
    for name, model, gpus, monthly, hourly in (
        ("a", "A100", "8", "52000", "80"),  # a card: 6,500 a month, 10.00 an hour
        ("b", "RTX 4090", "2", "3000", "4"),  # a card: 1,500 a month, 2.00 an hour
    ):
        ok(cli, "node", "add", name, "--ssh", f"ssh root@{name}.lab", "--gpus", gpus,
           "--gpu-model", model)  # fmt: skip
        ok(cli, "lease", "add", name, "--billing", "monthly", "--price", monthly,
           "--hourly-price", hourly, "--start", start, "--end", end)  # fmt: skip
    _last_hours(ledger_path, "a", 240, cards=8, busy=8)  # 8 cards busy every hour
    _last_hours(ledger_path, "b", 240, cards=2, busy=1)  # 1 card busy every hour
    doc = json.loads(ok(cli, "plan", "hybrid", "--json"))
    models = {m["gpu_model"]: m for m in doc["models"]}
    assert sorted(models) == ["A100", "RTX 4090"]
    a, b = models["A100"], models["RTX 4090"]
    assert (a["nodes"], b["nodes"]) == (["a"], ["b"])
    assert a["hours"] == b["hours"] == 240
    # A100: threshold 6,500 / (10 x 730) = 0.89; 8 cards busy in every hour (share 1 above
    # any k < 8): all 8 monthly, 8 x 6,500 = 52,000 (all hourly 8 x 730 x 10 = 58,400).
    assert (a["base_cards"], D(a["cost_per_month"])) == (8, 52000)
    assert D(a["all_hourly_per_month"]) == 58400
    # RTX 4090: threshold 1,500 / (2 x 730) = 1.03 > 1: all hourly, 730 x 2 = 1,460
    # (all monthly: 1 x 1,500).
    assert (b["base_cards"], D(b["cost_per_month"])) == (0, 1460)
    assert D(b["saves_against_monthly"]) == 40
    text = ok(cli, "plan", "hybrid")
    assert "## A100" in text and "## RTX 4090" in text
    assert "Rent 8 card(s) monthly" in text and "Rent 0 card(s) monthly" in text
    # One model asked for: the plan as before, of that model only.
    one = json.loads(ok(cli, "plan", "hybrid", "--gpu-model", "4090", "--json"))
    assert one["nodes"] == ["b"] and one["base_cards"] == 0


def test_plan_buy_counts_the_cards_rented_now(cli: Cli, ledger_path: Path) -> None:
    """a: 8 A100 rented now. The old c: 4 A100 by the card-hour until 5 days ago, released;
    the new c, of the same name: 2 A100 by the card-hour for 2 days, now. Rented now:
    8 + 2 = 10 cards (not the old c's 4, nor 8 + 4 from the window's leases)."""
    shanghai = fields.timezone("Asia/Shanghai", "tz")
    now = datetime.now(UTC).astimezone(shanghai).replace(minute=0, second=0, microsecond=0)

    def at(hours_ago: int) -> str:
        return f"{now - timedelta(hours=hours_ago):%Y-%m-%dT%H:%M}"

    ok(cli, "node", "add", "a", "--ssh", "ssh root@a.lab", "--gpus", "8", "--gpu-model", "A100")
    ok(cli, "lease", "add", "a", "--billing", "monthly", "--price", "52000", "--start",
       _month_start(2), "--end", _month_start(-2))  # fmt: skip
    _last_hours(ledger_path, "a", 240, cards=8, busy=4)
    ok(cli, "node", "add", "c", "--ssh", "ssh root@c.lab", "--gpus", "4", "--gpu-model", "A100")
    ok(cli, "lease", "add", "c", "--billing", "card_hour", "--price", "5", "--start", at(240))
    _hours(ledger_path, "c", now - timedelta(hours=240), 120, cards=4, busy=4)
    ok(cli, "lease", "end", "c", "--at", at(120))
    ok(cli, "node", "archive", "c")
    ok(cli, "node", "add", "c", "--ssh", "ssh root@c2.lab", "--gpus", "2", "--gpu-model", "A100")
    ok(cli, "lease", "add", "c", "--billing", "card_hour", "--price", "5", "--start", at(48))
    args = ("plan", "buy", "--card-price", "80000", "--life-years", "4", "--power-w", "400",
            "--kwh", "1", "--hosting", "0", "--json")  # fmt: skip
    assert json.loads(ok(cli, *args))["cards"] == 10
    assert json.loads(ok(cli, *args, "--gpu-model", "A100"))["cards"] == 10


def _handed_on(cli: Cli) -> None:
    """n (8 A100 at P) monthly 30,000 for March, ended at its end and archived; a new n
    (2 RTX 4090 at Q) monthly 6,000 from the very moment the old one ended, to May 1."""
    ok(cli, "node", "add", "n", "--ssh", "ssh root@10.0.0.1", "--provider", "P", "--channel",
       "platform", "--gpus", "8", "--gpu-model", "A100")  # fmt: skip
    ok(cli, "lease", "add", "n", "--billing", "monthly", "--price", "30000", "--start",
       "2026-03-01T00:00", "--end", "2026-04-01T00:00")  # fmt: skip
    ok(cli, "lease", "end", "n", "--at", "2026-04-01T00:00")
    ok(cli, "node", "archive", "n")
    ok(cli, "node", "add", "n", "--ssh", "ssh root@10.0.0.2", "--provider", "Q", "--channel",
       "cloud", "--gpus", "2", "--gpu-model", "RTX 4090")  # fmt: skip
    ok(cli, "lease", "add", "n", "--billing", "monthly", "--price", "6000", "--start",
       "2026-04-01T00:00", "--end", "2026-05-01T00:00")  # fmt: skip


def test_a_new_nodes_first_lease_never_renews_the_released_node_of_its_name(
    cli: Cli, ledger_path: Path
) -> None:
    """The new n's lease starts where the old n's ended, in the same currency: by name it
    looked like a renewal, one chain of two nodes."""
    _handed_on(cli)
    listed = json.loads(ok(cli, "lease", "list", "--json"))
    assert [(le["unit_price"], le["renews"]) for le in listed] == [("30000", None), ("6000", None)]
    with Ledger.open(ledger_path) as ledger:
        live = ledger.node("n")
        assert live.id is not None
        chains = [c for c in renewals.chains(ledger.leases()) if len(c) > 1]
        assert chains == []  # two chains of one lease each
        b = ledger.billing(t("2026-04-10T00:00"))[live.id]
        assert b.lease.unit_price == D(6000) and b.chain == (b.lease,)


def test_node_list_shows_each_nodes_own_lease_when_a_name_is_reused(cli: Cli) -> None:
    _handed_on(cli)
    nodes = json.loads(ok(cli, "node", "list", "--all", "--json"))
    shown = {(n["state"], n["provider"]): (n["lease"] or {}).get("unit_price") for n in nodes}
    # The old n's lease ended: nothing bills it now; the new n's is its own.
    assert shown == {("released", "P"): None, ("active", "Q"): "6000"}
