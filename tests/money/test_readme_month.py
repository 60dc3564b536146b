"""README's "A month, end to end", run as a new user would: every command of its block, as
written, on a new ledger, from the checkout (the bill it imports is in assets/bills/).
Then the figures the README works out by hand, read back from the commands' JSON."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.support.cli import Cli

ROOT = Path(__file__).resolve().parent.parent.parent
README = ROOT / "README.md"


def month_commands() -> list[list[str]]:
    """The commands of the README's section, as words, without `zuka`."""
    lines = README.read_text(encoding="utf-8").split("### A month, end to end", 1)[1]
    out: list[list[str]] = []
    for line in lines.splitlines():
        if line.startswith("### "):
            break
        if line.startswith("    zuka "):
            out.append(shlex.split(line.strip())[1:])
    return out


def test_the_readme_month_runs_and_its_figures_are_the_hand_worked_ones(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    commands = month_commands()
    assert len(commands) >= 15 and commands[-1][:1] == ["report"]
    for words in commands:
        r = cli(*words)
        # bill check exits 1: the bill holds a disk nobody recorded
        assert r.code == (1 if words[:2] == ["bill", "check"] else 0), (words, r.err)

    doc = json.loads(cli("report", "--month", "2026-11", "--json").out)
    # accrued 3,611.52 (228 h x 8 x 1.98) + 3,000 + 36,000; charged 3,611.52 + 3,000 + 0
    assert (doc["total"]["cost"], doc["total"]["charged_in_month"]) == ("42611.52", "6611.52")
    by_node = {r["node"]: r for r in doc["leases"]}
    assert by_node["colo-a800"]["charged_in_month"] == "0.00"  # its quarter: on 10-01
    assert doc["deposits"]["by_currency"]["CNY"]["outstanding"] == "72000.00"
    invoiced = {(c["provider"], c["node"]): c["uninvoiced"] for c in doc["invoicing"]}
    assert invoiced[("Aliyun", None)] == "0.00"
    assert invoiced[("AutoDL", None)] == "3611.52"
    # NJ-IDC: 8 cards x 720 h = 5,760 of 5,760 + 1,824 + 720 = 8,304: 69.4 %
    assert doc["provider_shares"][0] == {"provider": "NJ-IDC", "card_hours": "5760.00",
                                         "percent": "69.4", "single_channel_risk": True}  # fmt: skip

    balance = json.loads(
        cli("provider", "balance", "AutoDL", "--at", "2026-11-11T10:00", "--json").out
    )
    assert balance["balance"] == "1388.48"  # 5,000 - 3,611.52

    check = cli("bill", "check", "--month", "2026-11", "--json")
    found = json.loads(check.out)
    assert [(x["node"], x["state"]) for x in found["leases"]] == [("ali-a10", "agrees")]
    assert [(x["resource_id"], x["amount"]) for x in found["unmatched"]] == [
        ("d-bp1forgotten01", "120.00")
    ]

    [held] = json.loads(cli("lease", "refunds", "colo-a800", "--json").out)
    assert (held["state"], held["outstanding"]) == ("held", "72000.00")

    invoice = json.loads(cli("invoice", "list", "--json").out)[0]
    assert (invoice["tax"], invoice["net"]) == ("169.81", "2830.19")  # 3,000 x 0.06 / 1.06
