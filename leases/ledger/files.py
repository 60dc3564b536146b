"""Opening a ledger file safely: created private (0600, in a 0700 directory; a lab's ledger
is shared by its groups instead, see leases.ledger.labfiles), refused in
words when it is not a zuka ledger or cannot be written, read-only where it cannot be,
the process's own locks kept (see _OPENING), WAL and the pragmas set, migrations run.

WAL mode so that a dashboard and a collector can share the file, mode 0600 because the
file says where the lab's machines are.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from pathlib import Path
from urllib.parse import quote

from leases.core.errors import READ_ONLY, LedgerError, ledger_failure
from leases.core.i18n import _
from leases.lab.layout import Lab, LabError, find_lab
from leases.ledger import labfiles
from leases.ledger.paths import companion

# How many migrations leases/ledger/schema.py holds; tests check the two agree. Kept here so that
# opening an up-to-date ledger needs neither sqlite-utils nor the schema (faster CLI).
SCHEMA_VERSION = 23
# How long a write waits for another writer's transaction before it gives up.
BUSY_TIMEOUT_S = 15.0


def open_file(
    path: Path,
    *,
    readonly: bool,
    create: bool,
    action: str | None = None,
    lab_init: bool = False,
) -> tuple[sqlite3.Connection, tuple[int, int] | None, Lab | None]:
    """The ledger at path opened (for a command that only reads, or for writing, created
    if allowed), the key under which this process now holds it, and its lab (None: a
    one-user ledger): give them back to close_file. In a lab (leases.lab) the ledger is
    never created nor chmod-ed here (only `zuka lab init`, lab_init), and a write refused
    by its permissions is refused before anything is written, naming the group that
    `action` (a command's words, "zuka lease add") needs. Raises OSError, sqlite3.Error
    or LedgerError."""
    lab = find_lab(path)
    if lab is not None:
        labfiles.check_readable(lab, path, None if readonly else action)
    with _OPENING:
        if readonly:
            conn = _connect_reading(path, lab)
        else:
            conn = _connect(path, create=create, lab=None if lab_init else lab, action=action)
        if lab is not None:
            labfiles.after_root_use(lab)
        return conn, _hold(path), lab


def close_file(
    conn: sqlite3.Connection, held: tuple[int, int] | None, lab: Lab | None = None
) -> None:
    """Close a connection open_file made (or in_memory's: held None). Root's last close of
    a lab's ledger lets SQLite remove the -wal and -shm, which a read-only member needs:
    they are made again, with the lab's permissions."""
    with _OPENING:
        conn.close()
        if held is not None:
            _release(held)
        if lab is not None:
            labfiles.after_root_use(lab)


def exists(path: Path) -> bool:
    """Whether the ledger file is there; a lab's folder this user may not enter is refused
    naming the group it needs (LabError), another failure is a LedgerError naming it."""
    try:
        return path.exists()
    except OSError as exc:
        find_lab(path)  # a lab's folder: refused in its words
        raise ledger_failure(path, exc) from None


def in_memory() -> sqlite3.Connection:
    """An empty ledger in memory, migrated."""
    conn = sqlite3.connect(":memory:")
    _prepare(conn)
    return conn


def _create_private(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except (FileNotFoundError, PermissionError, NotADirectoryError):
        # os_problem would say "no such file" of a directory that mkdir could not make.
        raise LedgerError(
            _(
                "{path}: cannot create its directory {parent}: that place is not writable or not "
                "a place for a ledger (like /proc or /sys): give another path"
            ).format(path=path, parent=path.parent)
        ) from None
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.close(fd)


_SQLITE_MAGIC = b"SQLite format 3\x00"

# Ledger files this process has open, by (device, inode), with how many connections.
# POSIX record locks belong to the process, and closing ANY descriptor of a file drops all
# of them: SQLite's own descriptors are managed for that, but a header check that opened
# and closed the file beside an open connection let another process's last close delete
# the -wal under it. So the header is read only while no connection of ours has the file
# open, and opens and closes are serialised (_OPENING).
_OPENING = threading.RLock()
_HELD: dict[tuple[int, int], int] = {}


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _hold(path: Path) -> tuple[int, int] | None:
    key = _inode(path)
    if key is not None:
        _HELD[key] = _HELD.get(key, 0) + 1
    return key


def _release(key: tuple[int, int]) -> None:
    left = _HELD.get(key, 0) - 1
    if left > 0:
        _HELD[key] = left
    else:
        _HELD.pop(key, None)


# Tables every zuka ledger has had since its first migration.
_LEDGER_TABLES = frozenset({"_sqlite_migrations", "providers", "nodes", "leases", "audit"})


def _connect(
    path: Path, *, create: bool, lab: Lab | None = None, action: str | None = None
) -> sqlite3.Connection:
    """The ledger opened for writing: refused early, in words, when it cannot be written."""
    if lab is not None:
        labfiles.check_writable(lab, path, action)
        create = False  # a lab's ledger is made by `zuka lab init` alone
    if create:
        _create_private(path)
    _check_file(path, create=create)
    _check_writable(path)
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S)
    try:
        _check_tables(conn, path, create=create)
        _prepare(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _connect_reading(path: Path, lab: Lab | None = None) -> sqlite3.Connection:
    """The ledger for a command that only reads. Where it can be written it is opened as
    for writing: upgraded if need be, and its last connection tidies the -wal and -shm
    files away (a read-only connection leaves them). Elsewhere, or when that open fails
    (a full disk), read-only. Root reads a lab's ledger read-only first: its last close
    of a connection that may write lets SQLite remove the -wal and -shm, which only root
    may make again there, and a member's open in between (the collector's start) would
    be refused. (With one of them missing it is opened as before, and they are made
    again at its close.)"""
    if lab is not None and os.geteuid() == 0 and _companions_there(path):
        try:
            return _connect_readonly(path)
        except (sqlite3.Error, LedgerError):
            pass  # an upgrade to make: opened for writing, which says why it may not
    if _writable(path):
        try:
            return _connect(path, create=False, lab=lab)
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc):
                raise  # it waited out the busy timeout once already: a second wait is no use
        except LabError:
            pass  # a lab's -wal or -shm missing: a read may do without them
    try:
        return _connect_readonly(path)
    except sqlite3.OperationalError:
        if lab is not None:
            labfiles.refuse_missing_companions(path)  # with its fix, when that is why
        raise


def _connect_readonly(path: Path) -> sqlite3.Connection:
    """The ledger opened read-only (SQLite's mode=ro); it cannot be upgraded here."""
    _check_file(path, create=False)
    uri = f"file:{quote(str(path))}?mode=ro"
    wal = companion(path, "-wal")
    # An empty -wal (one a failed read-only open left) holds nothing the main file lacks.
    had_wal = wal.exists() and wal.stat().st_size > 0
    conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:
        conn.close()
        # A WAL reader needs the -shm file beside the ledger, which a read-only directory
        # or a full disk will not let SQLite create. With no -wal file, or an empty one,
        # all of the ledger is in the main file: then it is read as immutable (no locks,
        # no -shm). With WAL content, a writer may be at work: not safe, the error stands.
        if had_wal:
            raise
        conn = sqlite3.connect(uri + "&immutable=1", uri=True)
    try:
        _check_tables(conn, path, create=False)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise LedgerError(_newer(version))
        if version < SCHEMA_VERSION:
            raise LedgerError(
                _(
                    "{path}: needs an upgrade to this zuka's schema (version {version} to "
                    "{SCHEMA_VERSION}) but is {split}; run zuka once where it can write the file"
                ).format(
                    path=path,
                    version=version,
                    SCHEMA_VERSION=SCHEMA_VERSION,
                    split=_(READ_ONLY).replace("；", ";").split(";")[0],
                )
            )
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    except BaseException:
        conn.close()
        raise
    return conn


def _writable(path: Path) -> bool:
    """Whether this user can write the ledger: the file, and its directory unless the WAL
    companions exist already (SQLite creates them there). Catches chmod, chattr +i and
    read-only mounts, for root too, before any write is tried."""
    eff = os.access in os.supports_effective_ids
    if not os.access(path, os.W_OK, effective_ids=eff):
        return False
    if _companions_there(path):
        return True
    return os.access(path.parent, os.W_OK | os.X_OK, effective_ids=eff)


def _companions_there(path: Path) -> bool:
    return companion(path, "-wal").exists() and companion(path, "-shm").exists()


def _check_writable(path: Path) -> None:
    if not _writable(path):
        raise LedgerError(_("{path}: {problem}").format(path=path, problem=_(READ_ONLY)))


def _check_file(path: Path, *, create: bool) -> None:
    """Refuse, before anything is written to it, a file that is not a zuka ledger: a
    directory, a device, or an empty file a read-only command was pointed at."""
    if not path.is_file():
        if path.is_dir():
            said = _("{path}: is a directory, so not a zuka ledger: give the ledger's file")
        else:
            said = _("{path}: is not a regular file, so not a zuka ledger: give the ledger's file")
        raise LedgerError(said.format(path=path))
    if _inode(path) in _HELD:
        return  # open here already, so checked; reading it now would drop our locks
    with path.open("rb") as fh:
        head = fh.read(len(_SQLITE_MAGIC))
    if not head:
        if create:
            path.chmod(0o600)  # a new ledger: ours to set up, private like every ledger
            return
        raise LedgerError(_("{path}: is an empty file, not a zuka ledger").format(path=path))
    if head != _SQLITE_MAGIC:
        raise LedgerError(
            _("{path}: is not an SQLite database, so not a zuka ledger").format(path=path)
        )


def _check_tables(conn: sqlite3.Connection, path: Path, *, create: bool) -> None:
    """Refuse another application's database before anything is written to it."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables and create:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            return
        raise LedgerError(
            _(
                "{path}: is an empty database marked by another application (user_version "
                "{version}), not a zuka ledger; refusing to touch it"
            ).format(path=path, version=version)
        )
    if not tables:
        raise LedgerError(_("{path}: is an empty database, not a zuka ledger").format(path=path))
    missing = _LEDGER_TABLES - tables
    if missing:
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise LedgerError(
            _(
                "{path}: is not a zuka ledger (another application's database? its tables: "
                "{shown}); refusing to touch it"
            ).format(path=path, shown=shown)
        )


def _prepare(conn: sqlite3.Connection, attempts: int = 50) -> None:
    """WAL, pragmas and migrations. Switching a new file to WAL while another process does
    the same can answer "database is locked" without waiting for the busy timeout, so
    that one case is retried for a few seconds."""
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    for attempt in range(attempts):
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            _migrate(conn)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.05 + 0.05 * random.random())


def _migrate(conn: sqlite3.Connection) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise LedgerError(_newer(version))
    from sqlite_utils import Database

    from leases.ledger.schema import MIGRATIONS

    db = Database(conn, execute_plugins=False)
    # A migration that rebuilds a table (m005) needs foreign keys off, and the pragma is
    # ignored inside a transaction: off here, checked by the migration, on again below.
    conn.execute("PRAGMA foreign_keys = OFF")
    # Two processes opening a new ledger at once (a dashboard and a collector): the write
    # lock makes the second wait, then find nothing pending (apply re-reads what is applied).
    conn.execute("BEGIN IMMEDIATE")
    try:
        known = {m.name for m in MIGRATIONS._migrations}
        applied = {m.name for m in MIGRATIONS.applied(db)}
        if applied - known:
            raise LedgerError(
                _("this ledger was written by a newer zuka (migrations {value})").format(
                    value=sorted(applied - known)
                )
            )
        MIGRATIONS.apply(db)
        conn.execute(f"PRAGMA user_version = {len(known)}")
    except BaseException:
        conn.rollback()
        conn.execute("PRAGMA foreign_keys = ON")
        raise
    conn.commit()
    conn.execute("PRAGMA foreign_keys = ON")


def _newer(version: int) -> str:
    return _(
        "this ledger was written by a newer zuka (schema {version}, this one knows "
        "{known}): upgrade zuka"
    ).format(version=version, known=SCHEMA_VERSION)
