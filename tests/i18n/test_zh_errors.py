"""The refusals of the field parsers and the ledger in Chinese: the tests' own tables of
bad input (tests/core, tests/ledger) run again under zh_CN, each message Chinese with no
English left in it beyond the value typed and the field's name; a few end to end through
the command line (exit 2, the field named, nothing written); and every refusal still
English, word for word, under English."""

from __future__ import annotations

import errno
import re
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from leases.core import errors, fields
from leases.core.errors import InputError, LedgerError
from leases.core.i18n import EN, ZH, using
from leases.core.promsource import check_url, parse_matchers, quote
from leases.core.tokenfile import read_token
from leases.ledger import records, wording
from leases.ledger.store import Ledger
from tests.core import test_promsource, test_tokenfile, test_typed_dates
from tests.core.test_typed_amounts import TABLE as AMOUNTS
from tests.support.cli import Cli
from tests.support.english import stray_english

CJK = re.compile(r"[\u4e00-\u9fff]")
# Words typed as they are in either language: option values people type (`--billing
# monthly`, yes/no), record keys and identifiers a message names (proposed for WORDS).
TYPED = ["yes", "no", "ssh", "prometheus", "upfront", "bearer", "hex", "schema", "chmod", "shell"]
# Python's own words about a regular expression or a URL, quoted in a refusal.
LIBRARY = ["unterminated", "character", "set", "position", "Port", "out", "range", "name"]


def _table(test: Callable[..., Any]) -> list[tuple[Any, ...]]:
    """The rows of a test's parametrize table, as written in its module."""
    (mark,) = [m for m in test.pytestmark if m.name == "parametrize"]  # type: ignore[attr-defined]
    return [tuple(row) if isinstance(row, tuple) else (row,) for row in mark.args[1]]


def refusal(check: Callable[..., Any], *args: Any) -> InputError:
    with pytest.raises(InputError) as caught:
        check(*args)
    return caught.value


def assert_chinese(text: str, data: Iterable[str] = (), extra: Iterable[str] = ()) -> None:
    assert CJK.search(text), text
    # The longest first: a field's name inside the value typed would cut the value.
    values = sorted({d for d in data if d}, key=len, reverse=True)
    assert stray_english(text, data=values, extra=[*TYPED, *extra]) == [], text


def zh(check: Callable[..., Any], *args: Any, data: Iterable[str] = ()) -> InputError:
    """check(*args)'s refusal under zh_CN, its whole message checked as Chinese."""
    with using(ZH):
        exc = refusal(check, *args)
        assert_chinese(str(exc), data=[exc.field, str(exc.value), *data])
        assert_chinese(errors.said(exc), data=[exc.field, str(exc.value), *data])
    return exc


# -- the core parsers' tables -------------------------------------------------------------


@pytest.mark.parametrize("typed", [t for t, read in AMOUNTS if read is None])
def test_amounts_refused_in_chinese(typed: str) -> None:
    exc = zh(fields.money, "price", typed)
    assert exc.field == "price"
    assert str(exc).startswith("price：")
    if typed == "1,98":
        assert "逗号只用于每三位分隔千位" in exc.reason


@pytest.mark.parametrize(
    ("typed", "words"), _table(test_typed_dates.test_nonsense_is_refused_naming_the_field)
)
def test_dates_refused_in_chinese(typed: str, words: str) -> None:
    for parse in (fields.day, fields.moment):
        exc = zh(parse, "start", typed)
        assert exc.field == "start"
    if typed == "2026-02-30":
        with using(ZH):
            assert "2026年2月只有 28 天" in refusal(fields.day, "start", typed).reason


def test_the_horizon_and_daylight_saving_in_chinese() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
    zh(fields.within_horizon, "end", "x", datetime(2031, 12, 3, tzinfo=UTC), now)
    exc = zh(
        fields.moment, "start", "2026-03-08 02:30", "America/New_York", data=["America/New_York"]
    )
    assert "夏令时" in exc.reason
    zh(fields.moment, "start", "2026-11-01 01:30", "America/New_York", data=["America/New_York"])


@pytest.mark.parametrize(
    ("check", "args"),
    [
        (fields.count, ("gpus", "eight")),
        (fields.count, ("gpus", "-1")),
        (fields.count, ("gpus", "999999")),
        (fields.currency, ("XYZ",)),
        (fields.timezone, ("Mars/Olympus",)),
        (fields.node_name, ("bad name",)),
        (fields.user_name, ("a b  c!",)),
        (fields.boolean, ("auto_renew", "maybe")),
        (fields.tags, ("ok, bad tag!",)),
        (fields.text, ("notes", "a\x07b")),
        (fields.text, ("notes", "x" * 2001)),
        (fields.money, ("deposit", "1.1234567")),
        (fields.money, ("deposit", "-5")),
        (fields.money, ("deposit", "1e13")),
        (fields.names_start, ("lease_start", " ", None, "UTC")),
    ],
)
def test_field_parsers_refuse_in_chinese(check: Callable[..., Any], args: tuple[Any, ...]) -> None:
    zh(check, *args, data=["Asia/Shanghai", "IANA"])


@pytest.mark.parametrize(
    ("text", "said"), _table(test_promsource.test_bad_matchers_are_refused_saying_what)
)
def test_bad_matchers_refused_in_chinese(text: str, said: str) -> None:
    # The matcher as typed and the example are data; the rest is Chinese.
    with using(ZH):
        exc = refusal(parse_matchers, text)
        data = [text, 'Hostname="gpu-07"', "Hostname", "gpu", "__name__", exc.field]
        assert_chinese(str(exc), data=data, extra=LIBRARY)


@pytest.mark.parametrize(
    ("text", "said"), _table(test_promsource.test_bad_urls_are_refused_saying_what)
)
def test_bad_urls_refused_in_chinese(text: str, said: str) -> None:
    with using(ZH):
        exc = refusal(check_url, text)
        assert_chinese(str(exc), data=[text, exc.field, str(exc.value)], extra=LIBRARY)


@pytest.mark.parametrize(
    ("pattern", "said"), _table(test_promsource.test_what_re2_refuses_is_refused)
)
def test_what_re2_refuses_in_chinese(pattern: str, said: str) -> None:
    text = f"Hostname=~{quote(pattern)}"
    with using(ZH):
        exc = refusal(parse_matchers, text)
        assert_chinese(str(exc), data=[text, exc.field], extra=["name"])


@pytest.mark.parametrize(
    ("text", "said"), _table(test_tokenfile.test_what_is_not_one_token_is_refused)
)
def test_token_files_refused_in_chinese(tmp_path: Path, text: str, said: str) -> None:
    path = test_tokenfile.token_file(tmp_path, text)
    zh(read_token, path, "prom_token_file", "the Prometheus queries", data=[str(path)])


def test_an_open_token_file_says_who_in_chinese(tmp_path: Path) -> None:
    path = test_tokenfile.token_file(tmp_path, "tok\n", 0o640)
    exc = zh(read_token, path, "prom_token_file", "the Prometheus queries", data=[str(path)])
    assert "其属组" in exc.reason and "Prometheus 查询" in exc.reason


@pytest.mark.parametrize(
    "make",
    [
        lambda v: records.provider_from({"name": "P", "kind": "cloud", "region": v}),
        lambda v: records.lease_from({"node": "n", "billing_type": "hourly", "unit_price": 1,
                                      "start": "2026-01-01", "notes": v}),
        lambda v: records.resource_from({"kind": "disk", "native_id": v}, 1, "UTC"),
    ],
)  # fmt: skip
def test_key_text_refused_in_chinese_and_hidden(make: Callable[[str], Any]) -> None:
    with using(ZH):
        exc = refusal(make, "-----BEGIN EC PRIVATE KEY-----MHcCAQEE")
        assert "（已隐藏）" in str(exc) and "MHcCAQEE" not in str(exc)
        assert_chinese(str(exc), data=[exc.field])
    assert "(hidden)" in str(refusal(make, "-----BEGIN EC PRIVATE KEY-----MHcCAQEE"))


@pytest.mark.parametrize(
    ("kind", "bad"),
    [
        ("scratch_path", "/data/*"), ("scratch_path", "tmp"), ("snapshot", "s-1 s-2"),
        ("bucket", "B"), ("bucket_prefix", "bucket/../x"), ("disk", "d-1\nd-2"),
    ],
)  # fmt: skip
def test_resource_ids_refused_in_chinese(kind: str, bad: str) -> None:
    zh(records.resource_id, records.ResourceKind(kind), bad,
       data=[kind, "scratch_path", "bucket_prefix", "BUCKET/PREFIX/"])  # fmt: skip


def test_lease_rules_refused_in_chinese() -> None:
    base = {"node": "n", "billing_type": "monthly", "unit_price": "100", "start": "2026-11-01"}
    # The billing type is named as typed (`--billing monthly`).
    zh(records.lease_from, {**base, "end": "2026-10-01"}, data=["monthly"])
    zh(records.lease_from, {**base, "billing_type": "hourly", "payment_schedule": "monthly"},
       data=["payment_schedule", "hourly", "monthly"])  # fmt: skip
    zh(records.lease_from, {**base, "unit_price": "1.123"}, data=["monthly"])
    zh(records.lease_from, {**base, "deposit_refund": "refunded"}, data=["refunded", "monthly"])
    zh(records.lease_from, {k: v for k, v in base.items() if k != "unit_price"}, data=["monthly"])


# -- the ledger's words -------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [errno.ENAMETOOLONG, errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EISDIR, errno.ENOTDIR,
     errno.ENOENT],
)  # fmt: skip
def test_os_problems_in_chinese(code: int) -> None:
    with using(ZH):
        assert_chinese(errors.os_problem(OSError(code, "x")), extra=["lsattr"])
        said = errors.ledger_failure("/nowhere/l.db", OSError(code, "x"))
        assert_chinese(str(said), extra=["lsattr"])


@pytest.mark.parametrize("name", ["SQLITE_BUSY", "SQLITE_READONLY", "SQLITE_FULL", "SQLITE_CANTOPEN",
                                  "SQLITE_IOERR", "SQLITE_CORRUPT"])  # fmt: skip
def test_sqlite_problems_in_chinese(name: str) -> None:
    exc = sqlite3.OperationalError("x")
    exc.sqlite_errorname = name  # type: ignore[attr-defined]
    with using(ZH):
        assert_chinese(errors.sqlite_problem(exc), extra=["df"])
    assert not CJK.search(errors.sqlite_problem(exc))


def test_no_ledger_in_chinese() -> None:
    with using(ZH):
        assert_chinese(str(errors.no_ledger("/x/l.db")))
        assert_chinese(str(errors.no_ledger("/x/l.db", "[lab] ledger of /etc/zuka")))


def test_delete_counts_in_chinese() -> None:
    counts = {"leases": 2, "resources": 1, "gpu_minute": 3}
    assert wording.describe_counts(counts) == "2 leases, 1 resource, 3 gpu_minute rows"
    with using(ZH):
        said = wording.describe_counts(counts)
        assert "2 份租约" in said and "1 个资源" in said
        assert_chinese(said, data=["gpu_minute"])


def test_ledger_refusals_in_chinese() -> None:
    ledger = Ledger.open(None)
    ledger.add_node(records.node_from({"name": "n1", "ssh_host": "h"}))
    from leases.ledger import undo

    with using(ZH):
        for check, args in (
            (ledger.add_node, (records.node_from({"name": "n1", "ssh_host": "h"}),)),
            (ledger.node, ("n9",)),
            (undo.undo_last, (ledger,)),
        ):
            try:
                exc = refusal(check, *args)
            except pytest.fail.Exception:
                continue  # not a refusal here (a lookup returning None)
            assert_chinese(str(exc), data=[exc.field, str(exc.value)])


def test_a_file_that_is_not_a_ledger_in_chinese(tmp_path: Path) -> None:
    bad = tmp_path / "l.db"
    bad.write_bytes(b"not sqlite at all, just some bytes" * 10)
    with using(ZH), pytest.raises(LedgerError) as caught:
        Ledger.open(bad)
    assert_chinese(str(caught.value), data=[str(bad)])
    assert "SQLite" in str(caught.value)


# -- end to end ---------------------------------------------------------------------------

# The front end's own words around a refusal ("zuka: error:", "(got ...)") belong to
# leases/app/flags.py and tui/cli/main.py; the refusal's words are checked here.
# Nor is "(hidden)" said there in Chinese yet (flags.py builds its own "(got ...)").
FRONT = ["error", "got", "ledger", "hidden"]


def _node(cli: Cli) -> None:
    assert cli("node", "add", "n", "--ssh", "root@10.0.0.9", "--gpus", "8").code == 0


def _leases(path: Path) -> list[Any]:
    with Ledger.open(path, create=False) as ledger:
        return ledger.leases("n")


@pytest.mark.parametrize(
    ("args", "field", "words"),
    [
        (("--price", "1,2000"), "--price", "不是数字"),
        (("--price", "1,98"), "--price", "逗号只用于每三位分隔千位"),
        (("--price", "¥1000"), "--price", "不带货币符号"),
        (("--start", "2026-02-30"), "--start", "2026年2月只有 28 天"),
        (("--end", "2026-10-01"), "--end", "须晚于开始时间"),
        (("--currency", "XYZ"), "--currency", "未知币种"),
    ],
)
def test_lease_add_refused_in_chinese(
    cli: Cli, ledger_path: Path, args: tuple[str, ...], field: str, words: str
) -> None:
    _node(cli)
    given = {"--price": "1200", "--start": "2026-11-01", "--end": "2026-12-01"}
    given.update(dict(zip(args[::2], args[1::2], strict=True)))
    flat = [x for kv in given.items() for x in kv]
    r = cli("lease", "add", "n", "--billing", "monthly", *flat, "--lang", "zh_CN")
    assert r.code == 2, r.err
    assert field in r.err and words in r.err, r.err
    assert_chinese(r.err, data=[*given.values(), "unit_price"], extra=FRONT)
    assert _leases(ledger_path) == []


def test_a_secret_refused_in_chinese_never_repeated(cli: Cli, ledger_path: Path) -> None:
    r = cli("node", "add", "s1", "--ssh", "ssh h", "--notes", "root password: Pa55word9",
            "--lang", "zh_CN")  # fmt: skip
    assert r.code == 2 and "Pa55word9" not in r.err
    assert "看起来是密码" in r.err, r.err
    assert_chinese(r.err, extra=FRONT)


def test_a_ledger_that_is_a_directory_in_chinese(cli: Cli, tmp_path: Path) -> None:
    r = cli("node", "list", "--lang", "zh_CN", ledger=tmp_path)
    assert r.code == 1
    assert "是目录，不是 zuka 台账" in r.err
    assert_chinese(r.err, data=[str(tmp_path)], extra=FRONT)


def test_refusals_stay_english_under_english(cli: Cli, ledger_path: Path) -> None:
    _node(cli)
    r = cli("lease", "add", "n", "--billing", "monthly", "--price", "1,98", "--start",
            "2026-11-01", "--end", "2026-12-01", "--lang", "en")  # fmt: skip
    assert r.code == 2 and "a comma only groups thousands in threes" in r.err
    assert not CJK.search(r.err)
    with using(EN):
        assert str(refusal(fields.day, "start", "2026-02-30")) == (
            "start: has day 30: February 2026 has 28 days (got '2026-02-30')"
        )


def test_json_refusals_do_not_change_with_the_language(cli: Cli) -> None:
    _node(cli)
    args = ("lease", "add", "n", "--billing", "monthly", "--price", "1,98", "--start",
            "2026-11-01", "--end", "2026-12-01", "--json")  # fmt: skip
    en, zh_ = cli(*args, "--lang", "en"), cli(*args, "--lang", "zh_CN")
    assert (en.code, en.out, en.err) == (zh_.code, zh_.out, zh_.err)
    listed = [cli("node", "list", "--json", "--lang", lang).out for lang in ("en", "zh_CN")]
    assert listed[0] == listed[1]


def test_a_row_changed_outside_zuka_is_refused_in_chinese(cli: Cli, ledger_path: Path) -> None:
    """A price written over with sqlite3: the refusal names the row, in Chinese."""
    _node(cli)
    r = cli("lease", "add", "n", "--billing", "monthly", "--price", "30000", "--start",
            "2026-08-01", "--end", "2026-09-01")  # fmt: skip
    assert r.code == 0, r.err
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE leases SET unit_price = '3000'")
    from leases.ledger import rowaudit

    with Ledger.open(ledger_path, create=False) as ledger, using(ZH):
        exc = refusal(rowaudit.refuse, rowaudit.drifted(ledger), "the export")
        said = str(exc)
        assert "1 行在 zuka 之外被改动，导出会依据无人记录的值" in said, said
        assert "在审计日志中为" in said
        assert_chinese(said, data=["unit_price", "'n'"], extra=["ledger"])
        assert "节点 'n' 的租约 1" in said
    with Ledger.open(ledger_path, create=False) as ledger:
        assert "1 row changed outside zuka, so the export" in str(
            refusal(rowaudit.refuse, rowaudit.drifted(ledger), "the export")
        )


def test_a_broken_audit_chain_is_said_in_chinese(cli: Cli, ledger_path: Path) -> None:
    _node(cli)
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("DROP TRIGGER audit_chain_only")
    with Ledger.open(ledger_path, create=False) as ledger, using(ZH):
        report = ledger.verify_audit()
        assert not report.ok
        assert_chinese(report.reason, data=["audit_chain_only"])
