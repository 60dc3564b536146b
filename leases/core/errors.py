"""Errors the domain raises for bad input, each naming the field and the value, and the
one-line words for an OS or SQLite error on the ledger or a file zuka reads or writes."""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

from leases.core.i18n import N_, _

P = ParamSpec("P")
T = TypeVar("T")


# The value of a refusal that must not repeat what it refused (a secret pasted); shown as
# the words of the language in use.
HIDDEN = N_("(hidden)")


def _echo(value: object) -> object:
    return _(HIDDEN) if value == HIDDEN else value


class InputError(ValueError):
    """Input that was refused. Nothing was changed."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        # None: the refusal is about no one value typed (a ledger, a row); nothing to echo.
        # Said in the language in use when raised: the field stays the option or key typed.
        if value is None:
            message = _("{field}: {reason}").format(field=field, reason=reason)
        else:
            message = _("{field}: {reason} (got {value})").format(
                field=field, reason=reason, value=repr(_echo(value))
            )
        super().__init__(message)


class InputErrors(InputError):
    """Several fields refused at once, in the order they were checked. As an InputError
    it is the first of them, so the command line says what it always said; a form shows
    each beside its own field."""

    def __init__(self, errors: Sequence[InputError]) -> None:
        first = errors[0]
        super().__init__(first.field, first.value, first.reason)
        self.errors = tuple(errors)


def each_error(exc: InputError) -> tuple[InputError, ...]:
    """The refusals one InputError carries: several for InputErrors, else itself."""
    return exc.errors if isinstance(exc, InputErrors) else (exc,)


class Problems:
    """Runs a record's field checks, keeping every refusal instead of stopping at the
    first, so that a form can say what is wrong with each field at once."""

    def __init__(self) -> None:
        self.found: list[InputError] = []

    def __call__(self, fallback: T, check: Callable[P, T], *args: P.args, **kw: P.kwargs) -> T:
        """check(...)'s result; if it refuses, the refusal is kept and fallback returned
        (a value the checks after it accept, so they go on)."""
        try:
            return check(*args, **kw)
        except InputError as exc:
            self.found.extend(each_error(exc))
            return fallback

    def refuse(self, exc: InputError) -> None:
        self.found.extend(each_error(exc))

    def raise_found(self) -> None:
        """Raise what was found: one refusal as itself, several as InputErrors."""
        if len(self.found) == 1:
            raise self.found[0]
        if self.found:
            raise InputErrors(self.found)


class ConfigError(InputError):
    """The config (leases.config) could not be used; `problems` holds one line per bad key
    or value. Here, not in leases.config, so that the CLI can catch it without loading
    the config module on every command."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("config", None, "; ".join(problems))


class UnknownNode(InputError):
    def __init__(self, name: str) -> None:
        super().__init__("node", name, _("no node of that name in the ledger"))


class LedgerError(RuntimeError):
    """The ledger file cannot be used (newer schema, not a zuka ledger, unreadable)."""


READ_ONLY = N_(
    "read-only: this user cannot write it (its mode, an immutable attribute, its directory "
    "or a read-only mount); commands that only read it still work"
)
NO_SPACE = N_("no space left on device: free some space, then try again")
IO_ERROR = N_("disk I/O error: the disk may be full or failing (see `df` and the system log)")


def said(exc: InputError | LedgerError) -> str:
    """An error in the words a status line shows: 'field: reason (got 'value')'."""
    if isinstance(exc, InputError):
        if exc.value is None:
            return _("{field}: {reason}").format(field=exc.field, reason=exc.reason)
        return _("{field}: {reason} (got {value})").format(
            field=exc.field, reason=exc.reason, value=f"'{_echo(exc.value)}'"
        )
    return str(exc)


def os_problem(exc: OSError, path: object = None, *, what: str = "file") -> str:
    """An OSError on a file in words, with what to do about it. With the path it was
    about, a missing file says whether its directory is missing or cannot hold a new
    file (/proc, /sys), instead of a bare "no such file"."""
    code = exc.errno
    if code == errno.ENAMETOOLONG:
        return _(
            "file name too long: a part of the path is longer than the file system allows"
            " (usually 255 bytes): give a shorter path"
        )
    if code == errno.ENOENT and path is not None:
        folder = os.path.dirname(os.path.abspath(str(path)))
        if not os.path.isdir(folder):
            return _(
                "the directory {folder} does not exist: create it, or give another path"
            ).format(folder=folder)
        if what == "ledger":
            return _(
                "cannot create a ledger in {folder}: the directory is not writable or not a"
                " place for a ledger (like /proc or /sys): give another path"
            ).format(folder=folder)
        return _(
            "cannot create a file in {folder}: the directory is not writable or not a"
            " place for a file (like /proc or /sys): give another path"
        ).format(folder=folder)
    if code in (errno.ENOSPC, errno.EDQUOT):
        return _(NO_SPACE)
    if code == errno.EROFS:
        return _("read-only file system: give a path on a file system that can be written")
    if code in (errno.EACCES, errno.EPERM):
        return _(
            "permission denied: check the owner and mode of the file and its directory "
            "(and `lsattr` for an immutable file)"
        )
    if code == errno.EISDIR:
        return _("is a directory: give the path of a file")
    if code == errno.ENOTDIR:
        return _("a part of the path is not a directory")
    if code == errno.ENOENT:
        return _("no such file or directory: check the path")
    return exc.strerror or str(exc)


def sqlite_problem(exc: sqlite3.Error) -> str:
    """An SQLite error on the ledger in words, with what to do about it."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc)
    if name.startswith("SQLITE_BUSY") or name.startswith("SQLITE_LOCKED") or "locked" in text:
        return _("database is locked: another zuka is writing to it; try again")
    if name.startswith("SQLITE_READONLY") or "readonly" in text:
        return _(READ_ONLY)
    if name == "SQLITE_FULL" or "is full" in text:
        return _(NO_SPACE)
    if name.startswith("SQLITE_CANTOPEN"):
        return _("cannot open it: check that it and its directory exist and can be read")
    if name.startswith("SQLITE_IOERR"):
        return _(IO_ERROR)
    if name in ("SQLITE_CORRUPT", "SQLITE_NOTADB"):
        return _("the file is damaged: restore it from a backup or an earlier `zuka export`")
    return text


def no_ledger(path: object, why: str = "") -> LedgerError:
    """A command that only reads was pointed at a ledger that is not there; why: what
    chose the path (leases.ledger.paths.ledger_choice), said when it was the host's lab
    ledger of the system config."""
    if why.startswith("[lab]"):
        return LedgerError(
            _(
                "no ledger at {path}, the lab's ledger ({why}): has the lab been set up"
                " (sudo zuka lab init)? For a ledger of your own: --ledger PATH"
            ).format(path=path, why=why)
        )
    return LedgerError(
        _("no ledger at {path} (nothing recorded yet, or a wrong --ledger?)").format(path=path)
    )


def ledger_failure(path: object, exc: OSError | sqlite3.Error) -> LedgerError:
    """The LedgerError, one line naming the ledger, for an OS or SQLite error on it."""
    problem = (
        os_problem(exc, path, what="ledger") if isinstance(exc, OSError) else sqlite_problem(exc)
    )
    if problem == _(IO_ERROR) and _no_space_beside(path):
        # SQLite says only "disk I/O error" when the -shm file cannot grow on a full disk.
        problem = _(NO_SPACE)
    return LedgerError(_("{path}: {problem}").format(path=path, problem=problem))


def _no_space_beside(path: object) -> bool:
    try:
        st = os.statvfs(os.path.dirname(str(path)) or ".")
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 65536
