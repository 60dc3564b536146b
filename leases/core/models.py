"""Frozen dataclasses and enums that every other module speaks in.

Money is Decimal with a currency code, never float. Times are timezone-aware datetimes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from enum import StrEnum

from leases.core.fields import DEFAULT_TZ
from leases.core.i18n import N_
from leases.core.promsource import MATCH, SOURCE, TOKEN_FILE, URL, ReadingSource
from leases.core.readings import GpuProcess as GpuProcess
from leases.core.readings import GpuSample as GpuSample
from leases.core.readings import NodeHealth as NodeHealth
from leases.core.readings import NodeStatus as NodeStatus
from leases.core.readings import OwnerHour as OwnerHour
from leases.core.recordfields import INTERNAL, cli, flattened, stands_for


class ProviderKind(StrEnum):
    CLOUD = "cloud"
    PLATFORM = "platform"
    COLO = "colo"

    @property
    def note(self) -> str:
        """What the word means, for help text."""
        return _PROVIDER_NOTES.get(self, "")


_PROVIDER_NOTES = {
    ProviderKind.PLATFORM: N_("GPU rental"),
    ProviderKind.COLO: N_("data-centre hosting"),
}


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


class ChargeRounding(StrEnum):
    """Where the provider rounds money to the fen: the bill's total (`bill`: exact amounts
    until then), or each charge (`charge`: each upfront charge and renewal, and time billed
    by the hour as AutoDL books it, a charge at each clock hour of the billing zone and at
    shutdown; each rounded up to the fen, at least one)."""

    BILL = "bill"
    CHARGE = "charge"


class StoppedBilling(StrEnum):
    """What a lease bills while its node is stopped (see ../shared/BILLING-FACTS.md)."""

    FULL = "full"  # most clouds without an economical stop mode
    STORAGE_ONLY = "storage_only"  # AutoDL-style: the GPU stops billing, storage does not
    NONE = "none"  # nothing bills while stopped

    @property
    def note(self) -> str:
        return _STOPPED_NOTES.get(self, "")


_STOPPED_NOTES = {
    StoppedBilling.STORAGE_ONLY: N_("the lease stops, its storage lines do not"),
    StoppedBilling.NONE: N_("its storage lines too"),
}


class MonthCount(StrEnum):
    """How a provider counts a month: Huawei calendar months, HyperAI 30 days."""

    CALENDAR = "calendar"
    DAYS_30 = "30_days"


class PartialUnit(StrEnum):
    """What a started piece of a billing unit is billed to: a started minute as a whole
    minute, say; `second` is pro rata; `whole` bills a started unit in full."""

    SECOND = "second"
    MINUTE = "minute"
    HOUR = "hour"
    DAY = "day"
    WHOLE = "whole"


class StoragePeriod(StrEnum):
    """The period a storage line's price is per."""

    HOUR = "hour"
    DAY = "day"
    MONTH = "month"


class PaymentSchedule(StrEnum):
    """When a monthly or contract term is paid: all of it at its start (`upfront`), or
    month by month, or a quarter at a time, each at the start of its period (colo
    contracts are invoiced monthly or quarterly)."""

    UPFRONT = "upfront"
    MONTHLY = "monthly"
    QUARTERLY = "quarterly"


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
    kind: ProviderKind = field(metadata=cli("--kind", N_("channel: {values}")))
    name: str = field(metadata=cli("NAME", N_("the provider's name"), by_hand=True))
    region: str = field(default="", metadata=cli("--region", N_("the provider's region")))
    account_id: str = field(default="", metadata=cli("--account-id", N_("the account's id")))
    account_alias: str = field(
        default="", metadata=cli("--account-alias", N_("a name for the account people know"))
    )
    # A profile name or environment variable name, never the secret itself.
    credential_ref: str = field(
        default="",
        metadata=cli(
            "--credential-ref", N_("profile or environment variable name (never the secret itself)")
        ),
    )
    # Days after a lease starts during which the provider takes a node back (acceptance
    # alerts while it is returnable); None: not known.
    return_days: int | None = field(
        default=None,
        metadata=cli(
            "--return-days",
            N_(
                "days after a lease starts during which the provider takes a node back"
                " (unknown by default)"
            ),
        ),
    )
    reading_source: ReadingSource | None = field(default=None, metadata=SOURCE)
    prom_url: str = field(default="", metadata=URL)
    prom_match: str = field(default="", metadata=MATCH)
    prom_token_file: str = field(default="", metadata=TOKEN_FILE)
    id: int | None = field(default=None, metadata=INTERNAL)


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
    # Port forwards the login command carried, each `-L|-R [bind:]port:host:hostport` or
    # `-D [bind:]port` as leases.ssh.login.check_tunnel writes it: kept and shown, used by
    # nothing in zuka (no connection opens them); command(tunnels=True) gives them back.
    tunnels: tuple[str, ...] = ()

    def command(self, *, tunnels: bool = False) -> str:
        """The equivalent OpenSSH command line; with its port forwards if `tunnels`."""
        parts = ["ssh"]
        if self.port is not None:
            parts += ["-p", str(self.port)]
        if self.key_path:
            parts += ["-i", self.key_path]
        if self.jump:
            parts += ["-J", self.jump]
        if tunnels:
            parts += self.tunnels
        parts.append(f"{self.user}@{self.host}" if self.user else self.host)
        return " ".join(parts)


# The field order of Node, Lease, Resource and Provider is their record's key order, so the
# JSON and CSV column order: a field placed for that but not to be given by position (as
# Node(name, ssh) and Lease(node, billing, price, start) are) is keyword-only.
@dataclass(frozen=True)
class Node:
    name: str = field(metadata=cli("NAME", N_("the node's name"), by_hand=True))
    provider: str | None = field(
        default=None, kw_only=True, metadata=cli("--provider", N_("the provider it is rented from"))
    )
    ssh: SshTarget = field(
        metadata=cli(
            "--ssh",
            N_(
                "the login command as the platform gives it, or an alias (its -L/-R/-D forwards"
                " are kept as the node's tunnels and shown; zuka never opens them)"
            ),
            by_hand=True,
        )
        | flattened("ssh_")
    )
    gpu_model: str = field(default="", metadata=cli("--gpu-model", N_("GPU model, as sold")))
    gpu_count: int = field(default=0, metadata=cli("--gpus", N_("number of GPUs")))
    # Nominal VRAM per GPU in GiB as sold (80 for an A100 80GB).
    vram_gib: int | None = field(
        default=None, metadata=cli("--vram", N_("nominal VRAM per GPU in GiB, as sold"))
    )
    interconnect: Interconnect = field(
        default=Interconnect.UNKNOWN, metadata=cli("--interconnect", N_("{values}, as advertised"))
    )
    # What was sold of the interconnect beside its kind: the NVLinks bonded between each pair
    # of GPUs (`NV18` in `nvidia-smi topo -m`), only with interconnect nvlink; and the
    # InfiniBand rate of a port (`Rate:` in `ibstat`).
    nvlinks: int | None = field(
        default=None,
        metadata=cli(
            "--nvlinks",
            N_(
                "NVLinks between each pair of GPUs as sold: 18 for HGX H100 (NV18), 12 for A100"
                " (NV12); needs --interconnect nvlink"
            ),
        ),
    )
    ib_gbps: int | None = field(
        default=None,
        metadata=cli("--ib-rate", N_("InfiniBand rate per port as sold, Gb/s: 100, 200, 400, 800")),
    )
    tags: tuple[str, ...] = field(default=(), metadata=cli("--tags", N_("comma-separated tags")))
    state: NodeState = field(default=NodeState.ACTIVE, metadata=cli("--state"))
    local: bool = field(
        default=False, metadata=cli("--local", N_("read via NVML here"), by_hand=True)
    )
    notes: str = field(default="", metadata=cli("--notes", N_("free notes")))
    # The cloud instance the node is (EC2: i-0123456789abcdef0), read by the collector for
    # its running/stopped state (leases.telemetry.cloudstate). Not a resource: offboarding never
    # plans to delete it. Region and credentials are its provider's.
    instance_id: str = field(
        default="",
        metadata=cli("--instance-id", N_("its cloud instance id (EC2: i-...), for its stop state")),
    )
    instance_endpoint: str = field(
        default="",
        metadata=cli(
            "--instance-endpoint",
            N_(
                "the EC2-compatible endpoint its instance is read at, if not the provider's default"
            ),
        ),
    )
    reading_source: ReadingSource | None = field(default=None, metadata=SOURCE)
    prom_url: str = field(default="", metadata=URL)
    prom_match: str = field(default="", metadata=MATCH)
    prom_token_file: str = field(default="", metadata=TOKEN_FILE)
    id: int | None = field(default=None, metadata=INTERNAL)
    # Set when a stored row holds a value now refused (records.stored_node): what is wrong
    # and how to fix it. Such a node is listed but never polled.
    problem: str = field(default="", metadata=INTERNAL)


@dataclass(frozen=True)
class Lease:
    node: str = field(metadata=cli("NODE", N_("the node's name"), by_hand=True))
    billing_type: BillingType = field(metadata=cli("--billing"))
    unit_price: Decimal = field(
        metadata=cli(
            "--price", N_("price of one billing unit (yuan per hour, per card-hour, per month...)")
        )
    )
    currency: str = field(
        default="CNY", kw_only=True, metadata=cli("--currency", N_("currency code (default CNY)"))
    )
    cards_billed: int | None = field(
        default=None, kw_only=True, metadata=cli("--cards", N_("cards billed (card_hour leases)"))
    )
    start: datetime = field(
        metadata=cli(
            "--start", N_("YYYY-MM-DD or YYYY-MM-DDTHH:MM in the billing time zone (default: now)")
        )
    )
    # Paid-up-to / contract end. Required for prepaid billing types.
    end: datetime | None = field(
        default=None,
        metadata=cli(
            "--end", N_("end of the paid period; required for daily, weekly, monthly, contract")
        ),
    )
    billing_tz: str = field(
        default=DEFAULT_TZ, metadata=cli("--tz", N_("billing time zone (default Asia/Shanghai)"))
    )
    auto_renew: bool = field(
        default=False,
        metadata=cli("--auto-renew", N_("set to renew automatically at the end"), by_hand=True),
    )
    # Minimum commitment in billing units (3 months, 100 card-hours...).
    min_commitment: int | None = field(
        default=None, metadata=cli("--min-commitment", N_("minimum commitment, in billing units"))
    )
    deposit: Decimal | None = field(
        default=None, metadata=cli("--deposit", N_("deposit paid, in the lease's currency"))
    )
    deposit_paid_on: date | None = field(
        default=None, metadata=cli("--deposit-paid-on", N_("YYYY-MM-DD the deposit was paid"))
    )
    deposit_refund: RefundState = field(
        default=RefundState.NONE,
        metadata=cli("--deposit-refund", N_("the deposit's refund: {values}")),
    )
    deposit_refunded_on: date | None = field(
        default=None,
        metadata=cli("--deposit-refunded-on", N_("YYYY-MM-DD the deposit came back")),
    )
    contract_no: str = field(default="", metadata=cli("--contract", N_("contract number")))
    notice_days: int | None = field(
        default=None, metadata=cli("--notice-days", N_("days of notice the contract asks for"))
    )
    on_expiry: ExpiryAction = field(
        default=ExpiryAction.RELEASED,
        metadata=cli("--on-expiry", N_("what the provider does at the end: {values}")),
    )
    # Platform rule: the machine is released after this many days stopped.
    release_after_stopped_days: int | None = field(
        default=None,
        metadata=cli(
            "--release-after-stopped-days", N_("platform rule: released after N days stopped")
        ),
    )
    notes: str = field(default="", metadata=cli("--notes", N_("free notes")))
    # When the lease actually ended (released or handed back); None while running.
    # Set by `zuka lease end`, not by an option.
    ended_at: datetime | None = None
    # Terms that change the maths (leases.money.billing); added at the end of the record (m006).
    stopped_billing: StoppedBilling = field(
        default=StoppedBilling.FULL,
        metadata=cli("--stopped-billing", N_("what bills while the node is stopped: {values}")),
    )
    month_count: MonthCount = field(
        default=MonthCount.CALENDAR,
        metadata=cli("--month-count", N_("how the provider counts a month: {values}")),
    )
    partial_unit: PartialUnit | None = field(
        default=None,
        metadata=cli(
            "--partial-unit",
            N_(
                "a started part of a billing unit is billed up to a whole: {values} (default:"
                " second, i.e. pro rata, for per_second, hourly and card_hour; whole otherwise)"
            ),
        ),
    )
    renew_charge_days: int | None = field(
        default=None,
        metadata=cli(
            "--renew-charge-days",
            N_("auto-renew charges this many days before the end (Aliyun 9, Huawei 7)"),
        ),
    )
    hourly_price: Decimal | None = field(
        default=None,
        metadata=cli(
            "--hourly-price",
            N_(
                "the pay-as-you-go price per hour: billed after the end with --on-expiry hourly,"
                " and used by refund rules and hourly-vs-monthly advice"
            ),
        ),
    )
    refund_rule: str = field(
        default="",
        metadata=cli(
            "--refund-rule",
            N_(
                "early-release refund: none | prorated_days | prorated_hours | used_then_hourly"
                " (used months at the price, the rest at --hourly-price), or the provider's rule"
                " in words (then the maths assumes no refund and says so)"
            ),
        ),
    )
    rounding: ChargeRounding = field(
        default=ChargeRounding.BILL,
        metadata=cli(
            "--rounding",
            N_(
                "where the provider rounds to the fen: {values} (bill: the bill's total; charge:"
                " each charge up, pay-as-you-go at each clock hour and at shutdown, as AutoDL)"
            ),
        ),
    )
    payment_schedule: PaymentSchedule = field(
        default=PaymentSchedule.UPFRONT,
        metadata=cli(
            "--payment-schedule",
            N_(
                "when a monthly or contract term is paid: {values} (default upfront: all at its"
                " start)"
            ),
        ),
    )
    id: int | None = field(default=None, metadata=INTERNAL)
    # The node it is on, as the ledger knows it (filled when read from it): a released
    # node's name may be reused, so money is keyed by this, `node` being only shown.
    node_id: int | None = field(default=None, metadata=INTERNAL)

    @property
    def open(self) -> bool:
        return self.ended_at is None

    @property
    def bills_node_gpus(self) -> bool:
        """A card-hour lease recorded without --cards: it pays for its node's GPUs
        (billing.cards_of), so the node's GPU count must be known."""
        return self.billing_type is BillingType.CARD_HOUR and not self.cards_billed

    @property
    def node_key(self) -> int | str:
        """Which node it is on: its id, or its name for a lease not read from a ledger."""
        return self.node_id if self.node_id is not None else self.node


@dataclass(frozen=True)
class Resource:
    # In a record the lease is named by its node and start.
    lease_id: int = field(
        metadata=stands_for("node", "lease_start")
        | cli(
            "--lease-start",
            N_(
                "the lease it belongs to, by its start as `zuka lease list` prints it (or a"
                " date); default: the open lease, else the latest"
            ),
            key="lease_start",
        )
    )
    kind: ResourceKind = field(metadata=cli("--kind", N_("resource: {values}")))
    native_id: str = field(
        metadata=cli(
            "--id",
            N_("the provider's id (snapshot id, bucket name, absolute path...)"),
            dest="native_id",
        )
    )
    region: str = field(default="", metadata=cli("--region", N_("region it lives in")))
    endpoint: str = field(
        default="",
        metadata=cli(
            "--endpoint", N_("the service endpoint it is reached through, if not the default")
        ),
    )
    created: datetime | None = field(
        default=None,
        metadata=cli("--created", N_("when it was created: YYYY-MM-DD or YYYY-MM-DDTHH:MM")),
    )
    deleted_at: datetime | None = None
    verified_at: datetime | None = None
    notes: str = field(default="", metadata=cli("--notes", N_("free notes")))
    # A storage line (a data disk, a snapshot, an EIP): billed from created (else the
    # lease's start) until deleted_at, whether the node runs, is stopped or was released.
    price: Decimal | None = field(
        default=None,
        metadata=cli(
            "--price",
            N_(
                "what it costs per --price-per period, billed from created until deleted (after"
                " a stop and after the lease ends too)"
            ),
        ),
    )
    price_per: StoragePeriod = field(
        default=StoragePeriod.MONTH,
        metadata=cli("--price-per", N_("the period --price is per: {values} (default month)")),
    )
    id: int | None = field(default=None, metadata=INTERNAL)
