"""Plain-dict records of the ledger's entities: the one shape for the database rows, the
audit log, `--json`, export and import. Every `*_from` validates and raises InputError.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any, TypeVar

from leases.core import cloudids as cloud_ids
from leases.core import fields, promsource, recordfields, secrets, valuewords
from leases.core.errors import InputError, Problems
from leases.core.i18n import _, pgettext
from leases.core.models import (
    BillingType,
    ChargeRounding,
    ExpiryAction,
    Interconnect,
    Lease,
    MonthCount,
    Node,
    NodeState,
    PartialUnit,
    PaymentSchedule,
    Provider,
    ProviderKind,
    RefundState,
    Resource,
    ResourceKind,
    SshTarget,
    StoppedBilling,
    StoragePeriod,
)
from leases.core.textsafe import visible
from leases.ledger.leasecheck import check_lease
from leases.ssh import login as sshcmd

Record = dict[str, Any]
E = TypeVar("E", bound=StrEnum)
T = TypeVar("T")
# What was sold of the interconnect (Node.nvlinks, Node.ib_gbps): NV18 is the most any
# NVIDIA GPU pair has (H100, B200); XDR InfiniBand is 1600 Gb/s a port.
MAX_NVLINKS = 64
MAX_IB_GBPS = 3200
# A lease's start while its own is refused: only so that the other fields are checked.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# The record keys, in export order, follow the dataclasses' fields (see leases.core.recordfields).
PROVIDER_KEYS = recordfields.record_keys(Provider)
NODE_KEYS = recordfields.record_keys(Node)
LEASE_KEYS = recordfields.record_keys(Lease)
RESOURCE_KEYS = recordfields.record_keys(Resource)

SSH_KEYS = recordfields.keys_of(Node, "ssh")

# What a node whose stored SSH target is refused points at instead: under .invalid, which
# never resolves (RFC 6761), and which sshcmd.check_host refuses, so no edit keeps it.
QUARANTINED_HOST = sshcmd.QUARANTINED_HOST


# What reading a stored row can raise on a value zuka would never have written (a wrong
# type, an unparsable number or date): the row is refused, never the read.
UNREADABLE = (InputError, ValueError, TypeError, ArithmeticError)


def unreadable(exc: BaseException) -> str:
    """Why a stored row was not read, in words safe for a terminal."""
    if isinstance(exc, InputError):
        return _("{field}: {reason} (got {value})").format(
            field=exc.field, reason=exc.reason, value=repr(visible(exc.value, 80))
        )
    return visible(f"{type(exc).__name__}: {exc}", 200)


def readable(
    rows: Sequence[dict[str, Any]],
    read: Callable[[dict[str, Any]], T],
    which: Callable[[dict[str, Any]], str],
) -> tuple[list[T], list[str]]:
    """The rows that read, and in words each one that does not ('<which>: not read: why')."""
    found: list[T] = []
    problems: list[str] = []
    for r in rows:
        try:
            found.append(read(r))
        except UNREADABLE as exc:
            problems.append(
                _("{which} not read: {why}").format(which=which(r), why=unreadable(exc))
            )
    return found, problems


def _iso(value: datetime | date | None) -> str | None:
    return value.isoformat() if value is not None else None


def _get(rec: Mapping[str, Any], key: str) -> Any:
    value = rec.get(key)
    if isinstance(value, str) and value.strip() == "":
        return None
    return value


def _currency(rec: Mapping[str, Any]) -> str:
    """The lease's currency: CNY when not given; given empty (`--currency ""`, "" in a JSON
    import), refused: it would turn a USD lease into CNY without a word."""
    value = rec.get("currency")
    if value is None:
        return "CNY"
    if isinstance(value, str) and not value.strip():
        raise InputError("currency", value, _("is empty: give a currency code (CNY, USD...)"))
    return fields.currency(str(value))


def _str(rec: Mapping[str, Any], key: str, max_len: int = 2000) -> str:
    value = rec.get(key)
    if value is None:
        return ""
    secrets.refuse_secret(key, str(value))  # before any check that would show the value
    return fields.text(key, str(value), max_len)


def _notes(rec: Mapping[str, Any]) -> str:
    """Free notes: several lines allowed; no secret (key text, token, password)."""
    value = rec.get("notes")
    if value is None:
        return ""
    secrets.refuse_secret("notes", str(value))  # before any check that would show the value
    return fields.text("notes", str(value), 2000, multiline=True)


def _opt_str(rec: Mapping[str, Any], key: str) -> str | None:
    return None if _get(rec, key) is None else _str(rec, key, 500)


def _tags(raw: Any) -> tuple[str, ...]:
    tags = fields.tags(raw)
    for tag in tags:
        secrets.refuse_secret("tags", tag)
    return tags


def _opt_int(
    rec: Mapping[str, Any], key: str, minimum: int = 0, maximum: int = 100_000
) -> int | None:
    value = _get(rec, key)
    return None if value is None else fields.count(key, value, minimum=minimum, maximum=maximum)


def _opt_money(rec: Mapping[str, Any], key: str) -> Decimal | None:
    value = _get(rec, key)
    return None if value is None else fields.money(key, value)


def _opt_choice(rec: Mapping[str, Any], key: str, enum: type[E]) -> E | None:
    value = _get(rec, key)
    return None if value is None else fields.choice(key, str(value), enum)


def _opt_day(rec: Mapping[str, Any], key: str) -> date | None:
    value = _get(rec, key)
    return None if value is None else fields.day(key, str(value))


def _opt_moment(rec: Mapping[str, Any], key: str, tz: str) -> datetime | None:
    value = _get(rec, key)
    return None if value is None else fields.moment(key, value, tz)


def _bool(rec: Mapping[str, Any], key: str) -> bool:
    value = rec.get(key)
    return (
        False
        if value is None
        else fields.boolean(key, value if isinstance(value, bool) else str(value))
    )


def provider_record(p: Provider) -> Record:
    return recordfields.record_values(p)


def provider_from(rec: Mapping[str, Any]) -> Provider:
    kind = fields.choice("kind", str(rec.get("kind") or ""), ProviderKind)
    name = _str(rec, "name", 100).strip()
    if not name:
        raise InputError("provider", rec.get("name"), _("a provider needs a name"))
    cred = _str(rec, "credential_ref", 200)  # refuses secrets too
    if len(cred) > 80 or " " in cred.strip():
        raise InputError(
            "credential_ref",
            secrets.HIDDEN,
            _("give a profile or environment variable name, never the secret itself"),
        )
    return Provider(
        kind=kind,
        name=name,
        region=_str(rec, "region", 100),
        account_id=_str(rec, "account_id", 100),
        account_alias=_str(rec, "account_alias", 100),
        credential_ref=cred,
        return_days=_opt_int(rec, "return_days", maximum=366),
        **_prom_fields(rec),
    )


def _prom_fields(rec: Mapping[str, Any]) -> dict[str, Any]:
    p = Problems()
    found = promsource.record_fields(p, rec)
    p.raise_found()
    return found


def node_record(n: Node) -> Record:
    return recordfields.record_values(n)


def _ssh_target(rec: Mapping[str, Any], local: bool) -> SshTarget:
    """The node's SSH target through sshcmd's one validator (also for rows read back)."""
    host = _get(rec, "ssh_host")
    if host is None and not local:
        raise InputError("ssh", None, _("a remote node needs an ssh target"))
    port = _get(rec, "ssh_port")
    user = _get(rec, "ssh_user")
    key = _get(rec, "ssh_key_path")
    jump = _get(rec, "ssh_jump")
    if isinstance(port, bool):
        raise InputError("ssh_port", port, _("port must be a number from 1 to 65535"))
    return SshTarget(
        host=sshcmd.check_host(str(host)) if host is not None else "localhost",
        port=None if port is None else sshcmd.check_port(port),
        user=None if user is None else sshcmd.check_user(str(user)),
        key_path=None if key is None else sshcmd.check_key_path(str(key)),
        jump=None if jump is None else sshcmd.check_jump(str(jump)),
        alias=_bool(rec, "ssh_alias"),
        tunnels=sshcmd.check_tunnels(rec.get("ssh_tunnels")),
    )


def node_from(rec: Mapping[str, Any]) -> Node:
    # Every field is checked, each refusal kept (Problems): a form shows them all at once.
    p = Problems()
    name = p("", fields.node_name, str(rec.get("name") or ""))
    local = p(False, _bool, rec, "local")
    ssh = p(SshTarget("localhost"), _ssh_target, rec, local)
    raw_tags = rec.get("tags") or ()
    node = Node(
        name=name,
        provider=p(None, _opt_str, rec, "provider"),
        ssh=ssh,
        gpu_model=p("", _str, rec, "gpu_model", 100),
        gpu_count=p(0, fields.count, "gpu_count", rec.get("gpu_count") or 0, maximum=1024),
        vram_gib=p(None, _opt_int, rec, "vram_gib", minimum=1),
        interconnect=p(
            Interconnect("unknown"), _choice, rec, "interconnect", Interconnect, "unknown"
        ),
        nvlinks=p(None, _opt_int, rec, "nvlinks", minimum=1, maximum=MAX_NVLINKS),
        ib_gbps=p(None, _opt_int, rec, "ib_gbps", minimum=1, maximum=MAX_IB_GBPS),
        tags=p((), _tags, raw_tags),
        state=p(NodeState("active"), _choice, rec, "state", NodeState, "active"),
        local=local,
        notes=p("", _notes, rec),
        instance_id=p("", _instance_id, rec),
        instance_endpoint=p("", _instance_endpoint, rec),
        **promsource.record_fields(p, rec, str(rec.get("name") or "")),
    )
    if node.nvlinks is not None and node.interconnect is not Interconnect.NVLINK:
        p.refuse(
            InputError(
                "nvlinks",
                node.nvlinks,
                _(
                    "NVLinks as sold need --interconnect nvlink (this node's is {value}): give"
                    " both, "
                    "or clear it with --nvlinks ''"
                    # the display word speech.interconnect_words marks ("pcie" in English)
                ).format(value=pgettext("interconnect", node.interconnect.value)),
            )
        )
    p.raise_found()
    return node


def _instance_id(rec: Mapping[str, Any]) -> str:
    return cloud_ids.instance_id(_str(rec, "instance_id", 200).strip())


def _instance_endpoint(rec: Mapping[str, Any]) -> str:
    """Through the one entry for endpoints, as a resource's: the collector signs requests
    to it and believes the state it answers."""
    return cloud_ids.endpoint(_str(rec, "instance_endpoint", 500).strip())


def stored_node(rec: Mapping[str, Any]) -> Node:
    """A node row read back from the ledger, never an exception.

    A ledger written before a check existed (or by hand) may hold a value now refused. The
    node is still read, so that listing and the dashboard work, with `problem` saying what
    is wrong: a refused SSH target is replaced by QUARANTINED_HOST (polling skips the node,
    see fleet.polled_nodes, and nothing ever connects to the stored value); another refused
    field is left empty. `zuka node edit NAME --ssh ...` (or the field's own option) fixes
    it; until then every edit is refused, naming the field.
    """
    current = dict(rec)
    problems: list[str] = []
    name = str(rec.get("name") or "")
    if not fields.valid_node_name(name):
        current["name"] = "unnamed"
        problems.append(
            _("{field}: {reason} (got {value})").format(
                field="name", reason=_("is not a valid node name"), value=repr(visible(name, 80))
            )
        )
    for _round in range(len(NODE_KEYS) + 1):
        try:
            node = node_from(current)
        except UNREADABLE as exc:
            problems.append(unreadable(exc))
            if not isinstance(exc, InputError):
                break  # not a field's check: which field is not known
            if exc.field in ("ssh", *SSH_KEYS):
                current.update(dict.fromkeys(SSH_KEYS), ssh_host=QUARANTINED_HOST)
            elif exc.field in current and exc.field != "name":
                current[exc.field] = None
            else:
                break
            continue
        return replace(node, name=name, problem="; ".join(problems))
    return Node(name=name, ssh=SshTarget(QUARANTINED_HOST), problem="; ".join(problems))


def lease_record(le: Lease) -> Record:
    return recordfields.record_values(le)


def _choice(rec: Mapping[str, Any], key: str, enum: type[E], default: str) -> E:
    """The stored choice; `default` where none is stored."""
    return fields.choice(key, str(rec.get(key) or default), enum)


def _required(rec: Mapping[str, Any], key: str, reason: str) -> Any:
    value = _get(rec, key)
    if value is None:
        raise InputError(key, rec.get(key), reason)
    return value


def lease_from(rec: Mapping[str, Any]) -> Lease:
    # Every field is checked, each refusal kept (Problems); the rules that tie fields
    # together (check_lease) only once each field is good.
    p = Problems()
    node = p("", fields.node_name, str(rec.get("node") or ""), "node")
    tz = str(_get(rec, "billing_tz") or fields.DEFAULT_TZ)
    if p(None, fields.timezone, tz, "billing_tz") is None:
        tz = fields.DEFAULT_TZ  # the moments below are still read, in the default zone
    billing = p(
        BillingType("hourly"),
        fields.choice,
        "billing_type",
        str(rec.get("billing_type") or ""),
        BillingType,
    )
    price = p(None, _required, rec, "unit_price", _("a lease needs a unit price"))
    start = p(None, _required, rec, "start", _("a lease needs a start"))
    deposit = _get(rec, "deposit")
    lease = Lease(
        node=node,
        billing_type=billing,
        unit_price=Decimal(0)
        if price is None
        else p(Decimal(0), fields.money, "unit_price", price),
        currency=p("CNY", _currency, rec),
        cards_billed=p(None, _opt_int, rec, "cards_billed", minimum=1),
        start=_EPOCH if start is None else p(_EPOCH, fields.moment, "start", start, tz),
        end=p(None, _opt_moment, rec, "end", tz),
        billing_tz=tz,
        auto_renew=p(False, _bool, rec, "auto_renew"),
        min_commitment=p(None, _opt_int, rec, "min_commitment", minimum=1),
        deposit=None if deposit is None else p(None, fields.money, "deposit", deposit),
        deposit_paid_on=p(None, _opt_day, rec, "deposit_paid_on"),
        deposit_refund=p(RefundState("none"), _choice, rec, "deposit_refund", RefundState, "none"),
        deposit_refunded_on=p(None, _opt_day, rec, "deposit_refunded_on"),
        contract_no=p("", _str, rec, "contract_no", 100),
        notice_days=p(None, _opt_int, rec, "notice_days", maximum=365),
        on_expiry=p(ExpiryAction("released"), _choice, rec, "on_expiry", ExpiryAction, "released"),
        release_after_stopped_days=p(
            None, _opt_int, rec, "release_after_stopped_days", minimum=1, maximum=3650
        ),
        notes=p("", _notes, rec),
        ended_at=p(None, _opt_moment, rec, "ended_at", tz),
        stopped_billing=p(
            StoppedBilling("full"), _choice, rec, "stopped_billing", StoppedBilling, "full"
        ),
        month_count=p(MonthCount("calendar"), _choice, rec, "month_count", MonthCount, "calendar"),
        partial_unit=p(None, _opt_choice, rec, "partial_unit", PartialUnit),
        # Providers charge a renewal days before the end (Aliyun 9, Huawei 7); beyond 60
        # days a typo would charge many renewals at the lease's start.
        renew_charge_days=p(None, _opt_int, rec, "renew_charge_days", maximum=60),
        hourly_price=p(None, _opt_money, rec, "hourly_price"),
        refund_rule=p("", _str, rec, "refund_rule", 500).strip(),
        rounding=p(ChargeRounding("bill"), _choice, rec, "rounding", ChargeRounding, "bill"),
        payment_schedule=p(
            PaymentSchedule("upfront"),
            _choice,
            rec,
            "payment_schedule",
            PaymentSchedule,
            "upfront",
        ),
    )
    p.raise_found()
    check_lease(lease)
    return lease


def resource_record(r: Resource, node: str, lease_start: datetime) -> Record:
    return recordfields.record_values(r, node=node, lease_start=_iso(lease_start))


# Offboarding will hand these ids to shred and to cloud delete calls: an allow-list per
# kind, so that no id can be a glob, a second word, an option or a way out of its folder.
_PROVIDER_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+=,-]{0,254}")
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_PATH_PART_RE = re.compile(r"[A-Za-z0-9._@+=,:-]{1,255}")


def resource_id(kind: ResourceKind, value: str) -> str:
    """A resource's provider id (or, for a scratch_path, its path), checked for its kind."""
    field = "native_id"
    if kind is ResourceKind.SCRATCH_PATH:
        parts = value.split("/")[1:]
        if (
            not value.startswith("/")
            or len(value) > 1024
            or not parts
            or not all(_PATH_PART_RE.fullmatch(p) and p not in (".", "..") for p in parts)
        ):
            raise InputError(
                field,
                visible(value, 80),
                _(
                    "a scratch_path is an absolute, normalised path below / (parts of letters, "
                    "digits and . _ @ + = , : -; no '..', '//', trailing '/', spaces, globs or "
                    "shell characters)"
                ),
            )
        return value
    if kind is ResourceKind.BUCKET:
        if not _BUCKET_RE.fullmatch(value) or ".." in value:
            raise InputError(
                field, visible(value, 80), _("a bucket name is 3-63 of a-z, 0-9, '.' and '-'")
            )
        return value
    if kind is ResourceKind.BUCKET_PREFIX:
        bucket, slash, prefix = value.partition("/")
        resource_id(ResourceKind.BUCKET, bucket)
        if (
            not slash
            or any(p in (".", "..") for p in prefix.split("/"))
            or not (prefix == "" or _PROVIDER_ID_RE.fullmatch(prefix.rstrip("/") or "x"))
        ):
            raise InputError(
                field, visible(value, 80), _("a bucket_prefix is BUCKET/PREFIX/ (no '..')")
            )
        return value
    if not _PROVIDER_ID_RE.fullmatch(value) or ".." in value:
        raise InputError(
            field,
            visible(value, 80),
            _(
                "a {value} id is letters, digits and . _ : / @ + = , - (not starting with '-', "
                "no spaces, globs or shell characters)"
            ).format(value=valuewords.word(kind)),
        )
    return value


def _endpoint(rec: Mapping[str, Any]) -> str:
    """An endpoint through the one entry for endpoints (https, or http to loopback only):
    offboarding signs requests to it and believes what it answers."""
    return cloud_ids.endpoint(_str(rec, "endpoint", 500).strip())


def resource_from(rec: Mapping[str, Any], lease_id: int, tz: str) -> Resource:
    # Every field is checked, each refusal kept (Problems): a form shows them all at once.
    p = Problems()
    native_id = p("", _str, rec, "native_id", 1000).strip()
    if not native_id and not p.found:
        p.refuse(
            InputError("native_id", rec.get("native_id"), _("a resource needs its provider id"))
        )
    kind = p(None, fields.choice, "kind", str(rec.get("kind") or ""), ResourceKind)
    if native_id and kind is not None:
        native_id = p(native_id, resource_id, kind, native_id)
    res = Resource(
        lease_id=lease_id,
        kind=kind or ResourceKind("disk"),
        native_id=native_id,
        region=p("", _str, rec, "region", 100),
        endpoint=p("", _endpoint, rec),
        created=p(None, _opt_moment, rec, "created", tz),
        deleted_at=p(None, _opt_moment, rec, "deleted_at", tz),
        verified_at=p(None, _opt_moment, rec, "verified_at", tz),
        notes=p("", _notes, rec),
        price=p(None, _opt_money, rec, "price"),
        price_per=p(StoragePeriod("month"), _choice, rec, "price_per", StoragePeriod, "month"),
    )
    p.raise_found()
    return res


def renewal_record(lease: Lease, end: Any, changes: Mapping[str, Any]) -> Record:
    """The record of the lease that follows `lease` until `end`: same terms unless changed,
    no deposit of its own unless one is given."""
    assert lease.end is not None
    return {
        **lease_record(lease),
        **changes,
        "start": lease.end.isoformat(),
        "end": end,
        "ended_at": None,
        "deposit": changes.get("deposit"),
        "deposit_paid_on": changes.get("deposit_paid_on"),
        "deposit_refund": changes.get("deposit_refund", "none"),
        "deposit_refunded_on": None,
    }
