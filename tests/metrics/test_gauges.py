"""The gauges of a known fleet state, rendered as Prometheus text and parsed back with
prometheus_client's own parser: values worked out here by hand."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from hypothesis import example, given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from leases.core.models import GpuSample, NodeHealth, NodeStatus
from leases.metrics.gauges import (
    LABEL_MAX,
    METRICS,
    FleetText,
    Gauges,
    LeaseMoney,
    Money,
    Place,
    label,
)

NOW = datetime(2026, 3, 11, 4, 0, 30, tzinfo=UTC)
READ = NOW - timedelta(seconds=12)


def scrape(
    statuses: dict[str, NodeStatus], places: dict[str, Place], money: Money | None = None
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    gauges = Gauges(lambda: statuses, lambda: places, lambda: NOW,
                    None if money is None else (lambda: money))  # fmt: skip
    out = {}
    for family in text_string_to_metric_families(gauges.render().decode()):
        assert family.type == "gauge" and family.documentation, family.name
        for s in family.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in out, key  # one sample a series
            out[key] = s.value
    return out


def _gpu(node: str, i: int, **kw: object) -> GpuSample:
    return GpuSample(node, READ, i, uuid=f"GPU-{node}-{i}", name="NVIDIA A100-SXM4-80GB", **kw)  # type: ignore[arg-type]


FLEET = {
    "a1": NodeStatus("a1", NodeHealth.OK, checked=READ, at=READ, samples=(
        _gpu("a1", 0, util_gpu=87.0, mem_used_mib=1024.0, mem_total_mib=81920.0,
             power_w=312.5, temp_c=64.0),
        _gpu("a1", 1, util_gpu=None, mem_used_mib=None, mem_total_mib=81920.0,
             power_w=None, temp_c=None),  # unknown: no sample, never a zero
    )),
    # Down since: its kept readings are not exported, its age and state are.
    "b2": NodeStatus("b2", NodeHealth.UNREACHABLE, "timed out", checked=NOW,
                     at=NOW - timedelta(minutes=5), samples=(_gpu("b2", 0, util_gpu=50.0),)),
    "c3": NodeStatus("c3"),  # never read
}  # fmt: skip
PLACES = {"a1": Place("platform", "AutoDL"), "b2": Place("cloud", "Aliyun")}


def _l(**kw: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(kw.items()))


def test_known_fleet_by_hand() -> None:
    got = scrape(FLEET, PLACES)
    g0 = _l(node="a1", gpu="0", uuid="GPU-a1-0", model="NVIDIA A100-SXM4-80GB",
            channel="platform", provider="AutoDL")  # fmt: skip
    assert got[("zuka_gpu_utilization_ratio", g0)] == 0.87
    assert got[("zuka_gpu_memory_used_bytes", g0)] == 1024 * 1024 * 1024
    assert got[("zuka_gpu_memory_total_bytes", g0)] == 80 * 1024**3
    assert got[("zuka_gpu_power_watts", g0)] == 312.5
    assert got[("zuka_gpu_temperature_celsius", g0)] == 64.0
    g1 = dict(g0)
    g1.update(gpu="1", uuid="GPU-a1-1")
    g1l = tuple(sorted(g1.items()))
    assert got[("zuka_gpu_memory_total_bytes", g1l)] == 80 * 1024**3
    for unknown in ("utilization_ratio", "memory_used_bytes", "power_watts", "temperature_celsius"):
        assert (f"zuka_gpu_{unknown}", g1l) not in got
    a1 = _l(node="a1", channel="platform", provider="AutoDL")
    b2 = _l(node="b2", channel="cloud", provider="Aliyun")
    c3 = _l(node="c3", channel="", provider="")
    assert got[("zuka_node_up", a1)] == 1 and got[("zuka_node_up", b2)] == 0
    assert got[("zuka_node_up", c3)] == 0
    assert got[("zuka_node_health", (*a1, ("state", "ok")))] == 1
    assert got[("zuka_node_health", tuple(sorted((*b2, ("state", "unreachable")))))] == 1
    assert got[("zuka_node_health", tuple(sorted((*c3, ("state", "connecting")))))] == 1
    assert got[("zuka_node_reading_age_seconds", a1)] == 12.0
    assert got[("zuka_node_reading_age_seconds", b2)] == 300.0
    assert ("zuka_node_reading_age_seconds", c3) not in got  # no reading: no age
    assert got[("zuka_node_gpus", a1)] == 2
    assert not [k for k in got if k[0].startswith("zuka_gpu_") and ("node", "b2") in k[1]]
    # 4 figures of GPU 0, 1 of GPU 1; per node: up and health x3, age x2, gpus x2.
    assert len(got) == 5 + 1 + 3 + 3 + 2 + 2
    assert {k[0] for k in got} <= set(METRICS)


def test_hostile_label_values_are_escaped_and_cut() -> None:
    evil = 'x"}\nzuka_node_up{node="forged"} 1\n\\' + "A" * 500
    st = NodeStatus(evil, NodeHealth.OK, checked=READ, at=READ,
                    samples=(GpuSample(evil, READ, 0, uuid="GPU-\x1b[31m", name=evil, util_gpu=1.0),))  # fmt: skip
    got = scrape({evil: st}, {evil: Place("platform", "\u202eevil" + "p" * 300)})
    nodes = {dict(k[1])["node"] for k in got}
    assert len(nodes) == 1 and "forged" not in {
        dict(k[1]).get("node") for k in got if k[0] == "zuka_node_up"
    }
    (node,) = nodes
    assert len(node) == LABEL_MAX and re.search("…[0-9a-f]{8}$", node) and "\n" not in node
    assert node.startswith('x"}␊zuka_node_up{node="forged"} 1␊\\')  # shown, not obeyed
    labels = dict(next(k[1] for k in got if k[0] == "zuka_gpu_utilization_ratio"))
    assert labels["uuid"] == "GPU-␛[31m"
    assert labels["provider"].startswith("\\u202eevil") and len(labels["provider"]) == LABEL_MAX
    assert len([k for k in got if k[0] == "zuka_node_up"]) == 1


def test_long_names_that_share_their_start_stay_apart() -> None:
    """Two node names (an edited ledger) alike in their first 200 characters: each cut to
    LABEL_MAX, yet two series, each the same at every scrape; a name of LABEL_MAX
    characters is not cut."""
    one, two, exact = "n" * 200 + "-1", "n" * 200 + "-2", "m" * LABEL_MAX
    fleet = {n: NodeStatus(n, NodeHealth.OK, checked=READ, at=READ, samples=(_gpu(n, 0, util_gpu=5.0),))
             for n in (one, two, exact)}  # fmt: skip
    first = scrape(fleet, {})
    ups = sorted(dict(k[1])["node"] for k in first if k[0] == "zuka_node_up")
    assert len(set(ups)) == 3 and all(len(u) == LABEL_MAX for u in ups)
    assert exact in ups
    assert {u[: LABEL_MAX - 9] for u in ups if u != exact} == {"n" * (LABEL_MAX - 9)}
    assert scrape(fleet, {}) == first
    assert label(one) != label(two) and label(one) == label("n" * 200 + "-1")
    # A name made long by its shown controls is cut and tagged too.
    assert len(label("\x1b" * 60 + "\u202e" * 30)) == LABEL_MAX


def test_money_gauges_and_refusals() -> None:
    end = datetime(2026, 4, 30, 16, tzinfo=UTC)
    money = Money(
        leases=(LeaseMoney("a1", "7", PLACES["a1"], "monthly", "CNY", Decimal("60000"),
                           Decimal("12500") / 31, end),
                LeaseMoney("b2", "8", PLACES["b2"], "hourly", "CNY", Decimal("12.34"), None, None)),
        refused=(("c3", "9", Place()),),
    )  # fmt: skip
    got = scrape({}, {}, money)
    a1 = _l(
        node="a1",
        lease="7",
        channel="platform",
        provider="AutoDL",
        billing="monthly",
        currency="CNY",
    )
    b2 = _l(
        node="b2", lease="8", channel="cloud", provider="Aliyun", billing="hourly", currency="CNY"
    )
    assert got[("zuka_lease_cost_to_date_yuan", a1)] == 60000
    assert abs(got[("zuka_lease_idle_month_yuan", a1)] - 403.2258064516129) < 1e-9
    assert got[("zuka_lease_end_timestamp_seconds", a1)] == end.timestamp() == 1777564800
    assert got[("zuka_lease_cost_to_date_yuan", b2)] == 12.34
    assert ("zuka_lease_idle_month_yuan", b2) not in got  # unknown: no sample
    assert ("zuka_lease_end_timestamp_seconds", b2) not in got  # open-ended
    assert got[("zuka_money_refused", _l(node="c3", lease="9", channel="", provider=""))] == 1
    assert not [k for k in got if ("node", "c3") in k[1] and k[0] != "zuka_money_refused"]


def test_no_money_unless_asked() -> None:
    got = scrape(FLEET, PLACES)
    assert not [k for k in got if k[0].startswith(("zuka_lease_", "zuka_money_"))]


def test_label_text_is_kept_until_the_labels_change() -> None:
    fleet = FleetText()
    places = dict(PLACES)
    first = fleet.render(FLEET, places, NOW)
    assert fleet.render(FLEET, places, NOW) == first
    places["a1"] = Place("colo", "NJ IDC")  # the provider edited: the new labels at once
    moved = fleet.render(FLEET, places, NOW)
    assert 'node="a1",channel="colo",provider="NJ IDC"' in moved and "AutoDL" not in moved
    fewer = {k: v for k, v in FLEET.items() if k != "a1"}  # a node removed: forgotten
    assert 'node="a1"' not in fleet.render(fewer, places, NOW)
    assert set(fleet._nodes) == {"b2", "c3"}


def test_a_thousand_nodes_render_fast_enough() -> None:
    """1,000 nodes of 8 GPUs: every series once, in a time a collector can spare (a
    bound, not a benchmark: prometheus-client's generate_latest spent about 1 s of CPU)."""
    import time

    fleet = {f"n{i:04d}": NodeStatus(f"n{i:04d}", NodeHealth.OK, checked=READ, at=READ, samples=tuple(
        _gpu(f"n{i:04d}", g, util_gpu=50.0, mem_used_mib=1.0, mem_total_mib=2.0, power_w=3.0,
             temp_c=4.0) for g in range(8))) for i in range(1000)}  # fmt: skip
    places = dict.fromkeys(fleet, Place("platform", "P"))
    text = FleetText()
    text.render(fleet, places, NOW)
    started = time.process_time()
    body = text.render(fleet, places, NOW)
    spent = time.process_time() - started
    assert body.count("\nzuka_gpu_") == 5 * 8000 and body.count("\nzuka_node_up{") == 1000
    assert spent < 1.0, spent


@given(node=st.text(min_size=1, max_size=300), model=st.text(max_size=300),
       provider=st.text(max_size=300))  # fmt: skip
@example(node="gpu-\udc80", model="A100 \ud800", provider="P")  # lone surrogates
def test_any_label_value_reads_back_as_shown(node: str, model: str, provider: str) -> None:
    """Whatever a ledger or a node names: one series, its labels what label() shows."""
    status = NodeStatus(node, NodeHealth.OK, checked=READ, at=READ,
                        samples=(GpuSample(node, READ, 0, uuid="GPU-1", name=model, util_gpu=5.0),))  # fmt: skip
    got = scrape({node: status}, {node: Place("colo", provider)})
    (labels,) = [dict(k[1]) for k in got if k[0] == "zuka_gpu_utilization_ratio"]
    assert labels["node"] == label(node) and labels["model"] == label(model)
    assert labels["provider"] == label(provider) and len(labels["node"]) <= LABEL_MAX
    assert len([k for k in got if k[0] == "zuka_node_up"]) == 1
