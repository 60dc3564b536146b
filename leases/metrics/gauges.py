"""Which Prometheus gauges `zuka collect --metrics-listen` exports, from which state.

A prometheus-client Collector that yields, at scrape time, from what the collector already
holds in memory (the poller's latest status of each node) and from the money figures
(leases.metrics.money, cached): nothing is updated per reading, and a scrape never
touches SSH. Every label value from the ledger or a node is made visible and cut to
LABEL_MAX characters (prometheus-client escapes quotes, backslashes and newlines itself).

Names follow Prometheus's conventions: `zuka_` prefix, base units in the name (bytes,
watts, celsius, seconds, ratio 0-1). A node's health is `zuka_node_up` (1: read now) and
`zuka_node_health{state="..."} 1` for its one current state (NodeHealth's values). Money
is in the lease's own currency, named by the `currency` label (`yuan`: CNY, the default).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from leases.core.models import NodeHealth, NodeStatus
from leases.core.textsafe import visible

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
    " chain's (as zuka cost), in the currency label's unit",
    "zuka_lease_idle_month_yuan": "money paid this month (whole hours, billing zone) for"
    " cards that sat idle (the underuse rule's figure)",
    "zuka_lease_end_timestamp_seconds": "when the lease billing now ends, Unix time (days"
    " left: (this - time()) / 86400); none for an open-ended lease",
    "zuka_money_refused": "1 for a lease whose figures are not exported: rows changed"
    " outside zuka (zuka audit verify), or a figure that cannot be worked out",
}
METRICS = (*GPU_METRICS, *NODE_METRICS, *MONEY_METRICS)


def label(value: object) -> str:
    """A label value made safe: controls shown, cut to LABEL_MAX characters."""
    return visible("" if value is None else value, LABEL_MAX)


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


def fleet_families(
    statuses: Mapping[str, NodeStatus], places: Mapping[str, Place], now: datetime
) -> list[GaugeMetricFamily]:
    """The per-GPU and per-node gauges of the poller's statuses at `now`. A GPU's figures
    only while its node reads (health ok): kept readings of a node that stopped answering
    are not this moment's; the node's reading age says how old they are."""
    gpu = {name: _gauge(name, GPU_METRICS, GPU_LABELS) for name in GPU_METRICS}
    up = _gauge("zuka_node_up", NODE_METRICS, NODE_LABELS)
    health = _gauge("zuka_node_health", NODE_METRICS, (*NODE_LABELS, "state"))
    age = _gauge("zuka_node_reading_age_seconds", NODE_METRICS, NODE_LABELS)
    count = _gauge("zuka_node_gpus", NODE_METRICS, NODE_LABELS)
    for name in sorted(statuses):
        st = statuses[name]
        where = places.get(name, Place())
        node = [label(name), label(where.channel), label(where.provider)]
        ok = st.health is NodeHealth.OK
        up.add_metric(node, 1.0 if ok else 0.0)
        health.add_metric([*node, label(st.health.value)], 1.0)
        if st.at is not None:
            age.add_metric(node, max(0.0, (now - st.at).total_seconds()))
            count.add_metric(node, float(len(st.samples)))
        if not ok:
            continue
        for s in st.samples:
            labels = [node[0], str(s.index), label(s.uuid), label(s.name), node[1], node[2]]
            for metric, value in (
                ("zuka_gpu_utilization_ratio", None if s.util_gpu is None else s.util_gpu / 100),
                ("zuka_gpu_memory_used_bytes", _bytes(s.mem_used_mib)),
                ("zuka_gpu_memory_total_bytes", _bytes(s.mem_total_mib)),
                ("zuka_gpu_power_watts", s.power_w),
                ("zuka_gpu_temperature_celsius", s.temp_c),
            ):
                if value is not None:  # unknown is no sample, never zero
                    gpu[metric].add_metric(labels, float(value))
    return [*gpu.values(), up, health, age, count]


def _bytes(mib: float | None) -> float | None:
    return None if mib is None else mib * MIB


def money_families(money: Money) -> list[GaugeMetricFamily]:
    """The per-lease money gauges, and a refusal series for each lease held back."""
    cost = _gauge("zuka_lease_cost_to_date_yuan", MONEY_METRICS, LEASE_LABELS)
    idle = _gauge("zuka_lease_idle_month_yuan", MONEY_METRICS, LEASE_LABELS)
    end = _gauge("zuka_lease_end_timestamp_seconds", MONEY_METRICS, LEASE_LABELS)
    refused = _gauge("zuka_money_refused", MONEY_METRICS, ("node", "lease", "channel", "provider"))
    for m in money.leases:
        labels = [
            label(m.node), label(m.lease), label(m.place.channel), label(m.place.provider),
            label(m.billing), label(m.currency),
        ]  # fmt: skip
        if m.cost_to_date is not None:
            cost.add_metric(labels, float(m.cost_to_date))
        if m.idle_month is not None:
            idle.add_metric(labels, float(m.idle_month))
        if m.end is not None:
            end.add_metric(labels, m.end.timestamp())
    for node, lease, where in money.refused:
        refused.add_metric([label(node), label(lease), label(where.channel),
                            label(where.provider)], 1.0)  # fmt: skip
    return [cost, idle, end, refused]


class FleetCollector(Collector):
    """Registered once; each scrape calls collect(), which reads the sources given."""

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
        self._money = money

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from fleet_families(self._statuses(), self._places(), self._clock())
        if self._money is not None:
            yield from money_families(self._money())
