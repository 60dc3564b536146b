"""`zuka lab ...`: parse, call leases.app.lab, show. Every change's steps are printed first
and taken only with --yes or a typed `yes` (never without a terminal to ask on)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from leases.app import lab as labapp
from leases.core.i18n import _, ngettext
from leases.core.textsafe import visible
from leases.lab import perms
from leases.lab.layout import DEFAULT_FOLDER, Lab, LabError, find_lab
from leases.ledger.paths import resolve_ledger_path
from tui.cli.opening import named


def _folder(args: argparse.Namespace) -> Path:
    if getattr(args, "folder", None):
        return Path(args.folder).expanduser().absolute()
    if named(args):  # --ledger or ZUKA_LEDGER
        return resolve_ledger_path(args.ledger).parent
    return DEFAULT_FOLDER


def _existing(args: argparse.Namespace) -> Lab:
    folder = _folder(args)
    found = find_lab(folder / "ledger.db")
    if found is None:
        raise LabError(
            _(
                "{folder}: is no lab's folder (no zuka-lab.toml): sudo zuka lab init --folder"
                " {folder}"
            ).format(folder=folder)
        )
    return found


def lab(args: argparse.Namespace, out: TextIO) -> int:
    action = args.action
    if action == "check":
        return _check(args, out)
    if action == "pubkey":
        return _pubkey(args, out)
    labapp.refuse_unless_root(f"zuka lab {action}")
    if action == "init":
        target = labapp.lab_from(
            _folder(args),
            viewers=args.viewers,
            editors=args.editors,
            offboard=args.offboard,
            service_user=args.service_user,
        )
        plan = labapp.plan_init(target)
    elif action == "repair":
        plan = labapp.plan_repair(_existing(args))
    elif action == "add-user":
        plan = labapp.plan_add_user(_existing(args), args.name, args.role)
    else:
        plan = labapp.plan_remove_user(_existing(args), args.name, args.role)
    return _carry(plan, args, out)


def _carry(plan: labapp.Plan, args: argparse.Namespace, out: TextIO) -> int:
    where = visible(str(plan.lab.folder))
    for note in plan.notes:
        print(_("note: {note}").format(note=visible(note)), file=sys.stderr)
    if not plan.steps:
        print(
            _("nothing to change: the lab at {where} is as it should be").format(where=where),
            file=out,
        )
        return 0
    print(
        _("zuka lab {action} will, in {where}:").format(action=args.action, where=where),
        file=out,
    )
    for i, step in enumerate(plan.steps, 1):
        print(f"  {i}. {visible(step.shown, keep_newlines=True)}", file=out)
    if args.dry_run:
        print(_("(--dry-run: nothing changed)"), file=out)
        return 0
    if not args.yes:
        if not sys.stdin.isatty():
            raise LabError(
                _("no terminal to ask on: give --yes to take these steps (nothing changed)")
            )
        out.flush()
        if input(_("Type yes to take these steps: ")).strip() != "yes":
            print(_("nothing changed"), file=out)
            return 1
    done = labapp.carry_out(plan)
    print(ngettext("done: {n} step", "done: {n} steps", len(done)).format(n=len(done)), file=out)
    return 0


def _check(args: argparse.Namespace, out: TextIO) -> int:
    lab = _existing(args)
    found = perms.check(lab)
    for finding in found:
        print(visible(finding.line()), file=out)
    if not found:
        print(
            _("the lab at {where} is as it should be").format(where=visible(str(lab.folder))),
            file=out,
        )
    hidden = perms.unseen(lab)
    if hidden:
        names = ", ".join(visible(p.name) for p in hidden)
        said = _("(not looked at, this user may not: {names}; root may)")
        print(said.format(names=names), file=out)
    return 1 if found else 0


def _pubkey(args: argparse.Namespace, out: TextIO) -> int:
    text = labapp.public_key_text(_existing(args))
    print(visible(text), file=out)
    print(
        "\n"
        + _(
            "Give it to each node, on the account zuka logs in as, one line in"
            " ~/.ssh/authorized_keys:"
        )
        + "\n  ssh USER@NODE 'umask 077; mkdir -p ~/.ssh; cat >> ~/.ssh/authorized_keys' <"
        f" {visible(str(_folder(args) / perms.COLLECTOR_PUB))}",
        file=out,
    )
    return 0
