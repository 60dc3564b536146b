"""Where a ledger is: --ledger, $ZUKA_LEDGER, the host's lab ledger (the system config's
`[lab] ledger`, leases.lab.sysconfig) and the user's data directory resolved in that
order, and the files SQLite and zuka keep beside it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from leases.core.i18n import _
from leases.lab.sysconfig import lab_ledger


def default_ledger_path() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("zuka", appauthor=False)) / "ledger.db"


def resolve_ledger_path(cli_value: str | None, env: Mapping[str, str] = os.environ) -> Path:
    """--ledger wins over ZUKA_LEDGER, which wins over the system config's [lab] ledger,
    which wins over the platform's data directory. A system config that cannot be used
    is a ConfigError naming it."""
    return ledger_choice(cli_value, env)[0]


def ledger_choice(cli_value: str | None, env: Mapping[str, str] = os.environ) -> tuple[Path, str]:
    """The ledger's path and what chose it: "--ledger", "$ZUKA_LEDGER", "[lab] ledger of
    PATH" or "" (the user's data directory, the default)."""
    if cli_value:
        path, why = Path(cli_value), "--ledger"
    elif env.get("ZUKA_LEDGER"):
        path, why = Path(env["ZUKA_LEDGER"]), "$ZUKA_LEDGER"
    elif (lab := lab_ledger(env)) is not None:
        # "[lab] ..." in every language (leases.core.errors.no_ledger reads it so).
        path, why = lab[0], _("[lab] ledger of {config}").format(config=lab[1])
    else:
        path, why = default_ledger_path(), ""
    # Symlinks are resolved once, here: the lock, the trust store and the sim folder sit
    # beside the real file, whichever link a command was given.
    return path.expanduser().resolve(), why


def companion(path: Path, suffix: str) -> Path:
    """A file beside the ledger named after it: SQLite's -wal and -shm."""
    return path.with_name(path.name + suffix)


# zuka's own files beside a ledger, each named after it (one ledger, one set of them).


def trust_store(ledger_path: Path) -> Path:
    """zuka's own known_hosts for this ledger's fleet: accepted keys go here."""
    return ledger_path.parent / "known_hosts"


def sim_dir(ledger_path: Path) -> Path:
    """Where `zuka sim` keeps its client key and its nodes' host keys for this ledger: a
    folder of its own, so that nothing of the user's (an id_ed25519 beside the ledger)
    is ever overwritten."""
    return ledger_path.with_name(ledger_path.name + ".sim")


def sim_trust_store(ledger_path: Path) -> Path:
    """Host keys of simulated nodes that `zuka sim` started for this ledger."""
    return sim_dir(ledger_path) / "known_hosts"


def fault_log_path(ledger_path: Path) -> Path:
    """The fault log (leases.telemetry.faultlog)."""
    return ledger_path.with_name(ledger_path.name + ".faults.log")


def poller_lock_path(ledger_path: Path) -> Path:
    """One poller per ledger (leases.telemetry.lock)."""
    return ledger_path.with_name(ledger_path.name + ".poller.lock")


def offboard_lock_path(ledger_path: Path) -> Path:
    """One offboarding run per ledger (leases.offboard.runner.RunLock)."""
    return ledger_path.with_name(ledger_path.name + ".offboard.lock")
