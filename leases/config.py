"""The user's config: a TOML file of thresholds, notification URLs, currency and time zone.

Where: `--config PATH`, else $ZUKA_CONFIG, else `config.toml` in the platform's user config
directory (a missing default file means all defaults). Any key can also be set by
environment, `ZUKA_<SECTION>_<KEY>` (ZUKA_ALERTS_STARVED_MINUTES=20): the value is read as
a TOML value when it parses as one, else as a string; a list may be given as words
separated by commas or spaces. Environment wins over the file.

Every unknown key and bad value is reported at once, each naming the key, the value and
where it came from, with "did you mean" for near misses; nothing half-read is ever used.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import time
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from leases.alerts.severity import Severity
from leases.core.errors import ConfigError, InputError
from leases.core.fields import DEFAULT_TZ
from leases.core.textsafe import is_clean, visible

CONFIG_ENV = "ZUKA_CONFIG"
ENV_PREFIX = "ZUKA_"
# Bounds on what a config may hold, so that a wrong path (a FIFO, /dev/zero) or a hostile
# file costs a clear message, not a hang, gigabytes or a traceback.
MAX_FILE_BYTES = 1 << 20
MAX_URLS = 50
MAX_URL_CHARS = 2048
MAX_STRING_CHARS = 4096
MAX_PROBLEMS = 50


@dataclass(frozen=True)
class BillingConfig:
    currency: str = "CNY"
    tz: str = DEFAULT_TZ


@dataclass(frozen=True)
class AlertsConfig:
    # Days before a lease's end at which it is announced, the earliest first.
    lease_end_notice_days: tuple[int, ...] = (7, 3, 1)
    underuse_window_days: int = 7
    # Busy / paid card-hours below this share over the window is underuse.
    underuse_threshold: float = 0.5
    forgotten_idle_hours: float = 2.0
    starved_minutes: int = 30
    # Percent utilisation under which a GPU with processes is starved.
    starved_util: float = 40.0
    unreachable_minutes: int = 15
    # Hours a node with a lease that bills less while stopped goes unread before an alert
    # asks whether it was stopped (and gives the `zuka lease stop` command).
    stopped_question_hours: float = 3.0
    deposit_refund_days: int = 30
    autorenew_notice_days: int = 3
    release_notice_days: int = 2
    temperature_c: float = 85.0


@dataclass(frozen=True)
class NotifyConfig:
    urls: tuple[str, ...] = ()
    min_severity: Severity = Severity.WARNING
    rate_limit_per_hour: int = 20
    # Config key `digest`: "off", or "daily at HH:MM" (billing time zone): messages below
    # critical are then collected and sent once a day; critical ones still go at once.
    digest_at: time | None = None
    dedupe_hours: float = 12.0
    # A failed send is retried with backoff for this long, then given up (0: never retried).
    retry_hours: float = 24.0
    timeout_s: float = 10.0


@dataclass(frozen=True)
class OffboardConfig:
    # Cloud accounts zuka must never delete in, whatever the ledger says (preflight refuses).
    blocked_accounts: tuple[str, ...] = ()
    # Roots under which declared scratch paths may be shredded, beyond the presets for the
    # provider's kind (leases.offboard); absolute paths.
    scratch_roots: tuple[str, ...] = ()
    # How long to keep reading back a deletion a cloud finishes later (Huawei, EC2 images).
    verify_timeout_s: float = 300.0


@dataclass(frozen=True)
class MoneyConfig:
    # Month (YYYY-MM) -> currency code -> how many of the lab's currency (billing.currency)
    # one unit of it was worth that month: [money.rates."2026-11"] USD = 7.12. Only a
    # report's optional total in the lab's currency uses them; no figure is converted.
    rates: Mapping[str, Mapping[str, Decimal]] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class Setting:
    """One effective value as `zuka config show` prints it."""

    key: str
    value: Any
    source: str


@dataclass(frozen=True)
class Config:
    billing: BillingConfig = field(default_factory=BillingConfig)
    alerts: AlertsConfig = field(default_factory=AlertsConfig)
    notify: NotifyConfig = field(default_factory=NotifyConfig)
    offboard: OffboardConfig = field(default_factory=OffboardConfig)
    money: MoneyConfig = field(default_factory=MoneyConfig)
    # Unix user on a node -> person; person or user -> project or tag.
    users: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    projects: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # The dashboard's key remaps: binding id -> keys ("fleet-filter" = "slash,f"); the
    # dashboard checks the ids and keys it knows (leases knows no bindings).
    keys: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    path: Path | None = None
    # "section.key" -> "default", the file's path, or "env ZUKA_..."; absent means default.
    sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    warnings: tuple[str, ...] = ()

    def settings(self, *, mask: bool = True) -> list[Setting]:
        """Every key's effective value and where it came from; notification URLs masked."""
        out: list[Setting] = []
        for spec in _SPECS:
            section = getattr(self, spec.section)
            value = _shown(getattr(section, spec.attr), mask)
            out.append(Setting(spec.key, value, self.sources.get(spec.key, "default")))
        for name in _MAPPINGS:
            mapping: Mapping[str, str] = getattr(self, name)
            for k, v in mapping.items():
                key = f"{name}.{k}"
                out.append(Setting(key, v, self.sources.get(key, "default")))
        for month, rates in self.money.rates.items():
            for code, rate in rates.items():
                key = f"money.rates.{month}.{code}"
                out.append(Setting(key, str(rate), self.sources.get(key, "default")))
        return out


class _Bad(Exception):
    """A value refused by a key's parser; the message says why. `items` are problems of
    single entries ("[1]: reason (got ...)") that already show their (masked) values."""

    def __init__(self, reason: str = "", items: list[str] | None = None) -> None:
        super().__init__(reason)
        self.items = items or []


# -- value parsers --------------------------------------------------------------------


def _int(lo: int, hi: int) -> Callable[[Any], int]:
    def parse(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise _Bad(f"must be a whole number from {lo} to {hi}")
        if not lo <= v <= hi:
            raise _Bad(f"must be from {lo} to {hi}")
        return v

    return parse


def _num(lo: float, hi: float, *, lo_open: bool = False, hint: str = "") -> Callable[[Any], float]:
    rng = f"{'above' if lo_open else 'from'} {lo:g} {'and up' if lo_open else ''} to {hi:g}"
    rng = " ".join(rng.split())
    extra = f" ({hint})" if hint else ""

    def parse(v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise _Bad(f"must be a number {rng}{extra}")
        if (v <= lo if lo_open else v < lo) or v > hi:
            raise _Bad(f"must be {rng}{extra}")
        return float(v)

    return parse


def _days_list(v: Any) -> tuple[int, ...]:
    if not isinstance(v, list) or not v:
        raise _Bad("must be a non-empty list of whole days, such as [7, 3, 1]")
    bad = [x for x in v if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= 365]
    if bad:
        shown = ", ".join(visible(repr(x), 40) for x in bad)
        raise _Bad(f"every entry must be a whole number of days from 0 to 365; not {shown}")
    return tuple(sorted(set(v), reverse=True))


def _currency(v: Any) -> str:
    from leases.core.fields import CURRENCIES

    if isinstance(v, str) and v.strip().upper() == "RMB":
        raise _Bad("is not an ISO 4217 code: did you mean CNY?")
    if not isinstance(v, str) or v not in CURRENCIES:
        known = ", ".join(sorted(CURRENCIES))
        raise _Bad(f"must be an ISO 4217 code that zuka knows: {known}")
    return v


def _tz(v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise _Bad("must be an IANA time zone name such as Asia/Shanghai or UTC")
    try:
        ZoneInfo(v)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise _Bad("is not a known IANA time zone (such as Asia/Shanghai or UTC)") from exc
    return v


def _severity(v: Any) -> Severity:
    try:
        return Severity(v)
    except ValueError as exc:
        raise _Bad(f"must be one of {', '.join(s.value for s in Severity)}") from exc


def _digest(v: Any) -> time | None:
    text = v.strip().lower() if isinstance(v, str) else None
    if text == "off":
        return None
    m = re.fullmatch(r"daily(?: at)? ([01]?\d|2[0-3]):([0-5]\d)", text or "")
    if m is None:
        raise _Bad('must be "off" or "daily at HH:MM", such as "daily at 09:00"')
    return time(int(m.group(1)), int(m.group(2)))


def _urls(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list):
        raise _Bad("must be a list of notification URLs")
    if len(v) > MAX_URLS:
        raise _Bad(f"must hold at most {MAX_URLS} URLs (got {len(v)})")
    # Imported here: apprise is only loaded when there are URLs to check.
    from leases.notify.url import mask_url, parse_target

    reasons: list[str] = []
    for i, url in enumerate(v):
        if not isinstance(url, str):
            reasons.append(f"[{i}]: must be a string (got {visible(repr(url), 60)})")
            continue
        if len(url) > MAX_URL_CHARS:
            shown = visible(mask_url(url[:200]), 120)
            reasons.append(f"[{i}]: must be at most {MAX_URL_CHARS} characters (got {shown})")
            continue
        try:
            parse_target(url)
        except InputError as exc:
            reasons.append(f"[{i}]: {exc.reason} (got {visible(mask_url(url), 200)})")
    if reasons:
        raise _Bad(items=reasons)
    return tuple(v)


def _words(what: str) -> Callable[[Any], tuple[str, ...]]:
    def parse(v: Any) -> tuple[str, ...]:
        if not isinstance(v, list):
            raise _Bad(f"must be a list of strings, each {what}")
        for i, item in enumerate(v):
            if not isinstance(item, str) or not item.strip() or not is_clean(item):
                raise _Bad(f"[{i}]: must be {what}: one line, not empty{_got(item)}")
            if len(item) > 256:
                raise _Bad(f"[{i}]: must be at most 256 characters")
        return tuple(item.strip() for item in v)

    return parse


def _roots(v: Any) -> tuple[str, ...]:
    roots = _words("an absolute path")(v)
    for i, root in enumerate(roots):
        parts = root.split("/")
        if not root.startswith("/") or root.rstrip("/") == "" or ".." in parts:
            raise _Bad(f"[{i}]: must be an absolute path below / without '..'{_got(root)}")
    return tuple(r.rstrip("/") for r in roots)


@dataclass(frozen=True)
class _Spec:
    section: str
    name: str
    parse: Callable[[Any], Any]
    is_list: bool = False
    # The dataclass field, where it differs from the key's name.
    dest: str = ""

    @property
    def attr(self) -> str:
        return self.dest or self.name

    @property
    def key(self) -> str:
        return f"{self.section}.{self.name}"

    @property
    def env(self) -> str:
        return f"{ENV_PREFIX}{self.section}_{self.name}".upper()


_SPECS = (
    _Spec("billing", "currency", _currency),
    _Spec("billing", "tz", _tz),
    _Spec("alerts", "lease_end_notice_days", _days_list, is_list=True),
    _Spec("alerts", "underuse_window_days", _int(1, 90)),
    _Spec("alerts", "underuse_threshold", _num(0, 1, lo_open=True, hint="a share: 0.5 is 50 %")),
    _Spec("alerts", "forgotten_idle_hours", _num(0, 720, lo_open=True)),
    _Spec("alerts", "starved_minutes", _int(1, 1440)),
    _Spec("alerts", "starved_util", _num(0, 100, lo_open=True, hint="percent")),
    _Spec("alerts", "unreachable_minutes", _int(1, 10080)),
    _Spec("alerts", "stopped_question_hours", _num(0, 24 * 30, lo_open=True)),
    _Spec("alerts", "deposit_refund_days", _int(1, 365)),
    _Spec("alerts", "autorenew_notice_days", _int(0, 60)),
    _Spec("alerts", "release_notice_days", _int(0, 60)),
    _Spec("alerts", "temperature_c", _num(40, 120)),
    _Spec("notify", "urls", _urls, is_list=True),
    _Spec("notify", "min_severity", _severity),
    _Spec("notify", "rate_limit_per_hour", _int(1, 3600)),
    _Spec("notify", "digest", _digest, dest="digest_at"),
    _Spec("notify", "dedupe_hours", _num(0, 24 * 30)),
    _Spec("notify", "retry_hours", _num(0, 24 * 7)),
    _Spec("notify", "timeout_s", _num(0, 120, lo_open=True)),
    _Spec("offboard", "blocked_accounts", _words("an account id"), is_list=True),
    _Spec("offboard", "scratch_roots", _roots, is_list=True),
    _Spec("offboard", "verify_timeout_s", _num(0, 86400, lo_open=True)),
)
_BY_KEY = {s.key: s for s in _SPECS}
_BY_ENV = {s.env: s for s in _SPECS}
_SECTION_TYPES: dict[str, type] = {
    "billing": BillingConfig,
    "alerts": AlertsConfig,
    "notify": NotifyConfig,
    "offboard": OffboardConfig,
}
_MAPPINGS = ("users", "projects", "keys")
SECTIONS = (*_SECTION_TYPES, *_MAPPINGS, "money")
_RATE_MONTH = re.compile(r"([0-9]{4})-(0[1-9]|1[0-2])")
MAX_RATE = Decimal(1_000_000)  # KRW to a currency a million times smaller: a typo above it
RATE_PLACES = 8
RATE_YEARS = (2000, 2100)  # the months a report can be asked for (leases.money.report.YEARS)
_UNIX_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?")
_BINDING_ID = re.compile(r"[a-z][a-z0-9-]{0,63}")


def _shown(value: Any, mask: bool) -> Any:
    """A typed value back in the shape the file takes."""
    if isinstance(value, time):
        return f"daily at {value:%H:%M}"
    if value is None:
        return "off"
    if isinstance(value, Severity):
        return value.value
    if isinstance(value, tuple):
        if value and all(isinstance(v, str) for v in value) and mask:
            from leases.notify.url import mask_url

            return [mask_url(v) for v in value]
        return list(value)
    return value


def _suggest(name: str, choices: list[str], prefix: str = "") -> str:
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.7)
    return f"; did you mean {prefix}{close[0]}?" if close else ""


def _got(value: Any) -> str:
    return f" (got {visible(repr(value), 200)})"


# -- loading --------------------------------------------------------------------------


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


def load_user_config(cli_value: str | None, env: Mapping[str, str] = os.environ) -> Config:
    """The config a command runs with: the resolved file (if any) and the environment."""
    path, explicit = resolve_config_path(cli_value, env)
    return load_config(path if explicit or path.exists() else None, env=env)


def load_config(path: Path | None, *, env: Mapping[str, str] = os.environ) -> Config:
    """Read, validate and type a config file (None: defaults) plus environment overrides.
    Raises ConfigError naming every problem."""
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
    mappings: dict[str, dict[str, str]] = {name: {} for name in _MAPPINGS}
    rates: dict[str, dict[str, Decimal]] = {}

    for section, body in raw.items():
        if section not in SECTIONS:
            problems.append(
                f"{where}: {visible(section, 80)}: unknown section"
                f"{_suggest(section, list(SECTIONS))}"
            )
            continue
        if not isinstance(body, dict):
            problems.append(f"{where}: {section}: must be a table ([{section}]){_got(body)}")
            continue
        if section in _MAPPINGS:
            problems.extend(_read_mapping(section, body, where, mappings[section], sources))
            continue
        if section == "money":
            problems.extend(_read_money(body, where, rates, sources))
            continue
        names = [s.name for s in _SPECS if s.section == section]
        for name, value in body.items():
            key = f"{section}.{name}"
            spec = _BY_KEY.get(key)
            if spec is None:
                problems.append(
                    f"{where}: {visible(key, 120)}: unknown key"
                    f"{_suggest(name, names, section + '.')}{_got(value)}"
                )
                continue
            if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
                problems.append(f"{where}: {key}: must be at most {MAX_STRING_CHARS} characters"
                                f"{_got(value)}")  # fmt: skip
                continue
            try:
                values[key] = spec.parse(value)
                sources[key] = where
            except _Bad as exc:
                problems.extend(_refused(where, key, exc, value))

    for var, text in sorted(env.items()):
        if not var.startswith(ENV_PREFIX) or var in (CONFIG_ENV, "ZUKA_LEDGER"):
            continue
        spec = _BY_ENV.get(var)
        if spec is None:
            if var.startswith(f"{ENV_PREFIX}MONEY_"):
                problems.append(f"env {var}: money rates are set in the config file only"
                                ' ([money.rates."2026-11"] USD = 7.12)')  # fmt: skip
            elif any(var.startswith(f"{ENV_PREFIX}{s.upper()}_") for s in _SECTION_TYPES):
                problems.append(f"env {var}: no such setting{_suggest(var, list(_BY_ENV))}")
            continue
        value = _env_value(text, spec.is_list)
        try:
            values[spec.key] = spec.parse(value)
            sources[spec.key] = f"env {var}"
        except _Bad as exc:
            problems.extend(_refused(f"env {var}", spec.key, exc, text))

    lab = values.get("billing.currency", BillingConfig.currency)
    for month, table in rates.items():
        if lab in table:
            problems.append(
                f'{sources[f"money.rates.{month}.{lab}"]}: money.rates."{month}".{lab}: is the'
                " lab's own currency (billing.currency): it needs no rate"
            )
    if len(problems) > MAX_PROBLEMS:
        more = len(problems) - MAX_PROBLEMS
        problems = [*problems[:MAX_PROBLEMS], f"... and {more} more problems"]
    if problems:
        raise ConfigError(problems)
    sections: dict[str, Any] = {}
    for section, cls in _SECTION_TYPES.items():
        given = {s.attr: values[s.key] for s in _SPECS if s.section == section and s.key in values}
        sections[section] = cls(**given)
    return Config(
        **sections,
        money=MoneyConfig(
            MappingProxyType({m: MappingProxyType(t) for m, t in sorted(rates.items())})
        ),
        users=MappingProxyType(mappings["users"]),
        projects=MappingProxyType(mappings["projects"]),
        keys=MappingProxyType(mappings["keys"]),
        path=path,
        sources=MappingProxyType(sources),
        warnings=tuple(warnings),
    )


def _refused(where: str, key: str, exc: _Bad, value: Any) -> list[str]:
    if exc.items:  # each shows its own value, masked: a URL's token never reaches the screen
        return [f"{where}: {key}{item}" for item in exc.items]
    return [f"{where}: {key}: {exc}{_got(value)}"]


def _env_value(text: str, is_list: bool) -> Any:
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    if is_list and isinstance(value, str):
        words = [w for w in re.split(r"[\s,]+" if "://" not in value else r"\s+", value) if w]
        return [_env_value(w, False) for w in words]
    return value


def _read_mapping(
    section: str, body: dict[str, Any], where: str, into: dict[str, str], sources: dict[str, str]
) -> list[str]:
    problems: list[str] = []
    for name, value in body.items():
        key = f"{section}.{visible(name, 80)}"
        if section == "users" and not _UNIX_USER.fullmatch(name):
            problems.append(f"{where}: {section}: {name!r} is not a Unix user name")
        elif section == "projects" and (not name or not is_clean(name) or len(name) > 64):
            problems.append(f"{where}: {section}: {visible(repr(name))} is not a usable name")
        elif section == "keys" and not _BINDING_ID.fullmatch(name):
            problems.append(f"{where}: {section}: {visible(repr(name))} is not a binding id")
        elif not isinstance(value, str):
            problems.append(f"{where}: {key}: must be a string{_got(value)}")
        elif not value.strip():
            problems.append(f"{where}: {key}: must not be empty{_got(value)}")
        elif not is_clean(value) or len(value) > 64:
            problems.append(f"{where}: {key}: must be one line of at most 64 characters"
                            f"{_got(value)}")  # fmt: skip
        else:
            into[name] = value
            sources[f"{section}.{name}"] = where
    return problems


def _read_money(
    body: dict[str, Any],
    where: str,
    into: dict[str, dict[str, Decimal]],
    sources: dict[str, str],
) -> list[str]:
    """[money]: only `rates`, a table of months, each a table of currency = rate."""
    from leases.core.fields import CURRENCIES

    problems: list[str] = []
    shape = ' (as [money.rates."2026-11"] USD = 7.12)'
    for name, value in body.items():
        if name != "rates":
            problems.append(f"{where}: money.{visible(name, 80)}: unknown key"
                            f"{_suggest(name, ['rates'], 'money.')}{_got(value)}")  # fmt: skip
            continue
        if not isinstance(value, dict):
            problems.append(f"{where}: money.rates: must be a table of months{shape}{_got(value)}")
            continue
        for month, table in value.items():
            key = f'money.rates."{visible(month, 40)}"'
            m = _RATE_MONTH.fullmatch(month)
            if m is None or not RATE_YEARS[0] <= int(m.group(1)) <= RATE_YEARS[1]:
                problems.append(f"{where}: {key}: must be a month YYYY-MM from {RATE_YEARS[0]}"
                                f" to {RATE_YEARS[1]}{shape}")  # fmt: skip
                continue
            if not isinstance(table, dict):
                problems.append(f"{where}: {key}: must be a table of currency = rate{shape}"
                                f"{_got(table)}")  # fmt: skip
                continue
            for code, rate in table.items():
                here = f"{key}.{visible(code, 40)}"
                if code not in CURRENCIES:
                    problems.append(f"{where}: {here}: unknown currency; known:"
                                    f" {', '.join(sorted(CURRENCIES))}")  # fmt: skip
                    continue
                try:
                    into.setdefault(month, {})[code] = _rate(here, rate)
                    sources[f"money.rates.{month}.{code}"] = where
                except _Bad as exc:
                    problems.append(f"{where}: {here}: {exc}{_got(rate)}")
    return problems


def _rate(key: str, v: Any) -> Decimal:
    """A rate: how many of the lab's currency one unit is worth; more than 0, at most
    MAX_RATE, at most RATE_PLACES decimals. A TOML number, or a string read as every typed
    amount is (fields.number)."""
    from leases.core.fields import number

    said = (
        f"must be a number above 0 and at most {MAX_RATE:,}: how many of the lab's currency"
        " one unit was worth"
    )
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise _Bad(said)
    try:
        rate = number(key, str(v) if isinstance(v, float) else v)
    except InputError as exc:
        raise _Bad(exc.reason) from None
    if not rate.is_finite() or not 0 < rate <= MAX_RATE:
        raise _Bad(said)
    if rate.as_tuple().exponent < -RATE_PLACES:  # type: ignore[operator]
        raise _Bad(f"has more than {RATE_PLACES} decimal places")
    return rate


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
