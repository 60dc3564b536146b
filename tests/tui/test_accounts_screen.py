"""The accounts screen (`$` on the fleet): this month's prepaid balance, the deposit still
out, the invoiced and uninvoiced charges, the last complete month's bill and the offers
still valid, on a ledger typed with the real CLI; every figure worked out by hand below.
A row changed outside zuka shows the refusal, not figures."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from textual.widgets import Static

from leases.config.sections import Config
from tests.support.cli import Cli
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.screens.accounts import AccountsScreen

# 2026-09-10 12:00 in Asia/Shanghai (the default billing zone): this month is 2026-09,
# the last complete one 2026-08.
NOW = datetime(2026, 9, 10, 4, 0, tzinfo=UTC)


def _ok(z: Cli, *args: str) -> None:
    r = z(*args)
    assert r.code == 0, r.err


@pytest.fixture
def books(z: Cli, tmp_path: Path, ledger_path: Path) -> Path:
    # An hourly lease of n at ¥10 a machine-hour from 2026-08-01 00:00, running at NOW,
    # with a deposit of ¥5,000 paid 2026-07-30.
    _ok(z, "node", "edit", "n", "--instance-id", "i-n1")
    _ok(z, "lease", "add", "n", "--billing", "hourly", "--price", "10", "--start",
        "2026-08-01T00:00", "--deposit", "5000", "--deposit-paid-on", "2026-07-30")  # fmt: skip
    _ok(z, "lease", "refund", "n", "--amount", "2000", "--on", "2026-09-05")
    _ok(z, "provider", "topup", "P", "--amount", "5000", "--at", "2026-09-01T00:00")
    _ok(z, "invoice", "add", "--provider", "P", "--number", "0012", "--issued", "2026-09-05",
        "--period", "2026-09", "--amount", "1000", "--vat", "6%")  # fmt: skip
    config = tmp_path / "config.toml"
    config.write_text('[bills.colo]\nresource_id = "Res"\namount = "Cost"\nperiod = "Month"\n')
    bill = tmp_path / "aug.csv"
    bill.write_text("Month,Res,Cost\n2026-08,i-n1,7000\n2026-08,disk-x,50\n")
    _ok(z, "bill", "import", str(bill), "--provider", "P", "--format", "colo", "--config",
        str(config))  # fmt: skip
    for until in ("2026-12-31", "2026-09-05"):  # the second expired before NOW
        _ok(z, "offer", "add", "--provider", "Q", "--channel", "platform",
            "--gpu-model", "H800", "--gpus", "8",
            "--billing", "card_hour", "--price", "15.8", "--quoted", "2026-09-01",
            "--valid-until", until)  # fmt: skip
    # A month of a machine of 8 cards for ¥80,000, the model written another way.
    _ok(z, "offer", "add", "--provider", "R", "--channel", "colo", "--gpu-model", "H800 80GB",
        "--gpus", "8", "--billing", "monthly", "--price", "80000", "--quoted", "2026-09-01",
        "--valid-until", "2026-12-31")  # fmt: skip
    return ledger_path


def _app(path: Path) -> ZukaApp:
    return ZukaApp(path, clock=lambda: NOW, poll=False, refresh_s=3600, config=Config())


def _text(screen: AccountsScreen, key: str) -> str:
    return str(screen.query_one(f"#accounts-{key}", Static).render())


async def _open(app: ZukaApp, pilot: object) -> AccountsScreen:
    await pilot.press("dollar_sign")  # type: ignore[attr-defined]
    await wait_until(lambda: isinstance(app.screen, AccountsScreen), what="the accounts screen")
    screen = app.screen
    assert isinstance(screen, AccountsScreen)
    await wait_until(lambda: screen.view is not None or screen.problem, what="the first read")
    await pilot.pause()  # type: ignore[attr-defined]
    return screen


async def test_the_accounts_of_the_month(books: Path, z: Cli) -> None:
    app = _app(books)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(app, pilot)
        assert screen.problem == ""
        balance = _text(screen, "balances")
        # Charged since the top-up at 09-01 00:00 to NOW 09-10 12:00: 9.5 days = 228 h
        # x ¥10 = ¥2,280; balance 5,000 - 2,280 = ¥2,720.00.
        assert "P: balance CNY 2,720.00 at 2026-09-10 12:00" in balance
        # Burn ¥10 x 24 = ¥240.00 a day; 2,720 / 240 = 11.333 -> 11.33 days; 0.333 day
        # = 8 h after NOW: 2026-09-21 20:00, the second the charges reach the balance
        # (leases.money.balances.run_out); the node that stops: n.
        assert "burn CNY 240.00/day" in balance
        assert "11.33 days left: runs out 2026-09-21 20:00; then stops: n" in balance
        deposit = _text(screen, "deposits")
        # ¥5,000 paid, ¥2,000 back on 09-05: ¥3,000 outstanding.
        assert "P n (lease from 2026-08-01 00:00): deposit CNY 5,000.00, back so far CNY 2,000.00," \
               " outstanding CNY 3,000.00" in deposit  # fmt: skip
        invoicing = _text(screen, "invoicing")
        # Charged in 2026-09 to NOW: 228 h x ¥10 = ¥2,280; invoice 0012 covers the whole
        # month for ¥1,000 (tax included): uninvoiced 2,280 - 1,000 = ¥1,280.00.
        assert (
            "P: charged CNY 2,280.00, invoiced CNY 1,000.00, uninvoiced CNY 1,280.00" in invoicing
        )
        bill = _text(screen, "bill")
        # August: 31 days x 24 h x ¥10 = ¥7,440 in zuka; the bill says ¥7,000: -¥440.
        assert "bill 2026-08: 1 differ, 1 unmatched" in bill
        assert "P n: differs: bill CNY 7,000.00, zuka CNY 7,440.00, difference" in bill
        assert "440.00" in bill
        assert "unmatched: P disk-x" in bill and "CNY 50.00" in bill
        offers = screen.text()
        # Three offers, one expired on 09-05: two valid on 09-10.
        assert "Offers valid on 2026-09-10: 2" in offers
        listed = _text(screen, "offers")
        assert "Q 8x H800 card_hour CNY 15.80, valid until 2026-12-31" in listed
        assert "R 8x H800 80GB monthly CNY 80,000.00, valid until 2026-12-31" in listed
        assert "2026-09-05" not in listed
        # A card-hour at full use: Q ¥15.80; R 80,000 / (720 h x 8 cards) = 13.888... ->
        # ¥13.89: R is the cheapest H800 (one model, "H800 80GB" and "H800" alike).
        assert "cheapest H800 80GB: #3 R monthly, CNY 13.89 a card-hour at full use" in listed
        assert "cheapest H800:" not in listed
        # r reads again: another top-up of ¥1,000 shows (2,720 + 1,000 = ¥3,720.00).
        _ok(z, "provider", "topup", "P", "--amount", "1000", "--at", "2026-09-10T11:00")
        await pilot.press("r")
        await wait_until(lambda: "CNY 3,720.00" in _text(screen, "balances"), what="the reread")
        await pilot.press("escape")
        await wait_until(lambda: not isinstance(app.screen, AccountsScreen), what="escape")


async def test_a_row_edited_outside_zuka_shows_the_refusal_not_figures(books: Path) -> None:
    with sqlite3.connect(books) as conn:
        conn.execute("UPDATE balance_entries SET amount = '50000'")
    conn.close()
    app = _app(books)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(app, pilot)
        refused = _text(screen, "refused")
        assert "changed outside zuka, so the accounts would rest on values nobody recorded" \
            in refused  # fmt: skip
        assert "CNY " not in screen.text()  # no figure at all: neither 50,000 nor 2,720
        assert not screen.query("#accounts-balances")


async def test_an_empty_ledger_says_what_each_section_lacks(z: Cli, ledger_path: Path) -> None:
    app = _app(ledger_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(app, pilot)
        text = screen.text()
        for said in (
            "no prepaid balance recorded: zuka provider topup NAME --amount X",
            "no deposit outstanding",
            "no invoice recorded: zuka invoice add",
            "no bill imported for 2026-08: zuka bill import FILE --provider NAME",
            "no offer valid today: zuka offer add",
        ):
            assert said in text


async def test_the_palette_opens_the_accounts(z: Cli, ledger_path: Path) -> None:
    from textual.command import CommandList

    app = _app(ledger_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"accounts")
        hits = app.screen.query_one(CommandList)
        await wait_until(
            lambda: hits.option_count and "Accounts" in str(hits.get_option_at_index(0).prompt),
            what="the palette's hit",
        )
        await pilot.press("enter")
        await wait_until(lambda: isinstance(app.screen, AccountsScreen), what="the accounts")


def test_accounts_snapshot_at_80x24(snap_compare, books: Path) -> None:  # type: ignore[no-untyped-def]
    """Five sections in 80x24: the body scrolls, the title and footer stay."""

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _open(pilot.app, pilot)
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(_app(books), run_before=run_before, terminal_size=(80, 24))
