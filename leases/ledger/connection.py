"""The connection a Ledger is built on: the clock, the actor and the origin its writes
record, and its write transactions (BEGIN IMMEDIATE: one writer at a time, everything
inside commits or nothing does). Opening the file is leases.ledger.files'.
"""

from __future__ import annotations

import os
import pwd
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from leases.core.clock import Clock, utc_now
from leases.core.errors import ledger_failure
from leases.core.origin import MAX_ORIGIN, this_process
from leases.core.textsafe import visible
from leases.lab.layout import Lab
from leases.ledger import files


class LedgerConnection:
    """The connection under a Ledger (leases.ledger.store): who writes, by which clock,
    and one write transaction at a time. Construct a Ledger with Ledger.open()."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        clock: Clock = utc_now,
        actor: str | None = None,
        path: Path | None = None,
        origin: str | None = None,
    ) -> None:
        self.conn = conn
        # Stored text that is not UTF-8 (a ledger edited by hand or tampered with) is read
        # with U+FFFD where it breaks: its row then fails its checks, or shows replaced,
        # instead of failing every read of the table (sqlite3's default raises).
        conn.text_factory = _text
        self.path = path  # None: in memory
        self.clock = clock
        self.actor = actor if actor is not None else _whoami()
        # Where the actor came from (leases.core.origin): detected once per process.
        self.origin = visible(origin, MAX_ORIGIN) if origin is not None else this_process()
        # The batch of the audit entries the open transaction writes (see audit).
        self._batch: int | None = None
        self._held: tuple[int, int] | None = None  # see leases.ledger.files.open_file
        self.lab: Lab | None = None  # the lab whose folder holds the ledger (leases.lab)

    def close(self) -> None:
        files.close_file(self.conn, self._held, self.lab)
        self._held = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions --------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; everything inside commits or nothing does."""
        conn = self.conn
        if conn.in_transaction:
            raise RuntimeError("nested ledger transaction")
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._batch = None
            try:
                yield conn
            except BaseException:
                conn.rollback()
                raise
            else:
                conn.commit()
            finally:
                self._batch = None
        except sqlite3.OperationalError as exc:
            # Locked past the busy timeout, read-only, full: one line naming the file.
            raise ledger_failure(self.path or ":memory:", exc) from exc

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """The rows a query returns, each as a dict by column name."""
        cur = self.conn.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur]


def _whoami() -> str:
    """The user this process runs as, from its uid: $LOGNAME and $USER can say anything."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except (KeyError, OSError):
        return str(os.getuid())


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")
