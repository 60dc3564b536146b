"""The node beyond its GPUs: the shell snippet that reads CPU, load, memory, disks and
network in the same round trip as nvidia-smi, and its parser (pure).

The snippet prints a marker carrying the GPU query's exit status (`@zuka-host N`), then one
section per source, each after a `@zh NAME` line: /proc/uptime and /proc/loadavg, the
meminfo lines we use, the cpu lines of /proc/stat, /proc/net/dev, and `df -P -k -T` (under
`timeout`, so a hung network mount costs the disk figures, never the GPUs). Every command's
stderr goes to /dev/null: the GPU query's stderr is what the poller classifies.

CPU % and network throughput are deltas: `HostReading` keeps the raw counters, the poller
keeps the previous reading per node, and `stats(reading, before)` turns both into
HostStats (the first reading has load and memory but no CPU % nor throughput). The time
between two readings is the node's own (/proc/uptime), so a slow round trip does not skew
the rates; a smaller uptime (a reboot) or a counter that went back gives no rate.

Everything the node prints is hostile: lines, sections and lengths are bounded, numbers
are ASCII digits only, mount paths are made safe to show (leases.core.textsafe), and
nothing here raises on what a node printed: a part that cannot be read is named in
`problems` and its figures stay unknown.

Where the platforms put their data disks (the labels of MOUNT_LABELS):
- AutoDL: data disk /root/autodl-tmp (local, 50 GB and up, expandable: a per-instance
  quota, which df shows as the mount's size), file storage /root/autodl-fs (network,
  shared within a region), https://www.autodl.com/docs/env/ and
  https://docs.gpuhub.com/data/file-storage (AutoDL's international site).
- OpenBayes: the persisted working directory /openbayes/home,
  https://openbayes.com/docs/gear/storage-persistence.
- Featurize (/home/featurize/data), Aliyun PAI-DSW (/mnt/workspace) and Matpool (/mnt):
  from their users' guides as commonly quoted; not confirmed by a source found here.
- /dev/shm: Docker gives a container 64 MiB unless --shm-size says otherwise; PyTorch's
  DataLoader workers and NCCL fail ("Bus error", "unable to write to file </torch_...>")
  when it is full.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from leases.core.host import HostStats, Mount, MountKind
from leases.core.i18n import N_
from leases.core.textsafe import last_line, visible

HOST_MARK = "@zuka-host"
_SECTION = "@zh"
# Each command alone (the node's shell may be any sh); 2>/dev/null on each.
# The aggregate cpu line and the count of cpuN lines (not every line: 128 of them on a
# big node would be most of what the snippet sends).
_PARTS = (
    ("load", ("cat /proc/uptime /proc/loadavg",)),
    ("mem", ("grep -E '^(MemTotal|MemAvailable|SwapTotal|SwapFree):' /proc/meminfo",)),
    ("stat", ("grep -E '^cpu ' /proc/stat", "grep -c -E '^cpu[0-9]' /proc/stat")),
    # Without the virtual interfaces (a Kubernetes host has thousands of veths).
    ("net", ("grep -v -E '^ *(veth|cali|lxc|tap)' /proc/net/dev",)),
    # No line starting with "@": busybox df prints mount paths raw, and a tenant's mount
    # (FUSE) named with line breaks could otherwise forge a section or a marker line.
    ("df", ("timeout 5 df -P -k -T 2>/dev/null | grep -v '^@'",)),
    # A container's memory limit (cgroup v2, then v1): what the OOM killer goes by, where
    # /proc/meminfo (without lxcfs) shows the whole machine's.
    ("cg2", ("cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory.current",
             "grep -E '^inactive_file ' /sys/fs/cgroup/memory.stat")),
    ("cg1", ("cat /sys/fs/cgroup/memory/memory.limit_in_bytes"
             " /sys/fs/cgroup/memory/memory.usage_in_bytes",
             "grep -E '^total_inactive_file ' /sys/fs/cgroup/memory/memory.stat")),
)  # fmt: skip
SNIPPET = "; ".join(
    f"echo {_SECTION} {name}; " + "; ".join(f"{c} 2>/dev/null" for c in cmds)
    for name, cmds in _PARTS
)
SNIPPET += f"; echo {_SECTION} end"


def with_host(command: str) -> str:
    """`command`, then the host snippet; the marker line carries command's exit status."""
    return f"{command}; echo {HOST_MARK} $?; {SNIPPET}"


# Bounds on what a node may make us read.
MAX_LINES = 4096  # all sections together
MAX_LINE_CHARS = 4096
MAX_MOUNTS = 64  # kept, after the pseudo file systems are skipped
MAX_PROBLEMS = 5
DF_KEPT_CHARS = 16 * 1024  # df lines longer than this are parsed every reading, not kept
_PATH_SHOWN = 120
_BIG = 10**20  # no counter of a sane node comes near

_MARK_LINE = re.compile(rf"^{re.escape(HOST_MARK)} ([0-9]{{1,3}})[ \t\r]*$", re.MULTILINE)
_SECTION_LINE = re.compile(rf"^{re.escape(_SECTION)} ([a-z0-9]{{1,8}})\r?$")
_DECIMAL = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,6})?")
_IFACE = re.compile(r"[A-Za-z0-9_.:@-]{1,32}")

# Pseudo file systems df lists that are no disk; /dev/shm (tmpfs) and the overlay root are
# kept by path below.
PSEUDO_FS = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "tmpfs", "cgroup", "cgroup2", "mqueue", "debugfs",
    "tracefs", "securityfs", "pstore", "bpf", "configfs", "fusectl", "hugetlbfs", "autofs",
    "rpc_pipefs", "nsfs", "efivarfs", "binfmt_misc", "squashfs", "ramfs", "overlay",
    "shm", "none", "udev", "nvidia-uvm", "selinuxfs",
})  # fmt: skip
# Where a container's df lists the host's disk for a file bind-mounted into it
# (/etc/hosts, the NVIDIA libraries): no disk of the user's.
_SYSTEM_DIRS = ("/etc/", "/usr/", "/proc/", "/sys/", "/dev/", "/run/", "/boot", "/var/lib/")
# Interfaces that carry no traffic of their own: their bytes are counted on another.
_VIRTUAL_IFACES = ("lo", "veth", "docker", "br-", "virbr", "cni", "flannel", "cali", "tunl",
                   "vxlan", "kube-ipvs", "cilium", "lxc")  # fmt: skip

# (mount path, label, kind); a path is matched exactly. Generic data mounts follow in
# mount_label. A label is stored in English (readings, --json): marked, shown with _().
MOUNT_LABELS: tuple[tuple[str, str, MountKind], ...] = (
    ("/root/autodl-tmp", N_("AutoDL data disk"), MountKind.DATA),
    ("/root/autodl-fs", N_("AutoDL file storage"), MountKind.DATA),
    ("/root/autodl-nas", N_("AutoDL network disk"), MountKind.DATA),
    ("/home/featurize/data", N_("Featurize data"), MountKind.DATA),
    ("/openbayes/home", N_("OpenBayes home"), MountKind.DATA),
    ("/mnt/workspace", N_("PAI-DSW workspace"), MountKind.DATA),
    ("/mnt", N_("Matpool /mnt disk"), MountKind.DATA),
    ("/dev/shm", N_("shared memory"), MountKind.SHM),
    ("/", N_("root fs"), MountKind.ROOT),
)
_GENERIC_DATA = re.compile(r"^(/data[A-Za-z0-9_-]{0,16}|/mnt/[^/]{1,64})(/|$)")


def mount_label(path: str) -> tuple[str, MountKind]:
    """What a mount point is: its platform's name for it, a data disk, or nothing known."""
    for at, label, kind in MOUNT_LABELS:
        if path == at:
            return label, kind
    if _GENERIC_DATA.match(path):
        return N_("data disk"), MountKind.DATA
    return "", MountKind.OTHER


@dataclass(frozen=True)
class CpuTimes:
    """The aggregate `cpu` line of /proc/stat, in clock ticks."""

    total: int
    idle: int  # idle + iowait


@dataclass(frozen=True)
class HostReading:
    """One reading as printed: figures, and the counters a later reading is compared with."""

    uptime_s: float | None = None
    load: tuple[float, float, float] | None = None
    cpus: int | None = None
    cpu: CpuTimes | None = None
    mem: dict[str, int] = field(default_factory=dict)
    net: tuple[int, int] | None = None  # rx, tx bytes summed over the counted interfaces
    mounts: tuple[Mount, ...] = ()
    df_read: bool = False
    problems: tuple[str, ...] = ()
    mem_cgroup: bool = False  # memory is the container's limit, not /proc/meminfo's
    # The df lines the mounts were read from, and what reading them found wrong: the next
    # reading of the same lines takes both as they are (see parse_host's `before`).
    df: tuple[tuple[str, ...], tuple[str, ...]] = field(default=((), ()), compare=False)


def split_output(stdout: str, *, last: bool = False) -> tuple[str, int | None, str | None]:
    """(the command's own output, its exit status, the host part) around the marker.

    The first marker after nvidia-smi's GPU query (its output holds no process's words,
    while mount paths come after the marker); the last after the owner query (`last`),
    whose compute apps print process names raw. No marker: the whole output is the
    command's, the host part None.
    """
    match = last_line(stdout, HOST_MARK, _MARK_LINE) if last else _MARK_LINE.search(stdout)
    if match is None:
        return stdout, None, None
    return stdout[: match.start()], int(match.group(1)), stdout[match.end() :]


def _int(token: str) -> int | None:
    # 1 to 20 ASCII digits (isdigit alone takes other scripts' digits too).
    return int(token) if token.isascii() and token.isdigit() and len(token) <= 20 else None


def _dec(token: str) -> float | None:
    return float(token) if _DECIMAL.fullmatch(token) else None


def _sections(text: str, problems: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    lines = text.split("\n")
    if len(lines) > MAX_LINES:
        problems.append(f"more than {MAX_LINES} lines: the rest not read")
        lines = lines[:MAX_LINES]
    for line in lines:
        line = line[:MAX_LINE_CHARS]
        head = _SECTION_LINE.match(line)
        if head is not None:
            name = head.group(1)
            # A section named twice keeps its first (a forged one comes later).
            current = None if name in out or name == "end" else out.setdefault(name, [])
            continue
        if current is not None and line.strip():
            current.append(line.rstrip("\r"))
    return out


def _load(lines: list[str], problems: list[str]) -> tuple[float | None, tuple[float, ...] | None]:
    uptime: float | None = None
    load: tuple[float, ...] | None = None
    for line in lines[:4]:
        words = line.split()
        if len(words) == 2 and uptime is None:
            uptime = _dec(words[0])
        elif len(words) == 5 and load is None:
            figures = tuple(_dec(w) for w in words[:3])
            if all(f is not None for f in figures):
                load = tuple(f for f in figures if f is not None)
    if load is None:
        problems.append("load average not read (/proc/loadavg)")
    return uptime, load


def _mem(lines: list[str], problems: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in lines[:16]:
        key, _, rest = line.partition(":")
        words = rest.split()
        if key in ("MemTotal", "MemAvailable", "SwapTotal", "SwapFree") and key not in out:
            value = _int(words[0]) if words and words[1:] in ([], ["kB"]) else None
            if value is not None:
                out[key] = value
    if "MemTotal" not in out or "MemAvailable" not in out:
        problems.append("memory not read (/proc/meminfo)")
    return out


def _stat(lines: list[str], problems: list[str]) -> tuple[CpuTimes | None, int | None]:
    cpu: CpuTimes | None = None
    count = 0
    counted: int | None = None
    for line in lines[:1100]:
        words = line.split()
        if not words:
            continue
        if len(words) == 1 and counted is None:
            counted = _int(words[0])  # grep -c's count of cpuN lines
        elif words[0] == "cpu" and cpu is None:
            ticks = [_int(w) for w in words[1:11]]
            if len(ticks) >= 4 and all(t is not None for t in ticks):
                t = [x for x in ticks if x is not None]
                # user nice system idle iowait irq softirq steal (guest is in user already)
                total = sum(t[:8])
                idle = t[3] + (t[4] if len(t) > 4 else 0)
                cpu = CpuTimes(total, idle)
        elif words[0].startswith("cpu") and _int(words[0][3:]) is not None:
            count += 1
    if cpu is None:
        problems.append("CPU use not read (/proc/stat)")
    if counted is not None and 0 < counted <= 65536:
        return cpu, counted
    return cpu, count or None


def _net(lines: list[str], problems: list[str]) -> tuple[int, int] | None:
    rx = tx = 0
    seen = False
    for line in lines[:512]:
        name, colon, rest = line.partition(":")
        name = name.strip()
        if not colon or not _IFACE.fullmatch(name):
            continue  # the two header lines, or a name we refuse
        words = rest.split()
        if len(words) < 16:
            continue
        r, t = _int(words[0]), _int(words[8])
        if r is None or t is None:
            continue
        seen = True
        if not name.startswith(_VIRTUAL_IFACES):
            rx, tx = rx + r, tx + t
    if not seen:
        problems.append("network not read (/proc/net/dev)")
        return None
    return rx, tx


def _df(lines: list[str], problems: list[str]) -> tuple[Mount, ...]:
    mounts: list[Mount] = []
    seen: set[str] = set()
    bad = 0
    for line in lines:
        if line.startswith("Filesystem"):
            continue  # the header
        # Filesystem Type 1024-blocks Used Available Capacity Mounted-on (which may hold
        # spaces: everything after the sixth column).
        words = line.split(None, 6)
        if len(words) != 7:
            bad += 1
            continue
        _dev, fs_type, total, used, avail, _cap, path = words
        figures = (_int(total), _int(used), _int(avail))
        if any(f is None or f > _BIG for f in figures) or not path.startswith("/"):
            bad += 1
            continue
        t, u, a = (f or 0 for f in figures)
        fs_type = visible(fs_type, 16)
        path = visible(path, _PATH_SHOWN)
        label, kind = mount_label(path)
        if (
            kind is not MountKind.SHM
            and path != "/"
            and (fs_type in PSEUDO_FS or t == 0 or path.startswith(_SYSTEM_DIRS))
        ):
            continue  # no disk of the user's: a pseudo fs, a file bind-mounted by docker
        if path in seen:
            continue  # mounted twice: the first df line (the top mount comes last: rare)
        seen.add(path)
        if len(mounts) >= MAX_MOUNTS:
            problems.append(f"more than {MAX_MOUNTS} file systems: the rest not shown")
            break
        mounts.append(Mount(path, fs_type, t, u, a, label, kind))
    if bad:
        problems.append(f"{bad} df line(s) not read")
    return tuple(mounts)


def _cgroup(lines: list[str]) -> tuple[int, int] | None:
    """(limit, working set) in KiB from a cgroup's limit, usage and inactive file pages
    (the page cache the kernel reclaims before it OOM-kills, as `docker stats` counts);
    None without a limit ('max', v1's huge number) or when not read."""
    words = [line.split() for line in lines[:4]]
    if len(words) < 2 or len(words[0]) != 1 or len(words[1]) != 1:
        return None
    limit, usage = _int(words[0][0]), _int(words[1][0])
    if limit is None or usage is None or limit >= 1 << 60 or limit == 0:
        return None
    inactive = 0
    for w in words[2:]:
        if len(w) == 2 and w[0] in ("inactive_file", "total_inactive_file"):
            inactive = _int(w[1]) or 0
    return limit // 1024, max(0, usage - inactive) // 1024


def _container_mem(sections: dict[str, list[str]], mem: dict[str, int]) -> bool:
    """Memory as the container's limit where it is below what /proc/meminfo says."""
    found = _cgroup(sections.get("cg2", [])) or _cgroup(sections.get("cg1", []))
    if found is None:
        return False
    limit, used = found
    total = mem.get("MemTotal")
    if total is not None and limit >= total:
        return False  # no tighter than the machine
    mem["MemTotal"], mem["MemAvailable"] = limit, max(0, limit - used)
    return True


# The snippet's output as a Linux node prints it, read by one pattern instead of line by
# line: where it matches whole, _by_pattern gives what _by_lines gives, and sooner
# (tests/telemetry/test_hostpattern.py holds the two equal). No line it takes is longer
# than MAX_LINE_CHARS (_sections cuts those); its net, df and cgroup lines are the lines
# _sections keeps: none blank, none with a CR, none starting with "@" (so no forged
# section). Anything else is read line by line.
_DEC = _DECIMAL.pattern
_COUNT = r"[0-9]{1,20}"
_SHORT = rf"(?=[^\n]{{0,{MAX_LINE_CHARS}}}\n)"  # what follows, up to its line's end
_KEPT = rf"(?:{_SHORT}[^\S\n\r]*[^\s@][^\n\r]*\n)*"
_USUAL = re.compile(
    rf"\n?@zh load\n{_SHORT}({_DEC}) \S+\n{_SHORT}({_DEC}) ({_DEC}) ({_DEC}) \S+ \S+\n"
    rf"@zh mem\n{_SHORT}MemTotal: +({_COUNT}) kB\n{_SHORT}MemAvailable: +({_COUNT}) kB\n"
    rf"{_SHORT}SwapTotal: +({_COUNT}) kB\n{_SHORT}SwapFree: +({_COUNT}) kB\n"
    rf"@zh stat\n{_SHORT}cpu +({_COUNT}(?: {_COUNT}){{3,9}})\n({_COUNT})\n"
    rf"@zh net\n({_KEPT})@zh df\n({_KEPT})@zh cg2\n({_KEPT})@zh cg1\n({_KEPT})@zh end\n?"
)


# What the first sections give: uptime, load, memory, whether that is a container's
# limit, CPU times, CPUs, and the sections still to read (net, df, the cgroups).
_Figures = tuple[
    float | None, tuple[float, ...] | None, dict[str, int], bool, CpuTimes | None, int | None,
    dict[str, list[str]],
]  # fmt: skip


def _by_pattern(m: re.Match[str]) -> _Figures:
    """The figures of an output _USUAL matched whole (nothing in it is a problem)."""
    up, l1, l5, l15, total, available, swap, swap_free, ticks, cpus, net, df, cg2, cg1 = m.groups()
    t = list(map(int, ticks.split(" ")))
    mem = {"MemTotal": int(total), "MemAvailable": int(available), "SwapTotal": int(swap),
           "SwapFree": int(swap_free)}  # fmt: skip
    sections = {"net": net.split("\n"), "df": df.split("\n"), "cg2": cg2.split("\n"),
                "cg1": cg1.split("\n")}  # fmt: skip
    for lines in sections.values():
        lines.pop()  # what came after the last line's end: nothing
    counted = int(cpus)
    return (
        float(up),
        (float(l1), float(l5), float(l15)),
        mem,
        _container_mem(sections, mem),
        CpuTimes(sum(t[:8]), t[3] + (t[4] if len(t) > 4 else 0)),
        counted if 0 < counted <= 65536 else None,
        sections,
    )


def _by_lines(text: str, problems: list[str]) -> _Figures | None:
    """The figures of any output, read line by line, what was wrong added to problems;
    None when it holds no section."""
    sections = _sections(text, problems)
    if not sections:
        return None
    uptime, load = _load(sections.get("load", []), problems)
    mem = _mem(sections.get("mem", []), problems)
    limited = _container_mem(sections, mem)
    if limited:
        problems[:] = [p for p in problems if not p.startswith("memory not read")]
    cpu, cpus = _stat(sections.get("stat", []), problems)
    return uptime, load, mem, limited, cpu, cpus, sections


def parse_host(text: str | None, before: HostReading | None = None) -> HostReading:
    """The host part of the output (after the marker). Never raises on what it holds.

    before: the node's reading before this one; its disks are taken as they are when the
    df lines are the same, byte for byte (the same reading as parsing them again)."""
    if text is None:
        return HostReading(problems=("no host figures (the output ended before them)",))
    problems: list[str] = []
    usual = _USUAL.fullmatch(text) if text.count("\n") < MAX_LINES else None
    # The usual shape gives the same figures as reading it line by line, sooner.
    figures = _by_pattern(usual) if usual is not None else _by_lines(text, problems)
    if figures is None:
        return HostReading(problems=("no host figures (no /proc on the node?)",))
    uptime, load, mem, limited, cpu, cpus, sections = figures
    net = _net(sections.get("net", []), problems)
    df_lines = sections.get("df", [])
    mounts: tuple[Mount, ...] = ()
    df: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    lines = tuple(df_lines)
    if lines and before is not None and before.df[0] == lines:
        mounts, df = before.mounts, before.df
        problems += df[1]
    elif lines:
        said = len(problems)
        mounts = _df(df_lines, problems)
        if sum(map(len, lines)) <= DF_KEPT_CHARS:  # what a node makes us hold: bounded
            df = (lines, tuple(problems[said:]))
    else:
        problems.append("disks not read (df failed or timed out)")
    three = (load[0], load[1], load[2]) if load is not None and len(load) == 3 else None
    return HostReading(
        uptime,
        three,
        cpus,
        cpu,
        mem,
        net,
        mounts,
        bool(df_lines),
        tuple(problems[:MAX_PROBLEMS]),
        limited,
        df,
    )


def stats(now: HostReading, before: HostReading | None, seconds: float | None = None) -> HostStats:
    """HostStats of `now`, with rates against `before` (None: the first reading).

    The time between them is the node's uptime difference; `seconds` (the poller's
    clock) is used only where uptime was not read.
    """
    cpu_pct = rx = tx = None
    if before is not None:
        elapsed = seconds
        if now.uptime_s is not None and before.uptime_s is not None:
            elapsed = now.uptime_s - before.uptime_s  # <= 0 after a reboot: no rate
        if now.cpu is not None and before.cpu is not None:
            ticks = now.cpu.total - before.cpu.total
            idle = now.cpu.idle - before.cpu.idle
            if ticks > 0 and 0 <= idle <= ticks and (elapsed is None or elapsed > 0):
                cpu_pct = 100.0 * (ticks - idle) / ticks
        if elapsed is not None and elapsed > 0 and now.net and before.net:
            d_rx, d_tx = now.net[0] - before.net[0], now.net[1] - before.net[1]
            if d_rx >= 0 and d_tx >= 0:  # an interface gone or reset: no rate this time
                rx, tx = d_rx / elapsed, d_tx / elapsed
    load = now.load or (None, None, None)
    return HostStats(
        cpu_pct=cpu_pct,
        cpus=now.cpus,
        load1=load[0],
        load5=load[1],
        load15=load[2],
        mem_total_kib=now.mem.get("MemTotal"),
        mem_available_kib=now.mem.get("MemAvailable"),
        swap_total_kib=now.mem.get("SwapTotal"),
        swap_free_kib=now.mem.get("SwapFree"),
        mem_cgroup=now.mem_cgroup,
        mounts=now.mounts,
        net_rx_bps=rx,
        net_tx_bps=tx,
        problems=now.problems,
    )


__all__ = [
    "HOST_MARK",
    "MOUNT_LABELS",
    "SNIPPET",
    "CpuTimes",
    "HostReading",
    "mount_label",
    "parse_host",
    "split_output",
    "stats",
    "with_host",
]
