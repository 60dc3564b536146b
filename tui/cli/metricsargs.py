"""`zuka collect`'s options for Prometheus (checked, and the endpoint started, in
tui.cli.fleet.collect through leases.metrics.exporter)."""

from __future__ import annotations

import argparse

from leases.core.i18n import _


def metrics_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--metrics-listen",
        metavar="ADDRESS",
        help=_(
            "serve /metrics for Prometheus at 127.0.0.1:PORT, [::1]:PORT, 0.0.0.0:PORT"
            " (with --metrics-token-file), or unix:PATH (a socket only you can open: for your own"
            " tools; Prometheus scrapes TCP)"
        ),
    )
    p.add_argument(
        "--metrics-token-file",
        metavar="PATH",
        help=_(
            "the bearer token scrapes must carry (a file only you can read); needed for"
            " an address other than loopback, and for --metrics-money over TCP"
        ),
    )
    p.add_argument(
        "--metrics-money",
        action="store_true",
        help=_("export money too: each lease's cost to date, idle cost this month, its end"),
    )
