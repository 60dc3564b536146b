"""Write the README's screenshots (SVG) into assets/ from real app states.

    python scripts/screenshots.py [--out assets] [--size 120x36] [--only NAME ...] [--lang zh_CN]

Each shot is the dashboard on the demo fleet, frozen at one instant (fixed readings and
history, no polling), after the keys in SHOTS were pressed: a new screen is one line.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from leases.core.i18n import EN, LANGS, set_language
from leases.core.models import NodeHealth, NodeStatus
from leases.sim import history, row_samples
from leases.sim.demoledger import build_demo_ledger
from leases.sim.ledger import backfill, sim_nodes_of
from leases.telemetry.rollups import HistoryStore
from tui.dashboard.app import ZukaApp

# (file name without .svg, keys pressed after the first paint), in README order.
SHOTS: list[tuple[str, tuple[str, ...]]] = [
    ("fleet", ()),
    ("node", ("enter",)),
    ("node-history", ("enter", "2")),
    ("alerts", ("a",)),
    ("help", ("question_mark",)),
    ("palette", ("ctrl+p", *"go to a100")),
    ("lease-form", ("l",)),
    ("offboard", ("o",)),
]
NOW = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)
LEDGER = "zuka-demo.db"  # shown in the header: a plain name, not a temporary path


def frozen_fleet(path: Path, now: datetime = NOW, days: float = 1.0) -> None:
    """The demo ledger with a day of simulated history and each node's reading at `now`,
    as a collector would have written them (the simulation is seeded by node name)."""
    with build_demo_ledger(path, now.date()) as ledger:
        store = HistoryStore(ledger)
        latest = []
        for sim in sim_nodes_of(ledger.nodes()):
            backfill(store, sim, now - timedelta(days=days), now)
            rows = list(history(sim, now - timedelta(minutes=1), now, timedelta(minutes=1)))
            gpus = tuple(row_samples(sim, rows[-1])) if rows else ()
            health = NodeHealth.OK if gpus else NodeHealth.CONNECTING
            latest.append(NodeStatus(sim.name, health, "", checked=now, samples=gpus))
        store.write_latest(latest)


async def shoot(ledger: Path, keys: Sequence[str], size: tuple[int, int]) -> str:
    app = ZukaApp(ledger, clock=lambda: NOW, poll=False, refresh_s=3600)
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
        await app.workers.wait_for_complete()
        await pilot.pause()
        return app.export_screenshot()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="assets", help="folder for the SVGs (default assets)")
    parser.add_argument("--size", default="120x36", help="terminal COLSxROWS (default 120x36)")
    parser.add_argument("--only", nargs="*", help="only these shots (names in SHOTS)")
    parser.add_argument("--lang", default=EN, choices=LANGS, help="the UI's language (default en)")
    args = parser.parse_args(argv)
    cols, _, rows = args.size.partition("x")
    size = (int(cols), int(rows))
    shots = [s for s in SHOTS if not args.only or s[0] in args.only]
    unknown = set(args.only or ()) - {name for name, _ in SHOTS}
    if unknown:
        parser.error(f"no such shot: {', '.join(sorted(unknown))}")
    set_language(args.lang)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    here = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="zuka-shots-") as tmp:
        master = Path(tmp) / "master.db"
        frozen_fleet(master)
        os.chdir(tmp)  # the header names the ledger as given: LEDGER, not a temporary path
        try:
            for name, keys in shots:
                shutil.copyfile(master, LEDGER)  # each shot starts from the same state
                svg = asyncio.run(shoot(Path(LEDGER), keys, size))
                (out / f"{name}.svg").write_text(svg, encoding="utf-8")
                print(f"{out / f'{name}.svg'}: {', '.join(keys) or '(first paint)'}")
        finally:
            os.chdir(here)
    return 0


if __name__ == "__main__":
    sys.exit(main())
