"""The config as zuka uses it: one frozen dataclass a section ([billing], [alerts],
[notify], [offboard], [money]), each field's default there, and Config, which holds them
with the user's own tables and where every value came from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import time
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any

from leases.config.keys import MAPPINGS, SPECS, shown
from leases.core.fields import DEFAULT_TZ
from leases.core.severity import Severity


@dataclass(frozen=True)
class BillingConfig:
    currency: str = "CNY"
    tz: str = DEFAULT_TZ


@dataclass(frozen=True)
class UiConfig:
    # The language zuka speaks (leases.core.i18n): "" for the locale's, else en or zh_CN.
    # `--lang` and $ZUKA_LANG win over it.
    lang: str = ""


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
    # A data disk (or quota), the root fs or /dev/shm used at or above this percent:
    # disk_full; memory available at or below this percent: ram_full.
    disk_full_pct: float = 90.0
    ram_free_pct: float = 5.0
    # Not keys of [alerts]: filled by leases.config.load from [bills] tolerance and
    # [billing] tz, which the bill alerts (leases.alerts.billfacts) need.
    bill_tolerance: str = ""
    billing_tz: str = DEFAULT_TZ
    # Days of prepaid balance left (at the burn rate now) under which balance_low is raised.
    balance_days: float = 3.0
    # Not a key of [alerts]: [accept] young_days, filled by leases.config.load.
    accept_young_days: int = 7


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
class AcceptConfig:
    """[accept]: hand-over acceptance (the settings leases.accept.engine runs with)."""

    vram_tolerance: float = 0.03  # memory.total within ±3 % of the model's nominal size
    matmul_pass: float = 0.70  # BF16 matmul at least 70 % of the nominal dense figure
    ports: tuple[int, ...] = (22,)  # expected to listen, besides the training range
    training_ports: tuple[int, int] = (8000, 9000)  # "8000-9000", inclusive
    data_paths: tuple[str, ...] = ("/", "/root", "/data", "/root/autodl-tmp", "/mnt")
    min_free_gib: int = 100
    burn_seconds: int = 300
    # How long after a lease starts a failed acceptance alerts when the provider's return
    # window is not known.
    young_days: int = 7


@dataclass(frozen=True)
class MoneyConfig:
    # Month (YYYY-MM) -> currency code -> how many of the lab's currency (billing.currency)
    # one unit of it was worth that month: [money.rates."2026-11"] USD = 7.12. Only a
    # report's optional total in the lab's currency uses them; no figure is converted.
    rates: Mapping[str, Mapping[str, Decimal]] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class BillsConfig:
    # [bills] tolerance: "" (1.00 or 1 %, whichever larger), an amount "5", a share "2%".
    tolerance: str = ""
    # [bills.NAME]: a CSV bill's column mapping (leases.money.bills.mapped), by format name.
    formats: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class Layer:
    """One file the config was read from, in order (later wins key by key): the system
    config, the secrets file, the user's own; and whether it was read."""

    kind: str  # "system config", "secrets file", "config file"
    path: Path
    state: str  # "read", "absent", or why it was skipped


@dataclass(frozen=True)
class LabConfig:
    """The system config's [lab] (leases.lab.sysconfig): the host's default ledger, and
    where the secrets file is."""

    ledger: Path | None = None
    secrets: Path | None = None


@dataclass(frozen=True)
class Setting:
    """One effective value as `zuka config show` prints it."""

    key: str
    value: Any
    source: str


@dataclass(frozen=True)
class Config:
    billing: BillingConfig = field(default_factory=BillingConfig)
    ui: UiConfig = field(default_factory=UiConfig)
    alerts: AlertsConfig = field(default_factory=AlertsConfig)
    notify: NotifyConfig = field(default_factory=NotifyConfig)
    offboard: OffboardConfig = field(default_factory=OffboardConfig)
    accept: AcceptConfig = field(default_factory=AcceptConfig)
    money: MoneyConfig = field(default_factory=MoneyConfig)
    bills: BillsConfig = field(default_factory=BillsConfig)
    # Unix user on a node -> person; person or user -> project or tag.
    users: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    projects: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # A project's own table, [projects.NAME] regions = [...]: where its data may sit.
    project_regions: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    # The dashboard's key remaps: binding id -> keys ("fleet-filter" = "slash,f"); the
    # dashboard checks the ids and keys it knows (leases knows no bindings).
    keys: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    lab: LabConfig = field(default_factory=LabConfig)
    # The user's own file (None: none, the defaults).
    path: Path | None = None
    # "section.key" -> "default", the file's path, or "env ZUKA_..."; absent means default.
    sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    warnings: tuple[str, ...] = ()
    # Every file looked for, in the order they are laid over each other.
    layers: tuple[Layer, ...] = ()

    def settings(self, *, mask: bool = True) -> list[Setting]:
        """Every key's effective value and where it came from; notification URLs masked."""
        out: list[Setting] = []
        for spec in SPECS:
            section = getattr(self, spec.section)
            value = shown(getattr(section, spec.attr), mask)
            out.append(Setting(spec.key, value, self.sources.get(spec.key, "default")))
        for name in MAPPINGS:
            mapping: Mapping[str, str] = getattr(self, name)
            for k, v in mapping.items():
                key = f"{name}.{k}"
                out.append(Setting(key, v, self.sources.get(key, "default")))
        for name, regions in self.project_regions.items():
            key = f"projects.{name}.regions"
            out.append(Setting(key, list(regions), self.sources.get(key, "default")))
        for name in ("ledger", "secrets"):
            value = getattr(self.lab, name)
            if value is not None:
                key = f"lab.{name}"
                out.append(Setting(key, str(value), self.sources.get(key, "default")))
        for month, rates in self.money.rates.items():
            for code, rate in rates.items():
                key = f"money.rates.{month}.{code}"
                out.append(Setting(key, str(rate), self.sources.get(key, "default")))
        return out
