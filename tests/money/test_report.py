"""`zuka report` on a month of the simulated fleet, checked against figures computed here
from the ledger's tables and the leases' prices (not through leases.money.report or billing)."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from leases.config.load import load_config
from leases.core.errors import InputError
from leases.ledger import records, rowaudit
from leases.ledger.store import Ledger
from leases.money import reportjson
from leases.money.report import month_window
from leases.sim.ledger import backfill, register_sim_nodes, sim_nodes_of
from leases.telemetry.rollups import HistoryStore
from tui.cli.main import main

NOW = datetime(2025, 4, 1, tzinfo=UTC)  # the sim leases start 20 days before, 2025-03-12
SINCE = datetime(2025, 3, 1, tzinfo=UTC) - timedelta(hours=8)  # March in Asia/Shanghai
UNTIL = datetime(2025, 4, 1, tzinfo=UTC) - timedelta(hours=8)
HOLE = ("sim-003", 60)  # a node with 60 hours of history removed: unknown, never idle
CONFIG = """\
[users]
alice = "Alice Wang"
bob = "Bob Li"
[projects]
"Alice Wang" = "llm"
bob = "vision"
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("report")
    path = folder / "ledger.db"
    with Ledger.open(path) as ledger:
        nodes = register_sim_nodes(ledger, 8, NOW)
        store = HistoryStore(ledger)
        for s in sim_nodes_of(nodes):
            backfill(
                store,
                s,
                NOW - timedelta(days=32),
                NOW,
                minute_span=timedelta(0),
                coarse_step=timedelta(minutes=10),
            )
        ledger.add_resource(
            "sim-002",
            {"kind": "disk", "native_id": "d-1", "price": "300", "price_per": "month"},
        )
        ledger.update_lease("sim-004", {"deposit_refund": "pending"})
    with sqlite3.connect(path) as conn:
        node_id = conn.execute("SELECT id FROM nodes WHERE name = ?", [HOLE[0]]).fetchone()[0]
        lo = int(datetime(2025, 3, 20, tzinfo=UTC).timestamp()) // 3600
        for table in ("gpu_hour", "gpu_owner_hour"):
            conn.execute(
                f"DELETE FROM {table} WHERE node_id = ? AND hour >= ? AND hour < ?",
                (node_id, lo, lo + HOLE[1]),
            )
    config = folder / "zuka.toml"
    config.write_text(CONFIG)
    config.chmod(0o600)
    yield path, config


def run(path: Path, *args: str) -> str:
    out = io.StringIO()
    assert main(["--ledger", str(path), *args], out=out) == 0
    return out.getvalue()


def _hours(a: datetime, b: datetime) -> Decimal:
    return Decimal(int((b - a).total_seconds())) / 3600


def expected(path: Path) -> dict[str, dict[str, Decimal]]:
    """Per node: cost, paid/busy/known card-hours, from prices and raw gpu_hour rows."""
    out: dict[str, dict[str, Decimal]] = {}
    conn = sqlite3.connect(path)
    rows = conn.execute(
        'SELECT n.name, n.id, n.gpu_count, l.billing_type, l.unit_price, l.start, l."end"'
        " FROM leases l JOIN nodes n ON n.id = l.node_id"
    ).fetchall()
    for name, node_id, gpus, bt, price, start_s, end_s in rows:
        start = datetime.fromisoformat(start_s)
        lo = max(start, SINCE)
        hours = _hours(lo, UNTIL)
        price = Decimal(price)
        if bt == "card_hour":
            cost = price * gpus * hours
        elif bt == "hourly":
            cost = price * hours
        else:
            # Charged up front, spread over the time it pays for month by month: the
            # 30-day lease's one month over its 30 days; the contract's first month
            # (Mar 12 - Apr 12, 31 days) at its monthly price.
            end = datetime.fromisoformat(end_s)
            if bt == "contract":
                end = start.replace(month=start.month + 1)
            cost = price * hours / _hours(start, end)
        busy, known = conn.execute(
            "SELECT SUM(busy_card_minutes), SUM(known_card_minutes) FROM gpu_hour"
            " WHERE node_id = ? AND hour >= ? AND hour < ?",
            (node_id, int(lo.timestamp()) // 3600, int(UNTIL.timestamp()) // 3600),
        ).fetchone()
        out[name] = {
            "cost": cost,
            "paid": gpus * hours,
            "busy": Decimal(busy) / 60,
            "known": Decimal(known) / 60,
            "lo": Decimal(int(lo.timestamp()) // 3600),
        }
    conn.close()
    return out


HALF = "0.005"  # half a fen, half of 0.01 card-hour


def close(a: Decimal | str, b: Decimal, tol: str = "0.000001") -> bool:
    return abs(Decimal(a) - b) <= Decimal(tol)


def test_report_json_agrees_with_an_independent_computation(fleet: tuple[Path, Path]) -> None:
    path, _ = fleet
    doc = json.loads(run(path, "report", "--month", "2025-03", "--format", "json"))
    want = expected(path)
    assert doc["tz"] == "Asia/Shanghai" and doc["complete"] is True
    assert len(doc["leases"]) == 8
    for row in doc["leases"]:
        w = want[row["node"]]
        # JSON shows money to the fen and card-hours to 0.01: within half a step.
        assert close(row["cost"], w["cost"], HALF), row["node"]
        assert close(row["paid_card_hours"], w["paid"], HALF)
        assert close(row["busy_card_hours"], w["busy"], HALF)
        assert close(row["unknown_card_hours"], w["paid"] - w["known"], HALF)
        idle = w["known"] - w["busy"]
        assert close(row["idle_card_hours"], idle, HALF)
        assert close(row["idle_yuan"], w["cost"] * idle / w["paid"], HALF)
        if w["busy"]:
            assert close(row["yuan_per_busy_card_hour"], w["cost"] / w["busy"], HALF)
    by = {r["node"]: r for r in doc["leases"]}
    # The hole is unknown, not idle; the idle monthly node paid for idle cards.
    assert Decimal(by[HOLE[0]]["unknown_card_hours"]) == 8 * HOLE[1]
    assert Decimal(by["sim-002"]["idle_yuan"]) > Decimal(by["sim-002"]["cost"]) / 2
    # The disk: 300 a month, from the lease's start (Mar 12 UTC) to the month's end, pro
    # rata on its own month grid (Mar 12 - Apr 12: 31 days).
    assert close(by["sim-002"]["storage"], Decimal(300) * 472 / 744, HALF)
    assert by["sim-004"]["deposit"] == "72000.00" and by["sim-004"]["deposit_state"] == (
        "pending refund"
    )
    assert by["sim-001"]["channel"] == "platform" and by["sim-001"]["provider"] == "SimPlatform"


def test_totals_are_the_sums_of_the_rows(fleet: tuple[Path, Path]) -> None:
    path, _ = fleet
    doc = json.loads(run(path, "report", "--month", "2025-03", "--json"))
    keys = ("cost", "storage", "total", "paid_card_hours", "busy_card_hours")
    keys += ("idle_card_hours", "unknown_card_hours", "idle_yuan")
    rows = doc["leases"]
    for key in keys:
        # Exact to the last of Decimal's 28 digits (a sum of sums rounds there).
        assert close(doc["total"][key], sum(Decimal(r[key]) for r in rows), "1e-18"), key
        for group, field in (("by_channel", "channel"), ("by_provider", "provider")):
            for name, t in doc[group].items():
                mine = [Decimal(r[key]) for r in rows if r[field] == name]
                assert close(t[key], sum(mine), "1e-18"), (group, name, key)
            whole = sum(Decimal(t[key]) for t in doc[group].values())
            assert close(doc["total"][key], whole, "1e-18")
    assert set(doc["by_channel"]) == {"platform", "colo", "cloud"}
    assert doc["total"]["deposits"] == {"pending refund": "72000.00"}


def test_csv_has_one_header_and_rounded_rows_that_reconcile(fleet: tuple[Path, Path]) -> None:
    path, _ = fleet
    text = run(path, "report", "--month", "2025-03", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert text.count("row,node,channel") == 1
    leases = [r for r in rows if r["row"] == "lease"]
    total = next(r for r in rows if r["row"] == "total")
    assert len(leases) == 8
    for key in ("cost", "total", "idle_yuan", "paid_card_hours", "busy_card_hours"):
        # Each row is rounded to the fen: the sum is within half a fen a row.
        gap = abs(sum(Decimal(r[key]) for r in leases) - Decimal(total[key]))
        assert gap <= Decimal("0.005") * len(leases), key
    assert {r["channel"] for r in rows if r["row"] == "channel"} == {"platform", "colo", "cloud"}


def test_markdown_pastes_into_a_weekly_report(fleet: tuple[Path, Path]) -> None:
    path, _ = fleet
    text = run(path, "report", "--month", "2025-03")
    doc = json.loads(run(path, "report", "--month", "2025-03", "--json"))
    lines = text.splitlines()
    assert lines[0] == "# GPU rental report 2025-03"
    total = Decimal(doc["total"]["total"]).quantize(Decimal("0.01"))
    idle = Decimal(doc["total"]["idle_yuan"]).quantize(Decimal("0.01"))
    assert f"**Total CNY {total:,}**" in lines[2]
    assert f"**CNY {idle:,} paid for idle cards**" in lines[2]
    assert "Asia/Shanghai" in lines[2]
    assert "## By channel" in text and "## By provider" in text
    table = [ln for ln in lines if ln.startswith("| sim-")]
    assert len(table) == 8 and all(ln.count("|") == 15 for ln in table)


def test_by_user_and_by_project_agree_with_owner_hours(fleet: tuple[Path, Path]) -> None:
    path, config = fleet
    doc = json.loads(run(path, "report", "--month", "2025-03", "--json"))
    want = expected(path)
    price = {node: w["cost"] / w["busy"] for node, w in want.items() if w["busy"]}
    conn = sqlite3.connect(path)
    by_user: dict[str, Decimal] = {}
    yuan: dict[str, Decimal] = {}
    lo = min(w["lo"] for w in want.values())
    for node, owner, minutes, hour in conn.execute(
        "SELECT n.name, o.owner, o.busy_card_minutes, o.hour FROM gpu_owner_hour o"
        " JOIN nodes n ON n.id = o.node_id WHERE o.hour >= ? AND o.hour < ?",
        (int(lo), int(UNTIL.timestamp()) // 3600),
    ).fetchall():
        if hour < want[node]["lo"]:
            continue  # before the node's lease: nobody paid for it
        hours = Decimal(str(minutes)) / 60
        by_user[owner] = by_user.get(owner, Decimal(0)) + hours
        yuan[owner] = yuan.get(owner, Decimal(0)) + hours * price[node]
    conn.close()
    assert {"alice", "bob", "carol", "root", "uid:2000"} <= set(by_user)
    users = json.loads(
        run(path, "--config", str(config), "report", "--month", "2025-03", "--by", "user",
            "--json")
    )  # fmt: skip
    rows = {r["name"]: r for r in users["rows"]}
    names = {"alice": "Alice Wang", "bob": "Bob Li"}
    for owner, hours in by_user.items():
        row = rows[names.get(owner, owner)]
        assert close(row["busy_card_hours"], hours, HALF)
        assert close(row["yuan"], yuan[owner], HALF)
    assert sum(Decimal(r["yuan"]) for r in users["rows"]) == Decimal(users["yuan"])
    # Every busy hour was attributed: the users carry the whole cost of the leases.
    assert close(Decimal(users["yuan"]) + Decimal(users["unattributed_yuan"]),
                 Decimal(doc["total"]["cost"]))  # fmt: skip
    assert close(users["unattributed_yuan"], Decimal(0), "0.01")
    projects = json.loads(
        run(path, "--config", str(config), "report", "--month", "2025-03", "--by", "project",
            "--json")
    )  # fmt: skip
    prows = {r["name"]: r for r in projects["rows"]}
    assert set(prows) == {"llm", "vision", "unassigned"}
    assert prows["llm"]["users"] == ["alice"] and prows["vision"]["users"] == ["bob"]
    assert set(prows["unassigned"]["users"]) == {"carol", "root", "uid:2000"}
    assert close(prows["llm"]["yuan"], yuan["alice"], HALF)
    md = run(path, "--config", str(config), "report", "--month", "2025-03", "--by", "project")
    assert md.startswith("# GPU use by project 2025-03")
    assert "| llm | alice |" in md and "| **Total** |" in md
    text = run(path, "--config", str(config), "report", "--month", "2025-03", "--by", "user",
               "--format", "csv")  # fmt: skip
    crows = list(csv.DictReader(io.StringIO(text)))
    assert {r["name"] for r in crows if r["row"] == "user"} == set(rows)


def test_output_file_and_bad_month(fleet: tuple[Path, Path], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    path, _ = fleet
    target = tmp_path / "march.md"
    assert run(path, "report", "--month", "2025-03", "-o", str(target)) == ""
    assert target.read_text().startswith("# GPU rental report 2025-03")
    for bad in ("2025-13", "March", "2999-01"):
        assert main(["--ledger", str(path), "report", "--month", bad]) == 2
        assert "month" in capsys.readouterr().err


def _accept_all(path: Path) -> None:
    """Take every row written behind zuka's back as it is (`zuka audit accept`): the
    report refuses them until somebody does (leases.ledger.rowaudit); the text is still hostile."""
    with Ledger.open(path) as ledger:
        found = rowaudit.drifted(ledger)
        assert found
        for d in found:
            rowaudit.accept(ledger, d.entity, d.entity_id)


def test_ledger_text_is_shown_safely(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with Ledger.open(path) as ledger:
        register_sim_nodes(ledger, 2, NOW, prefix="n")  # n-002: a monthly lease
    with sqlite3.connect(path) as conn:  # a ledger written by someone else
        conn.execute("UPDATE providers SET name = ?", ["=Evil|Cloud"])
        conn.execute(
            "UPDATE leases SET refund_rule = ?, ended_at = ? WHERE billing_type = 'monthly'",
            ["ask|them", "2025-03-20T00:00:00+00:00"],
        )
    _accept_all(path)
    text = run(path, "report", "--month", "2025-03")
    assert "\\(ask\\|them\\)" in text  # the pipe escaped: a cell stays a cell
    assert "| =Evil\\|Cloud |" in text
    text = run(path, "report", "--month", "2025-03", "--format", "csv")
    assert ",'=Evil|Cloud," in text  # no formula for a spreadsheet


def test_month_window_refuses_out_of_range_and_non_ascii_months() -> None:
    now = datetime(2026, 5, 1, tzinfo=UTC)
    for bad in ("0000-01", "9999-12", "0001-01", "1999-12", "2101-01", "２０２５-03",
                "2025-０3"):  # fmt: skip
        with pytest.raises(InputError, match="month") as info:
            month_window(bad, "Asia/Shanghai", now)
        if bad[:1].isdigit() and bad.isascii():
            assert "2000" in str(info.value) and "2100" in str(info.value)
    (since, _until), complete = month_window("2000-01", "UTC", now)
    assert since == datetime(2000, 1, 1, tzinfo=UTC) and complete


def test_report_bad_months_exit_2_without_a_traceback(
    fleet: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = fleet
    for bad in ("0000-01", "9999-12", "２０２５-03", "0001-01"):
        assert main(["--ledger", str(path), "report", "--month", bad]) == 2
        err = capsys.readouterr().err
        assert "month" in err and "Traceback" not in err


def test_markdown_cells_from_the_ledger_render_as_text(tmp_path: Path) -> None:
    markdown_it = pytest.importorskip("markdown_it")
    path = tmp_path / "l.db"
    with Ledger.open(path) as ledger:
        register_sim_nodes(ledger, 2, NOW, prefix="n")
    provider = '![x](http://evil.example/p.png)<img src="http://e/q.png"># h *em* `c` &amp;'
    rule = "[click](http://e/) <http://e/auto> # 1. > [x](y) <b>b</b>"
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE providers SET name = ?", [provider])
        conn.execute(
            "UPDATE leases SET refund_rule = ?, ended_at = ? WHERE billing_type = 'monthly'",
            [rule, "2025-03-20T00:00:00+00:00"],
        )
    _accept_all(path)
    text = run(path, "report", "--month", "2025-03")
    html = markdown_it.MarkdownIt().enable("table").render(text)
    for tag in ("<img", "<a ", "<b>", "<h1>heading", "<em>", "<code>", "<blockquote"):
        assert tag not in html, (tag, html)
    assert "&lt;img" in html and "evil.example/p.png" in html  # shown, as text
    assert html.count("<h1>") == 1  # the report's own title only


def _num(cell: str) -> Decimal:
    cell = cell.strip().strip("*").replace(",", "").removeprefix("CNY ")
    return Decimal(0) if cell in ("", "-") else Decimal(cell)


def _md_table(text: str, title: str) -> list[list[str]]:
    """The cells of the Markdown table under `## title`, header and rule left out."""
    lines = text.split(f"## {title}\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in lines[2:]]


SUMMED = ("cost", "storage", "total", "charged_in_month", "paid_card_hours", "busy_card_hours", "idle_card_hours",
          "unknown_card_hours", "idle_yuan")  # fmt: skip


def test_every_format_shows_totals_that_are_the_sums_of_the_rows_as_printed(
    fleet: tuple[Path, Path],
) -> None:
    path, config = fleet
    md = run(path, "report", "--month", "2025-03")
    rows = _md_table(md, "Leases")
    leases, total = rows[:-1], rows[-1]
    for col in (4, 5, 6, 7, 8, 9, 10, 12):  # cost, storage, card-hours, idle yuan, charged
        assert sum(_num(r[col]) for r in leases) == _num(total[col]), col
    channel = {r[1] for r in leases}
    by_channel = _md_table(md, "By channel")
    assert {r[0] for r in by_channel} == channel
    for g in by_channel:
        mine = [r for r in leases if r[1] == g[0]]
        assert sum(_num(r[4]) + _num(r[5]) for r in mine) == _num(g[2])
    whole = sum(_num(r[4]) + _num(r[5]) for r in leases)
    assert f"**Total CNY {whole:,}**" in md
    text = run(path, "report", "--month", "2025-03", "--format", "csv")
    crows = list(csv.DictReader(io.StringIO(text)))
    clease = [r for r in crows if r["row"] == "lease"]
    for r in clease:
        assert Decimal(r["total"]) == Decimal(r["cost"]) + Decimal(r["storage"])
    for kind, field in (("total", None), ("channel", "channel"), ("provider", "provider")):
        for t in (r for r in crows if r["row"] == kind):
            mine = [r for r in clease if field is None or r[field] == t[field]]
            for key in SUMMED:
                assert sum(Decimal(r[key]) for r in mine) == Decimal(t[key]), (kind, key)
    doc = json.loads(run(path, "report", "--month", "2025-03", "--json"))
    for key in SUMMED:
        for r in doc["leases"]:
            assert Decimal(r[key]).as_tuple().exponent == -2, (key, r[key])
        assert sum(Decimal(r[key]) for r in doc["leases"]) == Decimal(doc["total"][key]), key
    users = run(path, "--config", str(config), "report", "--month", "2025-03", "--by", "user")
    urows = [[c.strip() for c in ln.strip("|").split(" | ")]
             for ln in users.splitlines() if ln.startswith("| ")][1:]  # fmt: skip
    assert sum(_num(r[4]) for r in urows[:-1]) == _num(urows[-1][4])
    assert "-0.00" not in users
    ucsv = run(path, "--config", str(config), "report", "--month", "2025-03", "--by", "user",
               "--format", "csv")  # fmt: skip
    assert ",-0.00" not in ucsv
    ujson = json.loads(
        run(path, "--config", str(config), "report", "--month", "2025-03", "--by", "user",
            "--json")
    )  # fmt: skip
    assert sum(Decimal(r["yuan"]) for r in ujson["rows"]) == Decimal(ujson["yuan"])
    assert not ujson["unattributed_yuan"].startswith("-0") and "E" not in ujson["yuan"]


def test_each_lease_is_reported_in_its_own_currency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def ledger_of(path: Path, leases: tuple[tuple[str, str, str], ...]) -> Path:
        with Ledger.open(path) as ledger:
            for name, cur, price in leases:
                ledger.add_node(records.node_from({"name": name, "ssh_host": "10.0.0.1",
                                                   "gpu_count": 1}))  # fmt: skip
                ledger.add_lease(records.lease_from(
                    {"node": name, "billing_type": "monthly", "unit_price": price,
                     "currency": cur, "start": "2025-03-01", "end": "2025-04-01"}
                ))  # fmt: skip
        return path

    cny = ("cn1", "CNY", "7000")
    path = ledger_of(tmp_path / "l.db", (cny, ("us1", "USD", "1000")))
    monkeypatch.setenv("ZUKA_BILLING_CURRENCY", "USD")  # the display default only
    md = run(path, "report", "--month", "2025-03")
    assert "USD 8,000.00" not in md and "CNY 8,000.00" not in md  # never CNY + USD
    assert "CNY 7,000.00" in md and "USD 1,000.00" in md
    summary = md.splitlines()[2]
    assert "CNY 7,000.00" in summary and "USD 1,000.00" in summary
    doc = json.loads(run(path, "report", "--month", "2025-03", "--json"))
    assert {r["node"]: r["currency"] for r in doc["leases"]} == {"cn1": "CNY", "us1": "USD"}
    assert doc["by_currency"]["CNY"]["total"] == "7000.00"
    assert doc["by_currency"]["USD"]["total"] == "1000.00"
    text = run(path, "report", "--month", "2025-03", "--format", "csv")
    totals = {r["currency"]: r["total"] for r in csv.DictReader(io.StringIO(text))
              if r["row"] == "total"}  # fmt: skip
    assert totals == {"CNY": "7000.00", "USD": "1000.00"}
    # One currency: the leases' own, whatever the config says.
    md = run(ledger_of(tmp_path / "cny.db", (cny,)), "report", "--month", "2025-03")
    assert "**Total CNY 7,000.00**" in md and "USD" not in md


@pytest.mark.parametrize(("value", "words"), [("RMB", "did you mean CNY"), ("XYZ", "ISO 4217"),
                                              ("usd", "ISO 4217")])  # fmt: skip
def test_config_refuses_a_currency_that_is_not_iso_4217(value: str, words: str) -> None:
    with pytest.raises(InputError) as err:
        load_config(None, env={"ZUKA_BILLING_CURRENCY": value})
    assert words in str(err.value) and "currency" in str(err.value)


def test_an_auto_renew_lease_is_reported_month_by_month_as_it_accrues() -> None:
    """`lease add m6 --billing monthly --price 30000 --start 2026-08-03 --end 2026-09-03
    --auto-renew --renew-charge-days 9`, reported Aug-Dec: each period's price over its own
    days (tests/money/test_billing.py works the same table), never a renewal on its charge day."""
    from leases.money import billing, report
    from leases.money.billing import CardHours

    le = records.lease_from(
        {"node": "m6", "billing_type": "monthly", "unit_price": "30000", "cards_billed": 8,
         "start": "2026-08-03", "end": "2026-09-03", "auto_renew": True,
         "renew_charge_days": 9}
    )  # fmt: skip

    def usage(lease: object, since: datetime, until: datetime, cards: int | None) -> CardHours:
        paid = billing.paid_card_hours(le, since, until)
        return CardHours(paid, Decimal(0), paid, Decimal(0))

    want = {
        "2026-08": "28064.52",  # 29/31 of the first period
        "2026-09": "29935.48",  # 2/31 of it + 28/30 of Sep 3 - Oct 3
        "2026-10": "30064.52",  # 2/30 + 29/31
        "2026-11": "29935.48",  # 2/31 + 28/30
        "2026-12": "30064.52",  # 2/30 + 29/31: December is not empty
    }
    now = datetime(2027, 1, 10, tzinfo=UTC)
    for month, cost in want.items():
        window, complete = report.month_window(month, "Asia/Shanghai", now)
        rep = report.build_report(
            month, window, complete, tz="Asia/Shanghai", currency="CNY", leases=[le],
            nodes=[], providers=[], resources=[], usage=usage,
        )  # fmt: skip
        doc = json.loads(reportjson.dumps(reportjson.report_json(rep)))
        row = doc["leases"][0]
        assert row["cost"] == cost, month
        # All of it idle: the idle yuan is the month's cost, not a lump's.
        assert row["idle_yuan"] == cost, month
        # Cash beside it: August the first period and the Sep 3 renewal charged Aug 25;
        # each later month the renewal charged 9 days before the 3rd of the next.
        assert row["charged_in_month"] == ("60000.00" if month == "2026-08" else "30000.00")
    # Cut at Nov 28 (after the Nov 24 charge for Dec 3 - Jan 3): none of it in November.
    window, _ = report.month_window(
        "2026-11", "Asia/Shanghai", datetime(2026, 11, 27, 16, tzinfo=UTC)
    )
    rep = report.build_report(
        "2026-11", window, False, tz="Asia/Shanghai", currency="CNY", leases=[le], nodes=[],
        providers=[], resources=[], usage=usage,
    )  # fmt: skip
    part = Decimal(30000) * 2 / 31 + Decimal(30000) * 25 / 30
    assert rep.rows[0].cost == part
