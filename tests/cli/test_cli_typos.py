"""Mistyped flags and commands (issue 22): said in two lines with what was probably meant,
exit 2, nothing written; a prefix of a flag is never taken for the flag."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import Cli
from tui.cli.main import build_parser, main


def _short(err: str) -> list[str]:
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith("usage: "), err
    return lines


def test_a_mistyped_flag_says_what_was_meant(cli: Cli) -> None:
    assert cli("node", "add", "n1", "--ssh", "ssh root@h").code == 0
    r = cli("lease", "add", "n1", "--prise", "3", "--billing", "monthly")
    assert r.code == 2
    usage, said = _short(r.err)
    assert usage.startswith("usage: zuka lease add ")
    assert said == "zuka: error: unknown option --prise; did you mean --price?"
    # Said before the flags still missing (--price), and nothing was written.
    assert "required" not in r.err
    assert "n1" not in cli("lease", "list").out.split("\n", 1)[1]


def test_a_mistyped_flag_with_its_value_after_an_equals_sign(cli: Cli) -> None:
    r = cli("node", "list", "--al=1")
    assert r.code == 2 and "unknown option --al; did you mean --all?" in r.err


def test_a_flag_far_from_any_says_where_the_list_is(cli: Cli) -> None:
    r = cli("node", "list", "--zzzzzzzz")
    assert r.code == 2
    assert "unknown option --zzzzzzzz (`zuka node list --help` lists them)" in _short(r.err)[1]


def test_a_prefix_of_a_flag_is_not_the_flag(cli: Cli) -> None:
    assert cli("node", "add", "n1", "--ssh", "ssh root@h").code == 0
    r = cli("lease", "add", "n1", "--pric", "3", "--billing", "hourly")
    assert r.code == 2 and "unknown option --pric; did you mean --price?" in r.err
    assert cli("lease", "list", "--json").out.strip() == "[]"


def test_a_flag_before_the_command_and_on_a_command_with_actions(cli: Cli) -> None:
    r = cli("--prise", "node", "list")
    assert r.code == 2 and "unknown option --prise" in _short(r.err)[1]
    r = cli("alerts", "--alll")
    assert r.code == 2 and "unknown option --alll; did you mean --all?" in r.err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("lease", "ad", "n1"), "unknown command 'ad'; did you mean 'add'?"),
        (("nod", "list"), "unknown command 'nod'; did you mean 'node'?"),
        (("report", "--month", "2026-01", "--format", "mdd"), "did you mean 'md'?"),
    ],
)
def test_a_mistyped_command_or_choice_says_what_was_meant(
    cli: Cli, args: tuple[str, ...], said: str
) -> None:
    r = cli(*args)
    assert r.code == 2
    assert said in _short(r.err)[1]


def test_a_missing_flag_shows_the_short_usage(cli: Cli) -> None:
    r = cli("lease", "add", "n1")
    assert r.code == 2
    usage, said = _short(r.err)
    assert usage == "usage: zuka lease add [options] --billing BILLING --price PRICE node"
    assert "required: --billing, --price" in said


def test_a_value_after_the_separator_is_not_an_option(
    ledger_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["node", "add", "n1", "--ssh", "ssh root@h", "--ledger", str(ledger_path)]) == 0
    code = main(["node", "show", "--ledger", str(ledger_path), "--", "--prise"])
    err = capsys.readouterr().err
    assert code == 2 and "unknown option" not in err and "--prise" in err


def test_a_negative_number_is_a_value(cli: Cli) -> None:
    r = cli("node", "list", "-5")
    assert r.code == 2 and "unknown option" not in r.err and "unrecognized arguments: -5" in r.err


def _parsers(p: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def test_no_parser_takes_prefixes() -> None:
    every = list(_parsers(build_parser()))
    assert len(every) > 60
    assert [p.prog for p in every if p.allow_abbrev] == []


def test_provider_list_shows_the_account_alias_and_id(cli: Cli) -> None:
    added = cli("provider", "add", "ali", "--kind", "cloud", "--account-id", "1234567890123456",
                "--account-alias", "lab-main")  # fmt: skip
    assert added.code == 0, added.err
    head, row = cli("provider", "list").out.splitlines()
    assert "ACCOUNT ID" in head
    assert "lab-main" in row and "1234567890123456" in row
    doc = json.loads(cli("provider", "list", "--json").out)[0]
    assert (doc["account_alias"], doc["account_id"]) == ("lab-main", "1234567890123456")


def test_a_command_passing_its_words_on_is_not_checked_for_options() -> None:
    from tui.cli.parsing import Parser

    p = Parser(prog="zuka x")
    p.add_argument("node")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(["n1", "ls", "-la", "--color=never"])
    assert args.command == ["ls", "-la", "--color=never"]
