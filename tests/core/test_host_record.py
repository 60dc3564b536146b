"""A host record read back from the ledger (leases.core.host.host_from): the ledger is a
file anyone may edit, so a bad value makes that figure (or that mount) unknown and never
raises; mount paths and problems are made safe to show again."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from leases.core.host import HostStats, Mount, MountKind, host_from, host_record
from leases.core.models import NodeHealth, NodeStatus
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.telemetry.rollups import HistoryStore

GOOD_MOUNT = {"path": "/root/autodl-tmp", "fs_type": "xfs", "total_kib": 100, "used_kib": 95,
              "avail_kib": 5, "label": "AutoDL data disk", "kind": "data"}  # fmt: skip

STORED = (Mount(**{**GOOD_MOUNT, "kind": MountKind.DATA}),)


def test_non_finite_and_huge_figures_are_unknown() -> None:
    for bad in (math.inf, -math.inf, math.nan, 10**400, -1, 2**63, "1", True, [1], {}):
        h = host_from({"cpus": bad, "load1": bad, "cpu_pct": bad, "mem_total_kib": bad})
        assert h == HostStats(), bad
        assert h.mem_used_pct is None
        mount = host_from({"mounts": [{**GOOD_MOUNT, "total_kib": bad}, GOOD_MOUNT]})
        assert mount is not None and [m.path for m in mount.mounts] == ["/root/autodl-tmp"]
        assert mount.fullest_data is not None and round(mount.fullest_data.used_pct) == 95


def test_load1_alone_keeps_load1() -> None:
    h = host_from({"load1": 1.5, "load5": math.inf, "load15": "x"})
    assert h == HostStats(load1=1.5)


def test_a_mount_path_edited_to_hold_markup_or_control_characters_is_shown_safely() -> None:
    evil = {**GOOD_MOUNT, "path": "/data\x1b[2J[bold red]x[/]\n" + "a" * 500,
            "label": "\x07bell", "fs_type": "x\ry"}  # fmt: skip
    h = host_from({"mounts": [evil], "problems": ["\x1b]0;title\x07 bad", 7, "ok"] * 9})
    assert h is not None
    (m,) = h.mounts
    for text in (m.path, m.label, m.fs_type, *h.problems):
        assert not any(ord(c) < 32 or c == "\x7f" for c in text), text
    assert len(m.path) <= 120  # (markup is the screens' concern: they render it as Text)
    assert len(h.problems) <= 5


def test_a_kind_that_is_no_kind_or_a_mount_that_is_no_dict_is_left_out() -> None:
    stored = {"mounts": [{**GOOD_MOUNT, "kind": "nvme"}, {**GOOD_MOUNT, "kind": ["data"]},
                         "/x", None, 3, GOOD_MOUNT]}  # fmt: skip
    h = host_from(stored)
    assert h is not None and len(h.mounts) == 1 and h.mounts[0].kind is MountKind.DATA
    assert host_from({"mounts": "/root"}) == HostStats()
    assert (
        host_from({"mounts": [GOOD_MOUNT] * 1000}).mounts
        == (
            Mount(
                **{  # type: ignore[union-attr]
                    **GOOD_MOUNT,
                    "kind": MountKind.DATA,
                }
            ),
        )
        * 64
    )


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=30,
)
_keys = st.sampled_from(["cpus", "load1", "load5", "load15", "cpu_pct", "mem_total_kib",
                         "mem_available_kib", "mounts", "problems", "net_rx_bps", "mem_cgroup"])  # fmt: skip
_mount = st.fixed_dictionaries({}, optional={k: _json for k in GOOD_MOUNT})


@given(
    st.one_of(
        _json,
        st.dictionaries(_keys, _json | st.lists(_mount, max_size=3), max_size=8),
    )
)
def test_host_from_never_raises_on_arbitrary_json(value: Any) -> None:
    h = host_from(value)
    if h is not None:  # and what it read shows without raising either
        assert h.mem_used_pct is None or math.isfinite(h.mem_used_pct)
        for m in h.mounts:
            assert math.isfinite(m.used_pct) and m.name
        _ = h.fullest_data, h.shm, host_record(h)


def test_a_ledger_row_edited_to_hold_1e999_loads_with_that_figure_unknown(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db", create=True) as ledger:
        ledger.add_node(records.node_from({"name": "n1", "ssh_host": "10.0.0.9",
                                           "ssh_user": "root"}))  # fmt: skip
        store = HistoryStore(ledger)
        at = datetime(2026, 11, 20, tzinfo=UTC)
        store.write_latest([NodeStatus("n1", NodeHealth.OK, checked=at, at=at,
                                       host=HostStats(cpus=8, load1=1.0))])  # fmt: skip
        row = json.dumps({"cpus": 8, "load1": 1.0, "mounts": [GOOD_MOUNT]})
        edits = {
            row.replace("1.0", "1e999"): HostStats(cpus=8, mounts=STORED),
            row.replace("1.0", "Infinity"): HostStats(cpus=8, mounts=STORED),
            row.replace("1.0", "-Infinity"): HostStats(cpus=8, mounts=STORED),
            row.replace("8", "NaN"): HostStats(load1=1.0, mounts=STORED),
            row.replace("100", "1e999"): HostStats(cpus=8, load1=1.0),
            row.replace("100", "1" + "0" * 500): HostStats(cpus=8, load1=1.0),
            "[" * 100_000: None,
        }
        for edited, expected in edits.items():
            with ledger.transaction() as conn:
                conn.execute("UPDATE node_latest SET host = ?", [edited])
            (read,) = store.latest_by_id().values()
            assert read.health is NodeHealth.OK
            assert read.host == expected, edited
