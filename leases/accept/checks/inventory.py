"""Inventory against the lease: how many GPUs, which model (by name and PCI device id),
memory.total against the model's nominal figure (ECC mode beside it), driver and CUDA.

A fake-VRAM node (an "A100 80GB" showing 24564 MiB) or a GPU named for another model
fails, in words a provider accepts: what was expected, what was found, on which GPU, from
which command.
"""

from __future__ import annotations

from collections.abc import Sequence

from leases.accept.checks.smi import gpu_label, per_gpu, read_q, read_rows, said_once, unread
from leases.accept.engine import Check, Context, Settings, Sold
from leases.accept.facts import SmiQuery
from leases.accept.nominal import Lookup, Nominal, by_name, by_pci
from leases.accept.parse._text import digits
from leases.accept.parse.smiquery import SmiRow
from leases.core.acceptance import CheckResult, Level, Status, worse
from leases.core.gpumodels import gpu_key
from leases.core.textsafe import visible

TITLE = "Inventory against the lease"
QUERY = "nvidia-smi --query-gpu"


def _name(row: SmiRow) -> str:
    return visible(row.name, 80)


def judge_count(rows: Sequence[SmiRow], sold: Sold, keys: tuple[str, ...]) -> CheckResult:
    n = len(rows)
    cid, title = "inventory.count", "GPU count"
    found = f"{n} GPU{'s' if n != 1 else ''}"
    if sold.gpu_count <= 0:
        words = f"skipped, because the lease records no GPU count; {QUERY} lists {found}"
        return CheckResult(cid, title, Status.SKIPPED, words, "", found, keys)
    expected = f"{sold.gpu_count} GPU{'s' if sold.gpu_count != 1 else ''}"
    if n < sold.gpu_count:
        words = f"{QUERY} lists {found}; the lease says {sold.gpu_count}"
        return CheckResult(cid, title, Status.FAILED, words, expected, found, keys)
    if n > sold.gpu_count:
        words = f"{QUERY} lists {found}, more than the {sold.gpu_count} the lease says"
        return CheckResult(cid, title, Status.WARNED, words, expected, found, keys)
    return CheckResult(
        cid, title, Status.PASSED, f"{found}, as the lease says", expected, found, keys
    )


def _sold_nominal(rows: Sequence[SmiRow], sold: Sold) -> Lookup:
    """The sold model's nominal figures; where the sold name leaves the memory size open
    (an "A100"), the card the PCI id names, if it is of the sold model."""
    found = by_name(sold.gpu_model, sold.vram_gib)
    if found.nominal is not None or not sold.gpu_model:
        return found
    key = gpu_key(sold.gpu_model)
    for row in rows:
        card = by_pci(row.pci_device_id)
        if card is not None and gpu_key(card.model) == key:
            return Lookup(card, "")
    return found


def judge_model(rows: Sequence[SmiRow], sold: Sold, keys: tuple[str, ...]) -> CheckResult:
    cid, title = "inventory.model", "GPU model"
    if not sold.gpu_model:
        names = ", ".join(sorted({_name(r) for r in rows}))
        words = f"skipped, because the lease records no GPU model; the node shows {names}"
        return CheckResult(cid, title, Status.SKIPPED, words, "", names, keys)
    want = gpu_key(sold.gpu_model)
    shown = visible(sold.gpu_model, 60)
    wrong: list[str] = []
    unread: list[str] = []
    for i, row in enumerate(rows):
        card = by_pci(row.pci_device_id)
        if not row.name:  # [N/A]: the PCI id alone tells the card, where zuka knows it
            if card is None:
                unread.append(
                    f"{gpu_label(row.index, i)} prints no name and a PCI device id zuka does "
                    "not know"
                )
            elif gpu_key(card.model) != want:
                wrong.append(
                    f"{gpu_label(row.index, i)} prints no name; its PCI device id "
                    f"{row.pci_device_id} is the {card.model}'s"
                )
        elif gpu_key(row.name) != want:
            wrong.append(f"{gpu_label(row.index, i)} is named {_name(row)!r}")
        elif card is not None and gpu_key(card.model) != want:
            wrong.append(
                f"{gpu_label(row.index, i)} is named {_name(row)!r} but its PCI device id "
                f"{row.pci_device_id} is the {card.model}'s"
            )
    found = ", ".join(sorted({_name(r) for r in rows}))
    if wrong:
        words = f"the lease says {shown}; {'; '.join(wrong[:8])} ({QUERY} name,pci.device_id)"
        return CheckResult(cid, title, Status.FAILED, words, shown, found, keys)
    if unread:
        words = f"not checked: {'; '.join(unread[:8])} ({QUERY} name,pci.device_id)"
        return CheckResult(cid, title, Status.NOT_CHECKED, words, shown, found, keys)
    return CheckResult(
        cid, title, Status.PASSED, f"every GPU is the {shown} the lease says", shown, found, keys
    )


def _ecc_on(row: SmiRow) -> bool | None:
    state = row.ecc_current.lower()
    return True if state == "enabled" else False if state == "disabled" else None


def vram_verdict(
    total: int, card: Nominal, ecc_on: bool | None, tolerance: float
) -> tuple[Status, int]:
    """Whether memory.total is what the card shows, with ECC in the state found: PASSED
    within the tolerance (either ECC state where ECC is unknown), FAILED below, WARNED
    above (more than sold is no loss). Returns the figure compared against."""
    states = [ecc_on] if ecc_on is not None else [False, True]
    figures = [card.memory_for(s) for s in states]
    for figure in figures:
        if abs(total - figure) <= figure * tolerance:
            return Status.PASSED, figure
    figure = min(figures, key=lambda f: abs(total - f))
    return (Status.FAILED if total < figure else Status.WARNED), figure


def judge_vram(
    rows: Sequence[SmiRow], sold: Sold, settings: Settings, keys: tuple[str, ...]
) -> CheckResult:
    cid, title = "inventory.vram", "VRAM per GPU"
    lookup = _sold_nominal(rows, sold)
    card = lookup.nominal
    label = f"the {card.model} has" if card else ""
    kind_known = card is not None
    if card is None and sold.vram_gib:
        # No nominal figures, but the lease records the VRAM sold: compare with it, allowing
        # the 1/16 that ECC takes on GDDR (zuka cannot tell the memory kind of an unknown card).
        card = Nominal(f"{sold.gpu_model} as sold", sold.vram_gib * 1024, (), gddr=True)
        label = f"{lookup.words}; the lease records {sold.vram_gib} GiB per GPU,"
    if card is None:
        return CheckResult(
            cid, title, Status.SKIPPED, f"skipped, because {lookup.words}", evidence=keys
        )
    tol = f"±{settings.vram_tolerance * 100:g} %"
    worst = Status.PASSED
    lines: list[str] = []
    notes: list[str] = []
    for i, row in enumerate(rows):
        total = row.memory_total_mib
        ecc = row.ecc_current or "unknown"
        if total is None:
            lines.append(f"{gpu_label(row.index, i)}: memory.total unreadable")
            worst = worse(worst, Status.NOT_CHECKED)
            continue
        ecc_on = _ecc_on(row) if kind_known else None  # either figure for an unknown card
        status, figure = vram_verdict(total, card, ecc_on, settings.vram_tolerance)
        if status is not Status.PASSED:
            lines.append(
                f"{gpu_label(row.index, i)} reports {total} MiB (memory.total, ECC {ecc}); "
                f"{label} {figure} MiB ({tol})"
            )
            worst = worse(worst, status)
        elif card.gddr and _ecc_on(row) and figure != card.memory_for(False):
            notes.append(
                f"{gpu_label(row.index, i)}: {total} MiB with ECC on, which takes 1/16 of "
                f"GDDR memory ({card.memory_for(False)} MiB with ECC off)"
            )
    expected = f"{card.memory_mib} MiB ({tol})"
    found = per_gpu(
        [
            (gpu_label(r.index, i), f"{r.memory_total_mib} MiB ECC {r.ecc_current or 'unknown'}")
            for i, r in enumerate(rows)
        ]
    )
    if worst is Status.PASSED:
        words = f"every GPU shows the {card.model}'s memory ({expected})"
        if notes:
            words += "; " + "; ".join(notes[:4])
        return CheckResult(cid, title, Status.PASSED, words, expected, found, keys)
    return CheckResult(cid, title, worst, said_once(lines), expected, found, keys)


def _cuda_major(version: str) -> int | None:
    head = version.split(".")[0].strip()
    return int(head) if digits(head) and len(head) < 4 else None


def judge_versions(
    rows: Sequence[SmiRow], facts: SmiQuery | None, keys: tuple[str, ...]
) -> CheckResult:
    cid, title = "inventory.driver", "Driver and CUDA"
    driver = next((r.driver_version for r in rows if r.driver_version), "")
    if not driver and facts is not None:
        driver = facts.driver_version
    cuda = facts.cuda_version if facts is not None else ""
    found = f"driver {visible(driver or 'unknown', 40)}, CUDA {visible(cuda or 'unknown', 40)}"
    major = _cuda_major(cuda)
    if major is not None and major < 12:
        words = f"{found}: CUDA below 12 (vast.ai's bar for verified hosts)"
        return CheckResult(cid, title, Status.WARNED, words, "CUDA 12 or later", found, keys)
    return CheckResult(cid, title, Status.PASSED, found, "CUDA 12 or later", found, keys)


async def run(ctx: Context) -> list[CheckResult]:
    read = await read_rows(ctx)
    if read.rows is None:
        return [unread("inventory.query", TITLE, read)]
    rows = read.rows.rows
    q = await read_q(ctx)
    results = [
        judge_count(rows, ctx.sold, read.keys),
        judge_model(rows, ctx.sold, read.keys),
        judge_vram(rows, ctx.sold, ctx.settings, read.keys),
        judge_versions(rows, q.facts, read.keys + q.keys),
    ]
    return results


CHECK = Check("inventory", TITLE, Level.QUICK, run, cost=0)
