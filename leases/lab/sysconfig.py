"""The host's own config, under every user's: `/etc/zuka/config.toml` (the system config)
and the secrets file beside it (`/etc/zuka/secrets.toml`, or the path its `[lab] secrets`
says).

The system config is readable by every user of the host and says, in `[lab] ledger`, the
ledger everyone on the host opens by default. So it must be root's (or, for a developer's
own test, the user's own) and writable by nobody else: whoever could write it could point
the lab at a ledger of theirs. The secrets file holds what must not be read by every user
(notification URLs carry tokens): root's, readable by its group only (the lab's editors,
or a group of the service user's own), never by others. A user who may not read it (a
viewer) goes without it, silently: that is its point.

`ZUKA_SYSTEM_CONFIG` names another system config (tests; a second lab on one host); empty,
or /dev/null, turns the system layer (and so the secrets file) off. Here rather than in
leases.config because the ledger's path (leases.ledger.paths) needs `[lab] ledger` too,
and leases.ledger may not import the config; this module reads only `[lab]`, cheaply.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leases.core.configfile import is_devnull, parse_toml, read_text
from leases.core.errors import ConfigError, LedgerError
from leases.core.i18n import _
from leases.core.textsafe import is_clean, visible

if TYPE_CHECKING:
    from leases.lab.layout import Lab

# The lab's marker, the user and group database (leases.lab.layout, .roles) are imported
# only where the secrets file is checked: the ledger's path reads [lab] ledger alone, and a
# cold `zuka poll` should not pay for the rest (nor for dataclasses or NamedTuples, whose
# making costs milliseconds: plain classes here).

SYSTEM_CONFIG_ENV = "ZUKA_SYSTEM_CONFIG"
DEFAULT_SYSTEM_CONFIG = Path("/etc/zuka/config.toml")
SECRETS_NAME = "secrets.toml"
LAB_KEYS = ("ledger", "secrets")
MAX_PATH_CHARS = 4096
# Where no file of zuka's belongs: the kernel's views and the devices.
_NOT_FILES = ("/proc", "/sys", "/dev")


class LabSettings:
    """The system config's `[lab]`: the host's default ledger, where the secrets are."""

    __slots__ = ("ledger", "secrets")

    def __init__(self, ledger: Path | None = None, secrets: Path | None = None) -> None:
        self.ledger = ledger
        self.secrets = secrets


class SystemFile:
    """The system config as read: its TOML (empty when absent), its [lab] apart."""

    __slots__ = ("lab", "path", "present", "raw")

    def __init__(
        self, path: Path, present: bool, raw: dict[str, Any], lab: LabSettings | None = None
    ) -> None:
        self.path = path
        self.present = present
        self.raw = raw
        self.lab = lab or LabSettings()

    @property
    def secrets_path(self) -> Path:
        return self.lab.secrets or self.path.with_name(SECRETS_NAME)


def system_config_path(env: Mapping[str, str] = os.environ) -> Path | None:
    """$ZUKA_SYSTEM_CONFIG, else /etc/zuka/config.toml; None when turned off (an empty
    value or the null device)."""
    if SYSTEM_CONFIG_ENV in env:
        value = env[SYSTEM_CONFIG_ENV]
        if not value.strip():
            return None
        path = Path(value).expanduser()
    else:
        path = DEFAULT_SYSTEM_CONFIG
    return None if is_devnull(path) else path


def read_system_config(path: Path) -> SystemFile:
    """The system config at path (absent: no layer), its ownership and modes checked and
    its [lab] read; ConfigError naming the file for every problem."""
    try:
        text, info = read_text(path)
    except FileNotFoundError:
        return SystemFile(path, present=False, raw={})
    except PermissionError:
        from leases.lab.roles import me

        raise ConfigError(
            [
                _(
                    "{path}: cannot be read by {user}: the system config is for every user "
                    "of the host (as root: chmod 644 {path}; secrets go in the secrets "
                    "file); to go without it: {system_config_env}= zuka ..."
                ).format(path=path, user=me(), system_config_env=SYSTEM_CONFIG_ENV)
            ]
        ) from None
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid not in (0, os.geteuid()):
        raise ConfigError(
            [
                _(
                    "{path}: is owned by uid {uid}, not root: whoever owns it could point "
                    "everyone's zuka at a ledger of theirs; as root: chown root:root {path}"
                ).format(path=path, uid=info.st_uid)
            ]
        )
    if mode & 0o022:
        raise ConfigError(
            [
                _(
                    "{path}: may be written by its group or others (mode {mode:04o}): anyone "
                    "of them could point everyone's zuka at a ledger of theirs; as root: "
                    "chmod 644 {path}"
                ).format(path=path, mode=mode)
            ]
        )
    problem = folder_problem(path)
    if problem:
        raise ConfigError([problem])
    raw = parse_toml(text, path)
    body = raw.pop("lab", None)
    lab, problems = lab_settings(body, str(path))
    if problems:
        raise ConfigError(problems)
    return SystemFile(path, present=True, raw=raw, lab=lab)


def folder_problem(path: Path) -> str:
    """Why the folder of a system config or secrets file would let someone else swap the
    file for one of theirs (empty when it would not): a folder others may write, without
    the sticky bit that keeps them from removing root's files (as /tmp has)."""
    folder = path.parent
    try:
        info = os.stat(folder)
    except OSError:
        return ""  # the file itself was just read: nothing more to learn here
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid not in (0, os.geteuid()):
        return _(
            "{path}: its folder {folder} is owned by uid {uid}, not root: its owner "
            "could put another file in its place; as root: chown root:root {folder}"
        ).format(path=path, folder=folder, uid=info.st_uid)
    if mode & 0o022 and not mode & stat.S_ISVTX:
        return _(
            "{path}: its folder {folder} may be written by its group or others (mode "
            "{mode:04o}): anyone of them could put another file in its place; as "
            "root: chmod 755 {folder}"
        ).format(path=path, folder=folder, mode=mode)
    return ""


def lab_settings(body: object, where: str) -> tuple[LabSettings, list[str]]:
    """`[lab]` checked: its keys, each a path a file of zuka's may have."""
    if body is None:
        return LabSettings(), []
    if not isinstance(body, dict):
        return LabSettings(), [_("{where}: lab: must be a table ([lab])").format(where=where)]
    problems: list[str] = []
    paths: dict[str, Path] = {}
    for key, value in body.items():
        if key not in LAB_KEYS:
            problems.append(
                _("{where}: lab.{key}: unknown key (known: {lab_keys})").format(
                    where=where, key=visible(key, 60), lab_keys=", ".join(LAB_KEYS)
                )
            )
            continue
        reason = path_problem(value)
        if reason:
            problems.append(
                _("{where}: lab.{key}: {reason} (got {value})").format(
                    where=where, key=key, reason=reason, value=visible(repr(value), 200)
                )
            )
        else:
            paths[key] = Path(value)
    return LabSettings(paths.get("ledger"), paths.get("secrets")), problems


def path_problem(value: object) -> str:
    """Why value is not the absolute path of a file (empty when it is)."""
    if not isinstance(value, str) or not value:
        return _("must be the absolute path of a file, in quotes")
    if len(value) > MAX_PATH_CHARS or not is_clean(value):
        return _("must be one line of at most {max_path_chars} characters").format(
            max_path_chars=MAX_PATH_CHARS
        )
    if not value.startswith("/"):
        return _(
            "must be an absolute path (it is the same file for every user, whatever the folder)"
        )
    if value.endswith("/") or ".." in value.split("/"):
        return _("must name a file (no trailing / and no '..')")
    if any(value == root or value.startswith(root + "/") for root in _NOT_FILES):
        return _("must not be under {not_files} (not a place for a file of zuka's)").format(
            not_files=", ".join(_NOT_FILES)
        )
    if os.path.isdir(value):
        return _("is a folder, not a file")
    return ""


def lab_ledger(env: Mapping[str, str] = os.environ) -> tuple[Path, Path] | None:
    """The host's default ledger and the system config that names it, or None."""
    path = system_config_path(env)
    if path is None:
        return None
    system = read_system_config(path)
    return None if system.lab.ledger is None else (system.lab.ledger, path)


class Secrets:
    """The secrets file as this user found it: its TOML, or why there is none."""

    __slots__ = ("path", "raw", "state")

    def __init__(self, path: Path, raw: dict[str, Any] | None, state: str) -> None:
        self.path = path
        self.raw = raw
        self.state = state  # "read", "absent", or why it was skipped


def read_secrets(system: SystemFile) -> Secrets:
    """The secrets file of this system config, its ownership, modes and group checked; one
    this user may not read is skipped (said in its state), not an error."""
    path = system.secrets_path
    try:
        text, info = read_text(path)
    except FileNotFoundError:
        if system.lab.secrets is not None:  # named, so meant to be there
            raise ConfigError(
                [
                    _("{path}: lab.secrets: no such file {path2}").format(
                        path=system.path, path2=visible(str(path))
                    )
                ]
            ) from None
        return Secrets(path, None, "absent")
    except PermissionError:
        from leases.lab.roles import me

        return Secrets(path, None, _("not readable by {user}: skipped").format(user=me()))
    problems = secrets_problems(path, info, _lab_of(system))
    problem = folder_problem(path)
    if problem and not problems:
        problems = [problem]
    if problems:
        raise ConfigError(problems)
    return Secrets(path, parse_toml(text, path), "read")


def _lab_of(system: SystemFile) -> Lab | None:
    from leases.lab.layout import find_lab

    if system.lab.ledger is None:
        return None
    try:
        return find_lab(system.lab.ledger)
    except LedgerError as exc:
        raise ConfigError(
            [
                _(
                    "{path}: lab.ledger: its lab's marker cannot be trusted, so neither can "
                    "the secrets file's group: {problem}"
                ).format(path=system.path, problem=visible(str(exc), 300))
            ]
        ) from None


def secrets_problems(path: Path, info: os.stat_result, lab: Lab | None) -> list[str]:
    """What is wrong with a secrets file's owner, modes and group (pure but for the
    user and group database)."""
    mode = stat.S_IMODE(info.st_mode)
    fix = _("as root: chown root:GROUP {path} && chmod 640 {path}").format(path=path)
    if info.st_uid != 0:
        return [
            _("{path}: is owned by uid {uid}, not root: a secrets file is root's; {fix}").format(
                path=path, uid=info.st_uid, fix=fix
            )
        ]
    if mode & 0o007:
        return [
            _(
                "{path}: is open to every user (mode {mode:04o}): it holds tokens; as "
                "root: chmod 640 {path}"
            ).format(path=path, mode=mode)
        ]
    if mode & 0o020:
        return [
            _(
                "{path}: may be written by its group (mode {mode:04o}): only root writes "
                "it; as root: chmod 640 {path}"
            ).format(path=path, mode=mode)
        ]
    if lab is None or info.st_gid == 0:
        return []
    allowed = {_gid(lab.editors)}
    service = _primary_gid(lab.service_user)
    if service is not None and service != _gid(lab.viewers):
        allowed.add(service)
    if info.st_gid in allowed - {None}:
        return []
    group = _group_name(info.st_gid)
    whose = _(" (the lab's viewers: every member)") if group == lab.viewers else ""
    return [
        _(
            "{path}: its group is {group}{whose}: a secrets file is read by the "
            "lab's editors ({editors}) and the service ({service_user}) only; as "
            "root: chgrp {editors} {path}"
        ).format(
            path=path, group=group, whose=whose, editors=lab.editors, service_user=lab.service_user
        )
    ]


def _gid(name: str) -> int | None:
    import grp

    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def _primary_gid(user: str) -> int | None:
    import pwd

    try:
        return pwd.getpwnam(user).pw_gid
    except KeyError:
        return None


def _group_name(gid: int) -> str:
    import grp

    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)
