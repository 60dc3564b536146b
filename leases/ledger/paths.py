"""Where a ledger is: the default file, --ledger and $ZUKA_LEDGER resolved, and the files
SQLite keeps beside it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def default_ledger_path() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("zuka", appauthor=False)) / "ledger.db"


def resolve_ledger_path(cli_value: str | None, env: Mapping[str, str] = os.environ) -> Path:
    """--ledger wins over ZUKA_LEDGER, which wins over the platform's data directory."""
    if cli_value:
        path = Path(cli_value)
    elif env.get("ZUKA_LEDGER"):
        path = Path(env["ZUKA_LEDGER"])
    else:
        path = default_ledger_path()
    # Symlinks are resolved once, here: the lock, the trust store and the sim folder sit
    # beside the real file, whichever link a command was given.
    return path.expanduser().resolve()


def companion(path: Path, suffix: str) -> Path:
    """A file beside the ledger named after it: SQLite's -wal and -shm."""
    return path.with_name(path.name + suffix)
