"""A stored sample record read back (leases.telemetry.rollups.sample_from): what zuka wrote
comes back equal, by the quick path, and a record edited behind zuka's back is refused
exactly as GpuSample's own __init__ refuses it."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leases.core.models import GpuSample
from leases.telemetry.rollups import sample_from, sample_record

maybe_float = st.none() | st.floats(allow_nan=False, allow_infinity=False, width=32)
samples = st.builds(
    GpuSample,
    node=st.just("n0"),
    at=st.datetimes(timezones=st.just(UTC)),
    index=st.integers(0, 127),
    uuid=st.text(max_size=12),
    name=st.text(max_size=12),
    util_gpu=maybe_float,
    mem_used_mib=maybe_float,
    power_w=maybe_float,
    pstate=st.none() | st.text(max_size=3),
    mig=st.none() | st.booleans(),
    ecc_uncorrected=st.none() | st.integers(0, 10**6),
    extra=st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=3),
)


@given(samples)
def test_what_zuka_wrote_reads_back_equal(sample: GpuSample) -> None:
    back = sample_from("n0", json.loads(json.dumps(sample_record(sample))))
    assert back == sample and type(back) is GpuSample
    assert back.extra is not sample.extra  # its own dict


def slow(node: str, d: dict[str, Any]) -> GpuSample:
    return GpuSample(**{**d, "node": node, "at": datetime.fromisoformat(d["at"])})


AT = "2026-03-02T10:00:00+00:00"


@pytest.mark.parametrize(
    "record",
    [
        {"index": 1, "at": AT},  # an old row: the fields it lacks take their defaults
        {"index": 1, "at": AT, "node": "elsewhere"},  # the row's own node name wins
        {"index": 1, "at": AT, "extra": {"k": "v"}},
    ],
)
def test_short_records_read_as_init_reads_them(record: dict[str, Any]) -> None:
    fast = sample_from("n0", copy.deepcopy(record))
    assert fast == slow("n0", copy.deepcopy(record)) and fast.node == "n0"
    assert fast.extra == record.get("extra", {})
    other = sample_from("n0", copy.deepcopy(record))  # as each read decodes afresh
    assert other.extra is not fast.extra  # never one dict shared between samples


@pytest.mark.parametrize(
    "record",
    [
        {"index": 1, "at": AT, "__class__": "x"},  # a key no field has
        {"index": 1, "at": AT, "evil": 1},
        {"at": AT},  # no index
        {"index": 1},  # no time
        {"index": 1, "at": 5},  # a time that is no text
        1,  # a record that is no object at all
        "x",
        None,
        [1],
    ],
)
def test_edited_records_fail_as_before(record: Any) -> None:
    with pytest.raises((TypeError, KeyError)) as fast:
        sample_from("n0", copy.deepcopy(record))
    with pytest.raises((TypeError, KeyError)) as before:
        slow("n0", copy.deepcopy(record))
    assert type(fast.value) is type(before.value)


@given(samples, st.sets(st.sampled_from(["uuid", "name", "util_gpu", "pstate", "extra"])))
def test_a_sample_made_without_init_is_the_one_init_makes(
    sample: GpuSample, left: set[str]
) -> None:
    """made_sample (the parser's and the ledger's way to make samples) against GpuSample's
    keyword __init__: equal, the same repr and pickle, its fields held in the same order
    (samples then share one key table: half the memory), a fresh extra where none given."""
    import pickle
    from dataclasses import fields

    from leases.core.readings import made_sample

    values = {f.name: getattr(sample, f.name) for f in fields(GpuSample)}
    del values["node"], values["at"]
    for name in left:  # fields not given take their defaults
        del values[name]
    made = made_sample("n0", sample.at, values)
    inited = GpuSample(node="n0", at=sample.at, **values)  # type: ignore[arg-type]
    assert made == inited and repr(made) == repr(inited)
    assert list(vars(made)) == list(vars(inited)) == [f.name for f in fields(GpuSample)]
    assert pickle.dumps(made) == pickle.dumps(inited)
    if "extra" in left:
        assert made.extra == {} and made.extra is not made_sample("n0", sample.at, values).extra
