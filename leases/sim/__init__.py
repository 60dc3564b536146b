"""Simulated GPU nodes: a GPU model, command emulation, and in-process SSH servers.

`leases.sim.fleet` (asyncssh) is imported lazily so the fake nvidia-smi starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from leases.sim.commands import answer, loop_interval
from leases.sim.demo import default_demo_fleet
from leases.sim.gpu import (
    MODELS,
    SIM_USERS,
    GpuModel,
    GpuReading,
    HistoryRow,
    Scenario,
    SimGpu,
    SimNode,
    SimUser,
    gpu_user,
    history,
    readings,
    row_samples,
)
from leases.sim.output import Answer
from leases.sim.topo import topo_matrix
from leases.sim.traps import Trap

if TYPE_CHECKING:
    from leases.sim.fleet import SimEndpoint, SimFleet

__all__ = [
    "MODELS",
    "SIM_USERS",
    "Answer",
    "GpuModel",
    "GpuReading",
    "HistoryRow",
    "Scenario",
    "SimEndpoint",
    "SimFleet",
    "SimGpu",
    "SimNode",
    "SimUser",
    "Trap",
    "answer",
    "default_demo_fleet",
    "gpu_user",
    "history",
    "loop_interval",
    "readings",
    "row_samples",
    "topo_matrix",
]


def __getattr__(name: str) -> Any:
    if name in ("SimFleet", "SimEndpoint"):
        from leases.sim import fleet

        return getattr(fleet, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
