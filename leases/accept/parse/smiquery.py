"""`nvidia-smi --query-gpu=<acceptance fields> --format=csv,noheader,nounits` -> one typed row
per GPU. The field list is acceptance's own (QUERY_GPU_FIELDS); a value nvidia-smi could not
read (`[N/A]`, `[Not Supported]`) is None or "". Never raises: a row that cannot be read is
named in `problems`.
"""

from __future__ import annotations

from dataclasses import dataclass

from leases.accept.parse import values as v
from leases.accept.words import _

QUERY_GPU_FIELDS: tuple[str, ...] = (
    "index",
    "name",
    "pci.device_id",
    "memory.total",
    "memory.used",
    "driver_version",
    "ecc.mode.current",
    "mig.mode.current",
    "power.limit",
    "power.default_limit",
    "pcie.link.gen.max",
    "pcie.link.width.max",
    "pcie.link.gen.gpucurrent",
    "pcie.link.width.current",
    "clocks_event_reasons.active",
    "uuid",
    "pci.bus_id",
)
QUERY_GPU_COMMAND = (
    f"nvidia-smi --query-gpu={','.join(QUERY_GPU_FIELDS)} --format=csv,noheader,nounits"
)
MAX_CHARS = 1024 * 1024


@dataclass(frozen=True)
class SmiRow:
    """One GPU of the acceptance query."""

    index: int | None
    name: str
    pci_device_id: str  # "20b2" from 0x20B210DE; "" when unknown
    memory_total_mib: int | None
    memory_used_mib: int | None
    driver_version: str
    ecc_current: str  # "Enabled", "Disabled", "" when [N/A]
    mig_current: str
    power_limit_w: float | None
    default_power_limit_w: float | None
    pcie_gen_max: int | None
    pcie_width_max: int | None
    pcie_gen_current: int | None
    pcie_width_current: int | None
    clocks_event_reasons: int | None  # the bit mask (0x0000000000000001 = GPU idle)
    uuid: str
    bus_id: str


@dataclass(frozen=True)
class SmiRows:
    rows: tuple[SmiRow, ...] = ()
    problems: tuple[str, ...] = ()


def _opt(token: str) -> str:
    return "" if v.unknown(token) else v.text(token)


def _mask(token: str) -> int | None:
    text = token.strip()
    if v.unknown(text) or len(text) > 20:
        return None
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return None


def row_of(tokens: list[str]) -> SmiRow:
    t = [x.strip() for x in tokens]
    return SmiRow(
        index=v.whole(t[0]),
        name=_opt(t[1]),
        pci_device_id=v.device_id(t[2]),
        memory_total_mib=v.whole(t[3]),
        memory_used_mib=v.whole(t[4]),
        driver_version=_opt(t[5]),
        ecc_current=_opt(t[6]),
        mig_current=_opt(t[7]),
        power_limit_w=v.number(t[8]),
        default_power_limit_w=v.number(t[9]),
        pcie_gen_max=v.whole(t[10]),
        pcie_width_max=v.whole(t[11]),
        pcie_gen_current=v.whole(t[12]),
        pcie_width_current=v.whole(t[13]),
        clocks_event_reasons=_mask(t[14]),
        uuid=_opt(t[15]),
        bus_id=_opt(t[16]),
    )


def parse_query_gpu(text: str) -> SmiRows:
    """The query's CSV as rows; never raises. A GPU name holds no comma in practice, but a
    row with more fields than asked is read with the name taking the surplus."""
    problems: list[str] = []
    if len(text) > MAX_CHARS:
        problems.append(
            _("output longer than {count} characters: the rest was not read").format(
                count=MAX_CHARS
            )
        )
        text = text[:MAX_CHARS]
    rows: list[SmiRow] = []
    want = len(QUERY_GPU_FIELDS)
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        tokens = line.split(",")
        if len(tokens) > want:  # the surplus belongs to the name (field 2)
            extra = len(tokens) - want
            tokens = [tokens[0], ",".join(tokens[1 : 2 + extra]), *tokens[2 + extra :]]
        if len(tokens) != want:
            problems.append(
                _("line {line}: expected {want} comma-separated values, got {got}").format(
                    line=number, want=want, got=len(tokens)
                )
            )
            continue
        if len(rows) >= v.MAX_GPUS:
            problems.append(
                _("more than {count} GPUs listed: the rest were not read").format(count=v.MAX_GPUS)
            )
            break
        rows.append(row_of(tokens))
    if not rows and not problems:
        problems.append(_("nvidia-smi listed no GPU"))
    return SmiRows(tuple(rows), tuple(problems))
