"""What each GPU model should show: memory.total as nvidia-smi prints it (MiB), its PCI
device ids (vendor 10de), dense BF16 TFLOPS, NVLinks between each pair on its HGX board,
and whether its memory is GDDR (ECC on takes 1/16 of it, ~6 %).

From ACCEPTANCE-FACTS.md (sources there: MiB from real outputs in public code, PCI ids
from DCGM's diag-skus.yaml.in, TFLOPS from stas00/ml-engineering and NVIDIA whitepapers).
Where a real output in tests/accept/data disagrees, the real output wins and says so.
A model not in the table is unknown: the checks say "zuka has no nominal figures for it".
"""

from __future__ import annotations

from dataclasses import dataclass

from leases.accept.words import _
from leases.core.gpumodels import gpu_key, memory_gb


@dataclass(frozen=True)
class Nominal:
    model: str  # as the table names it: "A100 80GB"
    memory_mib: int  # memory.total as printed, with ECC in the state `ecc_in_figure`
    pci_ids: tuple[str, ...]  # 4 lower-case hex digits of the device
    bf16_tflops: float | None = None  # dense; None where unknown or no BF16 (V100)
    nvlinks: int | None = None  # NVLinks between each GPU pair on its HGX board (NV12)
    gddr: bool = False  # GDDR memory: ECC on hides 1/16 of it
    ecc_in_figure: bool = False  # memory_mib was read with ECC on (GDDR cards only)
    memory_gb: float | None = None  # the size that tells two cards of one name apart
    # Dense BF16 TFLOPS where a form factor of the model differs (H100 PCIe 756).
    bf16_by_pci: tuple[tuple[str, float], ...] = ()

    def memory_for(self, ecc_on: bool | None) -> int:
        """The memory.total expected with ECC in the given state (None: as in the table)."""
        if not self.gddr or ecc_on is None or ecc_on == self.ecc_in_figure:
            return self.memory_mib
        if ecc_on:  # the table's figure is ECC off: ECC takes 1/16
            return self.memory_mib * 15 // 16
        return -(-self.memory_mib * 16 // 15)  # ECC on in the table: the whole, rounded up

    def tflops_for(self, pci_id: str) -> float | None:
        return dict(self.bf16_by_pci).get(pci_id, self.bf16_tflops)


TABLE: tuple[Nominal, ...] = (
    # PCI ids 2204 (RTX 3090), 2230 (RTX A6000), 1eb8 (T4): from real outputs in
    # tests/accept/data; A6000's 49140 MiB (ECC off) from ACCEPTANCE-FACTS.
    Nominal("RTX 3090", 24576, ("2204",), 71.0, gddr=True),  # TFLOPS unverified
    Nominal("RTX 4090", 24564, ("2684",), 165.2, gddr=True),
    Nominal("A10", 23028, ("2236",), 125.0, gddr=True, ecc_in_figure=True),
    # A10G: 23028 MiB from a real output (telegraf's a10g.xml); PCI id 2237 unverified
    # (that output has its id redacted).
    Nominal("A10G", 23028, ("2237",), None, gddr=True, ecc_in_figure=True),
    Nominal("RTX A6000", 49140, ("2230",), None, gddr=True),
    Nominal("T4", 15360, ("1eb8",), None, gddr=True, ecc_in_figure=True),
    Nominal("A100 40GB", 40960, ("20b0", "20f1"), 312.0, 12, memory_gb=40),
    Nominal("A100 80GB", 81920, ("20b2", "20b5"), 312.0, 12, memory_gb=80),
    Nominal("A800 80GB", 81920, ("20f3",), 312.0, memory_gb=80),  # NVLink count unverified
    Nominal("H100", 81559, ("2330", "2331"), 989.0, 18, bf16_by_pci=(("2331", 756.0),)),
    Nominal("H800", 81559, ("2324",), 989.0),  # memory: weak source; TFLOPS unverified
    Nominal("H20", 97871, ("2329", "2328"), 148.0, 18),
    Nominal("H200", 143771, ("2335",), 989.0, 18),
    Nominal("L20", 46068, ("26b7",), 119.5, gddr=True, ecc_in_figure=True),
    Nominal("L40S", 46068, ("26b9",), 362.0, gddr=True, ecc_in_figure=True),
    Nominal("V100 16GB", 16160, ("1db0", "1db4"), None, memory_gb=16),
    # ACCEPTANCE-FACTS says 32768; a real 470 output of a V100-PCIE-32GB prints 32510
    # (tests/accept/data/v100-pcie-470-q.txt). Within ±3 % of either.
    Nominal("V100 32GB", 32510, ("1db1", "1db6"), None, memory_gb=32),
)

_BY_PCI: dict[str, Nominal] = {pci: n for n in TABLE for pci in n.pci_ids}


@dataclass(frozen=True)
class Lookup:
    nominal: Nominal | None
    words: str  # why there is none ("zuka has no nominal figures for MODEL"), else ""


def by_pci(device_id: str) -> Nominal | None:
    """The model a PCI device id ("20b2") belongs to, None if not in the table."""
    return _BY_PCI.get(device_id.lower())


def by_name(sold: str, vram_gib: int | None = None) -> Lookup:
    """The nominal figures of a model as sold ("A100 80GB", "NVIDIA A100-SXM4-80GB", "4090").
    Two cards of one name (A100 40GB / 80GB) are told apart by the memory the name says, or
    else by the VRAM recorded as sold."""
    key = gpu_key(sold)
    if not key:
        return Lookup(None, _("no GPU model is recorded as sold for this node"))
    found = [n for n in TABLE if gpu_key(n.model) == key]
    if not found:
        return Lookup(None, _("zuka has no nominal figures for {model}").format(model=sold))
    if len(found) == 1:
        return Lookup(found[0], "")
    size = memory_gb(sold) or (float(vram_gib) if vram_gib else None)
    sized = [n for n in found if size is not None and n.memory_gb == size]
    if len(sized) == 1:
        return Lookup(sized[0], "")
    sizes = _(" or ").join(n.model for n in found)
    words = _("{model} could be {sizes}: the lease does not say which memory size")
    return Lookup(None, words.format(model=sold, sizes=sizes))


def same_card(a: Nominal, b: Nominal) -> bool:
    return a.model == b.model
