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
from leases.accept.words import N_, _, ngettext
from leases.core.acceptance import CheckResult, Level, Status, worse
from leases.core.gpumodels import gpu_key
from leases.core.textsafe import visible

TITLE = N_("Inventory against the lease")
QUERY = "nvidia-smi --query-gpu"


def _name(row: SmiRow) -> str:
    return visible(row.name, 80)


def judge_count(rows: Sequence[SmiRow], sold: Sold, keys: tuple[str, ...]) -> CheckResult:
    n = len(rows)
    cid, title = "inventory.count", _("GPU count")
    found = ngettext("{count} GPU", "{count} GPUs", n).format(count=n)
    if sold.gpu_count <= 0:
        words = _("skipped, because the lease records no GPU count; {command} lists {found}")
        words = words.format(command=QUERY, found=found)
        return CheckResult(cid, title, Status.SKIPPED, words, "", found, keys)
    want = sold.gpu_count
    expected = ngettext("{count} GPU", "{count} GPUs", want).format(count=want)
    if n < want:
        words = _("{command} lists {found}; the lease says {sold}")
        words = words.format(command=QUERY, found=found, sold=want)
        return CheckResult(cid, title, Status.FAILED, words, expected, found, keys)
    if n > want:
        words = _("{command} lists {found}, more than the {sold} the lease says")
        words = words.format(command=QUERY, found=found, sold=want)
        return CheckResult(cid, title, Status.WARNED, words, expected, found, keys)
    words = _("{found}, as the lease says").format(found=found)
    return CheckResult(cid, title, Status.PASSED, words, expected, found, keys)


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
    cid, title = "inventory.model", _("GPU model")
    if not sold.gpu_model:
        names = ", ".join(sorted({_name(r) for r in rows}))
        words = _("skipped, because the lease records no GPU model; the node shows {names}")
        words = words.format(names=names)
        return CheckResult(cid, title, Status.SKIPPED, words, "", names, keys)
    want = gpu_key(sold.gpu_model)
    shown = visible(sold.gpu_model, 60)
    wrong: list[str] = []
    unread: list[str] = []
    for i, row in enumerate(rows):
        card = by_pci(row.pci_device_id)
        gpu, pci = gpu_label(row.index, i), row.pci_device_id
        if not row.name:  # [N/A]: the PCI id alone tells the card, where zuka knows it
            if card is None:
                unread.append(
                    _("{gpu} prints no name and a PCI device id zuka does not know").format(gpu=gpu)
                )
            elif gpu_key(card.model) != want:
                line = _("{gpu} prints no name; its PCI device id {pci} is the {model}'s")
                wrong.append(line.format(gpu=gpu, pci=pci, model=card.model))
        elif gpu_key(row.name) != want:
            wrong.append(_("{gpu} is named {name!r}").format(gpu=gpu, name=_name(row)))
        elif card is not None and gpu_key(card.model) != want:
            line = _("{gpu} is named {name!r} but its PCI device id {pci} is the {model}'s")
            wrong.append(line.format(gpu=gpu, name=_name(row), pci=pci, model=card.model))
    found = ", ".join(sorted({_name(r) for r in rows}))
    where = f"{QUERY} name,pci.device_id"
    if wrong:
        words = _("the lease says {sold}; {wrong} ({command})").format(
            sold=shown, wrong=_("; ").join(wrong[:8]), command=where
        )
        return CheckResult(cid, title, Status.FAILED, words, shown, found, keys)
    if unread:
        words = _("not checked: {why} ({command})").format(
            why=_("; ").join(unread[:8]), command=where
        )
        return CheckResult(cid, title, Status.NOT_CHECKED, words, shown, found, keys)
    words = _("every GPU is the {model} the lease says").format(model=shown)
    return CheckResult(cid, title, Status.PASSED, words, shown, found, keys)


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
    cid, title = "inventory.vram", _("VRAM per GPU")
    lookup = _sold_nominal(rows, sold)
    card = lookup.nominal
    kind_known = card is not None
    if card is None and sold.vram_gib:
        # No nominal figures, but the lease records the VRAM sold: compare with it, allowing
        # the 1/16 that ECC takes on GDDR (zuka cannot tell the memory kind of an unknown card).
        model = _("{model} as sold").format(model=sold.gpu_model)
        card = Nominal(model, sold.vram_gib * 1024, (), gddr=True)
    if card is None:
        words = _("skipped, because {why}").format(why=lookup.words)
        return CheckResult(cid, title, Status.SKIPPED, words, evidence=keys)
    tol = f"±{settings.vram_tolerance * 100:g} %"
    worst = Status.PASSED
    lines: list[str] = []
    notes: list[str] = []
    for i, row in enumerate(rows):
        total = row.memory_total_mib
        ecc = row.ecc_current or _("unknown")
        if total is None:
            lines.append(_("{gpu}: memory.total unreadable").format(gpu=gpu_label(row.index, i)))
            worst = worse(worst, Status.NOT_CHECKED)
            continue
        ecc_on = _ecc_on(row) if kind_known else None  # either figure for an unknown card
        status, figure = vram_verdict(total, card, ecc_on, settings.vram_tolerance)
        if status is not Status.PASSED:
            line = _("{gpu} reports {total} MiB (memory.total, ECC {ecc}); {comparison}")
            if kind_known:
                comparison = _("the {model} has {mib} MiB ({tolerance})")
            else:
                comparison = _(
                    "{why}; the lease records {gib} GiB per GPU, {mib} MiB ({tolerance})"
                )
            comparison = comparison.format(
                model=card.model, why=lookup.words, gib=sold.vram_gib, mib=figure, tolerance=tol
            )
            lines.append(
                line.format(
                    gpu=gpu_label(row.index, i), total=total, ecc=ecc, comparison=comparison
                )
            )
            worst = worse(worst, status)
        elif card.gddr and _ecc_on(row) and figure != card.memory_for(False):
            note = _(
                "{gpu}: {total} MiB with ECC on, which takes 1/16 of GDDR memory"
                " ({whole} MiB with ECC off)"
            )
            whole = card.memory_for(False)
            notes.append(note.format(gpu=gpu_label(row.index, i), total=total, whole=whole))
    expected = f"{card.memory_mib} MiB ({tol})"
    found = per_gpu(
        [
            (
                gpu_label(r.index, i),
                _("{mib} MiB ECC {ecc}").format(
                    mib=r.memory_total_mib, ecc=r.ecc_current or _("unknown")
                ),
            )
            for i, r in enumerate(rows)
        ]
    )
    if worst is Status.PASSED:
        words = _("every GPU shows the {model}'s memory ({expected})")
        words = words.format(model=card.model, expected=expected)
        if notes:
            words = _("; ").join([words, *notes[:4]])
        return CheckResult(cid, title, Status.PASSED, words, expected, found, keys)
    return CheckResult(cid, title, worst, said_once(lines), expected, found, keys)


def _cuda_major(version: str) -> int | None:
    head = version.split(".")[0].strip()
    return int(head) if digits(head) and len(head) < 4 else None


def judge_versions(
    rows: Sequence[SmiRow], facts: SmiQuery | None, keys: tuple[str, ...]
) -> CheckResult:
    cid, title = "inventory.driver", _("Driver and CUDA")
    driver = next((r.driver_version for r in rows if r.driver_version), "")
    if not driver and facts is not None:
        driver = facts.driver_version
    cuda = facts.cuda_version if facts is not None else ""
    found = _("driver {driver}, CUDA {cuda}").format(
        driver=visible(driver or _("unknown"), 40), cuda=visible(cuda or _("unknown"), 40)
    )
    major = _cuda_major(cuda)
    want = _("CUDA 12 or later")
    if major is not None and major < 12:
        words = _("{found}: CUDA below 12 (vast.ai's bar for verified hosts)").format(found=found)
        return CheckResult(cid, title, Status.WARNED, words, want, found, keys)
    return CheckResult(cid, title, Status.PASSED, found, want, found, keys)


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
