"""What the command line says, tried as a new user would (issue 22): every config problem
in one run, plan figures a reader can act on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import Cli


def test_config_check_names_the_keys_errors_with_the_others_in_one_run(
    tmp_path: Path, cli: Cli
) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[alerts]\nidle_minutez = 3\n[keys]\nalerts-bak = "b"\n', encoding="utf-8")
    r = cli("config", "check", "--config", str(path))
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 2, r.err
    assert "alerts.idle_minutez: unknown key" in lines[0]
    assert "keys.alerts-bak: no binding has this id (did you mean alerts-back?)" in lines[1]
    assert f"{path}: keys.alerts-bak" in lines[1]  # named by its file, as [alerts]' are


def test_buying_pays_back_by_hand() -> None:
    from decimal import Decimal as D

    from leases.money import plan

    # 8 cards at 80,000 over 4 years, busy 50 %: 2,920 busy card-hours a month, power
    # 2,920 x 0.7 kW x 0.8 = 1,635.20, hosting 6,000; renting at 20 a busy card-hour 58,400.
    r = plan.buy_vs_rent(card_price=D(80000), life_years=D(4), power_w=D(700), kwh=D("0.8"),
                         hosting_month=D(6000), cards=8, utilisation=D("0.5"),
                         renting_per_busy_hour=D(20))  # fmt: skip
    assert r.power_month == D("1635.2") and r.renting_month == D(58400)
    # 640,000 / (58,400 - 1,635.20 - 6,000) = 12.6 months
    months = plan.payback_months(r, D(640000))
    assert months is not None and round(months, 1) == D("12.6")
    cheap = plan.buy_vs_rent(card_price=D(80000), life_years=D(4), power_w=D(700), kwh=D("0.8"),
                             hosting_month=D(6000), cards=8, utilisation=D("0.5"),
                             renting_per_busy_hour=D(2))  # fmt: skip
    assert plan.payback_months(cheap, D(640000)) is None  # 5,840 < running costs 7,635.20


def test_a_pasted_password_line_is_said_dropped_never_shown(cli: Cli) -> None:
    r = cli("node", "add", "p1", "--ssh", "登录指令：ssh -p 6666 root@gw\n密码：Pa55word9")
    assert r.code == 0, r.err
    assert "dropped the password line of the pasted login: zuka never stores a password" in r.err
    assert "Pa55word9" not in r.err + r.out
    r = cli("node", "edit", "p1", "--ssh", "ssh -p 7 root@gw password: Pa55word9", "--json")
    assert r.code == 0, r.err
    assert "dropped the password after the command" in r.err and "Pa55word9" not in r.err
    assert json.loads(r.out)["ssh_port"] == 7  # --json stays JSON: the note is on stderr
    quiet = cli("node", "add", "p2", "--ssh", "ssh -p 6666 root@gw")
    assert quiet.code == 0 and "dropped" not in quiet.err


def test_sshpass_says_what_to_give_instead_never_the_password(cli: Cli) -> None:
    r = cli("node", "add", "p1", "--ssh", "sshpass -p Pa55word9 ssh root@h -p 2222")
    assert r.code == 2
    assert "give the ssh command alone (without sshpass and its password)" in r.err
    assert "Pa55word9" not in r.err
    assert cli("node", "list", "--json").out.strip() in ("", "[]")


def test_zone_words_by_hand() -> None:
    from datetime import UTC, datetime

    from tui.words import clock, day, zone_header

    at = datetime(2026, 12, 2, 19, 30, 5, tzinfo=UTC)
    assert zone_header("Asia/Shanghai", at) == "times in CST (UTC+8)"
    assert zone_header("Asia/Kolkata", at) == "times in IST (UTC+5:30)"
    assert zone_header("America/New_York", at) == "times in EST (UTC-5)"
    assert clock(at, "Asia/Shanghai") == "2026-12-03 03:30"
    assert clock(at, "Asia/Shanghai", seconds=True) == "2026-12-03 03:30:05"
    assert day(at, "Asia/Shanghai") == "2026-12-03 03:30 CST"


def test_log_prints_the_labs_zone_once_and_json_keeps_the_offset(cli: Cli, tmp_path: Path) -> None:
    from datetime import datetime

    assert cli("node", "add", "n1", "--ssh", "ssh root@h").code == 0
    doc = json.loads(cli("log", "--json").out)[0]
    at = datetime.fromisoformat(doc["at"])
    assert at.utcoffset() is not None
    zone, head, row = cli("log").out.splitlines()[:3]
    assert zone == "times in CST (UTC+8)" and head.split()[:2] == ["ID", "WHEN"]
    from tui.words import clock

    assert clock(at, "Asia/Shanghai", seconds=True) in row  # not this machine's zone
    config = tmp_path / "config.toml"
    config.write_text('[billing]\ntz = "Europe/Berlin"\n', encoding="utf-8")
    berlin = cli("log", "--config", str(config)).out.splitlines()
    assert berlin[0] in ("times in CET (UTC+1)", "times in CEST (UTC+2)")
    assert clock(at, "Europe/Berlin", seconds=True) in berlin[2]


def test_the_hybrid_threshold_in_words() -> None:
    from decimal import Decimal

    from tui.cli.money import _threshold_line

    assert _threshold_line(Decimal("0.411")) == (
        "A card rented monthly pays for itself when it is busy in more than 41 % of the"
        " hours; below that, rent it by the hour."
    )
    assert _threshold_line(Decimal("1.855")).startswith(
        "A card a month costs 1.9x a card by the hour around the clock: renting it monthly"
        " never pays here"
    )


@pytest.mark.parametrize(
    "pasted",
    ["ssh -p 22 root@h.example.com 密码 SECRET7", "ssh root@h.example.com password SECRET10"],
)
def test_words_after_the_login_are_refused_never_shown(cli: Cli, pasted: str) -> None:
    """A password pasted on the login's line without a colon reads as a remote command: the
    refusal shows the login part only (a review found it echoed whole)."""
    r = cli("node", "add", "m3", "--ssh", pasted)
    assert r.code == 2
    assert "has words after the login" in r.err and "root@h.example.com" in r.err
    assert "SECRET" not in r.err + r.out
    assert cli("node", "list", "--json").out.strip() in ("", "[]")
