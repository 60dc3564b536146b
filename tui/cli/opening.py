"""Opening the ledger from a command, once for every command: the ledger of --ledger,
refused when missing for a command that only reads, created (and said) for one that adds."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from leases.core.errors import LedgerError, no_ledger
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.ledger import files, rowaudit
from leases.ledger.paths import ledger_choice
from leases.ledger.store import Ledger


def open_ledger(
    args: argparse.Namespace, *, create: bool = False, readonly: bool = False
) -> Ledger:
    """The ledger of --ledger; readonly for commands that only read (see Ledger.open).
    A typo in --ledger must not pass unseen: a command that only reads refuses a missing
    ledger, and one that creates it says so on stderr."""
    path, why = ledger_choice(args.ledger)
    # A name too long, a part of the path not a directory, a lab's folder this user may
    # not enter (refused naming the group it needs).
    existed = files.exists(path)
    if not existed and not create:
        raise no_ledger(path, why)
    if not existed:
        _refuse_missing_folder(why, path)
    ledger = Ledger.open(path, create=create, readonly=readonly, action=_action(args))
    if not existed:
        print(
            _("zuka: created a new ledger at {path}").format(path=visible(str(path))),
            file=sys.stderr,
        )
    return ledger


def _action(args: argparse.Namespace) -> str:
    """The command's words, as a refusal names them: "zuka lease add"."""
    words = [getattr(args, "command", None), getattr(args, "action", None)]
    return " ".join(["zuka", *(w for w in words if isinstance(w, str))])


def named(args: argparse.Namespace) -> bool:
    """Whether the ledger's path was named (--ledger, ZUKA_LEDGER or the system config's
    [lab] ledger), not the user's default."""
    return ledger_choice(getattr(args, "ledger", None))[1] != ""


def _refuse_missing_folder(why: str, path: Path) -> None:
    """A ledger named in a folder that does not exist is a typo far more often than a
    wish: creating /srv/zuak/lab.db's folders would start a second, empty ledger. The
    default place's folders are made (its first run)."""
    if why and not path.parent.is_dir():
        raise LedgerError(
            _(
                "no folder {folder} for a ledger at {path}: a typo? Create the folder first if"
                " it is meant (mkdir -p)"
            ).format(folder=visible(str(path.parent)), path=visible(str(path)))
        )


def trusted(ledger: Ledger, what: str, entities: tuple[str, ...] = rowaudit.FIGURES) -> Ledger:
    """The ledger, once every row of these kinds is what the audit log last wrote of it
    (else closed and refused, naming the rows: see leases.ledger.rowaudit). The figures
    rest on every kind but the provider's bills (`zuka bill check` asks for them too)."""
    try:
        rowaudit.refuse(rowaudit.drifted(ledger, entities), what)
    except BaseException:
        ledger.close()
        raise
    return ledger


def lab_zone(args: argparse.Namespace) -> str:
    """The one zone a person reads times in (the config's billing.tz, as the dashboard
    shows them). A config that cannot be read does not stop a read of the log: the default
    zone then, said on stderr."""
    from leases.config.load import load_user_config
    from leases.core.errors import ConfigError
    from leases.core.fields import DEFAULT_TZ

    try:
        return load_user_config(getattr(args, "config", None)).billing.tz
    except ConfigError:
        print(
            _("zuka: warning: the config has problems (zuka config check): times in {tz}").format(
                tz=DEFAULT_TZ
            ),
            file=sys.stderr,
        )
        return DEFAULT_TZ
