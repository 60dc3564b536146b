"""`zuka poll`'s options, and which commands get a parser of their own alone: what scripts
and cron jobs run cold should not build (and import) every other command's parser."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from leases.core.i18n import N_, _

POLL_HELP = N_("read every node's GPUs now and print them")
POLL_EPILOG = N_(
    "exit status with --once: 0 when a node answered (or none is polled), 1 when none did"
)

# The commands that get a parser of their own alone.
NARROW = frozenset({"poll"})
_VALUED = frozenset({"--ledger", "--config", "--lang"})  # the common options that take a value


def poll_options(p: argparse.ArgumentParser) -> None:
    p.epilog = _(POLL_EPILOG)
    p.add_argument(
        "nodes", nargs="*", metavar="NODE", help=_("only these nodes (default: the whole fleet)")
    )
    p.add_argument("--once", action="store_true", help=_("one sweep (default: every --interval)"))
    p.add_argument(
        "--interval", type=float, default=5.0, help=_("seconds between sweeps (default 5)")
    )
    p.add_argument("--force", action="store_true", help=_("poll even if a collector runs"))
    p.add_argument(
        "--processes",
        action="store_true",
        help=_("read the GPU processes too, counted in a PROCS column (--json always reads them)"),
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help=_("end each sweep after S seconds; nodes not done are reported as timeout"),
    )


def narrow(argv: Sequence[str]) -> str | None:
    """The command of argv when it is one of NARROW and nothing asks for the whole parser
    (no -h before it: `zuka -h poll` still lists every command)."""
    words = iter(argv)
    for word in words:
        if word in _VALUED:
            next(words, None)
        elif word in ("-h", "--help"):
            return None
        elif not word.startswith("-"):
            return word if word in NARROW else None
    return None
