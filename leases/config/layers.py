"""The files a config is laid from, in order: the system config (leases.lab.sysconfig),
the secrets file beside it, the user's own file. Each read safely and bounded
(leases.core.configfile); later files win key by key (leases.config.load lays them)."""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leases.config.sections import LabConfig, Layer
from leases.core.configfile import parse_toml, read_text
from leases.core.errors import ConfigError
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.lab.sysconfig import read_secrets, read_system_config

SYSTEM = "system config"
SECRETS = "secrets file"
USER = "config file"


@dataclass(frozen=True)
class Read:
    """The layers found, each with its TOML (None: not read), the system's [lab], and the
    warnings on the way."""

    layers: tuple[tuple[Layer, dict[str, Any] | None], ...]
    lab: LabConfig
    warnings: tuple[str, ...]


def read_layers(user: Path | None, system: Path | None) -> Read:
    """Every layer's file, read and checked; ConfigError naming the file of a problem."""
    layers: list[tuple[Layer, dict[str, Any] | None]] = []
    lab = LabConfig()
    if system is not None:
        found = read_system_config(system)
        state = "read" if found.present else "absent"
        layers.append((Layer(SYSTEM, system, state), found.raw if found.present else None))
        lab = LabConfig(found.lab.ledger, found.lab.secrets)
        secrets = read_secrets(found)
        layers.append((Layer(SECRETS, secrets.path, secrets.state), secrets.raw))
    warnings: list[str] = []
    if user is not None:
        try:
            text, info = read_text(user)
        except FileNotFoundError:
            raise ConfigError([_("{user}: no such file").format(user=user)]) from None
        except PermissionError as exc:
            raise ConfigError(
                [
                    _("{user}: cannot be read ({problem})").format(
                        user=user, problem=visible(exc.strerror, 200)
                    )
                ]
            ) from None
        layers.append((Layer(USER, user, "read"), parse_toml(text, user)))
        warnings.extend(_permission_warnings(user, info.st_mode))
    return Read(tuple(layers), lab, tuple(warnings))


def _permission_warnings(path: Path, mode: int) -> list[str]:
    if stat.S_ISREG(mode) and mode & 0o077:
        return [
            _(
                "{path} is readable by other users (mode {mode:03o}); it may hold "
                "notification tokens: chmod 600 {path}"
            ).format(path=path, mode=stat.S_IMODE(mode))
        ]
    return []
