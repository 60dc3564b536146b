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
from leases.core.i18n import _
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
            _("ledger: {path} (from {source}) cannot be looked at by this user").format(
                path=shown, source=setting.ledger_source
            ),
            _(
                "ask whoever keeps it (in a lab, its admin: sudo zuka lab add-user $(id -un)"
                " --role view)"
            ),
        )
        return
    except OSError:
        pass
    if ledger.is_file():
        said = _("ledger: {path} (from {source})")
        yield Finding("paths", Level.OK, said.format(path=shown, source=setting.ledger_source))
    elif ledger.exists():
        yield Finding(
            "paths",
            Level.FAIL,
            _("ledger: {path} (from {source}) is not a regular file").format(
                path=shown, source=setting.ledger_source
            ),
            _("give the ledger's file with --ledger or ZUKA_LEDGER"),
        )
    else:
        yield Finding(
            "paths",
            Level.WARN,
            _("ledger: {path} (from {source}) does not exist yet").format(
                path=shown, source=setting.ledger_source
            ),
            _("`zuka node add` creates it; a typo in --ledger or ZUKA_LEDGER? check the path"),
        )
    where = (
        _("no config file (defaults)")
        if setting.config_path is None
        else _("config: {path}").format(path=visible(str(setting.config_path)))
    )
    if setting.config_problems:
        for problem in setting.config_problems:
            yield Finding(
                "config", Level.FAIL, visible(problem), _("fix the file: zuka config check")
            )
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
            _("the ledger's folder {folder} is open to others (mode {mode})").format(
                folder=visible(str(folder)), mode=f"{stat.S_IMODE(info.st_mode):04o}"
            ),
            f"chmod 700 {_quoted(folder)}",
        )
    secret = [
        (_("the ledger"), ledger),
        (_("the ledger's WAL"), companion(ledger, "-wal")),
        (_("the ledger's shared memory"), companion(ledger, "-shm")),
        (_("the fault log"), fault_log_path(ledger)),
    ]
    clean = True
    for what, path in secret:
        info = _stat(path)
        if info is None:
            continue
        if not stat.S_ISREG(info.st_mode):
            clean = False
            said = _("{what} {path} is not a regular file")
            yield Finding(AREA, Level.FAIL, said.format(what=what, path=visible(str(path))))
            continue
        if info.st_mode & 0o077:
            clean = False
            yield Finding(
                AREA,
                Level.FAIL,
                _(
                    "{what} {path} is readable or writable by others (mode {mode}): it says"
                    " where the lab's machines are"
                ).format(
                    what=what, path=visible(str(path)), mode=f"{stat.S_IMODE(info.st_mode):04o}"
                ),
                f"chmod 600 {_quoted(path)}",
            )
        if info.st_uid != me:
            clean = False
            yield Finding(
                AREA,
                Level.WARN,
                _("{what} {path} belongs to uid {uid}, not to this user").format(
                    what=what, path=visible(str(path)), uid=info.st_uid
                ),
                _("chown $(id -un) {path} (or use that user's zuka)").format(path=_quoted(path)),
            )
    trust = trust_store(ledger)
    info = _stat(trust)
    if info is not None and info.st_mode & 0o022:
        clean = False
        yield Finding(
            AREA,
            Level.FAIL,
            _(
                "the trust store {path} may be written by others (mode {mode}): anyone could"
                " make zuka trust their host"
            ).format(path=visible(str(trust)), mode=f"{stat.S_IMODE(info.st_mode):04o}"),
            f"chmod 600 {_quoted(trust)}",
        )
    if clean:
        yield Finding(AREA, Level.OK, _("the ledger and the files beside it are this user's only"))


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _quoted(path: Path) -> str:
    import shlex

    return shlex.quote(visible(str(path)))
