"""The options of `zuka offboard` (its handler loads when it runs: tui/cli/lazy.py)."""

from __future__ import annotations

import argparse

from leases.core.i18n import _


def offboard_options(p: argparse.ArgumentParser) -> None:
    """The node, the mode (plan, --execute, --recheck, --report, --inspect) and the words
    that confirm, skip, include or keep a step."""
    p.add_argument("node", help=_("the node to offboard"))
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--execute", action="store_true", help=_("carry out the stored plan (needs --confirm NODE)")
    )
    mode.add_argument(
        "--recheck", action="store_true", help=_("read back again that everything is still gone")
    )
    mode.add_argument(
        "--report", action="store_true", help=_("the plan, each step's state and its evidence")
    )
    mode.add_argument(
        "--inspect",
        action="store_true",
        help=_(
            "look before you leap: read every thing the plan deletes (exists, size, versions,"
            " created) from the node and the cloud, changing nothing"
        ),
    )
    p.add_argument("--confirm", metavar="NODE", help=_("the node's name, typed again, to confirm"))
    p.add_argument(
        "--account",
        metavar="ALIAS",
        help=_(
            "with --confirm: the alias of the account the provider bills, when one is recorded"
            " (provider edit --account-alias), typed again"
        ),
    )
    p.add_argument(
        "--hash",
        metavar="HASH",
        help=_(
            "with --execute: the plan's hash as you read it (8 characters or more); refused"
            " if the stored plan is another"
        ),
    )
    p.add_argument(
        "--go-on",
        action="store_true",
        help=_("go on past steps that ask you first (GPU processes still running)"),
    )
    p.add_argument(
        "--did",
        action="append",
        default=[],
        metavar="STEP",
        help=_("a manual step you have done by hand (its key, as the plan lists it)"),
    )
    p.add_argument(
        "--skip", metavar="STEP", help=_("skip this step (needs --reason and --confirm)")
    )
    p.add_argument(
        "--never-existed",
        metavar="STEP",
        help=_(
            "a step whose thing zuka found missing at first look never existed (needs"
            " --reason and --confirm); recorded as absent, never as verified"
        ),
    )
    p.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="KIND:ID",
        help=_(
            "delete with this offboarding a resource the plan lists as recorded on the node's"
            " other lease"
        ),
    )
    p.add_argument(
        "--keep",
        action="append",
        default=[],
        metavar="KIND:ID",
        help=_("keep a resource recorded on the node's other lease (needs --reason)"),
    )
    p.add_argument(
        "--reason",
        metavar="TEXT",
        help=_("why, for --skip, --never-existed or --keep (kept as evidence)"),
    )
    p.add_argument("--format", choices=("md", "json"), default="md", help=_("--report's format"))
    p.add_argument("-o", "--output", metavar="FILE", help=_("write --report to FILE (mode 0600)"))
