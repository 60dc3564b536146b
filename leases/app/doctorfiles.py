"""`zuka doctor`'s look at the files of a one-user ledger: the ledger private to its owner
(0600 in a folder no one else enters), its SQLite companions, the trust store, the fault
log, and the config file. A lab's files are judged by the lab's own rules instead
(leases.app.doctorlab)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from leases.app.doctor import Finding, Level, Setting
from leases.app.doctorlab import lab_of
from leases.core.textsafe import visible
from leases.ledger.paths import companion, fault_log_path, trust_store

AREA = "permissions"


def paths(setting: Setting) -> Iterator[Finding]:
    """Which ledger and config this user's zuka opens, and why."""
    ledger = setting.ledger
    shown = visible(str(ledger))
    try:
        ledger.stat()
    except PermissionError:
        yield Finding(
            "paths",
            Level.FAIL,
            f"ledger: {shown} (from {setting.ledger_source}) cannot be looked at by this user",
            "ask whoever keeps it (in a lab, its admin: sudo zuka lab add-user $(id -un)"
            " --role view)",
        )
        return
    except OSError:
        pass
    if ledger.is_file():
        yield Finding("paths", Level.OK, f"ledger: {shown} (from {setting.ledger_source})")
    elif ledger.exists():
        yield Finding(
            "paths",
            Level.FAIL,
            f"ledger: {shown} (from {setting.ledger_source}) is not a regular file",
            "give the ledger's file with --ledger or ZUKA_LEDGER",
        )
    else:
        yield Finding(
            "paths",
            Level.WARN,
            f"ledger: {shown} (from {setting.ledger_source}) does not exist yet",
            "`zuka node add` creates it; a typo in --ledger or ZUKA_LEDGER? check the path",
        )
    where = (
        "no config file (defaults)"
        if setting.config_path is None
        else (f"config: {visible(str(setting.config_path))}")
    )
    if setting.config_problems:
        for problem in setting.config_problems:
            yield Finding("config", Level.FAIL, visible(problem), "fix the file: zuka config check")
    else:
        yield Finding("config", Level.OK, where)
    for warning in setting.config_warnings:
        yield Finding("config", Level.WARN, visible(warning))


def private_files(setting: Setting) -> Iterator[Finding]:
    """The one-user rule: the ledger and everything beside it readable by its owner only."""
    ledger = setting.ledger
    try:
        if not ledger.exists() or lab_of(setting) is not None:
            return  # a lab's files follow the lab's rules (leases.app.doctorlab)
    except OSError:
        return  # not to be looked at by this user: said by paths()
    folder = ledger.parent
    me = os.geteuid()
    info = _stat(folder)
    if info is not None and info.st_mode & 0o077:
        yield Finding(
            AREA,
            Level.WARN,
            f"the ledger's folder {visible(str(folder))} is open to others"
            f" (mode {stat.S_IMODE(info.st_mode):04o})",
            f"chmod 700 {_quoted(folder)}",
        )
    secret = [
        ("the ledger", ledger),
        ("the ledger's WAL", companion(ledger, "-wal")),
        ("the ledger's shared memory", companion(ledger, "-shm")),
        ("the fault log", fault_log_path(ledger)),
    ]
    clean = True
    for what, path in secret:
        info = _stat(path)
        if info is None:
            continue
        if not stat.S_ISREG(info.st_mode):
            clean = False
            yield Finding(AREA, Level.FAIL, f"{what} {visible(str(path))} is not a regular file")
            continue
        if info.st_mode & 0o077:
            clean = False
            yield Finding(
                AREA,
                Level.FAIL,
                f"{what} {visible(str(path))} is readable or writable by others (mode"
                f" {stat.S_IMODE(info.st_mode):04o}): it says where the lab's machines are",
                f"chmod 600 {_quoted(path)}",
            )
        if info.st_uid != me:
            clean = False
            yield Finding(
                AREA,
                Level.WARN,
                f"{what} {visible(str(path))} belongs to uid {info.st_uid}, not to this user",
                f"chown $(id -un) {_quoted(path)} (or use that user's zuka)",
            )
    trust = trust_store(ledger)
    info = _stat(trust)
    if info is not None and info.st_mode & 0o022:
        clean = False
        yield Finding(
            AREA,
            Level.FAIL,
            f"the trust store {visible(str(trust))} may be written by others (mode"
            f" {stat.S_IMODE(info.st_mode):04o}): anyone could make zuka trust their host",
            f"chmod 600 {_quoted(trust)}",
        )
    if clean:
        yield Finding(AREA, Level.OK, "the ledger and the files beside it are this user's only")


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _quoted(path: Path) -> str:
    import shlex

    return shlex.quote(visible(str(path)))
