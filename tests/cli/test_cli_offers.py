"""`zuka offer add/list/edit/delete` (the price book) and `zuka plan job`, through the real
command line on a real ledger file: the book's rows audited and undone, and every mistake
a person makes refused by name with the ledger unchanged. The hand-worked quote figures
are in tests/money/test_money_scenarios.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import Cli

H800 = ("--provider", "AutoDL", "--channel", "platform", "--gpu-model", "h800", "--gpus", "8",
        "--billing", "card_hour", "--price", "15.8", "--region", "cn-beijing",
        "--quoted", "2026-11-01")  # fmt: skip


def _files(ledger_path: Path) -> tuple[bytes, bytes]:
    wal = ledger_path.with_name(ledger_path.name + "-wal")
    return ledger_path.read_bytes(), wal.read_bytes() if wal.exists() else b""


def test_an_offer_is_added_listed_edited_deleted_and_undone(cli: Cli) -> None:
    r = cli("offer", "add", *H800, "--valid-until", "2026-12-31", "--deposit", "80,000")
    assert r.code == 0, r.err
    assert r.out == "added offer 1: AutoDL 8x h800 card_hour CNY 15.80\n"
    expired = cli("offer", "add", *H800, "--valid-until", "2026-11-10", "--notes", "old")
    assert expired.code == 0, expired.err
    listed = cli("offer", "list", "--on", "2026-11-15")
    assert "15.80" in listed.out and "80,000.00" in listed.out
    assert len(listed.out.splitlines()) == 2  # the header and offer 1: offer 2 expired
    every = cli("offer", "list", "--all", "--on", "2026-11-15")
    assert "2026-11-10 (expired)" in every.out
    doc = json.loads(cli("offer", "list", "--all", "--on", "2026-11-15", "--json").out)
    assert [(o["id"], o["valid"], o["gpu_model"], o["deposit"]) for o in doc] == [
        (1, True, "h800", "80000"), (2, False, "h800", None)]  # fmt: skip
    edited = cli("offer", "edit", "1", "--price", "14.9")
    assert edited.code == 0 and "updated offer 1" in edited.out, edited.err
    same = cli("offer", "edit", "1", "--price", "14.9")
    assert "nothing changed" in same.out
    gone = cli("offer", "delete", "2")
    assert gone.code == 0 and "deleted offer 2" in gone.out
    assert cli("undo").code == 0
    back = json.loads(cli("offer", "list", "--all", "--on", "2026-11-15", "--json").out)
    assert [(o["id"], o["unit_price"]) for o in back] == [(1, "14.9"), (2, "15.8")]
    verified = cli("audit", "verify")
    assert verified.code == 0, verified.out + verified.err


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--price", "15,8"), "--price"),  # a decimal comma
        (("--price", "¥15.8"), "--price"),
        (("--price", "0"), "--price"),
        (("--valid-until", "2026-10-01"), "--valid-until"),  # before it was quoted
        (("--quoted", "2026-13-01"), "--quoted"),
        (("--gpus", "0"), "--gpus"),
        (("--min-term", "three"), "--min-term"),
        (("--deposit", "-5"), "--deposit"),
        (("--currency", "YEN"), "--currency"),
        (("--channel", "plattform"), "--channel"),  # a typo: argparse's choices
        (("--billing", "hourley"), "--billing"),
        (("--provider", "  "), "--provider"),
        (("--notes", "a\x1b[31m"), "--notes"),  # a terminal escape
    ],
)
def test_a_bad_offer_is_refused_by_name_and_changes_nothing(
    cli: Cli, ledger_path: Path, args: tuple[str, ...], named: str
) -> None:
    assert cli("offer", "add", *H800).code == 0
    before = _files(ledger_path)
    base = list(H800)
    for flag, value in zip(args[::2], args[1::2], strict=True):
        if flag in base:
            base[base.index(flag) + 1] = value
        else:
            base += [flag, value]
    r = cli("offer", "add", *base)
    assert r.code == 2
    assert named in r.err, r.err
    assert _files(ledger_path) == before
    edit = cli("offer", "edit", "1", *args)
    assert edit.code == 2 and named in edit.err, edit.err
    assert _files(ledger_path) == before


def test_the_wrong_offer_id_is_refused(cli: Cli, ledger_path: Path) -> None:
    assert cli("offer", "add", *H800).code == 0
    before = _files(ledger_path)
    for args in (("edit", "7", "--price", "3"), ("delete", "7"), ("delete", "x"),
                 ("edit", "1")):  # fmt: skip
        r = cli("offer", *args)
        assert r.code == 2, (args, r.err)
        assert "id" in r.err or "nothing to change" in r.err, r.err
    assert _files(ledger_path) == before


def _fleet(cli: Cli) -> None:
    assert cli("provider", "add", "P", "--kind", "platform", "--region", "cn-beijing").code == 0
    node = cli("node", "add", "h1", "--ssh", "root@10.0.0.9", "--gpus", "8", "--gpu-model",
               "NVIDIA H800 80GB HBM3", "--provider", "P")  # fmt: skip
    assert node.code == 0, node.err
    lease = cli("lease", "add", "h1", "--billing", "hourly", "--price", "120", "--start",
                "2026-08-01")  # fmt: skip
    assert lease.code == 0, lease.err


def test_plan_job_prices_what_the_lab_pays_now_beside_the_offers(cli: Cli) -> None:
    _fleet(cli)
    assert cli("offer", "add", *H800).code == 0
    r = cli("plan", "job", "--model", "H800-SXM5", "--cards", "8", "--hours", "720",
            "--on", "2026-11-15", "--json")  # fmt: skip
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    # the lease: 1 machine of 8 cards x 720 h x 120 = 86,400; the offer 5,760 x 15.8 =
    # 91,008: the lease is cheaper by 4,608
    got = [(o["option"], o["cost"]) for o in doc["options"]]
    assert got == [("lease h1", "86400.00"), ("offer 1", "91008.00")]
    assert (doc["cheapest"], doc["saves"]) == ("lease h1", "4608.00")
    # Before the lease began (2026-07-15) nothing prices the job: the offer was quoted
    # on 2026-11-01, after that day
    early = cli("plan", "job", "--model", "h800", "--cards", "8", "--hours", "720",
                "--on", "2026-07-15", "--json")  # fmt: skip
    assert early.code == 2
    assert "no offer for it was quoted by 2026-07-15 (the first on 2026-11-01)" in early.err


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--model", "A100", "--cards", "8", "--hours", "10"), "models: h800"),  # as typed
        (("--model", "H800", "--cards", "0", "--hours", "10"), "--cards"),
        (("--model", "H800", "--cards", "8", "--hours", "1,5"), "--hours"),
        (("--model", "H800", "--cards", "8", "--hours", "0"), "--hours"),
        (("--model", "H800", "--cards", "8", "--hours", "100", "--within", "4"),
         "--within: is shorter than the job: 100 hours need at least 5 days"),
        (("--model", "H800", "--cards", "8", "--hours", "10", "--project", "nope"),
         "--project"),
        (("--model", "H800", "--cards", "8", "--hours", "10", "--on", "2026-02-30"), "--on"),
        (("--model", "H800", "--cards", "8", "--hours", "10", "--on", "2027-03-01"),
         "every offer for it expired (the last on 2026-12-31)"),
    ],
)  # fmt: skip
def test_plan_job_refuses_what_it_cannot_price(
    cli: Cli, ledger_path: Path, args: tuple[str, ...], named: str
) -> None:
    assert cli("offer", "add", *H800, "--valid-until", "2026-12-31").code == 0
    before = _files(ledger_path)
    r = cli("plan", "job", *args, *(() if "--on" in args else ("--on", "2026-11-15")))
    assert r.code == 2
    assert named in r.err, r.err
    assert _files(ledger_path) == before


def test_a_project_regions_table_is_checked(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[projects.llm]\nregions = "cn-beijing"\nregion = ["x"]\n')
    bad.chmod(0o600)
    r = cli("config", "check", "--config", str(bad))
    assert r.code == 2
    assert "projects.llm.regions: must be a list" in r.err, r.err
    assert "projects.llm.region: unknown key; did you mean projects.llm.regions?" in r.err
