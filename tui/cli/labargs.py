"""The parser of `zuka lab ...` (the lab install: leases.app.lab), its handler loaded lazily."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from leases.core.i18n import N_, _
from leases.lab.layout import DEFAULT_FOLDER
from tui.cli import choicewords

# A role's words (leases.core.valuewords), by name: the parser does not import the lab.
ROLE = "leases.lab.roles.Role"

LAB_HELP = N_("a lab on one jump host: one shared ledger folder, roles by Unix groups")
_FOLDER = N_(
    "the lab's folder (default: the folder of --ledger or $ZUKA_LEDGER when given, else {folder})"
)


def lab_options(
    sub: argparse._SubParsersAction[Any],
    cmd: Callable[..., argparse.ArgumentParser],
) -> None:
    """`zuka lab init|check|repair|add-user|remove-user|pubkey` added to sub; cmd(parent,
    name, help) makes one with the common options and the lab handler."""
    lab = sub.add_parser("lab", help=_(LAB_HELP), description=_(LAB_HELP))
    labs = lab.add_subparsers(dest="action", required=True, parser_class=type(lab))

    def one(name: str, help: str, *, changes: bool = True) -> argparse.ArgumentParser:
        p = cmd(labs, name, help)
        p.add_argument("--folder", metavar="DIR", help=_(_FOLDER).format(folder=DEFAULT_FOLDER))
        if changes:
            p.add_argument(
                "--dry-run", action="store_true", help=_("print the steps, change nothing")
            )
            p.add_argument("--yes", action="store_true", help=_("take the steps without asking"))
        return p

    p = one(
        "init", _("make (or make whole again) a lab: groups, service user, folder, ledger, key")
    )
    p.add_argument("--viewers", metavar="GROUP", help=_("the lab's group: every member (zuka)"))
    p.add_argument(
        "--editors", metavar="GROUP", help=_("who changes leases and nodes (zuka-editors)")
    )
    p.add_argument("--offboard", metavar="GROUP", help=_("who runs offboarding (zuka-offboard)"))
    p.add_argument("--service-user", metavar="USER", help=_("the collector's user (zuka)"))
    one(
        "check",
        _("what is wrong with the lab's files, and each fix (exit 1 if anything)"),
        changes=False,
    )
    one("repair", _("set every lab file's owner, mode and ACL again"))
    p = one("add-user", _("give a user a role: view, edit (also view), offboard (also edit)"))
    p.add_argument("name", help=_("the user's login name"))
    p.add_argument("--role", required=True, choices=("view", "edit", "offboard"),
                   type=choicewords.typed(ROLE), help=choicewords.help_of(ROLE))  # fmt: skip
    p = one("remove-user", _("take a role away (and those that include it), or the whole lab"))
    p.add_argument("name", help=_("the user's login name"))
    p.add_argument("--role", choices=("view", "edit", "offboard"), type=choicewords.typed(ROLE),
                   help=choicewords.help_of(ROLE, _("default: every role")))  # fmt: skip
    one("pubkey", _("the collector's SSH public key, and how to give it to a node"), changes=False)
