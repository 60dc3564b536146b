"""Loading the user's config: where its file is, reading it safely, and merging it with
the environment into a Config (leases.config.sections).

Where: `--config PATH`, else $ZUKA_CONFIG, else `config.toml` in the platform's user config
directory (a missing default file means all defaults). Any key can also be set by
environment, `ZUKA_<SECTION>_<KEY>` (ZUKA_ALERTS_STARVED_MINUTES=20): the value is read as
a TOML value when it parses as one, else as a string; a list may be given as words
separated by commas or spaces. Environment wins over the file.

Every unknown key and bad value is reported at once, each naming the key, the value and
where it came from, with "did you mean" for near misses; nothing half-read is ever used.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any

from leases.config.bills import read_bills
from leases.config.keys import BY_ENV, BY_KEY, ENV_PREFIX, MAPPINGS, SPECS, BadValue, got, suggest
from leases.config.mappings import read_mapping, read_money, read_project_tables
from leases.config.sections import (
    AcceptConfig,
    AlertsConfig,
    BillingConfig,
    BillsConfig,
    Config,
    MoneyConfig,
    NotifyConfig,
    OffboardConfig,
)
from leases.core.errors import ConfigError
from leases.core.textsafe import visible

CONFIG_ENV = "ZUKA_CONFIG"
# Bounds on what a config may hold, so that a wrong path (a FIFO, /dev/zero) or a hostile
# file costs a clear message, not a hang, gigabytes or a traceback.
MAX_FILE_BYTES = 1 << 20
MAX_STRING_CHARS = 4096
MAX_PROBLEMS = 50


_SECTION_TYPES: dict[str, type] = {
    "billing": BillingConfig,
    "alerts": AlertsConfig,
    "notify": NotifyConfig,
    "offboard": OffboardConfig,
    "accept": AcceptConfig,
}
SECTIONS = (*_SECTION_TYPES, *MAPPINGS, "money", "bills")


def default_config_path() -> Path:
    from platformdirs import user_config_path

    return user_config_path("zuka", appauthor=False) / "config.toml"


def resolve_config_path(
    cli_value: str | None, env: Mapping[str, str] = os.environ
) -> tuple[Path, bool]:
    """--config wins over $ZUKA_CONFIG, which wins over the platform's config directory.
    The flag says whether the path was given (then it must exist)."""
    if cli_value:
        return Path(cli_value).expanduser(), True
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).expanduser(), True
    return default_config_path(), False


# What a front end checks of the [keys] remaps (the binding ids only the dashboard knows):
# its problems, one line each. Given to load_config so that every problem comes in one run.
KeysCheck = Callable[[Mapping[str, str]], list[str]]


def load_user_config(
    cli_value: str | None,
    env: Mapping[str, str] = os.environ,
    *,
    keys_check: KeysCheck | None = None,
) -> Config:
    """The config a command runs with: the resolved file (if any) and the environment."""
    path, explicit = resolve_config_path(cli_value, env)
    return load_config(path if explicit or path.exists() else None, env=env, keys_check=keys_check)


def load_config(
    path: Path | None, *, env: Mapping[str, str] = os.environ, keys_check: KeysCheck | None = None
) -> Config:
    """Read, validate and type a config file (None: defaults) plus environment overrides.
    Raises ConfigError naming every problem, the [keys] ones by keys_check among them."""
    problems: list[str] = []
    raw: dict[str, Any] = {}
    warnings: list[str] = []
    where = str(path)
    if path is not None:
        text, mode = _read_bounded(path)
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError([f"{path}: not valid TOML: {visible(exc, 200)}"]) from None
        except RecursionError:
            raise ConfigError([f"{path}: not usable TOML: values nested too deeply"]) from None
        warnings.extend(_permission_warnings(path, mode))

    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    mappings: dict[str, dict[str, str]] = {name: {} for name in MAPPINGS}
    rates: dict[str, dict[str, Decimal]] = {}
    regions: dict[str, tuple[str, ...]] = {}
    bill_formats: dict[str, dict[str, str]] = {}
    bill_tolerance = ""

    for section, body in raw.items():
        if section not in SECTIONS:
            problems.append(
                f"{where}: {visible(section, 80)}: unknown section"
                f"{suggest(section, list(SECTIONS))}"
            )
            continue
        if not isinstance(body, dict):
            problems.append(f"{where}: {section}: must be a table ([{section}]){got(body)}")
            continue
        if section == "projects":  # [projects.NAME] tables beside person = project
            problems.extend(read_project_tables(body, where, regions, sources))
            body = {k: v for k, v in body.items() if not isinstance(v, dict)}
        if section in MAPPINGS:
            problems.extend(read_mapping(section, body, where, mappings[section], sources))
            continue
        if section == "money":
            problems.extend(read_money(body, where, rates, sources))
            continue
        if section == "bills":
            bill_tolerance, found = read_bills(body, where, bill_formats, sources)
            problems.extend(found)
            continue
        names = [s.name for s in SPECS if s.section == section]
        for name, value in body.items():
            key = f"{section}.{name}"
            spec = BY_KEY.get(key)
            if spec is None:
                problems.append(
                    f"{where}: {visible(key, 120)}: unknown key"
                    f"{suggest(name, names, section + '.')}{got(value)}"
                )
                continue
            if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
                problems.append(f"{where}: {key}: must be at most {MAX_STRING_CHARS} characters"
                                f"{got(value)}")  # fmt: skip
                continue
            try:
                values[key] = spec.parse(value)
                sources[key] = where
            except BadValue as exc:
                problems.extend(_refused(where, key, exc, value))

    for var, text in sorted(env.items()):
        if not var.startswith(ENV_PREFIX) or var in (CONFIG_ENV, "ZUKA_LEDGER"):
            continue
        spec = BY_ENV.get(var)
        if spec is None:
            if var.startswith(f"{ENV_PREFIX}MONEY_"):
                problems.append(f"env {var}: money rates are set in the config file only"
                                ' ([money.rates."2026-11"] USD = 7.12)')  # fmt: skip
            elif any(var.startswith(f"{ENV_PREFIX}{s.upper()}_") for s in _SECTION_TYPES):
                problems.append(f"env {var}: no such setting{suggest(var, list(BY_ENV))}")
            continue
        value = _env_value(text, spec.is_list)
        try:
            values[spec.key] = spec.parse(value)
            sources[spec.key] = f"env {var}"
        except BadValue as exc:
            problems.extend(_refused(f"env {var}", spec.key, exc, text))

    lab = values.get("billing.currency", BillingConfig.currency)
    for month, table in rates.items():
        if lab in table:
            problems.append(
                f'{sources[f"money.rates.{month}.{lab}"]}: money.rates."{month}".{lab}: is the'
                " lab's own currency (billing.currency): it needs no rate"
            )
    if keys_check is not None:
        said = keys_check(mappings["keys"])
        problems.extend(said if path is None else [f"{where}: {p}" for p in said])
    if len(problems) > MAX_PROBLEMS:
        more = len(problems) - MAX_PROBLEMS
        problems = [*problems[:MAX_PROBLEMS], f"... and {more} more problems"]
    if problems:
        raise ConfigError(problems)
    sections: dict[str, Any] = {}
    for section, cls in _SECTION_TYPES.items():
        given = {s.attr: values[s.key] for s in SPECS if s.section == section and s.key in values}
        sections[section] = cls(**given)
    sections["alerts"] = replace(
        sections["alerts"],
        bill_tolerance=bill_tolerance,
        billing_tz=sections["billing"].tz,
        accept_young_days=sections["accept"].young_days,
    )
    return Config(
        **sections,
        money=MoneyConfig(
            MappingProxyType({m: MappingProxyType(t) for m, t in sorted(rates.items())})
        ),
        bills=BillsConfig(
            bill_tolerance,
            MappingProxyType({k: MappingProxyType(v) for k, v in sorted(bill_formats.items())}),
        ),
        users=MappingProxyType(mappings["users"]),
        projects=MappingProxyType(mappings["projects"]),
        project_regions=MappingProxyType(regions),
        keys=MappingProxyType(mappings["keys"]),
        path=path,
        sources=MappingProxyType(sources),
        warnings=tuple(warnings),
    )


def _refused(where: str, key: str, exc: BadValue, value: Any) -> list[str]:
    if exc.items:  # each shows its own value, masked: a URL's token never reaches the screen
        return [f"{where}: {key}{item}" for item in exc.items]
    return [f"{where}: {key}: {exc}{got(value)}"]


def _env_value(text: str, is_list: bool) -> Any:
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    if is_list and isinstance(value, str):
        words = [w for w in re.split(r"[\s,]+" if "://" not in value else r"\s+", value) if w]
        return [_env_value(w, False) for w in words]
    return value


def _read_bounded(path: Path) -> tuple[str, int]:
    """The text of a config file and its mode. Only a regular file of at most
    MAX_FILE_BYTES is read; O_NONBLOCK keeps a FIFO from blocking the open, fstat tells
    what was opened (no race with the path being swapped after a check). The null device
    reads as an empty file: `--config /dev/null` is the usual way to say "defaults"."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ConfigError([f"{path}: no such file"]) from None
    except OSError as exc:
        raise ConfigError([f"{path}: cannot be read ({visible(exc.strerror, 200)})"]) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISCHR(info.st_mode) and _is_devnull(info):
            return "", 0o600
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(
                [f"{path}: not a regular file (a FIFO, a device or a directory); "
                 "a config must be a TOML file"]
            )  # fmt: skip
        if info.st_size > MAX_FILE_BYTES:
            raise ConfigError([f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB; not a config"])
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_FILE_BYTES:  # the file may grow after fstat
            chunk = os.read(fd, MAX_FILE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_FILE_BYTES:
            raise ConfigError([f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB; not a config"])
        text = b"".join(chunks).decode("utf-8")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot be read ({visible(exc.strerror, 200)})"]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}: not UTF-8 text ({visible(exc, 200)})"]) from None
    finally:
        os.close(fd)
    return text, info.st_mode


def _is_devnull(info: os.stat_result) -> bool:
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(null.st_mode) and info.st_rdev == null.st_rdev


def _permission_warnings(path: Path, mode: int) -> list[str]:
    if stat.S_ISREG(mode) and mode & 0o077:
        return [
            f"{path} is readable by other users (mode {stat.S_IMODE(mode):03o}); it may hold "
            f"notification tokens: chmod 600 {path}"
        ]
    return []
