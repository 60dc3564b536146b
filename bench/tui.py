"""The dashboard at 1,000 nodes against a bare Textual app with the same table (issue 23).

    python bench/tui.py                  # 1,000 nodes, about 6 minutes on 2 busy cores
    python bench/tui.py --nodes 500      # the same at 500
    python bench/tui.py --stall-s 60 --minutes 2 --paint-repeat 5

bench/dashboard.py's measurement (imported, not copied), run at one node count for every
figure: each app a whole process in a 120x36 pseudo-terminal, floor first, the same run.
- first paint: process start until ten node names have reached the terminal, median of
  --paint-repeat starts of each app, alternating; target within 1.5x of the bare app;
- longest UI-loop stall while refreshing (a probe task on the app's own loop sleeps 10 ms
  at a time; how late it wakes is how long the loop was held), from first paint + 1 s for
  --stall-s; target under 50 ms;
- CPU of the app's process as a share of one core while idle-refreshing (every 2 s, a
  writer process storing readings as `zuka collect` does), from first paint + 8 s for
  --minutes; target under 5 %.
Each target is printed MET / NOT MET with its figures; the bytes/s and RSS rows are
bench/dashboard.py's own (issue 9) and printed beside them.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if __name__ == "tui":
    # A script in bench/ (this folder first on sys.path) imported zuka's `tui` package and
    # found this file: hand it the package instead, and change nothing else.
    import importlib

    _saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
    del sys.modules["tui"]
    try:
        sys.modules["tui"] = importlib.import_module("tui")
    finally:
        sys.path[:] = _saved


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000, help="simulated nodes (default 1000)")
    ap.add_argument("--paint-repeat", type=int, default=3, help="first paints per app")
    ap.add_argument("--stall-s", type=float, default=25.0, help="the stall run, s after start")
    ap.add_argument("--minutes", type=float, default=0.5, help="the CPU run, minutes")
    ap.add_argument("--days", type=float, default=1.0, help="days of history in the ledger")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--keep", action="store_true", help="keep the ledger and logs")
    args = ap.parse_args(argv)
    # zuka's packages before this folder (where this file would pass for `tui`), this
    # folder still reachable for bench/dashboard.py.
    sys.path[:0] = [str(HERE.parent)]
    import dashboard

    forwarded = [
        "--quick", "--nodes", str(args.nodes), "--paint-nodes", str(args.nodes),
        "--paint-repeat", str(args.paint_repeat), "--stall-s", str(args.stall_s),
        "--minutes", str(args.minutes), "--days", str(args.days),
    ]  # fmt: skip
    if args.json:
        forwarded += ["--json", str(args.json)]
    if args.keep:
        forwarded.append("--keep")
    return int(dashboard.main(forwarded, paint_limit_s=None))


if __name__ == "__main__":
    sys.exit(main())
