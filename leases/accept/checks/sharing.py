"""Shared or virtualised GPUs: vGPU (virtualisation mode, licence), MIG, HAMi-style limiters
(ld.so.preload naming libvgpu, limit variables, /usr/local/vgpu, /tmp/vgpulock), other
tenants' compute processes, and memory in use that no visible process explains.

HAMi fakes memory.total alike in CUDA and NVML, so inventory's comparison with the nominal
figure and these signs are what find it (ACCEPTANCE-FACTS.md, "Shared / virtualised VRAM").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from leases.accept.checks.smi import gpu_label, per_gpu, read_q, said_once, unread
from leases.accept.engine import Check, Context
from leases.accept.facts import SmiQuery
from leases.accept.parse._text import digits
from leases.accept.words import N_, _, pgettext
from leases.core.acceptance import CheckResult, Evidence, Level, Status, worse
from leases.core.models import GpuProcess
from leases.core.textsafe import visible
from leases.telemetry.nvsmi import APPS_COMMAND, NvsmiParseError, parse_compute_apps

TITLE = N_("Shared or virtualised GPUs")
LIST_COMMAND = "nvidia-smi -L"
PS_COMMAND = "ps -e -o pid="
PRELOAD_COMMAND = "cat /etc/ld.so.preload"
# Only the limiter variables travel back: the whole environment may hold secrets, and
# evidence is stored. (`env` alone would print every token the node's shell holds.)
ENV_COMMAND = "env | grep -E '^(CUDA_DEVICE_MEMORY_LIMIT|CUDA_DEVICE_SM_LIMIT|LD_PRELOAD)'"
PATHS_COMMAND = "ls -d /usr/local/vgpu /tmp/vgpulock"
VGPU_PATHS = ("/usr/local/vgpu", "/tmp/vgpulock")

WARN_UNEXPLAINED_MIB = 1024  # above the 300 MB – 1 GB a driver reserves
FAIL_UNEXPLAINED_MIB = 4096  # with no process at all on the GPU

_MIG_LINE = re.compile(r"^\s*MIG\s+\S+\s+Device\s+\d+", re.MULTILINE)
_LIMIT_VAR = re.compile(r"^(CUDA_DEVICE_MEMORY_LIMIT\w*|CUDA_DEVICE_SM_LIMIT\w*)=(.*)$")


def mode_words(mode: str) -> str:
    """nvidia-smi's virtualization mode as a person reads it in the language in use: its
    "None" is a whole GPU, no virtualisation (not a value missing: that is "unknown");
    English keeps nvidia-smi's own words."""
    words = {
        "None": pgettext("virtualization mode", "None"),
        "Pass-Through": pgettext("virtualization mode", "Pass-Through"),
    }
    return words.get(mode, mode)


def judge_virtualisation(facts: SmiQuery, keys: tuple[str, ...]) -> CheckResult:
    cid, title = "sharing.vgpu", _("Virtualisation mode")
    bad: list[str] = []
    modes: list[tuple[str, str]] = []
    for i, g in enumerate(facts.gpus):
        mode = g.virtualization_mode or _("unknown")
        gpu = gpu_label(g.index, i)
        modes.append((gpu, visible(mode_words(mode), 30)))
        if "vgpu" in mode.lower():
            line = _("{gpu} is a vGPU (Virtualization Mode {mode})")
            line = line.format(gpu=gpu, mode=visible(mode, 30))
            if g.vgpu_license:
                licence = visible(g.vgpu_license, 60)
                if licence.lower().startswith("unlicensed"):
                    more = _("{line}, licence {licence} (an unlicensed vGPU is throttled)")
                else:
                    more = _("{line}, licence {licence}")
                line = more.format(line=line, licence=licence)
            bad.append(line)
    found = per_gpu(modes)
    expected = _("None or Pass-Through (a whole GPU)")
    if bad:
        words = _("{lines}: a slice of a shared GPU, not a whole one (nvidia-smi -q)")
        words = words.format(lines=said_once(bad))
        return CheckResult(cid, title, Status.FAILED, words, expected, found, keys)
    words = _("whole GPUs: {found}").format(found=found)
    return CheckResult(cid, title, Status.PASSED, words, expected, found, keys)


def mig_lines(list_output: str) -> int:
    """How many MIG devices `nvidia-smi -L` lists ("  MIG 3g.40gb     Device  0: ...")."""
    return len(_MIG_LINE.findall(list_output[:1_000_000]))


def judge_mig(facts: SmiQuery, listed_mig: int, keys: tuple[str, ...]) -> CheckResult:
    cid, title = "sharing.mig", "MIG"
    on = [
        _("{gpu} MIG {mode} with {count} MIG devices").format(
            gpu=gpu_label(g.index, i), mode=visible(g.mig_current, 20), count=g.mig_devices
        )
        for i, g in enumerate(facts.gpus)
        if g.mig_current.lower() == "enabled" or g.mig_devices > 0
    ]
    want = _("MIG disabled")
    if on or listed_mig:
        listed = _("nvidia-smi -L lists {count} MIG devices").format(count=listed_mig)
        parts = on[:8] + ([listed] if listed_mig else [])
        found = _("; ").join(parts)
        words = _("{found}: the GPUs are partitioned, and the lease sold whole GPUs")
        words = words.format(found=found)
        return CheckResult(cid, title, Status.FAILED, words, want, found, keys)
    words = _("MIG is off on every GPU")
    return CheckResult(cid, title, Status.PASSED, words, want, _("off"), keys)


def limiter_signs(preload: Evidence, env: Evidence, paths: Evidence) -> list[str]:
    """HAMi-style limiter signs in what the three commands printed."""
    signs: list[str] = []
    if preload.exit_status == 0:
        for line in preload.stdout.splitlines()[:200]:
            if "vgpu" in line.lower():
                loads = _("/etc/ld.so.preload loads {library}")
                signs.append(loads.format(library=visible(line.strip(), 120)))
    for line in env.stdout.splitlines()[:200]:
        found = _LIMIT_VAR.match(line.strip())
        if found:
            setting = f"{found.group(1)}={visible(found.group(2), 40)}"
            signs.append(_("{setting} is set").format(setting=setting))
        elif line.startswith("LD_PRELOAD=") and "vgpu" in line.lower():
            signs.append(_("{setting} is set").format(setting=visible(line.strip(), 120)))
    for line in paths.stdout.splitlines()[:10]:
        if line.strip() in VGPU_PATHS:
            signs.append(_("{path} exists").format(path=line.strip()))
    return signs


def judge_limiters(signs: Sequence[str], keys: tuple[str, ...], unread: str = "") -> CheckResult:
    """unread: why the environment's limit variables could not be read ("" when they
    were): then no sign found is no pass."""
    cid, title = "sharing.limiter", _("GPU-sharing limiters (HAMi)")
    want = _("no limiter")
    if signs:
        words = _("{signs}: a GPU-sharing layer (HAMi-style) limits this node's GPUs")
        words = words.format(signs=_("; ").join(signs[:8]))
        return CheckResult(cid, title, Status.FAILED, words, want, _("; ").join(signs), keys)
    if unread:
        words = _(
            "no libvgpu preload or vgpu lock files, but the limit variables could not be read:"
            " {why}"
        ).format(why=unread)
        return CheckResult(cid, title, Status.WARNED, words, want, _("unread"), keys)
    words = _("no libvgpu preload, limit variables or vgpu lock files")
    return CheckResult(cid, title, Status.PASSED, words, want, _("none"), keys)


def _by_uuid(facts: SmiQuery) -> dict[str, int]:
    return {g.uuid: (g.index if g.index is not None else i) for i, g in enumerate(facts.gpus)}


def judge_tenants(
    facts: SmiQuery,
    apps: Sequence[GpuProcess],
    keys: tuple[str, ...],
    visible_pids: frozenset[int] | None = None,
) -> CheckResult:
    """Compute processes on the GPUs. One the login cannot see in the node's process table
    (`ps -e`) runs in another container or for another tenant: that fails. One it can see
    may be the lab's own job (a node re-checked while in use): that warns, since a node
    just handed over should run nothing. Where ps could not be read, every process fails."""
    cid, title = "sharing.tenants", _("Other tenants' processes")
    index = _by_uuid(facts)
    # The compute-apps query names no process (nvidia-smi prints names raw, so a name could
    # forge rows there); the names `nvidia-smi -q` gives (XML or text) are shown by pid.
    named = {proc.pid: proc.name for g in facts.gpus for proc in g.processes if proc.name}
    procs: list[tuple[str, int | None, str, float | None, str]] = [
        (str(index.get(p.gpu_uuid, "?")), p.pid, p.process_name or named.get(p.pid, ""),
         p.used_mib, "")
        for p in apps
    ]  # fmt: skip
    seen = {p.pid for p in apps}
    for i, g in enumerate(facts.gpus):
        for proc in g.processes:
            if "C" in proc.type and proc.pid not in seen:
                where = str(g.index if g.index is not None else i)
                procs.append((where, proc.pid, proc.name, proc.used_mib, " (nvidia-smi -q)"))
    hidden, shown = [], []
    want = _("no compute process")
    for gpu, pid, name, used, source in procs:
        if name and used is not None:
            line = _("GPU {gpu} runs pid {pid} {name} using {mib:g} MiB")
        elif name:
            line = _("GPU {gpu} runs pid {pid} {name}")
        elif used is not None:
            line = _("GPU {gpu} runs pid {pid} using {mib:g} MiB")
        else:
            line = _("GPU {gpu} runs pid {pid}")
        line = line.format(gpu=gpu, pid=pid, name=repr(visible(name, 60)), mib=used) + source
        if visible_pids is not None and pid in visible_pids:
            shown.append(line)
        else:
            hidden.append(line)
    if hidden:
        if visible_pids is not None:
            words = _("{lines}: not in the node's process table: another container or tenant"
                      " runs it")  # fmt: skip
        else:
            words = _("{lines}: a node just handed over should run nothing")
        words = words.format(lines=_("; ").join(hidden[:8]))
        return CheckResult(cid, title, Status.FAILED, words, want, _("; ").join(hidden[:16]), keys)
    if shown:
        words = _("{lines}: visible to the login, so perhaps the lab's own job; a node just"
                  " handed over should run nothing")  # fmt: skip
        words = words.format(lines=_("; ").join(shown[:8]))
        return CheckResult(cid, title, Status.WARNED, words, want, _("; ").join(shown[:16]), keys)
    words = _("no compute process on any GPU")
    return CheckResult(cid, title, Status.PASSED, words, want, _("none"), keys)


def visible_pids(ev: Evidence) -> frozenset[int] | None:
    """The pids `ps -e -o pid=` listed, None where it could not run."""
    if ev.failure or ev.exit_status != 0:
        return None
    pids = {int(w) for w in ev.stdout.split()[:100_000] if digits(w) and len(w) < 10}
    return frozenset(pids) if pids else None


def judge_unexplained(
    facts: SmiQuery, apps: Sequence[GpuProcess], keys: tuple[str, ...]
) -> CheckResult:
    """Memory in use that no visible process explains: inside a container the processes of
    others are hidden, but their memory shows (nvidia-docker issues 179 and 1483)."""
    cid, title = "sharing.memory", _("Memory in use without a process")
    worst = Status.PASSED
    lines: list[str] = []
    for i, g in enumerate(facts.gpus):
        if g.memory_used_mib is None:
            continue
        own = [p.used_mib or 0 for p in apps if p.gpu_uuid and p.gpu_uuid == g.uuid]
        own += [p.used_mib or 0 for p in g.processes if not any(a.pid == p.pid for a in apps)]
        unexplained = g.memory_used_mib - sum(own)
        if unexplained > FAIL_UNEXPLAINED_MIB and not own:
            status = Status.FAILED
        elif unexplained > WARN_UNEXPLAINED_MIB:
            status = Status.WARNED
        else:
            continue
        line = _("{gpu} has {used} MiB in use, {unexplained:g} MiB of it by no process"
                 " nvidia-smi shows")  # fmt: skip
        lines.append(
            line.format(gpu=gpu_label(g.index, i), used=g.memory_used_mib, unexplained=unexplained)
        )
        worst = worse(worst, status)
    expected = _("at most {mib} MiB used with no process (driver reservation)")
    expected = expected.format(mib=WARN_UNEXPLAINED_MIB)
    if lines:
        words = _("{lines}: another tenant may hold these GPUs").format(lines=said_once(lines))
        return CheckResult(cid, title, worst, words, expected, _("; ").join(lines[:16]), keys)
    return CheckResult(
        cid,
        title,
        Status.PASSED,
        _("no memory in use beyond what processes explain"),
        expected,
        "",
        keys,
    )


async def run(ctx: Context) -> list[CheckResult]:
    q = await read_q(ctx)
    if q.facts is None:
        return [unread("sharing.query", TITLE, q)]
    facts = q.facts
    listing = await ctx.probe.run("smi-L", LIST_COMMAND)
    results = [
        judge_virtualisation(facts, q.keys),
        judge_mig(
            facts,
            mig_lines(listing.stdout) if listing.exit_status == 0 else 0,
            (*q.keys, listing.key),
        ),
    ]
    preload = await ctx.probe.run("ld-preload", PRELOAD_COMMAND)
    env = await ctx.probe.run("env-limits", ENV_COMMAND)
    paths = await ctx.probe.run("vgpu-paths", PATHS_COMMAND)
    keys = (preload.key, env.key, paths.key)
    if any(e.failure for e in (preload, env, paths)):
        why = next(e.failure for e in (preload, env, paths) if e.failure)
        results.append(
            CheckResult("sharing.limiter", _("GPU-sharing limiters (HAMi)"), Status.NOT_CHECKED,
                        _("not checked: {why}").format(why=why), evidence=keys)
        )  # fmt: skip
    else:
        # grep exits 1 when no variable matched; anything else is no answer.
        env_unread = (
            ""
            if env.exit_status in (0, 1)
            else _("`{command}` exited {status} ({said})").format(
                command=env.command,
                status=env.exit_status,
                said=visible((env.stderr or env.stdout).strip(), 160),
            )
        )
        results.append(judge_limiters(limiter_signs(preload, env, paths), keys, env_unread))
    apps_ev = await ctx.probe.run("compute-apps", APPS_COMMAND)
    apps: list[GpuProcess] = []
    app_keys = (*q.keys, apps_ev.key)
    if apps_ev.exit_status == 0 and not apps_ev.failure:
        try:
            apps = parse_compute_apps(apps_ev.stdout, ctx.sold.node)
        except NvsmiParseError as exc:
            results.append(
                CheckResult("sharing.tenants", _("Other tenants' processes"), Status.NOT_CHECKED,
                            _("not checked: {why}").format(why=visible(exc, 200)),
                            evidence=app_keys)
            )  # fmt: skip
            return results
    # Where the query could not run, -q's process list is judged alone.
    ps = await ctx.probe.run("ps", PS_COMMAND)
    results.append(judge_tenants(facts, apps, (*app_keys, ps.key), visible_pids(ps)))
    results.append(judge_unexplained(facts, apps, app_keys))
    return results


CHECK = Check("sharing", TITLE, Level.QUICK, run, cost=1)
