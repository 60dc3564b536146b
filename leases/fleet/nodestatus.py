"""A stored status as it stands now (stale or not), every fleet node's status joined from the
poller's and the ledger's, and one health summary: the CLI (`zuka poll` beside a collector,
`zuka collect`'s log line) and the dashboard share them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from leases.core.i18n import LANGS, N_, _, catalogue
from leases.core.models import GpuSample, Node, NodeHealth, NodeStatus
from leases.telemetry.history import busy_verdict
from leases.telemetry.words import health_word

# A stored reading older than this many poll intervals (and at least STALE_MIN_S) means
# nobody reads the node any more (the collector stopped?).
STALE_INTERVALS = 6
STALE_MIN_S = 30.0
# A stale status's detail, said in the language in use when it was made.
STALE = N_("stale: last reading {at}")
# A node's state when its last reading is old: the fleet table's word, the filter's value.
STALE_STATE = N_("stale")


def stale_after_s(interval_s: float) -> float:
    return max(STALE_MIN_S, STALE_INTERVALS * interval_s)


def _stale(status: NodeStatus, stale_before: datetime | None) -> bool:
    return (
        stale_before is not None and status.checked is not None and (status.checked < stale_before)
    )


def unless_stale(status: NodeStatus, stale_before: datetime | None = None) -> NodeStatus:
    """What a poller last wrote (node_latest, HistoryStore.latest_by_id) as the node's status
    now: a status last checked before `stale_before` is shown as stale, not as the node's
    state."""
    if _stale(status, stale_before):
        assert status.checked is not None
        return NodeStatus(
            status.node,
            NodeHealth.CONNECTING,
            _(STALE).format(at=f"{status.checked.astimezone():%H:%M:%S}"),
        )
    return status


def refused(name: str, problem: str) -> NodeStatus:
    """A node whose stored row holds a refused value: never polled."""
    return NodeStatus(name, NodeHealth.REFUSED, _("not polled: {problem}").format(problem=problem))


def is_stale(status: NodeStatus) -> bool:
    if status.health is not NodeHealth.CONNECTING:
        return False
    return any(
        status.detail.startswith(catalogue(lang).gettext(STALE).partition("{")[0]) for lang in LANGS
    )


# How a health reads to a person: the fleet table's state column, the dashboard's status
# line and the CLI's summary all say it with these words (short enough for the column;
# the detail line under the table says the rest). A health not here reads as its value.
HEALTH_LABEL = {
    NodeHealth.AUTH_FAILED: N_("auth failed"),
    NodeHealth.UNTRUSTED: N_("untrusted key"),
    NodeHealth.HOSTKEY_CHANGED: N_("KEY CHANGED"),
    NodeHealth.NO_NVIDIA_SMI: N_("no nvidia-smi"),
    NodeHealth.DRIVER_NOT_LOADED: N_("no driver"),
    NodeHealth.DRIVER_MISMATCH: N_("needs reboot"),
    NodeHealth.NVML_LIBRARY_MISSING: N_("no NVML lib"),
    NodeHealth.NVML_PERMISSION: N_("NVML denied"),
    NodeHealth.GPU_LOST: N_("GPU lost"),
    NodeHealth.GARBAGE: N_("bad output"),
    NodeHealth.NO_NVML: N_("no NVML"),
}


def health_label(health: NodeHealth) -> str:
    """The health's words in the language in use (its value's, for one not above)."""
    label = HEALTH_LABEL.get(health)
    return _(label) if label else health_word(health)


def health_counts(statuses: Iterable[NodeStatus]) -> dict[str, int]:
    """How many nodes are in each health, by its label (health_label). Counted by health,
    then each health named once: the dashboard asks this of every node on every refresh."""
    counts: dict[str, int] = {}
    for health, n in Counter(st.health for st in statuses).items():
        label = health_label(health)
        counts[label] = counts.get(label, 0) + n
    return counts


def health_summary(statuses: Iterable[NodeStatus]) -> str:
    """'2 ok, 1 needs reboot': how many nodes are in each health, in the words the fleet
    table uses."""
    counts = health_counts(statuses)
    said = [_("{n} {health}").format(n=n, health=h) for h, n in sorted(counts.items())]
    return _(", ").join(said) or _("no readings yet")


@dataclass(frozen=True)
class Figures:
    """A node's readings summed up for one table row; None where any GPU's is unknown."""

    gpus: int
    util: float | None
    mem_used_gib: float | None
    mem_total_gib: float | None
    power_w: float | None
    temp_max: float | None
    busy: int  # GPUs busy now (leases.telemetry.history.busy_verdict)
    idle: int  # GPUs read idle now; the rest are unknown


def figures(samples: Sequence[GpuSample]) -> Figures:
    # One pass over the samples: the dashboard sums every node's GPUs each refresh.
    utils: list[float] = []
    used: float | None = 0.0
    total: float | None = 0.0
    power: float | None = 0.0
    temp: float | None = None
    busy = idle = 0
    for s in samples:
        util, mem, watts = s.util_gpu, s.mem_used_mib, s.power_w
        if util is not None:
            utils.append(util)
        used = None if used is None or mem is None else used + mem
        total = None if total is None or s.mem_total_mib is None else total + s.mem_total_mib
        power = None if power is None or watts is None else power + watts
        if s.temp_c is not None and (temp is None or s.temp_c > temp):
            temp = s.temp_c
        verdict = busy_verdict(util, mem, watts, s.power_limit_w)
        if verdict is True:
            busy += 1
        elif verdict is False:
            idle += 1
    return Figures(
        gpus=len(samples),
        util=sum(utils) / len(utils) if utils else None,
        mem_used_gib=None if used is None else used / 1024,
        mem_total_gib=None if total is None else total / 1024,
        power_w=power,
        temp_max=temp,
        busy=busy,
        idle=idle,
    )


def figures_of(status: NodeStatus) -> Figures | None:
    """The figures of a node read ok; None for any other health (no readings to show)."""
    if status.health is not NodeHealth.OK:
        return None
    return figures(status.samples)


def status_figures(status: NodeStatus | None) -> Figures | None:
    """figures_of, worked out once per status and kept on it (as functools.cached_property
    keeps a value in the instance's __dict__, beside its frozen fields): the row, the
    header and the filter all read them, every refresh."""
    if status is None:
        return None
    kept = status.__dict__
    if _KEPT not in kept:
        kept[_KEPT] = figures_of(status)
    found: Figures | None = kept[_KEPT]
    return found


_KEPT = "_figures"


# node id -> (the stored status, whether it was stale, the status shown of it)
StatusCache = dict[int, tuple[NodeStatus, bool, NodeStatus]]


def current(
    nodes: Sequence[Node],
    polled: Mapping[str, NodeStatus] | None,
    stored: Mapping[int, NodeStatus],
    stale_before: datetime | None,
    cache: StatusCache | None = None,
) -> dict[int, NodeStatus]:
    """Every fleet node's status now, by node id: a refused node (its `problem` set) as
    refused; else what the poller in this process holds (polled: by name, as it polls the
    fleet's live nodes, whose names are their own), or else what a collector last wrote
    (stored, by node id: a released node's name may be reused), stale if old. A node with
    neither is left out. cache: the status made of the very same stored one last time is
    that status (with its figures worked out), not a new one."""
    out: dict[int, NodeStatus] = {}
    for n in nodes:
        if n.id is None:
            continue
        if n.problem:
            out[n.id] = refused(n.name, n.problem)
        elif polled is not None:
            if n.name in polled:
                out[n.id] = polled[n.name]
        elif n.id in stored:
            row = stored[n.id]
            stale = _stale(row, stale_before)
            hit = cache.get(n.id) if cache is not None else None
            if hit is not None and hit[0] is row and hit[1] == stale:
                out[n.id] = hit[2]
                continue
            out[n.id] = unless_stale(row, stale_before)
            if cache is not None:
                cache[n.id] = (row, stale, out[n.id])
    if cache is not None:
        for gone in cache.keys() - stored.keys():
            del cache[gone]
    return out
