"""Running a command's handler: its exit status, or the status its failure gets, with the
failure said on stderr by kind (config, input, ledger, lab, file) and never as a trace."""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections.abc import Callable
from typing import TextIO

from leases.core.errors import ConfigError, InputError, LedgerError, ledger_failure, os_problem
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.ledger.paths import resolve_ledger_path

Handler = Callable[[argparse.Namespace, TextIO], int]


def handled(handler: Handler, args: argparse.Namespace, out: TextIO) -> int:
    """handler's exit status, or the one its failure gets (said on stderr)."""
    try:
        code = handler(args, out)
        out.flush()  # a full disk behind stdout is reported here, not at exit
        return code
    except ConfigError as exc:
        for problem in exc.problems:
            print(_("zuka: config: {problem}").format(problem=visible(problem)), file=sys.stderr)
        return 2
    except InputError as exc:
        from leases.app.flags import describe_error  # (the record fields' flags: ~20 ms)

        said = visible(describe_error(exc))
        print(_("zuka: error: {message}").format(message=said), file=sys.stderr)
        return 2
    except LedgerError as exc:
        # A lab's refusal (leases.lab.layout.LabError) by name: no lab module loaded here.
        lab = type(exc).__name__ == "LabError"
        said = _("zuka: lab: {problem}") if lab else _("zuka: ledger: {problem}")
        print(said.format(problem=visible(exc)), file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except sqlite3.Error as exc:
        # Outside Ledger.open and its transactions (a read that failed): the ledger's path.
        try:
            ledger_path: object = resolve_ledger_path(args.ledger)
        except ConfigError:  # the system config changed under the command: no path to name
            ledger_path = _("the ledger")
        said = visible(ledger_failure(ledger_path, exc))
        print(_("zuka: ledger: {problem}").format(problem=said), file=sys.stderr)
        return 1
    except OSError as exc:
        if exc.filename is None:  # not a file's: no path to blame (nor stdout)
            print(_("zuka: {problem}").format(problem=visible(os_problem(exc))), file=sys.stderr)
        else:
            said = _("zuka: {path}: {problem}")
            path = visible(str(exc.filename))
            print(said.format(path=path, problem=visible(os_problem(exc))), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
