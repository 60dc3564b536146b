"""Frozen dataclasses and enums that every other module speaks in.

Money is Decimal with a currency code, never float. Times are timezone-aware datetimes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from enum import StrEnum


class ProviderKind(StrEnum):
    CLOUD = "cloud"
    PLATFORM = "platform"
    COLO = "colo"


class NodeState(StrEnum):
    ACTIVE = "active"
    OFFBOARDING = "offboarding"
    RELEASED = "released"


class Interconnect(StrEnum):
    NVLINK = "nvlink"
    PCIE = "pcie"
    UNKNOWN = "unknown"


class BillingType(StrEnum):
    PER_SECOND = "per_second"
    HOURLY = "hourly"
    CARD_HOUR = "card_hour"
    DAILY = "daily"
    WEEKLY = "weekly"
    MONTHLY = "monthly"
    CONTRACT = "contract"

    @property
    def prepaid(self) -> bool:
        """Prepaid periods are paid up front and must have an end."""
        return self in _PREPAID


_PREPAID = frozenset(
    {BillingType.DAILY, BillingType.WEEKLY, BillingType.MONTHLY, BillingType.CONTRACT}
)


class ExpiryAction(StrEnum):
    """What the provider does when a lease reaches its end."""

    RELEASED = "released"
    HOURLY = "hourly"
    RENEWS = "renews"


class RefundState(StrEnum):
    NONE = "none"
    PENDING = "pending"
    REFUNDED = "refunded"
    FORFEITED = "forfeited"


class ResourceKind(StrEnum):
    DISK = "disk"
    SNAPSHOT = "snapshot"
    IMAGE = "image"
    BUCKET = "bucket"
    BUCKET_PREFIX = "bucket_prefix"
    SSH_KEY = "ssh_key"
    SCRATCH_PATH = "scratch_path"
    EIP = "eip"


@dataclass(frozen=True)
class Provider:
    kind: ProviderKind
    name: str
    region: str = ""
    account_id: str = ""
    account_alias: str = ""
    # A profile name or environment variable name, never the secret itself.
    credential_ref: str = ""
    id: int | None = None


@dataclass(frozen=True)
class SshTarget:
    """How to log in to a node: parsed from the command a platform hands out, or an alias."""

    host: str
    port: int | None = None
    user: str | None = None
    key_path: str | None = None
    jump: str | None = None
    # True when host names an ~/.ssh/config Host entry rather than a real address.
    alias: bool = False

    def command(self) -> str:
        """The equivalent OpenSSH command line."""
        parts = ["ssh"]
        if self.port is not None:
            parts += ["-p", str(self.port)]
        if self.key_path:
            parts += ["-i", self.key_path]
        if self.jump:
            parts += ["-J", self.jump]
        parts.append(f"{self.user}@{self.host}" if self.user else self.host)
        return " ".join(parts)


@dataclass(frozen=True)
class Node:
    name: str
    ssh: SshTarget
    gpu_model: str = ""
    gpu_count: int = 0
    # Nominal VRAM per GPU in GiB as sold (80 for an A100 80GB).
    vram_gib: int | None = None
    interconnect: Interconnect = Interconnect.UNKNOWN
    tags: tuple[str, ...] = ()
    state: NodeState = NodeState.ACTIVE
    provider: str | None = None
    # Read through NVML on this machine instead of over SSH.
    local: bool = False
    notes: str = ""
    id: int | None = None
    # Set when a stored row holds a value now refused (records.stored_node): what is wrong
    # and how to fix it. Such a node is listed but never polled.
    problem: str = ""


@dataclass(frozen=True)
class Lease:
    node: str
    billing_type: BillingType
    unit_price: Decimal
    start: datetime
    currency: str = "CNY"
    cards_billed: int | None = None
    # Paid-up-to / contract end. Required for prepaid billing types.
    end: datetime | None = None
    billing_tz: str = "Asia/Shanghai"
    auto_renew: bool = False
    # Minimum commitment in billing units (3 months, 100 card-hours...).
    min_commitment: int | None = None
    deposit: Decimal | None = None
    deposit_paid_on: date | None = None
    deposit_refund: RefundState = RefundState.NONE
    deposit_refunded_on: date | None = None
    contract_no: str = ""
    notice_days: int | None = None
    on_expiry: ExpiryAction = ExpiryAction.RELEASED
    # Platform rule: the machine is released after this many days stopped.
    release_after_stopped_days: int | None = None
    notes: str = ""
    # When the lease actually ended (released or handed back); None while running.
    ended_at: datetime | None = None
    id: int | None = None

    @property
    def open(self) -> bool:
        return self.ended_at is None


@dataclass(frozen=True)
class Resource:
    lease_id: int
    kind: ResourceKind
    native_id: str
    region: str = ""
    endpoint: str = ""
    created: datetime | None = None
    deleted_at: datetime | None = None
    verified_at: datetime | None = None
    notes: str = ""
    id: int | None = None


@dataclass(frozen=True)
class AuditEntry:
    at: datetime
    action: str
    entity: str
    entity_id: int | None
    node: str | None
    before: dict[str, object] | None
    after: dict[str, object] | None
    actor: str = ""
    id: int | None = None
    problem: str = ""  # why the stored row could not be read as it should


@dataclass(frozen=True)
class GpuSample:
    """One reading of one GPU. None always means unknown, never zero."""

    node: str
    at: datetime
    index: int
    uuid: str = ""
    name: str = ""
    util_gpu: float | None = None
    util_mem: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    pstate: str | None = None
    fan_pct: float | None = None
    mig: bool | None = None
    ecc_uncorrected: int | None = None
    extra: dict[str, str] = field(default_factory=dict)


class NodeHealth(StrEnum):
    """What the last attempt to read a node found. Shared by ssh, nvsmi, nvml and poller."""

    OK = "ok"
    CONNECTING = "connecting"
    UNREACHABLE = "unreachable"
    TIMEOUT = "timeout"
    AUTH_FAILED = "auth_failed"
    UNTRUSTED = "untrusted"  # host key not yet accepted by the user
    HOSTKEY_CHANGED = "hostkey_changed"  # refused: possible MITM or reinstalled node
    NO_NVIDIA_SMI = "no_nvidia_smi"  # exit 127
    DRIVER_NOT_LOADED = "driver_not_loaded"
    DRIVER_MISMATCH = "driver_mismatch"  # driver/library version mismatch: needs reboot
    GPU_LOST = "gpu_lost"
    GARBAGE = "garbage"  # output we could not parse
    NO_NVML = "no_nvml"  # local node without NVML
    REFUSED = "refused"  # zuka will not connect: a refused ledger value or ssh config


@dataclass(frozen=True)
class GpuProcess:
    """One compute process on a GPU (nvidia-smi --query-compute-apps)."""

    node: str
    gpu_uuid: str
    pid: int
    process_name: str = ""
    used_mib: float | None = None
