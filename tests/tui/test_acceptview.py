"""The acceptance screen's view model (tui.screens.acceptview), without Textual: rows as a
run goes, a finding's detail with its evidence, the node screen's summary, the report's
file name. Expected words worked out by hand."""

from __future__ import annotations

from datetime import UTC, date, datetime

from leases.app.acceptance import Stored
from leases.core.acceptance import CheckResult, Evidence, Level, Status, Verdict
from tui.screens import acceptview
from tui.screens.acceptview import Family

AT = datetime(2026, 11, 30, 16, 5, 7, tzinfo=UTC)  # 2026-12-01 00:05:07 in Shanghai
LEASE = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)


def finding(n: int, status: Status, words: str = "w", ev: tuple[str, ...] = ()) -> CheckResult:
    return CheckResult(f"fam.c{n}", f"check {n}", status, words, evidence=ev)


def stored(results: tuple[CheckResult, ...], evidence: tuple[Evidence, ...] = (),
           until: date | None = None) -> Stored:  # fmt: skip
    v = Verdict("n1", Level.STANDARD, AT, AT, results, evidence)
    return Stored(1, "n1", LEASE, "Asia/Shanghai", "P", v, v.status, until, until is not None)


def test_rows_show_the_family_at_work_and_each_finding() -> None:
    lines: list[acceptview.Line] = [
        Family("fam", "A family"),
        finding(1, Status.FAILED, "bad\x1b[31m [b]x[/b]"),
    ]
    assert acceptview.rows(lines, running="fam") == [
        ("running…", "▸ A family", ""),
        ("FAILED", "  check 1", "bad␛[31m [b]x[/b]"),
    ]
    assert acceptview.rows(lines)[0] == ("", "▸ A family", "")


def test_detail_gives_expected_found_and_each_command_as_it_came() -> None:
    r = CheckResult("fam.c1", "check 1", Status.FAILED, "words", expected="80 GB",
                    found="24 GB", evidence=("q", "gone", "dmesg"))  # fmt: skip
    evidence = (
        Evidence("q", "nvidia-smi -q", 0, "line 1\nline\x1b2\n", "", 2.25),
        Evidence("dmesg", "dmesg", None, "", "", 30.0, "no answer within 30 s"),
    )
    assert acceptview.detail_lines(r, evidence) == [
        "FAILED: check 1 (fam.c1)",
        "words",
        "expected: 80 GB",
        "found: 24 GB",
        "",
        "$ nvidia-smi -q",
        "exit 0, 2.2 s",  # 2.25 rounds half to even
        "stdout:",
        "line 1\nline␛2",
        "",
        "evidence gone: not kept",
        "",
        "$ dmesg",
        "did not run: no answer within 30 s",
    ]


def test_a_finding_without_commands_says_what_it_rests_on() -> None:
    lines = acceptview.detail_lines(finding(1, Status.PASSED), ())
    assert lines[-1].startswith("(no command's output")


def test_summary_lists_failed_before_warned_and_says_the_window() -> None:
    results = (
        finding(1, Status.WARNED, "warm"),
        finding(2, Status.PASSED),
        finding(3, Status.FAILED, "fake VRAM"),
        finding(4, Status.SKIPPED),
    )
    assert acceptview.summary_lines(stored(results, until=date(2026, 12, 5)), "Asia/Shanghai") == [
        "acceptance: FAILED · level standard · 2026-12-01 00:05:07 · 1 FAILED, 1 warned,"
        " 0 not checked, 1 passed, 1 skipped",
        "returnable until 2026-12-05",
        "  FAILED: check 3: fake VRAM",
        "  warned: check 1: warm",
    ]
    assert acceptview.summary_lines(None, "UTC") == []


def test_summary_lists_at_most_a_dozen_findings() -> None:
    results = tuple(finding(n, Status.WARNED) for n in range(15))
    lines = acceptview.summary_lines(stored(results), "UTC")
    assert len(lines) == 2 + 12 + 1
    assert lines[-1] == "  … and 3 more (zuka accept --report md)"
    assert lines[1].startswith("return window unknown")


def test_verdict_of_a_run_that_read_nothing_is_not_checked() -> None:
    s = stored((finding(1, Status.NOT_CHECKED), finding(2, Status.SKIPPED)))
    assert acceptview.verdict_lines(s)[0] == (
        "verdict: not checked · level standard · 0 FAILED, 0 warned, 1 not checked,"
        " 0 passed, 1 skipped"
    )


def test_the_report_name_is_a_plain_file_name() -> None:
    assert acceptview.report_name("gpu-01", AT) == "zuka-accept-gpu-01-20261130-160507.md"
    assert (
        acceptview.report_name("../../etc/x\x1b", AT) == "zuka-accept-_.._etc_x_-20261130-160507.md"
    )
    assert acceptview.report_name("...", AT) == "zuka-accept-node-20261130-160507.md"


def test_a_run_with_no_check_says_so() -> None:
    assert acceptview.verdict_lines(stored(()))[:2] == [
        "verdict: not checked · level standard · 0 FAILED, 0 warned, 0 not checked,"
        " 0 passed, 0 skipped",
        "no check ran at this level: nothing was read from the node",
    ]
