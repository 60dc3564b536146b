"""Money and alerts at fleet scale: alerts and the monthly report's figures for 200 nodes
with 30 days of history, and the collector's CPU at 300 nodes with alerts on and off.

1. A ledger of `--nodes` simulated nodes (leases/sim/ledger.py: card-hour, monthly,
   contract and hourly leases) with `--days` of backfilled history. Timed, median of
   `--repeat`: alerts evaluated and stored (leases.alerts.watch.check: facts read, rules,
   reconcile), and the monthly report as `zuka report --month` builds it (tui.cli.money:
   every row checked against the audit log (leases.ledger.rowaudit), every chain's cost, busy,
   idle, unknown card-hours, idle yuan, deposits). Baseline in
   the same run: HistoryStore.busy_card_hours over the same 30 days (an existing read).
2. The collector at `--collector-nodes` nodes (bench/_fleet_server.py in its own process,
   no added delay): `--rounds` exec sweeps storing to a ledger, with alerts off and on
   (AlertWatch at the collector's default of once every 60 s, on a simulated clock that
   advances one `--interval` per round, so that 60 s of rounds see one evaluation). CPU by
   resource.getrusage of this process. Target: the difference under 1 % of one core.

3. `zuka bill check` (leases.app.bills.check_month after the audit-log check, as the CLI
   runs it) on the same ledger with `--bill-months` of bills imported (one CSV a month
   through a [bills.bench] column mapping, one line per node per day: 200 nodes x 365
   days = 73,000 lines), against the month's report measured in the same run.

Run: python bench/money.py [--nodes 200] [--days 30] [--collector-nodes 300] [--no-collector]
Targets: alerts under 1 s, report under 1 s, collector +1 % of a core at most, bill check
within 3x the month's report.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from leases.alerts import billfacts
from leases.alerts.watch import AlertWatch, check
from leases.app.monthreport import build as build_month
from leases.config.sections import AlertsConfig, Config
from leases.ledger import rowaudit
from leases.ledger.store import Ledger
from leases.money.report import month_window
from leases.sim.ledger import backfill, register_sim_nodes, sim_node_for
from leases.ssh.pool import SshPool
from leases.telemetry.poller import Poller
from leases.telemetry.rollups import HistoryStore

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from poll import start_fleet, stop_fleet, zuka_options  # noqa: E402

TARGET_S = 1.0
TARGET_CORE_PCT = 1.0
TARGET_BILL_RATIO = 3.0


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(fn: Callable[[], object], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def build(path: Path, nodes: int, days: float, now: datetime) -> None:
    with Ledger.open(path, actor="bench") as ledger:
        store = HistoryStore(ledger)
        for node in register_sim_nodes(ledger, nodes, now):
            backfill(store, sim_node_for(node), now - timedelta(days=days), now,
                     timedelta(hours=3), timedelta(minutes=15))  # fmt: skip


def part_one(args: argparse.Namespace, folder: Path) -> list[tuple[str, float, float]]:
    now = datetime.now(UTC)
    path = folder / "money.db"
    t = time.perf_counter()
    build(path, args.nodes, args.days, now)
    print(f"ledger: {args.nodes} nodes, {args.days:g} days of history, built in "
          f"{time.perf_counter() - t:.0f} s", flush=True)  # fmt: skip
    config = AlertsConfig()
    with Ledger.open(path) as ledger:
        store = HistoryStore(ledger)
        since = now - timedelta(days=args.days)
        base = timed(lambda: store.busy_card_hours(since, now), args.repeat)
        first = check(ledger, config, lambda: now)
        alerts = timed(lambda: check(ledger, config, lambda: now), args.repeat)
        print(f"alerts: {len(first)} raised on the first evaluation", flush=True)
        # The report exactly as `zuka report --month` builds it (tui.cli.money), for the
        # month that the 30 days of history mostly cover.
        month = f"{now - timedelta(days=15):%Y-%m}"
        cfg = Config()
        window, complete = month_window(month, cfg.billing.tz, now)
        what = "monthly report (zuka report)"
        count = len(build_month(ledger, month, window, complete, cfg).rows)
        print(f"monthly report: {count} lease rows", flush=True)

        def month_report() -> object:
            # As `zuka report` does: every row checked against the audit log first.
            rowaudit.refuse(rowaudit.drifted(ledger), "the figures")
            return build_month(ledger, month, window, complete, cfg)

        drift = timed(lambda: rowaudit.drifted(ledger), args.repeat)
        report = timed(month_report, args.repeat)
    bills, with_bills = bill_check_timed(path, folder, month, now, args)
    return [
        ("busy_card_hours 30 d (baseline)", base, 1.0),
        ("alerts evaluated + stored", alerts, alerts / base),
        (what, report, report / base),
        ("  of which rows against the audit log", drift, drift / base),
        (f"bill check ({args.bill_months} months of bills)", bills, bills / base),
        ("monthly report, bills in the ledger", with_bills, with_bills / base),
        ("  bill check / monthly report", bills / with_bills, bills / with_bills),
    ]


def bill_check_timed(
    path: Path, folder: Path, month: str, now: datetime, args: argparse.Namespace
) -> tuple[float, float]:
    """Import `--bill-months` monthly bills (one line per node per day), then time
    `zuka bill check --month` as the CLI runs it."""
    from types import MappingProxyType

    from leases.app import bills
    from leases.config.sections import BillsConfig
    from leases.money.report import month_window as window_of

    mapping = {"resource_id": "Res", "amount": "Cost", "period_start": "Day"}
    cfg = Config(bills=BillsConfig("", MappingProxyType({"bench": MappingProxyType(mapping)})))
    t = time.perf_counter()
    with Ledger.open(path, actor="bench") as ledger:
        for n in ledger.nodes():
            ledger.update_node(n.name, {"instance_id": f"i-{n.name}"})
        by_provider: dict[str, list[str]] = {}
        for n in ledger.nodes():
            by_provider.setdefault(n.provider or "", []).append(n.name)
        y, m = (int(x) for x in month.split("-"))
        lines = 0
        for back in range(args.bill_months):
            mm = (y * 12 + m - 1) - back
            label = f"{mm // 12}-{mm % 12 + 1:02d}"
            (since, until), _ = window_of(label, cfg.billing.tz, now)
            days = (until - since).days
            for provider, names in by_provider.items():
                rows = ["Day,Res,Cost"]
                for d in range(days):
                    day = (since + timedelta(days=d)).date().isoformat()
                    rows += [f"{day},i-{name},100.00" for name in names]
                csv = folder / f"bill-{label}-{len(provider)}-{abs(hash(provider))}.csv"
                csv.write_text("\n".join(rows) + "\n")
                bills.import_bill(ledger, csv, provider=provider, fmt="bench", month=None,
                                  config=cfg)  # fmt: skip
                lines += len(rows) - 1
    print(f"bills: {lines} lines in {args.bill_months} months, imported in "
          f"{time.perf_counter() - t:.0f} s", flush=True)  # fmt: skip
    with Ledger.open(path) as ledger:

        def bill_check() -> object:
            # As a new `zuka bill check` process runs it: the rows the figures rest on and
            # (in check_month) the month's bills checked, nothing worked out before (the
            # reconciliation is kept per process).
            billfacts.forget(ledger)
            rowaudit.refuse(rowaudit.drifted(ledger, rowaudit.FIGURES), "the figures")
            return bills.check_month(ledger, month, config=cfg)

        def month_report() -> object:  # as in part one, now on the ledger with the bills
            # As `zuka report` runs it: the rows the figures rest on (not the bills' lines).
            rowaudit.refuse(rowaudit.drifted(ledger, rowaudit.FIGURES), "the figures")
            window, complete = window_of(month, cfg.billing.tz, now)
            return build_month(ledger, month, window, complete, cfg)

        report = timed(month_report, args.repeat)
        alerts = timed(lambda: check(ledger, AlertsConfig(), lambda: now), args.repeat)
        print(f"alerts evaluated + stored with the bills (their month's alerts included):"
              f" {alerts * 1000:.0f} ms", flush=True)  # fmt: skip
        rec = bills.check_month(ledger, month, config=cfg)
        print(f"bill check {month}: {len(rec.rows)} leases, {len(rec.differing)} differ,"
              f" {len(rec.unmatched)} unmatched", flush=True)  # fmt: skip
        return timed(bill_check, args.repeat), report


async def sweeps(poller: Poller, rounds: int, tick: Callable[[], None]) -> float:
    c = cpu_s()
    for _ in range(rounds):
        await poller.sweep()
        tick()
    return cpu_s() - c


async def part_two(args: argparse.Namespace, folder: Path) -> tuple[float, float, int]:
    (folder / "fleet").mkdir()
    proc, fleet = start_fleet(args.collector_nodes, 0.0, folder / "fleet")
    now = datetime.now(UTC)
    path = folder / "collect.db"
    try:
        with Ledger.open(path, actor="bench") as ledger:
            nodes = register_sim_nodes(ledger, args.collector_nodes, now, prefix="c")
            store = HistoryStore(ledger)
            for node, port in zip(nodes, fleet.ports, strict=True):
                ssh = {"ssh_host": "127.0.0.1", "ssh_port": port, "ssh_user": "root",
                       "ssh_key_path": str(fleet.key)}  # fmt: skip
                ledger.update_node(node.name, ssh)
                backfill(store, sim_node_for(node), now - timedelta(days=8), now,
                         timedelta(hours=3), timedelta(minutes=15))  # fmt: skip
            nodes = ledger.nodes()
            fake = [0.0]  # the simulated monotonic clock: one interval a round
            watch = AlertWatch(ledger, AlertsConfig(), clock=lambda: datetime.now(UTC),
                               monotonic=lambda: fake[0])  # fmt: skip

            def advance() -> None:
                fake[0] += args.interval

            poller = Poller(nodes, pool=SshPool(zuka_options(fleet)), store=store)
            try:
                await poller.sweep()  # connect, probe
                off, on = [], []
                for _ in range(args.pairs):
                    poller.alerts = None
                    off.append(await sweeps(poller, args.rounds, advance))
                    poller.alerts = watch
                    on.append(await sweeps(poller, args.rounds, advance))
            finally:
                await poller.close()
            wall = args.rounds * args.interval
            return statistics.median(off) / wall, statistics.median(on) / wall, watch.runs
    finally:
        stop_fleet(proc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--repeat", type=int, default=3, help="timed runs (median)")
    ap.add_argument("--collector-nodes", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=24, help="sweeps per measurement")
    ap.add_argument("--pairs", type=int, default=2, help="off/on measurements (median)")
    ap.add_argument("--interval", type=float, default=5.0, help="collector interval, s")
    ap.add_argument("--bill-months", type=int, default=12, help="months of bills imported")
    ap.add_argument("--no-collector", action="store_true", help="skip part 2")
    args = ap.parse_args(argv)
    began = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="zuka-moneybench-"))
    try:
        rows = part_one(args, folder)
        off, on, runs = (0.0, 0.0, 0) if args.no_collector else asyncio.run(part_two(args, folder))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"\n{args.nodes} nodes x {args.days:g} days of history")
    print(f"{'what':40} {'time':>9} {'x baseline':>11}  target")
    for what, seconds, ratio in rows:
        if what.endswith("/ monthly report"):
            said = "ok" if ratio <= TARGET_BILL_RATIO else "MISSED"
            print(f"{what:40} {ratio:7.2f} x  {'':11}  {said} (target {TARGET_BILL_RATIO:g}x)")
            continue
        plain = "baseline" in what or what.startswith("bill check")  # its target: the ratio
        target = "" if plain else ("ok" if seconds < TARGET_S else "MISSED")
        print(f"{what:40} {seconds * 1000:7.0f} ms {ratio:10.1f}x  {target}")
    rise = (on - off) * 100
    print(
        f"\ncollector, {args.collector_nodes} nodes, exec sweeps, one round per "
        f"{args.interval:g} s of collector time, {args.rounds} rounds x {args.pairs}:"
    )
    print(
        f"  CPU alerts off {off * 100:.2f} % of a core, on {on * 100:.2f} % "
        f"({runs} evaluations): +{rise:.2f} % "
        f"{'ok' if rise <= TARGET_CORE_PCT else 'MISSED'} (target +{TARGET_CORE_PCT:g} %)"
    )
    print(f"(bench took {time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
