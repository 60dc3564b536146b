"""`zuka service`'s options (the parser only: the handlers load when it runs)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from leases.core.i18n import N_, _

SERVICE_HELP = N_(
    "run the collector (and zuka web) as a systemd service: install, status, uninstall"
)


def _mode(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--system",
        dest="mode",
        action="store_const",
        const="system",
        help=_(
            "a lab's service in /etc/systemd/system, as the lab's service user (needs root"
            " and `zuka lab init`)"
        ),
    )
    which.add_argument(
        "--user",
        dest="mode",
        action="store_const",
        const="user",
        help=_("your own service, on your own ledger (~/.config/systemd/user)"),
    )
    p.set_defaults(mode=None)
    # Where the units go, under this folder instead of / (as `systemctl --root`): tests.
    p.add_argument("--root", help=argparse.SUPPRESS)


def service_options(sub: Any, cmd: Callable[..., argparse.ArgumentParser], lazy: Any) -> None:
    """`zuka service install | status | uninstall` under sub (cmd: main's command maker)."""
    group = sub.add_parser("service", help=_(SERVICE_HELP), description=_(SERVICE_HELP))
    actions = group.add_subparsers(dest="action", required=True, parser_class=type(group))
    p = cmd(actions, "install", lazy.service_install, _("write the units and start them"))
    _mode(p)
    p.add_argument("--web", action="store_true", help=_("zuka web too, as a second unit"))
    p.add_argument("--web-host", default="127.0.0.1", help=_("zuka web's address (127.0.0.1)"))
    p.add_argument("--web-port", type=int, default=8000, help=_("zuka web's port (8000)"))
    p.add_argument(
        "--identity",
        metavar="FILE",
        help=_(
            "the collector's own SSH key (default with --system: the lab's collector key;"
            " with --user: none, the nodes' keys without an agent)"
        ),
    )
    p.add_argument("--dry-run", action="store_true", help=_("show the units; write nothing"))
    p.add_argument("--yes", action="store_true", help=_("write without asking"))
    p.add_argument("--force", action="store_true", help=_("replace units zuka did not write"))
    p = cmd(actions, "status", lazy.service_status, _("the units, who polls, the last reading"))
    _mode(p)
    p = cmd(actions, "uninstall", lazy.service_uninstall, _("stop the units and remove them"))
    _mode(p)
    p.add_argument("--yes", action="store_true", help=_("remove without asking"))
    p.add_argument("--force", action="store_true", help=_("remove units zuka did not write"))
