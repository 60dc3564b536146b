"""Per-model figures a healthy box of each kind shows to the heavier tools: PCI device id,
BF16 throughput, PCIe generation, NVLinks, InfiniBand, host copies and all-reduce bandwidth.

From /work/shared ACCEPTANCE-FACTS (DCGM diag-skus, whitepapers, nccl-tests issues, Azure's
health-check bars); the V100's id follows that table (1db1 for the 32 GB part).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    device_id: str  # PCI device id (vendor 10de), upper-case hex as nvidia-smi prints it
    architecture: str
    bf16_tflops: float | None  # dense; None: no BF16 (V100)
    pcie_gen: int
    nvlinks: int  # links per GPU (0: none)
    link_gbs: float  # per link, as `nvidia-smi nvlink -s` prints it
    ib_ports: int  # InfiniBand ports on a whole box (0: none)
    ib_rate: int
    ib_ca_type: str
    h2d_gbs: float  # nvbandwidth host_to_device_memcpy_ce per GPU
    busbw_gbs: float  # all_reduce_perf bus bandwidth at 1 GB, whole box
    min_power_w: float
    vbios: str


SPECS: dict[str, ModelSpec] = {
    "H100": ModelSpec("2330", "Hopper", 989.0, 5, 18, 26.562, 8, 400, "MT4129", 55.2, 481.0,
                      200.0, "96.00.89.00.01"),
    "H800": ModelSpec("2324", "Hopper", 989.0, 5, 8, 26.562, 8, 400, "MT4129", 55.0, 215.0,
                      200.0, "96.00.74.00.0D"),
    "A100": ModelSpec("20B2", "Ampere", 312.0, 4, 12, 25.0, 8, 200, "MT4123", 25.6, 231.0,
                      100.0, "92.00.36.00.02"),
    "A800": ModelSpec("20F3", "Ampere", 312.0, 4, 8, 25.0, 8, 200, "MT4123", 25.4, 155.0,
                      100.0, "92.00.9E.00.01"),
    "RTX 4090": ModelSpec("2684", "Ada Lovelace", 165.2, 4, 0, 0.0, 0, 0, "", 24.8, 28.0,
                          150.0, "95.02.3C.00.8E"),
    "A10": ModelSpec("2236", "Ampere", 125.0, 4, 0, 0.0, 0, 0, "", 24.6, 0.0, 100.0,
                     "94.02.5C.00.02"),
    "V100": ModelSpec("1DB1", "Volta", None, 3, 6, 25.781, 4, 100, "MT4115", 12.1, 130.0,
                      150.0, "88.00.80.00.04"),
}  # fmt: skip

# A box sold with NVLink whose GPUs talk over PCIe only: eight GPUs reach about this.
PCIE_BUSBW_GBS = 28.0
# What a matmul reaches of the nominal figure on a healthy card (ml-engineering "MAMF").
MATMUL_SHARE = 0.80
SLOW_SHARE = 0.40
