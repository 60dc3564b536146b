"""The fleet screen's `/` filter terms, parsed and matched (pure)."""

from __future__ import annotations

import pytest

from leases.core.errors import InputError
from leases.fleet.filter import RowFacts, matches, parse

A100 = RowFacts("a100-monthly-1", "platform", "AutoDL", "A100 80GB", ("train",), "机房 A",
                "ok", idle=True, ends_in_s=3 * 86400, alerts=0)  # fmt: skip
H800 = RowFacts("h800-monthly-2", "colo", "njidc", "H800", (), "", "timeout", busy=True,
                ends_in_s=20 * 86400, alerts=2)  # fmt: skip
HOURLY = RowFacts("aliyun-a10", "cloud", "aliyun", "A10", (), "", "ok", busy=True)


def kept(text: str) -> list[str]:
    f = parse(text)
    return [r.name for r in (A100, H800, HOURLY) if matches(f, r)]


def test_terms() -> None:
    assert kept("") == ["a100-monthly-1", "h800-monthly-2", "aliyun-a10"]
    assert kept("channel:platform") == ["a100-monthly-1"]
    assert kept("provider:ali") == ["aliyun-a10"]
    assert kept("state:timeout") == ["h800-monthly-2"]
    assert kept("model:h800") == ["h800-monthly-2"]
    assert kept("tag:train") == ["a100-monthly-1"]
    assert kept("idle") == ["a100-monthly-1"]
    assert kept("busy") == ["h800-monthly-2", "aliyun-a10"]
    assert kept("alert") == kept("alerts") == ["h800-monthly-2"]
    assert kept("ending:7d") == ["a100-monthly-1"]  # an open-ended lease never ends soon
    assert kept("ending:30d") == ["a100-monthly-1", "h800-monthly-2"]


def test_free_text_and_terms_all_hold() -> None:
    assert kept("monthly") == ["a100-monthly-1", "h800-monthly-2"]
    assert kept("MONTHLY channel:colo") == ["h800-monthly-2"]
    assert kept("机房") == ["a100-monthly-1"]  # notes, in Chinese
    assert kept("nothing-like-it") == []


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("ending:soon", "a duration such as"),
        ("colour:red", "unknown term 'colour:'"),
        ("channel:", "give a value after 'channel:'"),
    ],
)
def test_bad_terms_are_refused_naming_them(text: str, said: str) -> None:
    with pytest.raises(InputError) as err:
        parse(text)
    assert said in err.value.reason
    assert err.value.field.startswith("filter")


def test_a_colon_in_free_text_that_is_not_a_term_is_text() -> None:
    assert parse("10.0.0.1:22").free == ("10.0.0.1:22",)
