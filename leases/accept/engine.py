"""One acceptance run: the checks of a level, cheapest first, each told as it starts and
ends, their results and the evidence they rest on gathered into a Verdict.

A check is an async function of a Context returning its findings. It runs its commands
through `ctx.probe` (each once per run), parses what came back with `leases.accept.parse`,
and judges with pure functions. A check that raises is a defect of zuka, never the node's
fault and never a pass: it becomes a "not checked" finding naming the error. When the node
cannot be reached, every check left is "not checked".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from leases.accept.probe import Probe, Runner
from leases.accept.words import _, speaking, speaking_now
from leases.config.sections import AcceptConfig
from leases.core.acceptance import CheckResult, Level, Status, Verdict
from leases.core.i18n import EN
from leases.core.models import Interconnect
from leases.core.textsafe import visible
from leases.ssh.faults import said_again

LEVELS = (Level.QUICK, Level.STANDARD, Level.BURN)


@dataclass(frozen=True)
class Sold:
    """What the ledger says the node is: the facts every check compares against."""

    node: str
    gpu_model: str = ""  # as sold, any spelling (leases.core.gpumodels makes it comparable)
    gpu_count: int = 0  # 0: not recorded
    vram_gib: int | None = None
    interconnect: Interconnect = Interconnect.UNKNOWN
    nvlinks: int | None = None  # NVLinks between each GPU pair as sold (NV18 -> 18)
    ib_gbps: int | None = None  # InfiniBand rate per port as sold (400)
    # Fingerprints (SHA256:...) of the keys the lab expects in authorized_keys: the node's
    # ssh_key resources and the key zuka logs in with.
    expected_keys: tuple[str, ...] = ()
    local: bool = False


# The engine's settings are the [accept] config itself: its tolerances and what the node
# should offer, with their defaults written once (leases.config.sections).
Settings = AcceptConfig


# The password proof: a fresh login offering no key, recording whether the node asked for
# a password or keyboard-interactive answer. Injected (leases.ssh); None where not possible
# (a local node).
PasswordProof = Callable[[], Awaitable["LoginOffer"]]
# Bytes per second node -> jump host over the node's SSH connection; injected.
Throughput = Callable[[int], Awaitable[float]]


@dataclass(frozen=True)
class LoginOffer:
    """What a password-only login attempt met: the methods the node offered, and whether
    the node itself refused it (not a jump host, a timeout)."""

    refused: bool
    methods: tuple[str, ...]  # "publickey", "password", "keyboard-interactive", ...
    words: str


@dataclass
class Context:
    sold: Sold
    probe: Probe
    level: Level
    settings: Settings = field(default_factory=Settings)
    password_proof: PasswordProof | None = None
    throughput: Throughput | None = None
    # What a check measured or drew once for this run (a nonce, a login attempt, a timed
    # transfer): the same when the check is judged again in another language.
    memo: dict[str, Any] = field(default_factory=dict)

    async def once(self, key: str, make: Callable[[], Awaitable[Any]]) -> Any:
        """make()'s answer, made once per run under key (an exception is kept and raised
        again)."""
        if key not in self.memo:
            try:
                self.memo[key] = (True, await make())
            except Exception as exc:
                self.memo[key] = (False, exc)
        ok, value = self.memo[key]
        if not ok:
            raise value
        return value


CheckFn = Callable[[Context], Awaitable[Sequence[CheckResult]]]


@dataclass(frozen=True)
class Check:
    id: str  # the family: "inventory", "sharing", "health", "links", "heavy", "host", "sshd"
    # What the dashboard shows while it runs: "Inventory against the lease" (marked N_,
    # shown with _).
    title: str
    level: Level  # the lowest level it runs at
    run: CheckFn
    cost: int = 0  # cheapest first: sorted by (cost, registry order)


# Told as each check starts (its title) and as each finding comes.
Started = Callable[[Check], None]
Found = Callable[[CheckResult], None]


def _at_level(check: Check, level: Level) -> bool:
    return LEVELS.index(check.level) <= LEVELS.index(level)


def not_checked(check: Check, why: str) -> CheckResult:
    return CheckResult(f"{check.id}.run", _(check.title), Status.NOT_CHECKED, why)


async def _judged(check: Check, ctx: Context) -> Sequence[CheckResult]:
    """The check's findings in the language the checks speak now."""
    if ctx.probe.unreachable:
        why = _("not checked: the node could not be reached ({why})")
        return [not_checked(check, why.format(why=said_again(ctx.probe.unreachable)))]
    try:
        return await check.run(ctx)
    except Exception as exc:  # a defect of zuka's: said, never a pass
        why = f"{type(exc).__name__}: {visible(exc, 200)}"
        words = _("not checked: zuka's check failed ({why})").format(why=why)
        return [not_checked(check, words)]


async def run(
    checks: Sequence[Check],
    ctx: Context,
    *,
    now: Callable[[], datetime],
    started: Started | None = None,
    found: Found | None = None,
    shown: list[CheckResult] | None = None,
) -> Verdict:
    """Run the checks of ctx.level, cheapest first, and gather the verdict. The verdict is
    in English (it is stored); `found` and `shown` get each finding in the language in use
    (judged again over the same evidence, nothing run twice)."""
    lang = speaking_now()
    began = now()
    results: list[CheckResult] = []
    order = sorted(
        (c for c in checks if _at_level(c, ctx.level)),
        key=lambda c: c.cost,
    )
    for check in order:
        if started is not None:
            started(check)
        with speaking(EN):
            out = await _judged(check, ctx)
        told = out
        if lang != EN:
            with speaking(lang):
                told = await _judged(check, ctx)
            if len(told) != len(out):  # judged otherwise the second time: say the first
                told = out
        results.extend(out)
        if shown is not None:
            shown.extend(told)
        if found is not None:
            for result in told:
                found(result)
    return Verdict(ctx.sold.node, ctx.level, began, now(), tuple(results), ctx.probe.evidence)


def new_context(
    sold: Sold,
    runner: Runner,
    level: Level,
    settings: Settings | None = None,
    *,
    password_proof: PasswordProof | None = None,
    throughput: Throughput | None = None,
) -> Context:
    ctx = Context(sold, Probe(runner), level, settings or Settings(), password_proof, throughput)
    return memoized(ctx)


def memoized(ctx: Context) -> Context:
    """ctx with its password proof and throughput measured once per run (the engine judges
    a check twice where the language in use is not English)."""
    proof, rate = ctx.password_proof, ctx.throughput
    if proof is not None:
        p = proof

        async def once_proof() -> LoginOffer:
            answer: LoginOffer = await ctx.once("password-proof", p)
            return answer

        ctx.password_proof = once_proof
    if rate is not None:
        r = rate

        async def once_rate(nbytes: int) -> float:
            answer: float = await ctx.once(f"throughput-{nbytes}", lambda: r(nbytes))
            return answer

        ctx.throughput = once_rate
    return ctx
