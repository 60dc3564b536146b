"""Which Prometheus gauges `zuka collect --metrics-listen` exports, from which state.

At scrape time, from what the collector already holds in memory (the poller's latest
status of each node: FleetText) and from the money figures (leases.metrics.money, cached:
MoneyCollector, a prometheus-client Collector): nothing is updated per reading, and a
scrape never touches SSH. Every label value from the ledger or a node is made visible and
cut to LABEL_MAX characters (a hash of the whole kept at the end), then escaped as the
text format wants.

Names follow Prometheus's conventions: `zuka_` prefix, base units in the name (bytes,
watts, celsius, seconds, ratio 0-1). A node's health is `zuka_node_up` (1: read now) and
`zuka_node_health{state="..."} 1` for its one current state (NodeHealth's values). Money
is never converted (zuka keeps no rate for a running lease's figures): a lease priced in
CNY has its figures in the `_yuan` gauges; one priced in another currency has them in the
gauges of the same name without the unit (`zuka_lease_cost_to_date{currency="USD"}`), so
that no sum or `currencyCNY` panel over the `_yuan` gauges takes dollars for yuan.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from leases.core.models import NodeHealth, NodeStatus
from leases.core.textsafe import visible
from leases.telemetry.nvsmi import MAX_GPUS

LABEL_MAX = 128
MIB = 1024 * 1024

GPU_LABELS = ("node", "gpu", "uuid", "model", "channel", "provider")
NODE_LABELS = ("node", "channel", "provider")
LEASE_LABELS = ("node", "lease", "channel", "provider", "billing", "currency")

# name -> help: every metric the exporter can yield (the Grafana test reads these names).
GPU_METRICS = {
    "zuka_gpu_utilization_ratio": "GPU utilisation, 0 to 1 (nvidia-smi utilization.gpu)",
    "zuka_gpu_memory_used_bytes": "GPU memory in use, bytes",
    "zuka_gpu_memory_total_bytes": "GPU memory in all, bytes",
    "zuka_gpu_power_watts": "GPU power draw, watts",
    "zuka_gpu_temperature_celsius": "GPU temperature, degrees Celsius",
}
NODE_METRICS = {
    "zuka_node_up": "1 when the node's last attempt read its GPUs, else 0",
    "zuka_node_health": "1 for the node's current state (label state: zuka's NodeHealth)",
    "zuka_node_reading_age_seconds": "seconds since the node's last good reading",
    "zuka_node_gpus": "GPUs in the node's last good reading",
}
MONEY_METRICS = {
    "zuka_lease_cost_to_date_yuan": "what the lease billing now has cost to date, its renewal"
    " chain's (as zuka cost), yuan: leases priced in CNY only",
    "zuka_lease_idle_month_yuan": "yuan paid this month (whole hours, billing zone) for"
    " cards that sat idle (the underuse rule's figure): leases priced in CNY only",
    "zuka_lease_cost_to_date": "zuka_lease_cost_to_date_yuan of a lease priced in another"
    " currency than CNY, in that currency (the currency label), never converted",
    "zuka_lease_idle_month": "zuka_lease_idle_month_yuan of a lease priced in another"
    " currency than CNY, in that currency (the currency label), never converted",
    "zuka_lease_end_timestamp_seconds": "when the lease billing now ends, Unix time (days"
    " left: (this - time()) / 86400); none for an open-ended lease",
    "zuka_money_refused": "1 for a lease whose figures are not exported: rows changed"
    " outside zuka (zuka audit verify), or a figure that cannot be worked out",
}
METRICS = (*GPU_METRICS, *NODE_METRICS, *MONEY_METRICS)


# A cut label value ends with this many hex digits of its whole text's hash.
CUT_TAG = 8


def label(value: object) -> str:
    """A label value made safe: controls shown, a lone surrogate (bytes a decoder let
    through) written as its escape rather than failing the scrape, cut to LABEL_MAX. A
    cut value ends `…` and 8 hex digits of the whole value's hash, so two long names that
    share their start stay two series."""
    text = "" if value is None else str(value)
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode()
    shown = visible(text[: LABEL_MAX + 1])  # a character is shown as one at least
    if len(shown) <= LABEL_MAX:
        return shown
    tag = hashlib.sha256(text.encode()).hexdigest()[:CUT_TAG]
    return f"{shown[: LABEL_MAX - CUT_TAG - 1]}…{tag}"


@dataclass(frozen=True)
class Place:
    """Where a node is rented: its provider's channel (cloud, platform, colo) and name."""

    channel: str = ""
    provider: str = ""


@dataclass(frozen=True)
class LeaseMoney:
    """One lease billing now and its figures (None: not known)."""

    node: str
    lease: str  # the lease's id
    place: Place
    billing: str
    currency: str
    cost_to_date: Decimal | None
    idle_month: Decimal | None
    end: datetime | None


@dataclass(frozen=True)
class Money:
    """The money gauges' figures: leases exported, and (node, lease, why) refused."""

    leases: tuple[LeaseMoney, ...] = ()
    refused: tuple[tuple[str, str, Place], ...] = ()


def _gauge(name: str, helps: Mapping[str, str], labels: Sequence[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, helps[name], labels=list(labels))


def _escaped(value: object) -> str:
    """A label value as the text format writes it: made visible and cut (label), then
    backslash and double quote escaped (visible() has already replaced any newline)."""
    return label(value).replace("\\", "\\\\").replace('"', '\\"')


def _pairs(names: Sequence[str], values: Sequence[object]) -> str:
    return ",".join(f'{k}="{_escaped(v)}"' for k, v in zip(names, values, strict=True))


_GpuKey = tuple[int, str, str]  # index, uuid, model
# The node series whose lines start alike (health adds its state label).
_NODE_SERIES = ("zuka_node_up", "zuka_node_reading_age_seconds", "zuka_node_gpus")


def _number(value: float) -> str | None:
    """A sample's value in the text format; None for one that is not finite (no sample)."""
    v = float(value)
    return repr(v) if math.isfinite(v) else None


class FleetText:
    """Writes the per-GPU and per-node gauges of the poller's statuses as Prometheus text.

    Written here rather than through a prometheus-client Collector and generate_latest,
    which spent 0.86-1.13 s of CPU a scrape for 1,000 nodes of 8 GPUs against 55-79 ms for
    this, in the same run on the 2-core dev machine (it builds a sample object and
    validates and escapes every label of every sample): the start of each series' line is
    kept between scrapes (a node's, and each of its GPUs', made again only when its labels
    change), so a scrape costs a line per figure. prometheus-client's parser and a real
    Prometheus read it back in the tests.

    A GPU's figures only while its node reads (health ok): kept readings of a node that
    stopped answering are not this moment's; the node's reading age says how old they are.
    """

    def __init__(self) -> None:
        # node name -> (its place, its node-metric line starts, GPU identity -> the GPU's
        # metric line starts): `zuka_gpu_power_watts{node="a",...} `, ready for a value.
        self._nodes: dict[str, tuple[Place, tuple[str, ...], dict[_GpuKey, tuple[str, ...]]]] = {}

    def _node(
        self, name: str, where: Place
    ) -> tuple[tuple[str, ...], dict[_GpuKey, tuple[str, ...]]]:
        held = self._nodes.get(name)
        if held is None or held[0] != where:
            labels = _pairs(NODE_LABELS, (name, where.channel, where.provider))
            starts = tuple(f"{metric}{{{labels}}} " for metric in _NODE_SERIES)
            held = (where, (*starts, f'zuka_node_health{{{labels},state="'), {})
            self._nodes[name] = held
        return held[1], held[2]

    def render(
        self, statuses: Mapping[str, NodeStatus], places: Mapping[str, Place], now: datetime
    ) -> str:
        out: dict[str, list[str]] = {name: [] for name in (*GPU_METRICS, *NODE_METRICS)}
        up, health = out["zuka_node_up"], out["zuka_node_health"]
        age, count = out["zuka_node_reading_age_seconds"], out["zuka_node_gpus"]
        util, used, total, power, temp = (out[metric] for metric in GPU_METRICS)  # in order
        names = sorted(statuses)
        for name in names:
            st = statuses[name]
            where = places.get(name, Place())
            (up_at, age_at, count_at, health_at), gpus = self._node(name, where)
            ok = st.health is NodeHealth.OK
            up.append(f"{up_at}{1.0 if ok else 0.0}\n")
            health.append(f'{health_at}{_escaped(st.health.value)}"}} 1.0\n')
            if st.at is not None:
                age.append(f"{age_at}{max(0.0, (now - st.at).total_seconds())!r}\n")
                count.append(f"{count_at}{float(len(st.samples))!r}\n")
            if not ok:
                continue
            for s in st.samples:
                key = (s.index, s.uuid, s.name)
                starts = gpus.get(key)
                if starts is None:
                    if len(gpus) > 4 * MAX_GPUS:  # a node whose GPUs keep changing names
                        gpus.clear()
                    labels = _pairs(
                        GPU_LABELS, (name, s.index, s.uuid, s.name, where.channel, where.provider)
                    )
                    starts = gpus[key] = tuple(f"{metric}{{{labels}}} " for metric in GPU_METRICS)
                # Unknown (None) or not finite: no sample, never a zero.
                if s.util_gpu is not None and (v := _number(s.util_gpu / 100)):
                    util.append(f"{starts[0]}{v}\n")
                if s.mem_used_mib is not None and (v := _number(s.mem_used_mib * MIB)):
                    used.append(f"{starts[1]}{v}\n")
                if s.mem_total_mib is not None and (v := _number(s.mem_total_mib * MIB)):
                    total.append(f"{starts[2]}{v}\n")
                if s.power_w is not None and (v := _number(s.power_w)):
                    power.append(f"{starts[3]}{v}\n")
                if s.temp_c is not None and (v := _number(s.temp_c)):
                    temp.append(f"{starts[4]}{v}\n")
        for gone in self._nodes.keys() - set(names):
            del self._nodes[gone]
        helps = {**GPU_METRICS, **NODE_METRICS}
        return "".join(
            f"# HELP {metric} {helps[metric]}\n# TYPE {metric} gauge\n" + "".join(lines)
            for metric, lines in out.items()
        )


def in_yuan(currency: str) -> bool:
    """Whether a lease's figures are yuan (CNY; RMB, as a ledger written before the
    currency check might hold it, is the same)."""
    return currency.strip().upper() in ("CNY", "RMB")


def money_families(money: Money) -> list[GaugeMetricFamily]:
    """The per-lease money gauges (a CNY lease's in the _yuan ones, another currency's in
    the unitless ones), and a refusal series for each lease held back."""
    cost = _gauge("zuka_lease_cost_to_date_yuan", MONEY_METRICS, LEASE_LABELS)
    idle = _gauge("zuka_lease_idle_month_yuan", MONEY_METRICS, LEASE_LABELS)
    cost_other = _gauge("zuka_lease_cost_to_date", MONEY_METRICS, LEASE_LABELS)
    idle_other = _gauge("zuka_lease_idle_month", MONEY_METRICS, LEASE_LABELS)
    end = _gauge("zuka_lease_end_timestamp_seconds", MONEY_METRICS, LEASE_LABELS)
    refused = _gauge("zuka_money_refused", MONEY_METRICS, ("node", "lease", "channel", "provider"))
    for m in money.leases:
        labels = [
            label(m.node), label(m.lease), label(m.place.channel), label(m.place.provider),
            label(m.billing), label(m.currency),
        ]  # fmt: skip
        yuan = in_yuan(m.currency)
        if m.cost_to_date is not None:
            (cost if yuan else cost_other).add_metric(labels, float(m.cost_to_date))
        if m.idle_month is not None:
            (idle if yuan else idle_other).add_metric(labels, float(m.idle_month))
        if m.end is not None:
            end.add_metric(labels, m.end.timestamp())
    for node, lease, where in money.refused:
        refused.add_metric([label(node), label(lease), label(where.channel),
                            label(where.provider)], 1.0)  # fmt: skip
    return [cost, idle, cost_other, idle_other, end, refused]


class MoneyCollector(Collector):
    """The money gauges, a prometheus-client Collector: each scrape calls collect(), which
    reads the money source given (leases.metrics.money.MoneyCache: worked out at most once
    a minute)."""

    def __init__(self, money: Callable[[], Money]) -> None:
        self._money = money

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from money_families(self._money())


class Gauges:
    """Everything one scrape returns, from the sources given: the fleet's gauges, then
    (with a money source) the money gauges through prometheus-client's registry."""

    def __init__(
        self,
        statuses: Callable[[], Mapping[str, NodeStatus]],
        places: Callable[[], Mapping[str, Place]],
        clock: Callable[[], datetime],
        money: Callable[[], Money] | None = None,
    ) -> None:
        self._statuses = statuses
        self._places = places
        self._clock = clock
        self._fleet = FleetText()
        self.registry: CollectorRegistry | None = None
        if money is not None:
            self.registry = CollectorRegistry(auto_describe=False)
            self.registry.register(MoneyCollector(money))

    def render(self) -> bytes:
        body = self._fleet.render(self._statuses(), self._places(), self._clock()).encode()
        return body if self.registry is None else body + generate_latest(self.registry)
