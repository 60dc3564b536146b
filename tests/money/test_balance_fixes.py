"""Prepaid balances (review findings on issue 20): a reading says what zuka had worked out
and the gap; a run-out that falls on a prepaid charge the balance cannot pay stops that
lease's node too, named with the charge. Every figure by hand."""

from __future__ import annotations

from tests.support.cli import Cli
from tests.support.cli import json_of as _json
from tests.support.cli import ok as _ok


def _autodl(z: Cli) -> None:
    _ok(z, "provider", "topup", "P", "--amount", "5000", "--at", "2026-08-01T09:00")
    _ok(z, "lease", "add", "n", "--billing", "card_hour", "--price", "1.98", "--cards", "8",
        "--start", "2026-08-01T10:00")  # fmt: skip


def test_a_reading_says_what_zuka_had_worked_out_and_the_gap(z: Cli) -> None:
    _autodl(z)
    # by 08-02 10:00: 24 h x 8 x 1.98 = 380.16 charged; 5,000 - 380.16 = 4,619.84 worked out
    # the console says 4,607.32: 4,619.84 - 4,607.32 = 12.52 less
    out = _ok(z, "provider", "balance", "P", "--set", "4607.32", "--at", "2026-08-02T10:00")
    assert "zuka had worked out CNY 4,619.84: the console shows CNY 12.52 less" in out
    # an hour later (15.84 more charged: 4,607.32 - 15.84 = 4,591.48 worked out from the
    # reading), the console says 4,600: 8.52 more
    doc = _json(z, "provider", "balance", "P", "--set", "4600", "--at", "2026-08-02T11:00")
    assert (doc["worked_out"], doc["gap"]) == ("4591.48", "8.52")
    out = _ok(z, "provider", "balance", "P", "--set", "4584.16", "--at", "2026-08-02T12:00")
    # 4,600 - 15.84 = 4,584.16: the same
    assert "zuka had worked out CNY 4,584.16: the console shows the same" in out


def test_a_first_reading_has_nothing_to_compare(z: Cli) -> None:
    r = z("provider", "balance", "P", "--set", "100", "--at", "2026-08-02T09:00")
    assert r.code == 0 and "zuka had no balance to compare (no top-up nor reading" in r.out
    doc = _json(z, "provider", "balance", "P", "--set", "100", "--at", "2026-08-02T10:00")
    assert (doc["worked_out"], doc["gap"]) == ("100.00", "0.00")
    _ok(z, "provider", "add", "Q", "--kind", "platform")
    doc = _json(z, "provider", "balance", "Q", "--set", "7", "--at", "2026-08-02T10:00")
    assert (doc["worked_out"], doc["gap"]) == (None, None)
    out = _ok(z, "provider", "balance", "P", "--set", "90", "--at", "2026-08-03T10:00")
    # nothing charged at P: 100 worked out; 90 is 10 less
    assert "zuka had worked out CNY 100.00: the console shows CNY 10.00 less" in out


def _renews_on_the_15th(z: Cli, topup: str) -> None:
    _ok(z, "node", "add", "m", "--ssh", "root@10.0.0.8", "--gpus", "8", "--provider", "P")
    _ok(z, "lease", "add", "m", "--billing", "monthly", "--price", "3000", "--start",
        "2026-07-15", "--end", "2026-08-15", "--auto-renew")  # fmt: skip
    _ok(z, "provider", "topup", "P", "--amount", topup, "--at", "2026-08-01T09:00")
    _ok(z, "lease", "add", "n", "--billing", "card_hour", "--price", "1.98", "--cards", "8",
        "--start", "2026-08-01T10:00")  # fmt: skip


def test_a_renewal_the_balance_cannot_pay_stops_its_node_too(z: Cli) -> None:
    # n burns 1.98 x 8 x 24 = 380.16/day. Top-up 6,163.84: at 08-02 10:00, 6,163.84 -
    # 380.16 = 5,783.68 left; by m's renewal on 08-15 00:00 (12 d 14 h = 12.58333 days)
    # 380.16 x 12.58333 = 4,783.68 more is burnt: 1,000 left, short of the 3,000 renewal.
    # It runs out on the renewal, at 00:00, the second it is charged; m is not renewed,
    # and the 1,000 left stays: n runs on on it (1,000 / 380.16 = 2.63 days more).
    _renews_on_the_15th(z, "6163.84")
    doc = _json(z, "provider", "balance", "P", "--at", "2026-08-02T10:00")
    assert doc["runs_out"] == "2026-08-15 00:00"
    assert doc["stops_then"] == ["m"]
    assert doc["cannot_pay"] == [{"node": "m", "what": "renewal", "amount": "3000.00"}]
    assert doc["coming_charges"] == []  # the renewal is not one it pays
    text = _ok(z, "provider", "balance", "P", "--at", "2026-08-02T10:00")
    assert "then stops: m's renewal of CNY 3,000.00 cannot be paid" in text
    assert "coming before then" not in text


def test_a_renewal_the_balance_pays_stops_nothing_more(z: Cli) -> None:
    # 9,000: the renewal is paid (14.78 days, the case in test_invoices_balances); only n
    _renews_on_the_15th(z, "9000")
    doc = _json(z, "provider", "balance", "P", "--at", "2026-08-02T10:00")
    assert doc["stops_then"] == ["n"] and doc["cannot_pay"] == []
    assert "then stops: n\n" in _ok(z, "provider", "balance", "P", "--at", "2026-08-02T10:00")


def test_an_instalment_the_balance_cannot_pay_is_named(z: Cli) -> None:
    # m: 12 months at 3,000 paid monthly from 07-15: an instalment of 3,000 on 08-15 00:00;
    # the same 6,163.84 leaves 1,000 for it at 08-15 00:00
    _ok(z, "node", "add", "m", "--ssh", "root@10.0.0.8", "--gpus", "8", "--provider", "P")
    _ok(z, "lease", "add", "m", "--billing", "monthly", "--price", "3000", "--start",
        "2026-07-15", "--end", "2027-07-15", "--payment-schedule", "monthly")  # fmt: skip
    _ok(z, "provider", "topup", "P", "--amount", "6163.84", "--at", "2026-08-01T09:00")
    _ok(z, "lease", "add", "n", "--billing", "card_hour", "--price", "1.98", "--cards", "8",
        "--start", "2026-08-01T10:00")  # fmt: skip
    text = _ok(z, "provider", "balance", "P", "--at", "2026-08-02T10:00")
    assert "then stops: m's instalment of CNY 3,000.00 cannot be paid" in text


def test_a_balance_that_lasts_beyond_the_runway_says_so_and_never_overflows(z: Cli) -> None:
    """A ¥5,000,000 top-up burnt at ¥0.05 an hour (¥1.20 a day) lasts 4.17 million days: the
    run-out was once a date out of range (OverflowError); it is looked for within 400 days."""
    for typed in (
        ("lease", "add", "n", "--billing", "hourly", "--price", "0.05", "--start", "2026-08-01"),
        ("provider", "topup", "P", "--amount", "5000000", "--at", "2026-08-01T00:00"),
    ):
        r = z(*typed)
        assert r.code == 0, r.err
    r = z("provider", "balance", "P", "--at", "2026-08-02T00:00")
    assert r.code == 0, r.err
    # 24 h x 0.05 = 1.20 burnt: 4,999,998.80 left
    assert "balance CNY 4,999,998.80" in r.out and "burn CNY 1.20/day" in r.out
    assert "lasts beyond 400 days" in r.out
    assert z("provider", "list").code == 0


def test_a_recorded_renewal_the_balance_cannot_pay_is_a_renewal(z: Cli) -> None:
    """`lease renew` (a lease of the chain from the end of the one before) is a renewal too;
    the 1,000 left when it fails runs n on."""
    _ok(z, "node", "add", "m", "--ssh", "root@10.0.0.8", "--gpus", "8", "--provider", "P")
    _ok(z, "lease", "add", "m", "--billing", "monthly", "--price", "3000", "--start",
        "2026-07-15", "--end", "2026-08-15")  # fmt: skip
    _ok(z, "lease", "renew", "m", "--until", "2026-09-15")
    _ok(z, "provider", "topup", "P", "--amount", "6163.84", "--at", "2026-08-01T09:00")
    _ok(z, "lease", "add", "n", "--billing", "card_hour", "--price", "1.98", "--cards", "8",
        "--start", "2026-08-01T10:00")  # fmt: skip
    doc = _json(z, "provider", "balance", "P", "--at", "2026-08-02T10:00")
    # as the auto-renewal above: 1,000 left on 08-15 00:00, short of the 3,000
    assert doc["runs_out"] == "2026-08-15 00:00" and doc["stops_then"] == ["m"]
    assert doc["cannot_pay"] == [{"node": "m", "what": "renewal", "amount": "3000.00"}]
