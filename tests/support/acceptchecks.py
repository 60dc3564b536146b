"""Check families of the tests' own, for the acceptance use case and command: one reads
`nvidia-smi -L` through the probe and fails on fewer GPUs than sold; one always passes."""

from __future__ import annotations

from collections.abc import Sequence

from leases.accept.engine import Check, Context
from leases.core.acceptance import CheckResult, Level, Status


async def _count(ctx: Context) -> Sequence[CheckResult]:
    ev = await ctx.probe.run("gpu-list", "nvidia-smi -L", timeout=20)
    if ev.failure:
        return [CheckResult("test.count", "GPU count", Status.NOT_CHECKED, ev.failure)]
    found = sum(1 for line in ev.stdout.splitlines() if line.startswith("GPU "))
    want = ctx.sold.gpu_count
    status = Status.PASSED if found >= want else Status.FAILED
    return [
        CheckResult(
            "test.count",
            "GPU count",
            status,
            f"nvidia-smi -L lists {found} GPUs; the lease says {want}",
            expected=str(want),
            found=str(found),
            evidence=("gpu-list",),
        )
    ]


COUNT = Check("test", "GPU count against the lease", Level.QUICK, _count)


async def _ok(ctx: Context) -> Sequence[CheckResult]:
    return [CheckResult("test.ok", "Always", Status.PASSED, "fine")]


ALWAYS = Check("ok", "Always passes", Level.QUICK, _ok)
