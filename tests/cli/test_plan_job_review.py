"""`zuka plan job` and the price book after a new user's review: an offer counts only from
the day it was quoted, a break-even past a month's hours is said to be none, `--region`
with `--project` narrows the project's regions, the lab's own leases are marked already
rented with their terms (a period's lease never the cheapest), every price says its unit
and the known models are listed as typed. Every figure worked out by hand beside it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import Cli

CARD_HOUR = ("--provider", "AutoDL", "--channel", "platform", "--gpu-model", "h800", "--gpus",
             "8", "--billing", "card_hour", "--price", "15.8", "--region", "cn-beijing")  # fmt: skip
JOB = ("plan", "job", "--model", "H800", "--cards", "8", "--hours", "720")


def _files(ledger_path: Path) -> tuple[bytes, bytes]:
    wal = ledger_path.with_name(ledger_path.name + "-wal")
    return ledger_path.read_bytes(), wal.read_bytes() if wal.exists() else b""


def test_an_offer_counts_only_from_the_day_it_was_quoted(cli: Cli) -> None:
    assert cli("offer", "add", *CARD_HOUR, "--quoted", "2026-11-01").code == 0
    # offer 2: 10 a card-hour, quoted on 2026-12-02, after 2026-11-15
    later = [*CARD_HOUR[:-4], "--price", "10", "--region", "cn-beijing"]
    assert cli("offer", "add", *later, "--quoted", "2026-12-02").code == 0
    doc = json.loads(cli(*JOB, "--on", "2026-11-15", "--json").out)
    # 8 x 720 = 5,760 card-hours x 15.8 = 91,008.00; offer 2 did not exist yet
    assert [(o["option"], o["cost"]) for o in doc["options"]] == [("offer 1", "91008.00")]
    # on the day it was quoted it counts: 5,760 x 10 = 57,600.00, the cheapest
    then = json.loads(cli(*JOB, "--on", "2026-12-02", "--json").out)
    assert [(o["option"], o["cost"]) for o in then["options"]] == [
        ("offer 2", "57600.00"), ("offer 1", "91008.00")]  # fmt: skip
    listed = cli("offer", "list", "--on", "2026-11-15")
    assert len(listed.out.splitlines()) == 2, listed.out  # the header and offer 1
    every = cli("offer", "list", "--all", "--on", "2026-11-15").out
    assert "- (quoted later)" in every and "(expired)" not in every, every


def test_a_break_even_past_a_month_s_hours_is_none(cli: Cli) -> None:
    monthly = ("--provider", "IDC", "--channel", "colo", "--gpu-model", "H800", "--gpus", "8",
               "--billing", "monthly", "--region", "cn-beijing", "--quoted", "2026-11-01")  # fmt: skip
    hourly = ("--provider", "Cloud", "--channel", "cloud", "--gpu-model", "H800", "--gpus", "8",
              "--billing", "hourly", "--region", "cn-beijing", "--quoted", "2026-11-01")  # fmt: skip
    assert cli("offer", "add", *monthly, "--price", "80000").code == 0  # offer 1
    assert cli("offer", "add", *hourly, "--price", "72").code == 0  # offer 2
    assert cli("offer", "add", *hourly, "--price", "130").code == 0  # offer 3
    doc = json.loads(cli(*JOB, "--on", "2026-11-15", "--json").out)
    evens = {(b["monthly"], b["hourly"]): (b["hours_a_month"], b["reason"])
             for b in doc["break_even"]}  # fmt: skip
    why = "offer 2 costs less even at every hour of a month (720 h: a quote's month is 30 days)"
    # 80,000 / 72 = 1,111.11 h: more than the 720 h of a quote's month, so none
    assert evens[("offer 1", "offer 2")] == (None, why)
    # 80,000 / 130 = 615.38 h: within the month
    assert evens[("offer 1", "offer 3")] == ("615.38", None)
    text = cli(*JOB, "--on", "2026-11-15").out
    assert f"against offer 2 (CNY 72.00 an hour for 8 cards): {why}" in text, text
    assert "1,111.11" not in text
    assert "against offer 3 (CNY 130.00 an hour for 8 cards): 615.38 h" in text


def test_a_break_even_of_exactly_a_month_is_shown(cli: Cli) -> None:
    base = ("--channel", "cloud", "--gpu-model", "H800", "--gpus", "8", "--region", "x",
            "--quoted", "2026-11-01")  # fmt: skip
    assert cli("offer", "add", "--provider", "M", *base, "--billing", "monthly",
               "--price", "72000").code == 0  # fmt: skip
    assert cli("offer", "add", "--provider", "H", *base, "--billing", "hourly",
               "--price", "100").code == 0  # fmt: skip
    doc = json.loads(cli(*JOB, "--on", "2026-11-15", "--json").out)
    # 72,000 / 100 = 720 h: every hour of the month, not more: still a break-even
    assert [(b["hours_a_month"], b["reason"]) for b in doc["break_even"]] == [("720.00", None)]


def test_region_with_project_narrows_the_project_s_regions(
    cli: Cli, ledger_path: Path, tmp_path: Path
) -> None:
    config = tmp_path / "lab.toml"
    config.write_text('[projects.llm]\nregions = ["cn-beijing", "cn-shanghai"]\n')
    config.chmod(0o600)
    assert cli("offer", "add", *CARD_HOUR, "--quoted", "2026-11-01").code == 0  # Beijing
    shanghai = [*CARD_HOUR[:-1], "cn-shanghai", "--price", "16"]  # the last --price counts
    assert cli("offer", "add", *shanghai, "--quoted", "2026-11-01").code == 0
    on = ("--on", "2026-11-15", "--config", str(config))
    doc = json.loads(cli(*JOB, "--project", "llm", "--region", "cn-shanghai", *on,
                         "--json").out)  # fmt: skip
    assert doc["regions"] == ["cn-shanghai"]
    # only Shanghai allowed: offer 2, 5,760 x 16 = 92,160.00, is the cheapest though
    # Beijing's 91,008.00 costs less
    assert doc["cheapest"] == "offer 2"
    assert doc["options"][1]["note"] == (
        "not allowed for project llm, --region cn-shanghai (region cn-beijing)")  # fmt: skip
    before = _files(ledger_path)
    r = cli(*JOB, "--project", "llm", "--region", "us-west", *on)
    assert r.code == 2
    assert "--region: is not one of project llm's: cn-beijing, cn-shanghai" in r.err, r.err
    assert _files(ledger_path) == before
    helped = " ".join(cli("plan", "job", "--help").out.split())
    assert "allow only this data region; with --project it narrows the project's regions to" \
        " R, which must be one of them" in helped, helped  # fmt: skip
    readme = " ".join((Path(__file__).parents[2] / "README.md").read_text().split())
    assert "`--region R` alone allows only R, and with `--project` narrows the project's" \
        " regions to R, which must be one of them" in readme  # fmt: skip


def test_a_lease_already_rented_shows_its_terms_and_a_period_s_lease_is_never_cheapest(
    cli: Cli,
) -> None:
    assert cli("provider", "add", "P", "--kind", "colo", "--region", "cn-beijing").code == 0
    node = cli("node", "add", "h1", "--ssh", "root@10.0.0.9", "--gpus", "8", "--gpu-model",
               "H800", "--provider", "P")  # fmt: skip
    assert node.code == 0, node.err
    # a 12-month contract at 60,000 a month with a 72,000 deposit
    lease = cli("lease", "add", "h1", "--billing", "contract", "--price", "60000", "--start",
                "2026-06-01", "--end", "2027-06-01", "--deposit", "72000")  # fmt: skip
    assert lease.code == 0, lease.err
    assert cli("offer", "add", *CARD_HOUR, "--quoted", "2026-11-01").code == 0
    doc = json.loads(cli(*JOB, "--on", "2026-11-15", "--json").out)
    # the lease: 720 h is one month, 1 x 60,000 = 60,000.00, less than the offer's
    # 5,760 x 15.8 = 91,008.00, but more cards on it need a new contract: listed after,
    # never the cheapest; up front a month and the deposit, 60,000 + 72,000 = 132,000.00
    got = [(o["option"], o["cost"], o["deposit"], o["up_front"]) for o in doc["options"]]
    assert got == [("offer 1", "91008.00", None, "0.00"),
                   ("lease h1", "60000.00", "72000.00", "132000.00")]  # fmt: skip
    assert doc["cheapest"] == "offer 1" and doc["saves"] is None
    assert doc["options"][1]["note"] == (
        "already rented (its cards are in use: this prices more cards on the same terms),"
        " contract 2026-06-01 to 2027-06-01, deposit CNY 72,000.00; more cards need a new"
        " contract: never ranked first")  # fmt: skip
    text = cli(*JOB, "--on", "2026-11-15").out
    assert "cheapest: offer 1 (AutoDL card_hour) CNY 91,008.00, the only option allowed" in text
    assert "CNY 72,000.00" in text


def test_a_card_hour_price_says_its_unit_and_models_are_listed_as_typed(
    cli: Cli, ledger_path: Path
) -> None:
    assert cli("offer", "add", *CARD_HOUR, "--quoted", "2026-11-01").code == 0
    text = cli(*JOB, "--on", "2026-11-15").out
    assert "CNY 15.80 a card-hour" in text, text
    rtx = ("--provider", "Q", "--channel", "platform", "--billing", "card_hour", "--price", "2",
           "--quoted", "2026-11-01")  # fmt: skip
    assert cli("offer", "add", *rtx, "--gpu-model", "RTX 4090").code == 0
    assert cli("offer", "add", *rtx, "--gpu-model", "rtx4090 24GB").code == 0
    before = _files(ledger_path)
    r = cli("plan", "job", "--model", "A100", "--cards", "1", "--hours", "1", "--on",
            "2026-11-15")  # fmt: skip
    assert r.code == 2
    # sorted by the compared name (4090, H800), each as first typed
    assert "models: RTX 4090, h800" in r.err, r.err
    assert _files(ledger_path) == before
