"""The parser of `zuka lab ...` (the lab install: leases.app.lab), its handler loaded lazily."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from leases.lab.layout import DEFAULT_FOLDER

LAB_HELP = "a lab on one jump host: one shared ledger folder, roles by Unix groups"
_FOLDER = (
    f"the lab's folder (default: the folder of --ledger or $ZUKA_LEDGER when given, else"
    f" {DEFAULT_FOLDER})"
)


def lab_options(
    sub: argparse._SubParsersAction[Any],
    cmd: Callable[..., argparse.ArgumentParser],
) -> None:
    """`zuka lab init|check|repair|add-user|remove-user|pubkey` added to sub; cmd(parent,
    name, help) makes one with the common options and the lab handler."""
    lab = sub.add_parser("lab", help=LAB_HELP, description=LAB_HELP)
    labs = lab.add_subparsers(dest="action", required=True, parser_class=type(lab))

    def one(name: str, help: str, *, changes: bool = True) -> argparse.ArgumentParser:
        p = cmd(labs, name, help)
        p.add_argument("--folder", metavar="DIR", help=_FOLDER)
        if changes:
            p.add_argument("--dry-run", action="store_true", help="print the steps, change nothing")
            p.add_argument("--yes", action="store_true", help="take the steps without asking")
        return p

    p = one("init", "make (or make whole again) a lab: groups, service user, folder, ledger, key")
    p.add_argument("--viewers", metavar="GROUP", help="the lab's group: every member (zuka)")
    p.add_argument("--editors", metavar="GROUP", help="who changes leases and nodes (zuka-editors)")
    p.add_argument("--offboard", metavar="GROUP", help="who runs offboarding (zuka-offboard)")
    p.add_argument("--service-user", metavar="USER", help="the collector's user (zuka)")
    one(
        "check",
        "what is wrong with the lab's files, and each fix (exit 1 if anything)",
        changes=False,
    )
    one("repair", "set every lab file's owner, mode and ACL again")
    p = one("add-user", "give a user a role: view, edit (also view), offboard (also edit)")
    p.add_argument("name", help="the user's login name")
    p.add_argument("--role", required=True, choices=("view", "edit", "offboard"))
    p = one("remove-user", "take a role away (and those that include it), or the whole lab")
    p.add_argument("name", help="the user's login name")
    p.add_argument("--role", choices=("view", "edit", "offboard"), help="default: every role")
    one("pubkey", "the collector's SSH public key, and how to give it to a node", changes=False)
