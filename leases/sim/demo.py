"""The demo fleet: twelve nodes across the three channels a lab rents from."""

from __future__ import annotations

from leases.sim.gpu import Scenario, SimNode
from leases.sim.traps import Trap

S = Scenario
T = Trap


def default_demo_fleet() -> list[SimNode]:
    """Node specs only; the ledger side (provider, billing, price) is mapped elsewhere."""
    return [
        # GPU rental platform, per card-hour.
        SimNode("autodl-4090-a", "RTX 4090", 8, S.BURSTY, seed=101),
        # sshd open to passwords, and a Jupyter without a token on all interfaces.
        SimNode("autodl-4090-b", "RTX 4090", 8, S.BUSY, seed=102,
                traps=frozenset({T.PASSWORD_SSHD, T.OPEN_JUPYTER})),
        SimNode("autodl-4090-c", "RTX 4090", 4, S.FLAKY, seed=103),
        SimNode("autodl-4090-d", "RTX 4090", 8, S.DRIVER_MISMATCH, seed=104),
        # Sold as an 8x A100 80GB; nvidia-smi says A100 but reports 24564 MiB per card.
        SimNode("xy-a100-80g-cheap", "A100", 8, S.FAKE_VRAM, seed=105, vram_gib=80,
                spoof_name=True),
        # GPU rental platform, monthly (包月) whole machines.
        SimNode("a100-monthly-1", "A100", 8, S.BUSY, seed=201),
        # Sold as NVLink (SXM); the box's GPUs talk over PCIe only.
        SimNode("a100-monthly-2", "A100", 8, S.IDLE_MONTHLY, seed=202,
                traps=frozenset({T.PCIE_ONLY})),
        SimNode("h800-monthly-1", "H800", 8, S.BUSY, seed=203),
        SimNode("h800-monthly-2", "H800", 8, S.IDLE_MONTHLY, seed=204),
        # Local data-centre hosting, contract with deposit.
        SimNode("colo-njidc-a800", "A800", 8, S.BUSY, seed=301),
        # Public cloud, hourly.
        SimNode("aliyun-a10-hourly", "A10", 1, S.BURSTY, seed=401),
        SimNode("tencent-v100x8-hourly", "V100", 8, S.BURSTY, seed=402),
    ]  # fmt: skip
