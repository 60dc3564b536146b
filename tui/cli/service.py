"""`zuka service install | status | uninstall`: parse, call leases.app.service, show."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from leases.app import service as svc
from leases.core.clock import utc_now
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.lab.layout import find_lab
from leases.ledger.paths import ledger_choice, resolve_ledger_path
from leases.service.units import Mode


def _root(args: argparse.Namespace) -> Path | None:
    return Path(args.root).absolute() if args.root else None


def _mode(args: argparse.Namespace) -> Mode:
    """--system or --user, said: the two install different units in different places."""
    if args.mode is None:
        raise InputError(
            "mode", None, _("say --system (a lab's service, as root) or --user (your own)")
        )
    return Mode(args.mode)


def _request(args: argparse.Namespace) -> svc.Request:
    mode = _mode(args)
    if mode is Mode.SYSTEM:
        ledger = _system_ledger(args)
    else:
        ledger = resolve_ledger_path(args.ledger).absolute()
    return svc.Request(
        mode=mode,
        ledger=ledger,
        web=args.web,
        identity=Path(args.identity).expanduser().absolute() if args.identity else None,
        web_host=args.web_host,
        web_port=args.web_port,
        root=_root(args),
        home=Path.home(),
    )


def _show_plan(plan: svc.ServicePlan, out: TextIO, verb: str) -> None:
    said = _("write") if verb == "write" else _("remove")
    for unit in plan.units:
        print(f"--- {visible(str(unit.path))} ({said})", file=out)
        if verb == "write":
            print(unit.text, file=out)
    print(_("then:") if plan.run_commands else _("then, where systemd runs:"), file=out)
    for argv in plan.commands:
        print("  " + " ".join(argv), file=out)
    for note in plan.notes:
        print(_("note: {note}").format(note=visible(note)), file=out)


def _confirmed(args: argparse.Namespace, what: str) -> bool:
    """--yes, or `yes` typed at a terminal. No terminal and no --yes: refused. what:
    "written" or "removed"."""
    if args.yes:
        return True
    written = what == "written"
    if not sys.stdin.isatty():
        raise InputError(
            "--yes",
            None,
            _("no terminal to confirm at: nothing written; give --yes to go ahead")
            if written
            else _("no terminal to confirm at: nothing removed; give --yes to go ahead"),
        )
    answer = input(
        _("Type yes to go ahead (nothing is written otherwise): ")
        if written
        else _("Type yes to go ahead (nothing is removed otherwise): ")
    )
    return answer.strip() == "yes"


def _show_outcome(outcome: svc.Outcome, out: TextIO, done: str) -> int:
    for path in outcome.files:
        line = _("wrote {path}") if done == "wrote" else _("removed {path}")
        print(line.format(path=visible(str(path))), file=out)
    code = 0
    for argv, status, said in outcome.ran:
        command = " ".join(argv)
        line = _("ran: {command}: ok") if status == 0 else _("ran: {command}: failed ({status})")
        print(line.format(command=command, status=status), file=out)
        if status != 0:
            print(f"  {visible(said, 400)}", file=out)
            code = 1
    if outcome.not_run:
        print(
            _(
                "systemd is not running here (no /run/systemd/system), or --root was given:"
                " systemctl was not run. Run these where systemd runs:"
            ),
            file=out,
        )
        for argv in outcome.not_run:
            print("  " + " ".join(argv), file=out)
    return code


def service_install(args: argparse.Namespace, out: TextIO) -> int:
    plan = svc.plan_install(_request(args))
    _show_plan(plan, out, "write")
    if args.dry_run:
        print(_("dry run: nothing written"), file=out)
        return 0
    if not _confirmed(args, "written"):
        print(_("nothing written"), file=out)
        return 1
    return _show_outcome(svc.install(plan, force=args.force), out, "wrote")


def service_uninstall(args: argparse.Namespace, out: TextIO) -> int:
    plan = svc.plan_uninstall(_mode(args), _root(args), Path.home())
    if not plan.units:
        print(_("no zuka units installed here"), file=out)
        return 0
    _show_plan(plan, out, "remove")
    if not _confirmed(args, "removed"):
        print(_("nothing removed"), file=out)
        return 1
    return _show_outcome(svc.uninstall(plan, force=args.force), out, "removed")


def _system_ledger(args: argparse.Namespace) -> Path | None:
    """--ledger, $ZUKA_LEDGER or the system config's [lab] ledger; None: the default
    /var/lib/zuka (a person's own data folder is never a lab's)."""
    path, why = ledger_choice(args.ledger)
    return path if why else None


def _ledger_of(args: argparse.Namespace, mode: Mode) -> Path:
    if mode is Mode.SYSTEM:
        return svc.lab_for(_system_ledger(args)).ledger
    return resolve_ledger_path(args.ledger)


def service_status(args: argparse.Namespace, out: TextIO) -> int:
    if args.mode is not None:
        mode = Mode(args.mode)
    else:  # the lab's service where the ledger is a lab's, else the user's own
        lab = find_lab(_system_ledger(args) or svc.SYSTEM_LEDGER)
        mode = Mode.SYSTEM if lab is not None else Mode.USER
    st = svc.status(mode, _ledger_of(args, mode), _root(args), Path.home(), utc_now)
    for unit in st.units:
        if not unit.present:
            state = _("not installed")
        else:
            state = _("installed") if unit.ours else _("present, not written by zuka")
            if unit.active is not None:
                state += f", {visible(unit.active, 40)}"
            elif not st.systemd:
                state += _(", systemd not running here")
        print(f"{unit.name}: {state} ({visible(str(unit.path))})", file=out)
    print(_("ledger: {path}").format(path=visible(str(st.ledger))), file=out)
    if st.poller_pid is None:
        print(_("poller: nobody polls this ledger"), file=out)
    elif st.poller_user:
        print(
            _("poller: pid {pid} as {user}").format(
                pid=st.poller_pid, user=visible(st.poller_user)
            ),
            file=out,
        )
    else:
        print(_("poller: pid {pid}").format(pid=st.poller_pid), file=out)
    if st.age is None:
        print(_("last reading: none yet"), file=out)
    else:
        print(_("last reading: {n} s ago").format(n=int(st.age.total_seconds())), file=out)
    return 0
