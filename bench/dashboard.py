"""The dashboard against the floor: a minimal Textual app with the same table, same run.

    python bench/dashboard.py --quick            # about 3 minutes on 2 busy cores
    python bench/dashboard.py                    # about 1 h 10 min (RSS over an hour of refreshes)
    python bench/dashboard.py --minutes 10       # RSS over 10 minutes instead

Every app runs as a whole process in a pseudo-terminal of 120x36 that this script reads
(every byte counted), one after the other, floor first, so both see the same machine:

1. 500 nodes: first paint (process start until a node name reaches the terminal) and the
   event-loop lag during refreshes (a probe task on the app's own loop, asleep 10 ms at a
   time; how late it wakes is how long the loop was held).
2. 300 nodes refreshed every 2 s: CPU of the app's process (/proc/PID/stat), bytes written
   to the terminal per second, and RSS (VmRSS) sampled until the end, with its slope.

The dashboard is `ZukaApp(ledger, poll=False, ...)` over a ledger of simulated nodes
(leases.sim.ledger) with backfilled history; a writer process of this script holds the
poller lock and stores fresh readings every 5 s and closed minutes as `zuka collect` does,
so the dashboard only reads (the collector's cost, alert rules included, is not counted:
that process is measured apart, for scale). The floor
is a Header, one DataTable of the same rows and 12 columns, a Footer: fixed column widths,
only changed cells updated (`update_width=False`), values from the same simulator in
memory. Targets (issue 9): first paint under 1.0 s and within 1.5x of the floor; longest
stall under 50 ms; under 5 % of one core; bytes/s within 1.5x of the floor; RSS under
250 MB and flat. The machine's load is printed: on a shared machine every figure moves.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import re
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

HERE = Path(__file__).resolve()
# Run as `python bench/dashboard.py`, this folder comes first on sys.path and this very file
# would be imported as `tui`: put the repository root there instead.
if sys.path and Path(sys.path[0]).resolve() == HERE.parent:
    sys.path[0] = str(HERE.parent.parent)
COLS, ROWS = 120, 36
# What marks the first paint: the names of PAINTED nodes in the terminal (sim-001...):
# more than one, so that a name in a header line alone does not count as a table.
NAME = re.compile(rb"sim-\d{3}")
PAINTED = 10
PROBE_S = 0.010
WRITE_S = 5.0  # the collector's default flush
REFRESH_S = 2.0
TICK = os.sysconf("SC_CLK_TCK")


# -- the ledger -----------------------------------------------------------------------------


def build_ledgers(
    folder: Path, sizes: Sequence[int], days: float, now: datetime
) -> dict[int, Path]:
    """Simulated nodes with leases; hour roll-ups for `days`, minutes for the last 2 h.
    The smaller ledger is built first and copied into the larger one, which only adds
    nodes: the same first nodes, half the work."""
    import sqlite3

    from leases.ledger.store import Ledger
    from leases.sim.ledger import backfill, register_sim_nodes, sim_node_for
    from leases.telemetry.rollups import HistoryStore

    out: dict[int, Path] = {}
    previous: Path | None = None
    for size in sorted(set(sizes)):
        path = out[size] = folder / f"ledger-{size}.db"
        known: set[str] = set()
        if previous is not None:
            with Ledger.open(previous) as src, sqlite3.connect(path) as dst:
                src.conn.backup(dst)
                known = {n.name for n in src.nodes()}
        with Ledger.open(path, actor="bench") as ledger:
            store = HistoryStore(ledger)
            for node in register_sim_nodes(ledger, size, now):
                if node.name not in known:
                    backfill(store, sim_node_for(node), now - timedelta(days=days), now,
                             timedelta(hours=2), timedelta(minutes=15))  # fmt: skip
        previous = path
    return out


TICK_S = 10  # the simulator's readings move every 10 s
SLICE_S = 180  # the floor's sparkline: 20 cells of 3 minutes = the last hour
BARS = "▁▂▃▄▅▆▇█"


def floor_tape(path: Path, start: float, seconds: float) -> list[dict[str, Any]]:
    """Every row the floor will show from start for `seconds`, computed here from the
    simulator the writer uses (the same values the dashboard shows) and handed over as
    JSON: the floor holds its table and nothing else (the simulator's tables would cost it
    ~0.2 MB of RSS a node)."""
    from leases.ledger.store import Ledger
    from leases.sim.gpu import history
    from leases.sim.ledger import sim_node_for

    t0, t1 = int(start) // TICK_S, int(start + seconds) // TICK_S + 1
    s0, s1 = int(start) // SLICE_S, int(start + seconds) // SLICE_S + 1
    with Ledger.open(path) as ledger:
        billing = ledger.billing()
        out = []
        for n in ledger.nodes():
            b = billing.get(n.id) if n.id is not None else None
            lease = b.lease if b else None
            sim = sim_node_for(n)
            total = sum(g.memory_total_mib for g in sim.gpus) / 1024
            ticks = []
            for t in range(t0, t1):
                at = datetime.fromtimestamp(t * TICK_S, UTC)
                r = next(history(sim, at, at + timedelta(seconds=1)))
                k = len(r.util_gpu)
                ticks.append([f"{sum(r.util_gpu) / k:3.0f}%",
                              f"{sum(r.mem_used_mib) / 1024:.0f}/{total:.0f}G",
                              f"{max(r.temp_c)}°", f"{sum(r.power_w):.0f}W"])  # fmt: skip
            sparks = []
            for sl in range(s0, s1):
                at = datetime.fromtimestamp((sl - 20) * SLICE_S, UTC)
                cells = (
                    BARS[min(7, int(sum(r.util_gpu) / len(r.util_gpu) / 100 * 7 + 0.5))]
                    for r in history(sim, at, at + timedelta(hours=1), timedelta(seconds=SLICE_S))
                )
                sparks.append("".join(cells))
            out.append(
                {
                    "name": n.name,
                    "provider": n.provider or "",
                    "gpus": f"{sim.count}x {n.gpu_model}",
                    "cost": f"{lease.billing_type.value} {lease.unit_price}" if lease else "-",
                    "end": lease.end.isoformat() if lease and lease.end else None,
                    "t0": t0,
                    "ticks": ticks,
                    "s0": s0,
                    "sparks": sparks,
                }
            )
    return out


# -- the writer: readings as a collector stores them -------------------------------------------


def writer(path: Path, every: float, since: float) -> None:
    """Every `every` s the latest reading of every node; each minute, the minutes closed
    since `since` (the ledger's backfill ends there)."""
    from leases.core.models import GpuProcess, NodeHealth, NodeStatus
    from leases.ledger.store import Ledger
    from leases.sim.gpu import history, readings, row_samples
    from leases.sim.ledger import sim_node_for
    from leases.telemetry.history import GpuMinute, NodeMinute
    from leases.telemetry.lock import PollerLock
    from leases.telemetry.rollups import HistoryStore

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # Held as `zuka collect` holds it: the dashboard reads what this writes and leaves the
    # alert rules to the collector (whose cost is not the dashboard's), as it does in use.
    lock = PollerLock(path)
    if not lock.acquire():
        raise RuntimeError(f"{path}: another poller holds the lock")
    with Ledger.open(path, actor="bench-writer") as ledger:
        store = HistoryStore(ledger)
        sims = [sim_node_for(n) for n in ledger.nodes()]
        last_minute = int(since) // 60
        first = True
        while True:
            now = datetime.now(UTC)
            rows = []
            for sim in sims:
                row = next(history(sim, now, now + timedelta(seconds=1)))
                uuid = {g.index: g.uuid for g in sim.gpus}
                procs = tuple(
                    GpuProcess(sim.name, uuid[r.gpu.index], pid, name, float(mib), "sim")
                    for r in readings(sim, now)
                    for pid, name, mib in r.processes
                )
                rows.append(
                    NodeStatus(
                        sim.name,
                        NodeHealth.OK,
                        "",
                        checked=now,
                        samples=tuple(row_samples(sim, row)),
                        processes=procs,
                    )
                )
            store.write_latest(rows)
            minute = int(now.timestamp()) // 60
            closed = []
            for m in range(last_minute, minute):
                at = datetime.fromtimestamp(m * 60, UTC)
                for sim in sims:
                    r = next(history(sim, at, at + timedelta(minutes=1)))
                    limits = [g.power_limit_w for g in sim.gpus]
                    gpus = tuple(
                        GpuMinute(i, 1, r.util_gpu[i], r.util_gpu[i], r.mem_used_mib[i],
                                  r.power_w[i], limits[i])
                        for i in range(sim.count)
                    )  # fmt: skip
                    closed.append(NodeMinute(sim.name, m, gpus))
            if closed:
                store.write_minutes(closed)
            last_minute = minute
            if first:
                print("ready", flush=True)
                first = False
            time.sleep(max(0.0, every - (datetime.now(UTC) - now).total_seconds()))


# -- the floor: the same table, nothing else ----------------------------------------------------


def floor_app(tape_json: Path) -> Any:
    from rich.text import Text
    from textual.app import App, ComposeResult
    from textual.widgets import DataTable, Footer, Header

    columns = (
        ("Node", 10), ("Channel", 12), ("GPUs", 20), ("Util", 5), ("Last hour", 20),
        ("Memory", 10), ("Temp", 5), ("Power", 6), ("State", 6), ("Cost", 16),
        ("Ends", 14), ("Alerts", 6),
    )  # fmt: skip

    class Floor(App[None]):
        TITLE = "floor"
        CSS = "DataTable { height: 1fr; }"
        BINDINGS: ClassVar[list[Any]] = [("q", "quit", "Quit")]

        def __init__(self) -> None:
            super().__init__()
            self.tape: list[dict[str, Any]] = json.loads(tape_json.read_text())
            self.shown: dict[str, list[str]] = {}

        def compose(self) -> ComposeResult:
            yield Header()
            yield DataTable(cursor_type="row", zebra_stripes=True)
            yield Footer()

        def on_mount(self) -> None:
            table = self.query_one(DataTable)
            for label, width in columns:
                table.add_column(label, width=width, key=label)
            self.refresh_rows()
            self.set_interval(REFRESH_S, self.refresh_rows)

        def row(self, n: dict[str, Any], now: datetime) -> list[str]:
            t = int(now.timestamp())
            tick = n["ticks"][min(max(t // TICK_S - n["t0"], 0), len(n["ticks"]) - 1)]
            spark = n["sparks"][min(max(t // SLICE_S - n["s0"], 0), len(n["sparks"]) - 1)]
            ends = "-"
            if n["end"]:
                end = datetime.fromisoformat(n["end"])
                ends = f"{end:%m-%d} ({(end - now).total_seconds() / 86400:.0f}d)"
            util, mem, temp, power = tick
            return [n["name"], n["provider"], n["gpus"], util, spark, mem, temp, power, "ok",
                    n["cost"], ends, ""]  # fmt: skip

        def refresh_rows(self) -> None:
            now = datetime.now(UTC)
            table = self.query_one(DataTable)
            with self.batch_update():
                for n in self.tape:
                    cells = self.row(n, now)
                    key = n["name"]
                    old = self.shown.get(key)
                    if old is None:
                        table.add_row(*(Text(c, no_wrap=True) for c in cells), key=key)
                    else:
                        for (label, _), a, b in zip(columns, old, cells, strict=True):
                            if a != b:
                                table.update_cell(key, label, Text(b, no_wrap=True))
                    self.shown[key] = cells
            self.sub_title = f"{len(self.tape)} nodes"

    return Floor()


# -- one app in a pseudo-terminal: the child side ----------------------------------------------


async def child_main(kind: str, source: Path, seconds: float, report: Path, probe: bool) -> None:
    if kind == "zuka":
        from leases.config.sections import Config
        from tui.dashboard import gcpolicy
        from tui.dashboard.app import ZukaApp

        gcpolicy.tune()  # as ZukaApp.run() does (this child runs the app with run_async)

        # The constructor issue 9 keeps: poll=False, the writer process stores readings.
        app: Any = ZukaApp(source, refresh_s=REFRESH_S, interval_s=WRITE_S, poll=False,
                           config=Config())  # fmt: skip
    else:
        app = floor_app(source)
    lags: list[tuple[float, float]] = []

    async def probe_loop() -> None:
        while True:
            t = time.monotonic()
            await asyncio.sleep(PROBE_S)
            lags.append((t, time.monotonic() - t - PROBE_S))

    loop = asyncio.get_running_loop()
    task = loop.create_task(probe_loop()) if probe else None
    exit_at: list[float] = []

    def stop() -> None:
        exit_at.append(time.monotonic())  # lags after this are the shutdown's, not counted
        app.exit()

    loop.call_later(seconds, stop)
    await app.run_async()
    if task is not None:
        task.cancel()
    report.write_text(json.dumps({"lags": lags, "exit_at": exit_at[0] if exit_at else None}))


# -- the parent side: spawn in a pty, read every byte, sample /proc --------------------------


@dataclass
class Run:
    kind: str
    nodes: int
    started: float
    first_paint: float | None = None  # monotonic
    ended: float = 0.0
    chunks: list[tuple[float, int]] = field(default_factory=list)
    cpu: list[tuple[float, float]] = field(default_factory=list)  # (t, CPU seconds)
    rss: list[tuple[float, float]] = field(default_factory=list)  # (t, MiB)
    lags: list[tuple[float, float]] = field(default_factory=list)
    exit_at: float | None = None  # when the child asked its app to exit (monotonic)
    rc: int | None = None
    tail: bytes = b""

    @property
    def paint_s(self) -> float | None:
        return None if self.first_paint is None else self.first_paint - self.started

    def window(self, settle: float) -> tuple[float, float]:
        """From first paint + settle until the app was asked to exit (or it ended)."""
        start = (self.first_paint or self.started) + settle
        return start, self.exit_at or self.ended

    def cpu_pct(self, settle: float) -> float | None:
        a, b = self.window(settle)
        pts = [p for p in self.cpu if a <= p[0] <= b]
        if len(pts) < 2 or pts[-1][0] - pts[0][0] <= 0:
            return None
        return 100 * (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])

    def bytes_per_s(self, settle: float) -> float | None:
        a, b = self.window(settle)
        if b <= a:
            return None
        return sum(n for t, n in self.chunks if a <= t < b) / (b - a)

    def lag_ms(self, settle: float) -> tuple[float, float, float] | None:
        """Longest lag and p99 (ms) after first paint + settle, and when the longest
        began (s after first paint)."""
        a, b = self.window(settle)
        pts = [(lag, t) for t, lag in self.lags if a <= t and t + PROBE_S + lag <= b]
        if not pts:
            return None
        vals = sorted(lag for lag, _ in pts)
        worst, when = max(pts)
        return 1000 * worst, 1000 * vals[int(0.99 * (len(vals) - 1))], when - (a - settle)

    def rss_figures(self, settle: float) -> tuple[float, float, float, float | None] | None:
        """First, last and highest RSS (MiB) after settle; slope in MiB per minute."""
        a, b = self.window(settle)
        pts = [p for p in self.rss if a <= p[0] <= b]
        if not pts:
            return None
        slope = None
        if len(pts) >= 3:
            ts = [(t - pts[0][0]) / 60 for t, _ in pts]
            slope = statistics.linear_regression(ts, [m for _, m in pts]).slope
        return pts[0][1], pts[-1][1], max(m for _, m in pts), slope


def proc_cpu_s(pid: int) -> float | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def proc_rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def run_in_pty(kind: str, nodes: int, source: Path, seconds: float, probe: bool,
               sample_s: float, folder: Path, paint_only: bool = False) -> Run:  # fmt: skip
    """paint_only: kill the app as soon as its first paint is seen (nothing else measured)."""
    report = folder / f"{kind}-{nodes}-{'lag' if probe else 'load'}.json"
    report.unlink(missing_ok=True)
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEXTUAL")}
    env.update(TERM="xterm-256color", COLORTERM="truecolor", LANG="C.UTF-8")
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    argv = [sys.executable, str(HERE), "--child", kind, "--source", str(source),
            "--seconds", str(seconds), "--report", str(report)]  # fmt: skip
    if probe:
        argv.append("--probe")
    run = Run(kind, nodes, time.monotonic())
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)
    done = threading.Event()

    def read() -> None:
        tail = b""
        seen: set[bytes] = set()
        while True:
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                if done.is_set():
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            now = time.monotonic()
            run.chunks.append((now, len(data)))
            if run.first_paint is None:
                seen.update(NAME.findall(tail[-16:] + data))
                if len(seen) >= min(PAINTED, nodes):
                    run.first_paint = now
            tail = (tail + data)[-4096:]
        run.tail = tail

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = run.started + seconds + 60
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if paint_only and run.first_paint is not None:
                break
            t = time.monotonic()
            c, m = proc_cpu_s(proc.pid), proc_rss_mib(proc.pid)
            if c is not None:
                run.cpu.append((t, c))
            if m is not None:
                run.rss.append((t, m))
            time.sleep(0.02 if paint_only else sample_s)
    finally:
        if proc.poll() is None:
            proc.kill()
        run.rc = proc.wait()
        run.ended = time.monotonic()
        done.set()
        reader.join(timeout=5)
        os.close(master)
    if report.exists():
        said = json.loads(report.read_text())
        run.lags = [(t, lag) for t, lag in said["lags"]]
        run.exit_at = said["exit_at"]
    return run


def complain(run: Run, paint_only: bool = False) -> None:
    """A child that never painted or exited badly: show what it left on the terminal."""
    if run.first_paint is None or (run.rc != 0 and not paint_only):
        text = re.sub(rb"\x1b\[[0-9;?<>=]*[A-Za-z]|\x1b[()][AB0]", b"", run.tail)
        print(f"  !! {run.kind} {run.nodes}: exit {run.rc}, first paint "
              f"{'none' if run.first_paint is None else 'seen'}; last output:\n"
              + text.decode("utf-8", "replace")[-1500:], flush=True)  # fmt: skip


# -- the report -------------------------------------------------------------------------------


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b <= 0 else f"{a / b:.1f}x"


def fmt(v: float | None, unit: str, spec: str = ".2f") -> str:
    return "-" if v is None else f"{v:{spec}} {unit}"


def verdict(ok: bool | None) -> str:
    return "?" if ok is None else "MET" if ok else "NOT MET"


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def report(
    big: dict[str, Run],
    small: dict[str, Run],
    paints: dict[str, list[float]],
    settle: float,
    lag_settle: float,
    paint_limit_s: float | None = 1.0,
) -> dict[str, Any]:
    """The table with each target MET / NOT MET; paint_limit_s None: first paint is judged
    against the floor only (issue 23), else also under that many seconds (issue 9)."""
    z5, f5, z3, f3 = big["zuka"], big["floor"], small["zuka"], small["floor"]
    zp, fp = median(paints["zuka"]), median(paints["floor"])
    zl, fl = z5.lag_ms(lag_settle), f5.lag_ms(lag_settle)
    zc, fc = z3.cpu_pct(settle), f3.cpu_pct(settle)
    zb, fb = z3.bytes_per_s(settle), f3.bytes_per_s(settle)
    zr, fr = z3.rss_figures(settle), f3.rss_figures(settle)
    n5, n3 = z5.nodes, z3.nodes
    a, b = z3.window(settle)
    minutes = (b - a) / 60
    rows = [
        (f"first paint, {n5} nodes (median)", fmt(zp, "s"), fmt(fp, "s"), ratio(zp, fp),
         "<= 1.5x" if paint_limit_s is None else f"< {paint_limit_s:g} s, <= 1.5x",
         None if zp is None or fp is None
         else zp <= 1.5 * fp and (paint_limit_s is None or zp < paint_limit_s)),
        (f"longest loop stall, {n5} rows", fmt(zl and zl[0], "ms", ".0f"),
         fmt(fl and fl[0], "ms", ".0f"), ratio(zl and zl[0], fl and fl[0]), "< 50 ms",
         None if zl is None else zl[0] < 50),
        ("  p99 loop lag", fmt(zl and zl[1], "ms", ".1f"), fmt(fl and fl[1], "ms", ".1f"),
         ratio(zl and zl[1], fl and fl[1]), "", None),
        ("  longest began (after paint)", fmt(zl and zl[2], "s", ".1f"),
         fmt(fl and fl[2], "s", ".1f"), "", "", None),
        (f"CPU, {n3} nodes, {REFRESH_S:g} s refresh", fmt(zc, "%", ".1f"), fmt(fc, "%", ".1f"),
         ratio(zc, fc), "< 5 % of a core", None if zc is None else zc < 5),
        ("terminal bytes/s", fmt(zb and zb / 1000, "KB/s", ".1f"),
         fmt(fb and fb / 1000, "KB/s", ".1f"), ratio(zb, fb), "<= 1.5x floor",
         None if zb is None or fb is None else zb <= 1.5 * fb),
        (f"RSS after {minutes:.1f} min", fmt(zr and zr[1], "MiB", ".0f"),
         fmt(fr and fr[1], "MiB", ".0f"), ratio(zr and zr[1], fr and fr[1]), "< 250 MB",
         None if zr is None else zr[2] * 1.048576 < 250),
        ("  RSS slope after settling", fmt(zr and zr[3], "MiB/min", "+.2f"),
         fmt(fr and fr[3], "MiB/min", "+.2f"), "", "flat", None),
    ]  # fmt: skip
    print(f"\nfirst paint: median of {len(paints['zuka'])} runs each, whole process in a pty")
    print(f"{'':34}{'zuka':>15}{'floor':>15}{'ratio':>8}  {'target':<18}verdict")
    for label, z, f, r, target, ok in rows:
        print(f"{label:<34}{z:>15}{f:>15}{r:>8}  {target:<18}{verdict(ok) if target else ''}")
    # Numbers for a later run to compare against (None: not measured).
    return {
        "nodes": {"paint": n5, "load": n3},
        "minutes": minutes,
        "zuka": {"paint_s": zp, "stall_ms": zl and zl[0], "p99_ms": zl and zl[1],
                 "cpu_pct": zc, "bytes_per_s": zb, "rss_mib": zr and zr[1],
                 "rss_slope_mib_min": zr and zr[3]},
        "floor": {"paint_s": fp, "stall_ms": fl and fl[0], "p99_ms": fl and fl[1],
                  "cpu_pct": fc, "bytes_per_s": fb, "rss_mib": fr and fr[1],
                  "rss_slope_mib_min": fr and fr[3]},
        "met": {label.strip(): ok for label, _, _, _, target, ok in rows if target},
    }  # fmt: skip


def main(argv: list[str] | None = None, paint_limit_s: float | None = 1.0) -> int:
    """The bench; bench/tui.py runs it with issue 23's node count and targets
    (paint_limit_s None: first paint judged against the floor only)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--quick", action="store_true", help="about 3 minutes: short runs, 1 day of history"
    )
    ap.add_argument(
        "--minutes", type=float, help="length of the 300-node run (default 60; quick 0.5)"
    )
    ap.add_argument(
        "--stall-s",
        type=float,
        help="length of the 500-node run after start (default 60; quick 25)",
    )
    ap.add_argument(
        "--days", type=float, help="days of hour roll-ups in the ledger (default 30; quick 1)"
    )
    ap.add_argument(
        "--floor-minutes", type=float, default=5.0, help="the floor's load run, at most"
    )
    ap.add_argument("--paint-nodes", type=int, default=500)
    ap.add_argument("--paint-repeat", type=int, help="first paints per app (default 5; quick 3)")
    ap.add_argument("--nodes", type=int, default=300, help="nodes for CPU, bytes and RSS")
    ap.add_argument("--only", choices=("zuka", "floor"), help="run one app only")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--keep", action="store_true", help="keep the ledgers and logs")
    # Internal: how this script runs its children.
    ap.add_argument("--child", choices=("zuka", "floor"), help=argparse.SUPPRESS)
    ap.add_argument("--writer", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--since", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--source", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--report", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        asyncio.run(child_main(args.child, args.source, args.seconds, args.report, args.probe))
        return 0
    if args.writer:
        writer(args.writer, WRITE_S, args.since)
        return 0
    minutes = args.minutes if args.minutes is not None else 0.5 if args.quick else 60.0
    # The floor's CPU and bytes are rates and its RSS is only for scale: 5 minutes at most.
    floor_min = min(minutes, args.floor_minutes)
    # Long enough to hold one of the dashboard's 15 s ledger reloads after first paint.
    stall_s = args.stall_s if args.stall_s is not None else 25.0 if args.quick else 60.0
    days = args.days if args.days is not None else 1.0 if args.quick else 30.0
    args.paint_repeat = args.paint_repeat or (3 if args.quick else 5)
    settle = 8.0 if args.quick else 30.0  # CPU, bytes and RSS count from paint + settle
    lag_settle = 1.0
    kinds = [args.only] if args.only else ["floor", "zuka"]
    folder = Path(tempfile.mkdtemp(prefix="zuka-bench-tui-"))
    load_start = loadavg()
    print(f"bench/dashboard.py: {COLS}x{ROWS} pty, {os.cpu_count()} CPUs, load {load_start}, "
          f"folder {folder}", flush=True)  # fmt: skip
    writers: list[subprocess.Popen[str]] = []
    try:
        results: dict[str, dict[str, Run]] = {}
        writer_cpu: dict[str, float | None] = {}
        paints: dict[str, list[float]] = {kind: [] for kind in kinds}
        t = time.monotonic()
        built = datetime.now(UTC)
        ledgers = build_ledgers(folder, (args.paint_nodes, args.nodes), days, built)
        print(f"ledgers: {args.nodes} and {args.paint_nodes} nodes, {days:g} days of history, "
              f"built in {time.monotonic() - t:.0f} s", flush=True)  # fmt: skip
        for nodes, secs, probe in (
            (args.paint_nodes, {"zuka": stall_s, "floor": stall_s}, True),
            (args.nodes, {"zuka": settle + 60 * minutes, "floor": settle + 60 * floor_min}, False),
        ):
            phase = "paint" if probe else "load"
            path = ledgers[nodes]
            rows_json = folder / f"floor-{phase}-{nodes}.json"
            # Long enough for every floor run of this phase, with the zuka runs between.
            tape_s = 2 * sum(secs.values()) + 60 * args.paint_repeat * probe + 120
            rows_json.write_text(json.dumps(floor_tape(path, time.time(), tape_s)))
            w = subprocess.Popen([sys.executable, str(HERE), "--writer", str(path),
                                  "--since", str(built.timestamp())],
                                 stdout=subprocess.PIPE, text=True)  # fmt: skip
            writers.append(w)
            assert w.stdout is not None
            if w.stdout.readline().strip() != "ready":
                raise RuntimeError("the writer did not start")
            w_cpu0 = proc_cpu_s(w.pid) or 0.0
            w_t0 = time.monotonic()
            results[phase] = {}
            for kind in kinds:
                source = path if kind == "zuka" else rows_json
                seconds = secs[kind]
                print(f"{kind}: {nodes} nodes for {seconds:.0f} s (load {loadavg()})", flush=True)
                run = run_in_pty(kind, nodes, source, seconds, probe, 0.5 if probe else 2.0, folder)
                complain(run)
                results[phase][kind] = run
                if probe and run.paint_s is not None:
                    paints[kind].append(run.paint_s)
            if probe:  # more first paints, alternating, while this ledger is here
                for _ in range(args.paint_repeat - 1):
                    for kind in kinds:
                        source = path if kind == "zuka" else rows_json
                        run = run_in_pty(kind, nodes, source, 30, False, 0.0, folder, True)
                        complain(run, paint_only=True)
                        if run.paint_s is not None:
                            paints[kind].append(run.paint_s)
            w_cpu = proc_cpu_s(w.pid)
            writer_cpu[phase] = (
                None if w_cpu is None else 100 * (w_cpu - w_cpu0) / (time.monotonic() - w_t0)
            )
            w.terminate()
            w.wait(timeout=10)
        print(f"load at the end {loadavg()}; the writer (the collector's stand-in, not counted) "
              f"used {fmt(writer_cpu.get('load'), '%', '.1f')} of a core at {args.nodes} "
              f"nodes", flush=True)  # fmt: skip
        if args.only:
            for runs in results.values():
                r = runs[args.only]
                lag = r.lag_ms(lag_settle)
                rss = r.rss_figures(settle)
                print(f"{args.only} {r.nodes}: paint {fmt(median(paints[args.only]), 's')}, "
                      f"stall {fmt(lag and lag[0], 'ms', '.0f')}, "
                      f"CPU {fmt(r.cpu_pct(settle), '%', '.1f')}, "
                      f"{fmt((r.bytes_per_s(settle) or 0) / 1000, 'KB/s', '.1f')}, "
                      f"RSS {fmt(rss and rss[1], 'MiB', '.0f')} (first "
                      f"{fmt(rss and rss[0], 'MiB', '.0f')}, highest "
                      f"{fmt(rss and rss[2], 'MiB', '.0f')}, slope "
                      f"{fmt(rss and rss[3], 'MiB/min', '+.3f')})")  # fmt: skip
            return 0
        figures = report(
            results["paint"], results["load"], paints, settle, lag_settle, paint_limit_s
        )
        if args.json:
            figures |= {"load_start": load_start, "load_end": loadavg()}
            args.json.write_text(json.dumps(figures, indent=2))
        return 0
    finally:
        for w in writers:
            if w.poll() is None:
                w.kill()
                w.wait()
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
