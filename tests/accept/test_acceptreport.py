"""The return window in a run's words: judged on the day the run finished, in the lease's
billing time zone (worked out by hand: 2026-12-09 15:59 UTC is 23:59 in Shanghai, still the
9th; 16:00 UTC is already the 10th)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from leases.app.acceptance import Stored
from leases.app.acceptreport import report_md, returnable_words
from leases.core.acceptance import Level, Status, Verdict


def _stored(finished: datetime, until: date | None, provider: str = "AutoDL") -> Stored:
    verdict = Verdict("n1", Level.QUICK, finished, finished, (), ())
    return Stored(
        1, "n1", datetime(2026, 12, 2, tzinfo=UTC), "Asia/Shanghai", provider, verdict,
        Status.FAILED, until, until is not None,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("finished", "said"),
    [
        (datetime(2026, 12, 9, 15, 59, tzinfo=UTC), "returnable until 2026-12-09"),
        (
            datetime(2026, 12, 9, 16, 0, tzinfo=UTC),
            "the return window closed on 2026-12-09 (before this run, on 2026-12-10)",
        ),
    ],
)
def test_the_window_is_judged_on_the_runs_day(finished: datetime, said: str) -> None:
    assert returnable_words(_stored(finished, date(2026, 12, 9))) == said


def test_an_unknown_window_says_how_to_record_it() -> None:
    words = returnable_words(_stored(datetime(2026, 12, 3, tzinfo=UTC), None))
    assert words == "return window unknown (record it: zuka provider edit AutoDL --return-days N)"


def test_the_hint_quotes_a_provider_name_so_it_can_be_pasted() -> None:
    words = returnable_words(_stored(datetime(2026, 12, 3, tzinfo=UTC), None, "Matpool 矩池云"))
    assert "zuka provider edit 'Matpool 矩池云' --return-days N" in words


def test_the_report_names_the_time_zone_of_its_times() -> None:
    report = report_md(_stored(datetime(2026, 12, 3, 1, 2, tzinfo=UTC), None))
    assert "- checked: 2026-12-03 09:02 to 2026-12-03 09:02 (Asia/Shanghai; level quick" in report
