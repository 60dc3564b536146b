"""Loading the config: where its files are, reading them safely, and laying them and the
environment over each other into a Config (leases.config.sections).

The layers, later winning key by key (sections are merged, not replaced): the system
config `/etc/zuka/config.toml` ($ZUKA_SYSTEM_CONFIG; empty or /dev/null: none), then the
secrets file beside it (leases.lab.sysconfig: a token may sit there, never in the system
config, which every user reads), then the user's own file (`--config PATH`, else
$ZUKA_CONFIG, else `config.toml` in the platform's user config directory; a missing
default file is no layer), then the environment, `ZUKA_<SECTION>_<KEY>`
(ZUKA_ALERTS_STARVED_MINUTES=20): the value is read as a TOML value when it parses as one,
else as a string; a list may be given as words separated by commas or spaces.

Every unknown key and bad value is reported at once, each naming the key, the value and
where it came from, with "did you mean" for near misses; nothing half-read is ever used.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any

from leases.config.keys import BY_ENV, BY_KEY, ENV_PREFIX, MAPPINGS, SPECS, BadValue, got, suggest
from leases.config.layers import SECRETS, SYSTEM, read_layers
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
    UiConfig,
)
from leases.core.configfile import is_devnull
from leases.core.errors import ConfigError
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.lab.sysconfig import SYSTEM_CONFIG_ENV, system_config_path

CONFIG_ENV = "ZUKA_CONFIG"
# The variables of zuka's that are not settings: where the files are.
_NOT_SETTINGS = frozenset({CONFIG_ENV, "ZUKA_LEDGER", SYSTEM_CONFIG_ENV, "ZUKA_LANG"})
MAX_STRING_CHARS = 4096
MAX_PROBLEMS = 50
# `[ui] lang`: a value zuka does not speak is said by the command line before the command
# runs (leases.config.lang) and passed over here, so it stops no command.
LANG_KEY = "ui.lang"


_SECTION_TYPES: dict[str, type] = {
    "billing": BillingConfig,
    "ui": UiConfig,
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
    system: Path | None = None,
) -> Config:
    """The config a command runs with: the system config (system, else
    $ZUKA_SYSTEM_CONFIG, else /etc/zuka/config.toml; the null device: none) and its
    secrets file, the user's resolved file (if any) over them, and the environment."""
    path, explicit = resolve_config_path(cli_value, env)
    host = system_config_path(env) if system is None else None if is_devnull(system) else system
    return load_config(
        path if explicit or path.exists() else None, env=env, keys_check=keys_check, system=host
    )


@dataclass
class _Laid:
    """The values of the layers laid so far (later ones win key by key), with where each
    came from and every problem found."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    mappings: dict[str, dict[str, str]] = field(default_factory=lambda: {m: {} for m in MAPPINGS})
    rates: dict[str, dict[str, Decimal]] = field(default_factory=dict)
    regions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    bill_formats: dict[str, dict[str, str]] = field(default_factory=dict)
    bill_tolerance: str = ""
    problems: list[str] = field(default_factory=list)

    def lay(self, raw: dict[str, Any], where: str, kind: str, secrets: Path | None) -> None:
        problems = self.problems
        for section, body in raw.items():
            if section == "lab":
                problems.append(
                    _(
                        "{where}: lab: is read from the system config only; for a ledger of your "
                        "own use --ledger or $ZUKA_LEDGER"
                    ).format(where=where)
                )
                continue
            if section not in SECTIONS:
                problems.append(
                    _("{where}: {section}: unknown section{suggest}").format(
                        where=where,
                        section=visible(section, 80),
                        suggest=suggest(section, list(SECTIONS)),
                    )
                )
                continue
            if not isinstance(body, dict):
                problems.append(
                    _("{where}: {section}: must be a table ([{section}]){got}").format(
                        where=where, section=section, got=got(body)
                    )
                )
                continue
            if section == "projects":  # [projects.NAME] tables beside person = project
                problems.extend(read_project_tables(body, where, self.regions, self.sources))
                body = {k: v for k, v in body.items() if not isinstance(v, dict)}
            if section in MAPPINGS:
                problems.extend(
                    read_mapping(section, body, where, self.mappings[section], self.sources)
                )
                continue
            if section == "money":
                problems.extend(read_money(body, where, self.rates, self.sources))
                continue
            if section == "bills":
                # Only where a file has [bills]: it pulls in the bill formats (~80 ms of
                # imports that every command reading the config would pay for).
                from leases.config.bills import read_bills

                tolerance, found = read_bills(body, where, self.bill_formats, self.sources)
                problems.extend(found)
                if "tolerance" in body:
                    self.bill_tolerance = tolerance
                continue
            self._keys(section, body, where, kind, secrets)

    def _keys(
        self, section: str, body: dict[str, Any], where: str, kind: str, secrets: Path | None
    ) -> None:
        names = [s.name for s in SPECS if s.section == section]
        for name, value in body.items():
            key = f"{section}.{name}"
            spec = BY_KEY.get(key)
            if spec is None:
                self.problems.append(
                    _("{where}: {key}: unknown key{suggest}{got}").format(
                        where=where,
                        key=visible(key, 120),
                        suggest=suggest(name, names, section + "."),
                        got=got(value),
                    )
                )
                continue
            if spec.secret and kind == SYSTEM:
                self.problems.append(
                    _(
                        "{where}: {key}: may hold tokens, and the system config is read by every "
                        "user of the host: move it to the secrets file ({secrets}), root's, its "
                        "group the lab's editors, mode 0640"
                    ).format(where=where, key=key, secrets=secrets)
                )
                continue
            if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
                self.problems.append(
                    _("{where}: {key}: must be at most {max_string_chars} characters{got}").format(
                        where=where, key=key, max_string_chars=MAX_STRING_CHARS, got=got(value)
                    )
                )
                continue
            try:
                self.values[key] = spec.parse(value)
                self.sources[key] = where
            except BadValue as exc:
                if key != LANG_KEY:  # said by the command line, once (leases.config.lang)
                    self.problems.extend(_refused(where, key, exc, value))

    def env(self, env: Mapping[str, str]) -> None:
        for var, text in sorted(env.items()):
            if not var.startswith(ENV_PREFIX) or var in _NOT_SETTINGS:
                continue
            spec = BY_ENV.get(var)
            if spec is None:
                if var.startswith(f"{ENV_PREFIX}MONEY_"):
                    self.problems.append(
                        _(
                            "env {var}: money rates are set in the config file only "
                            '([money.rates."2026-11"] USD = 7.12)'
                        ).format(var=var)
                    )
                elif var.startswith(f"{ENV_PREFIX}LAB_"):
                    self.problems.append(
                        _(
                            "env {var}: [lab] is set in the system config only; for a ledger"
                            " of your own: $ZUKA_LEDGER"
                        ).format(var=var)
                    )
                elif any(var.startswith(f"{ENV_PREFIX}{s.upper()}_") for s in _SECTION_TYPES):
                    self.problems.append(
                        _("env {var}: no such setting{suggest}").format(
                            var=var, suggest=suggest(var, list(BY_ENV))
                        )
                    )
                continue
            value = _env_value(text, spec.is_list)
            try:
                self.values[spec.key] = spec.parse(value)
                self.sources[spec.key] = _("env {var}").format(var=var)
            except BadValue as exc:
                if spec.key != LANG_KEY:
                    self.problems.extend(
                        _refused(_("env {var}").format(var=var), spec.key, exc, text)
                    )


def load_config(
    path: Path | None,
    *,
    env: Mapping[str, str] = os.environ,
    keys_check: KeysCheck | None = None,
    system: Path | None = None,
) -> Config:
    """Read, validate and type the system config (system; None: none) with its secrets
    file, a user's config file over them (None: none) and environment overrides over all.
    Raises ConfigError naming every problem and its file, the [keys] ones by keys_check
    among them."""
    found = read_layers(path, system)
    laid = _Laid()
    secrets = next((layer.path for layer, _ in found.layers if layer.kind == SECRETS), None)
    for layer, raw in found.layers:
        if raw is not None:
            laid.lay(raw, str(layer.path), layer.kind, secrets)
    if system is not None:
        for name in ("ledger", "secrets"):
            if getattr(found.lab, name) is not None:
                laid.sources[f"lab.{name}"] = str(system)
    laid.env(env)
    problems, values, sources = laid.problems, laid.values, laid.sources

    lab = values.get("billing.currency", BillingConfig.currency)
    for month, table in laid.rates.items():
        if lab in table:
            problems.append(
                _(
                    '{sources}: money.rates."{month}".{lab}: is the lab\'s own currency '
                    "(billing.currency): it needs no rate"
                ).format(sources=sources[f"money.rates.{month}.{lab}"], month=month, lab=lab)
            )
    if keys_check is not None:
        said = keys_check(laid.mappings["keys"])
        files = {sources[f"keys.{k}"] for k in laid.mappings["keys"]}
        problems.extend([f"{files.pop()}: {p}" for p in said] if len(files) == 1 else said)
    if len(problems) > MAX_PROBLEMS:
        more = len(problems) - MAX_PROBLEMS
        problems = [*problems[:MAX_PROBLEMS], _("... and {more} more problems").format(more=more)]
    if problems:
        raise ConfigError(problems)
    sections: dict[str, Any] = {}
    for section, cls in _SECTION_TYPES.items():
        given = {s.attr: values[s.key] for s in SPECS if s.section == section and s.key in values}
        sections[section] = cls(**given)
    sections["alerts"] = replace(
        sections["alerts"],
        bill_tolerance=laid.bill_tolerance,
        billing_tz=sections["billing"].tz,
        accept_young_days=sections["accept"].young_days,
    )
    formats = laid.bill_formats
    return Config(
        **sections,
        money=MoneyConfig(
            MappingProxyType({m: MappingProxyType(t) for m, t in sorted(laid.rates.items())})
        ),
        bills=BillsConfig(
            laid.bill_tolerance,
            MappingProxyType({k: MappingProxyType(v) for k, v in sorted(formats.items())}),
        ),
        users=MappingProxyType(laid.mappings["users"]),
        projects=MappingProxyType(laid.mappings["projects"]),
        project_regions=MappingProxyType(laid.regions),
        keys=MappingProxyType(laid.mappings["keys"]),
        lab=found.lab,
        path=path,
        sources=MappingProxyType(sources),
        warnings=found.warnings,
        layers=tuple(layer for layer, _ in found.layers),
    )


def _refused(where: str, key: str, exc: BadValue, value: Any) -> list[str]:
    if exc.items:  # each shows its own value, masked: a URL's token never reaches the screen
        return [f"{where}: {key}{item}" for item in exc.items]
    return [
        _("{where}: {key}: {problem}{got}").format(
            where=where, key=key, problem=exc, got=got(value)
        )
    ]


def _env_value(text: str, is_list: bool) -> Any:
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    if is_list and isinstance(value, str):
        words = [w for w in re.split(r"[\s,]+" if "://" not in value else r"\s+", value) if w]
        return [_env_value(w, False) for w in words]
    return value
