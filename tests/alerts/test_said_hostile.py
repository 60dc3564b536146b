"""A stored alert form is read from a ledger others may write (a lab's shared ledger, a file
restored from elsewhere): one zuka would never have written is shown as stored, quickly,
whatever it asks for: a huge format width, an attribute walk, an unknown message id, or a
nesting deeper than any zuka makes. The forms zuka writes still round-trip."""

from __future__ import annotations

import json
import time
from decimal import Decimal

import pytest

from leases.alerts.said import MAX_DEPTH, PREFIX, call, decode, encode, say
from leases.core.i18n import N_, ZH, using

# A message id zuka's alerts use (the catalogue holds it).
REAL = N_("{name}: deposit {deposit} not refunded {span} after the lease ended {end}")


def _stored(form: object) -> str:
    return PREFIX + json.dumps(form)


@pytest.mark.parametrize(
    "form",
    [
        {"m": "{name:>400000000}", "a": {"name": "x"}},  # 400 MB of spaces
        {"m": "{name.__class__.__mro__}", "a": {"name": "x"}},  # an attribute walk
        {"m": "{name[0]}", "a": {"name": "x"}},
        {"m": "{name!x}", "a": {"name": "x"}},
        {"m": "not a message of zuka's: {name}", "a": {"name": "x"}},
        {"m": "{x:>99999}", "p": "{x}", "n": 2, "a": {"x": 1}},
        {"f": "no such call", "v": []},
    ],
)
def test_a_form_zuka_never_writes_is_shown_as_stored(form: dict[str, object]) -> None:
    stored = _stored(form)
    began = time.process_time()
    for lang in ("en", ZH):
        with using(lang):
            assert decode(stored) == stored
    assert time.process_time() - began < 1.0  # not 400 MB of padding written


def test_a_form_nested_deeper_than_zuka_writes_is_shown_as_stored() -> None:
    deep: dict[str, object] = {"t": "x"}
    for _i in range(MAX_DEPTH + 2):
        deep = {"m": REAL, "a": {"name": "n", "deposit": "1", "end": "e", "span": {"s": deep}}}
    assert decode(_stored(deep)) == _stored(deep)
    # JSON nested past the parser's own limit: no RecursionError escapes.
    very = PREFIX + '{"m": "x", "a": {"n": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    assert decode(very) == very


def test_what_zuka_writes_still_round_trips() -> None:
    made = say(REAL, name="a100-1", deposit=call("money", Decimal("5000"), "CNY"),
               span=call("span", 5400.0), end="2026-12-01")  # fmt: skip
    with using(ZH):
        zh = decode(encode(made))
    assert decode(encode(made)) == str(made)
    assert str(made) == (
        "a100-1: deposit CNY 5,000.00 not refunded 1 h 30 min after the lease ended 2026-12-01"
    )
    assert "5,000.00" in zh and "1小时30分钟" in zh and "租约" in zh, zh
