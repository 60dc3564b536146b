"""Soak `zuka collect`: 1,000 simulated nodes, a reading every 5 s, for 4 minutes.

Two processes, as a user would run them: `zuka sim --nodes N --ledger PATH --history 0`
(the fleet) and `zuka collect --ledger PATH --interval S` (the collector), both this
checkout's code (`python -m tui.cli.main`). Every --sample-s seconds the collector's CPU
time (utime+stime from /proc/PID/stat) and RSS (VmRSS from /proc/PID/status) are read; at
the end the ledger is checked for the data the collector wrote (gpu_minute rows,
node_latest health, poll gaps by the nodes' simulated scenario).

Run: python bench/collect_soak.py [--nodes 1000] [--minutes 4] [--interval 5]
Targets (issue 23, at 1,000 nodes), printed MET / NOT MET with their figures:
  CPU under 25 % of one core after the first minute (connects and probes are warm-up);
  peak RSS under 300 MB; RSS flat after warm-up: growth from minute 2 to the end under
  5 % of the minute-2 figure; no poll gap on a node that is not simulated flaky (the
  simulated mix has 1 flaky node in 8: its gaps are expected and counted apart).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")
ROOT = Path(__file__).resolve().parent.parent
CPU_TARGET_PCT = 25.0
RSS_TARGET_MB = 300.0
GROWTH_TOLERANCE_PCT = 5.0
FLAKY = "sim:flaky"  # the tag leases.sim.ledger gives a node simulated flaky


@dataclass(frozen=True)
class Sample:
    t: float  # seconds since the collector started
    cpu_s: float  # utime + stime so far
    rss_mb: float


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process, in seconds (children not included)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()  # the command name may contain spaces
    return (int(fields[11]) + int(fields[12])) / _TICK  # fields 14 and 15 of stat


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def sample(pid: int, t0: float) -> Sample:
    return Sample(time.monotonic() - t0, cpu_seconds(pid), rss_mb(pid))


def zuka_command() -> list[str]:
    """`zuka` from this checkout (run from the repository root), whatever is on PATH."""
    return [sys.executable, "-m", "tui.cli.main"]


def start_fleet(ledger: Path, nodes: int, log: Path) -> subprocess.Popen[bytes]:
    """`zuka sim` in the foreground of a child process; returns once its nodes listen."""
    out = log.open("wb")
    proc = subprocess.Popen(
        [*zuka_command(), "sim", "--nodes", str(nodes), "--ledger", str(ledger), "--history", "0"],
        stdout=out,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"collect_soak: zuka sim exited {proc.returncode}:\n{log.read_text()}")
        if "simulated nodes on" in log.read_text():
            return proc
        time.sleep(0.2)
    proc.kill()
    sys.exit("collect_soak: zuka sim did not come up in 120 s")


def stop(proc: subprocess.Popen[bytes], grace: float = 15.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def ledger_figures(ledger: Path) -> dict[str, object]:
    conn = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True, timeout=15)
    try:
        q = conn.execute
        minutes = q("SELECT COUNT(*), COUNT(DISTINCT node_id), MIN(minute), MAX(minute) "
                    "FROM gpu_minute").fetchone()  # fmt: skip
        health = dict(q("SELECT health, COUNT(*) FROM node_latest GROUP BY health").fetchall())
        gaps = q("SELECT COUNT(*) FROM poll_gap").fetchone()[0]
        # Gaps by the node's simulated scenario (its sim:... tag), and why, most first.
        by_kind: dict[str, int] = {}
        details: dict[str, int] = {}
        for tags, gap_health, detail in q(
            "SELECT n.tags, g.health, g.detail FROM poll_gap g JOIN nodes n ON n.id = g.node_id"
        ):
            kind = next((t for t in json.loads(tags) if t.startswith("sim:")), "?")
            by_kind[kind] = by_kind.get(kind, 0) + 1
            if kind != FLAKY:
                # Ports and counts differ from node to node: the same reason once.
                why = f"{gap_health}: {re.sub(r'[0-9]+', 'N', detail)[:80]}"
                details[why] = details.get(why, 0) + 1
        nodes = q("SELECT COUNT(*) FROM nodes").fetchone()[0]
    finally:
        conn.close()
    return {
        "gpu_minute_rows": minutes[0],
        "nodes_with_minutes": minutes[1],
        "minute_span": (minutes[3] - minutes[2] + 1) if minutes[0] else 0,
        "latest_health": health,
        "poll_gaps": gaps,
        "gaps_by_kind": by_kind,
        "gap_details": sorted(details.items(), key=lambda kv: -kv[1])[:3],
        "nodes": nodes,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--minutes", type=float, default=4.0)
    ap.add_argument("--interval", type=float, default=5.0, help="collector's seconds a reading")
    ap.add_argument("--sample-s", type=float, default=10.0, help="seconds between samples")
    ap.add_argument("--mode", choices=("stream", "exec"), default="stream")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="zuka-soak-"))
    ledger = tmp / "ledger.db"
    env = {**os.environ, "ZUKA_LEDGER": str(ledger)}
    fleet = collector = None
    try:
        began = time.monotonic()
        fleet = start_fleet(ledger, args.nodes, tmp / "sim.log")
        print(f"fleet: {args.nodes} nodes up in {time.monotonic() - began:.1f} s "
              f"(pid {fleet.pid}, ledger {ledger})", flush=True)  # fmt: skip
        collector_log = (tmp / "collect.log").open("wb")
        collector = subprocess.Popen(
            [*zuka_command(), "collect", "--ledger", str(ledger),
             "--interval", str(args.interval), "--mode", args.mode],
            stdout=collector_log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
        )  # fmt: skip
        t0 = time.monotonic()
        fleet_cpu0 = cpu_seconds(fleet.pid)
        samples = [sample(collector.pid, t0)]
        print(f"collector: pid {collector.pid}, {args.mode} mode, every {args.interval:g} s, "
              f"for {args.minutes:g} min; a sample every {args.sample_s:g} s",
              flush=True)  # fmt: skip
        print(f"{'t(s)':>6} {'cpu(s)':>8} {'cpu% (last)':>12} {'cpu% (all)':>11} {'RSS MB':>8}")
        end = t0 + args.minutes * 60
        while time.monotonic() < end:
            time.sleep(max(0.0, min(args.sample_s, end - time.monotonic())))
            if collector.poll() is not None:
                print(f"collector exited early with status {collector.returncode}")
                break
            s = sample(collector.pid, t0)
            prev = samples[-1]
            last = 100 * (s.cpu_s - prev.cpu_s) / max(1e-9, s.t - prev.t)
            whole = 100 * s.cpu_s / max(1e-9, s.t)
            print(f"{s.t:6.0f} {s.cpu_s:8.2f} {last:11.1f}% {whole:10.1f}% {s.rss_mb:8.1f}",
                  flush=True)  # fmt: skip
            samples.append(s)
        fleet_cpu = cpu_seconds(fleet.pid) - fleet_cpu0
        stop(collector)
        collector_log.close()
        figures = ledger_figures(ledger)

        # Summary. Steady state: from the first sample at or after 60 s (connects and
        # probes are over by then) to the last.
        last = samples[-1]
        steady = next((s for s in samples if s.t >= 60), samples[0])
        mean_pct = 100 * last.cpu_s / max(1e-9, last.t)
        steady_pct = 100 * (last.cpu_s - steady.cpu_s) / max(1e-9, last.t - steady.t)
        peak = max(s.rss_mb for s in samples)
        at2 = next((s for s in samples if s.t >= 120), None)
        growth = last.rss_mb - at2.rss_mb if at2 is not None and at2 is not last else None
        print()
        print(f"summary ({args.nodes} nodes, {args.mode} mode, every {args.interval:g} s, "
              f"{last.t / 60:.1f} min):")  # fmt: skip
        print(f"  collector CPU, whole run:       {mean_pct:5.1f} % of one core "
              f"({last.cpu_s:.1f} s CPU in {last.t:.0f} s)")  # fmt: skip
        print(f"  collector CPU, after 60 s:      {steady_pct:5.1f} % of one core")
        print(f"  collector peak RSS:             {peak:5.1f} MB")
        if growth is None:
            print("  RSS growth minute 2 -> end:     n/a (run shorter than 2 minutes)")
        else:
            print(f"  RSS growth minute 2 -> end:     {growth:+5.1f} MB "
                  f"({at2.rss_mb:.1f} -> {last.rss_mb:.1f})")  # fmt: skip
        print(f"  fleet process CPU (for scale):  {100 * fleet_cpu / max(1e-9, last.t):5.1f} % "
              "of one core")  # fmt: skip
        expected = args.nodes * max(0, int(last.t // 60) - 1)
        print(f"  ledger: {figures['gpu_minute_rows']} gpu_minute rows from "
              f"{figures['nodes_with_minutes']}/{figures['nodes']} nodes over "
              f"{figures['minute_span']} minutes (about {expected}+ expected); "
              f"node_latest {figures['latest_health']}; "
              f"{figures['poll_gaps']} poll gaps")  # fmt: skip
        by_kind: dict[str, int] = figures["gaps_by_kind"]  # type: ignore[assignment]
        unexpected = sum(n for kind, n in by_kind.items() if kind != FLAKY)
        print(f"  poll gaps by simulated scenario: "
              f"{', '.join(f'{k} {n}' for k, n in sorted(by_kind.items())) or 'none'}")  # fmt: skip
        for why, n in figures["gap_details"]:  # type: ignore[attr-defined]
            print(f"    {n} x {why}")
        pct = None if growth is None or at2 is None else 100 * growth / max(1e-9, at2.rss_mb)
        ok_cpu = steady_pct < CPU_TARGET_PCT
        ok_rss = peak < RSS_TARGET_MB
        ok_flat = None if pct is None else pct < GROWTH_TOLERANCE_PCT
        ok_data = int(figures["gpu_minute_rows"]) > 0  # type: ignore[call-overload]

        def met(ok: bool | None) -> str:
            return "n/a (run under 2 minutes)" if ok is None else "MET" if ok else "NOT MET"

        print(f"targets ({args.nodes} nodes; issue 23's are for 1,000):")
        print(f"  CPU < {CPU_TARGET_PCT:g} % of one core after the first minute: {met(ok_cpu)} "
              f"({steady_pct:.1f} %; whole run {mean_pct:.1f} %)")  # fmt: skip
        print(f"  peak RSS < {RSS_TARGET_MB:g} MB: {met(ok_rss)} ({peak:.1f} MB)")
        print(f"  RSS flat after warm-up (growth minute 2 -> end < {GROWTH_TOLERANCE_PCT:g} %): "
              f"{met(ok_flat)} ("
              + ("-" if pct is None or at2 is None else
                 f"{at2.rss_mb:.1f} -> {last.rss_mb:.1f} MB, {pct:+.1f} %") + ")")  # fmt: skip
        print(f"  no poll gap on a node not simulated flaky: {met(unexpected == 0)} "
              f"({unexpected} such gaps; {by_kind.get(FLAKY, 0)} on flaky nodes; "
              f"{figures['poll_gaps']} in all)")  # fmt: skip
        print(f"  data written: {'yes' if ok_data else 'NO'}")
        print("  collector log (tail):")
        for line in (tmp / "collect.log").read_text().splitlines()[-4:]:
            print(f"    {line}")
        return 0
    finally:
        for proc in (collector, fleet):
            if proc is not None:
                stop(proc)
        if args.keep:
            print(f"kept {tmp}")
        else:
            with contextlib.suppress(OSError):
                shutil.rmtree(tmp)


if __name__ == "__main__":
    sys.exit(main())
