"""The host around the GPUs: space and file-system type on the data paths, and how fast
data leaves the node for the jump host.

Data paths that do not exist are skipped, each said. Free space below
Settings.min_free_gib warns; a data path on overlay or tmpfs warns that what is written
there does not survive the container or a reboot. Throughput is `ctx.throughput(nbytes)`
(leases.ssh.throughput: bytes read over the node's own SSH connection, timed); below
MIN_MBPS warns (*ours*).
"""

from __future__ import annotations

import shlex

from leases.accept.engine import Check, Context, Settings
from leases.accept.parse.df import DfReport, DiskSpace, parse_df
from leases.accept.probe import missing_tool
from leases.accept.words import DISCARDED, N_, _
from leases.core.acceptance import CheckResult, Evidence, Level, Status
from leases.core.textsafe import visible
from leases.ssh.errors import SshError

MIN_MBPS = 10.0  # ours: below this, copying a checkpoint off the node takes hours
THROUGHPUT_BYTES = 64 * 1024 * 1024
# File systems whose contents do not outlive the container (overlay) or a reboot (tmpfs).
VOLATILE = frozenset({"overlay", "tmpfs", "ramfs", "aufs"})
KIB_PER_GIB = 1024 * 1024


def df_command(paths: tuple[str, ...]) -> str:
    return "df -PT -- " + " ".join(shlex.quote(p) for p in paths)


def _space_words(s: DiskSpace) -> str:
    free = s.available_kib / KIB_PER_GIB
    size = s.size_kib / KIB_PER_GIB
    words = _("{path}: {free:.1f} GiB free of {size:.1f} GiB, {fstype} ({device} on {mount})")
    return words.format(
        path=visible(s.path, 80),
        free=free,
        size=size,
        fstype=visible(s.fstype, 20),
        device=visible(s.filesystem, 60),
        mount=visible(s.mount, 80),
    )


def judge_disk(report: DfReport, settings: Settings, ev: Evidence) -> list[CheckResult]:
    keys = (ev.key,)
    out: list[CheckResult] = []
    for path in report.missing:
        out.append(
            CheckResult(
                f"host.disk:{path}",
                _("Disk {paths}").format(paths=path),
                Status.SKIPPED,
                _("skipped, because {path} does not exist on the node").format(
                    path=visible(path, 80)
                ),
                evidence=keys,
            )
        )
    want = _("at least {gib} GiB free, on a file system that persists")
    want = want.format(gib=settings.min_free_gib)
    # One finding per file system: the data paths on it named together.
    groups: dict[tuple[str, str], list[DiskSpace]] = {}
    for space in report.spaces:
        groups.setdefault((space.filesystem, space.mount), []).append(space)
    for group in groups.values():
        s = group[0]
        paths = ", ".join(visible(g.path, 60) for g in group)
        check, title = f"host.disk:{s.path}", _("Disk {paths}").format(paths=paths)
        found = _space_words(s)
        if len(group) > 1:
            found = _("{found}; the same file system holds {paths}").format(
                found=found, paths=", ".join(visible(g.path, 60) for g in group[1:])
            )
        problems = []
        if s.available_kib < settings.min_free_gib * KIB_PER_GIB:
            problems.append(_("less than {gib} GiB free").format(gib=settings.min_free_gib))
        if s.fstype.lower() in VOLATILE:
            if s.fstype.lower() in ("tmpfs", "ramfs"):
                lost = _("{fstype} does not survive a reboot: data written there is lost")
            else:
                lost = _("{fstype} does not survive the container: data written there is lost")
            problems.append(lost.format(fstype=visible(s.fstype, 20)))
        if problems:
            out.append(
                CheckResult(
                    check,
                    title,
                    Status.WARNED,
                    _("{problems}: {found}").format(problems=_("; ").join(problems), found=found),
                    want,
                    found,
                    keys,
                )
            )
        else:
            out.append(CheckResult(check, title, Status.PASSED, found, want, found, keys))
    if report.problems:
        shown = "; ".join(visible(p, 160) for p in report.problems[:4])
        status = Status.NOT_CHECKED if not report.spaces and not report.missing else Status.WARNED
        out.append(
            CheckResult(
                "host.disk",
                _("Disk space"),
                status,
                _("df's output could not all be read: {problems}").format(problems=shown),
                evidence=keys,
            )
        )
    return out


async def check_disk(ctx: Context) -> list[CheckResult]:
    paths = tuple(dict.fromkeys(ctx.settings.data_paths))
    if not paths:
        return [
            CheckResult(
                "host.disk",
                _("Disk space"),
                Status.SKIPPED,
                _("skipped, because no data paths are configured ([accept] data_paths)"),
            )
        ]
    ev = await ctx.probe.run("df", df_command(paths))
    if ev.failure:
        return [
            CheckResult(
                "host.disk",
                _("Disk space"),
                Status.NOT_CHECKED,
                _("not checked: df did not run ({why})").format(why=visible(ev.failure, 200)),
                evidence=(ev.key,),
            )
        ]
    if missing_tool(ev):
        return [
            CheckResult(
                "host.disk",
                _("Disk space"),
                Status.SKIPPED,
                _("skipped, because df is not on the node"),
                evidence=(ev.key,),
            )
        ]
    return judge_disk(parse_df(ev.stdout, ev.stderr, paths), ctx.settings, ev)


def judge_throughput(bytes_per_s: float | None, why: str = "") -> CheckResult:
    check, title = "host.throughput", _("Throughput node → zuka's host")
    want = _("at least {mbps:g} MB/s").format(mbps=MIN_MBPS)
    if bytes_per_s is None:
        return CheckResult(
            check,
            title,
            Status.NOT_CHECKED,
            _("not checked: the transfer did not complete ({why})").format(why=visible(why, 300)),
            want,
            "",
            ("throughput",),
        )
    mbps = bytes_per_s / 1e6
    found = _("{mbps:.1f} MB/s over the node's SSH connection").format(mbps=mbps)
    if mbps < MIN_MBPS:
        return CheckResult(
            check,
            title,
            Status.WARNED,
            _(
                "data leaves the node slowly: {found}; a 100 GB checkpoint would take {hours:.1f} h"
            ).format(found=found, hours=100e9 / bytes_per_s / 3600),
            want,
            found,
            ("throughput",),
        )
    return CheckResult(check, title, Status.PASSED, found, want, found, ("throughput",))


async def check_throughput(ctx: Context) -> CheckResult:
    if ctx.throughput is None:
        return CheckResult(
            "host.throughput",
            _("Throughput node → zuka's host"),
            Status.SKIPPED,
            _("skipped, because no SSH connection to time here (a local node)"),
        )
    nbytes = THROUGHPUT_BYTES
    try:
        rate: float | None = await ctx.throughput(nbytes)
        why = ""
    except SshError as exc:
        rate, why = None, exc.message
    except (OSError, TimeoutError) as exc:
        rate, why = None, f"{type(exc).__name__}: {exc}"
    ctx.probe.record(
        Evidence(
            "throughput",
            f"head -c {nbytes} /dev/zero ({DISCARDED})",
            0 if rate is not None else None,
            f"{rate:.0f} bytes/s\n" if rate is not None else "",
            "",
            failure=visible(why, 300),
        )
    )
    return judge_throughput(rate, why)


async def run(ctx: Context) -> list[CheckResult]:
    return [*await check_disk(ctx), await check_throughput(ctx)]


CHECK = Check("host", N_("Disk space and throughput"), Level.QUICK, run, cost=5)
