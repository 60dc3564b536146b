"""Plain-dict records of the ledger's entities: the one shape for the database rows, the
audit log, `--json`, export and import. Every `*_from` validates and raises InputError.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from leases import fields
from leases.errors import InputError
from leases.models import (
    BillingType,
    ExpiryAction,
    Interconnect,
    Lease,
    Node,
    NodeState,
    Provider,
    ProviderKind,
    RefundState,
    Resource,
    ResourceKind,
    SshTarget,
)

Record = dict[str, Any]

PROVIDER_KEYS = ("kind", "name", "region", "account_id", "account_alias", "credential_ref")
NODE_KEYS = (
    "name", "provider", "ssh_host", "ssh_port", "ssh_user", "ssh_key_path", "ssh_jump",
    "ssh_alias", "gpu_model", "gpu_count", "vram_gib", "interconnect", "tags", "state",
    "local", "notes",
)  # fmt: skip
LEASE_KEYS = (
    "node", "billing_type", "unit_price", "currency", "cards_billed", "start", "end",
    "billing_tz", "auto_renew", "min_commitment", "deposit", "deposit_paid_on",
    "deposit_refund", "deposit_refunded_on", "contract_no", "notice_days", "on_expiry",
    "release_after_stopped_days", "notes", "ended_at",
)  # fmt: skip
RESOURCE_KEYS = (
    "node", "lease_start", "kind", "native_id", "region", "endpoint", "created",
    "deleted_at", "verified_at", "notes",
)  # fmt: skip

# Secrets have no place in the ledger: refuse values that look like one.
_SECRET_HINTS = ("-----BEGIN", "AKIA", "LTAI", "AKID", "password=", "secret=")


def _iso(value: datetime | date | None) -> str | None:
    return value.isoformat() if value is not None else None


def _get(rec: Mapping[str, Any], key: str) -> Any:
    value = rec.get(key)
    if isinstance(value, str) and value.strip() == "":
        return None
    return value


def _str(rec: Mapping[str, Any], key: str, max_len: int = 2000) -> str:
    value = rec.get(key)
    return "" if value is None else fields.text(key, str(value), max_len)


def _opt_str(rec: Mapping[str, Any], key: str) -> str | None:
    value = _get(rec, key)
    return None if value is None else fields.text(key, str(value), 500)


def _opt_int(rec: Mapping[str, Any], key: str, minimum: int = 0) -> int | None:
    value = _get(rec, key)
    return None if value is None else fields.count(key, value, minimum=minimum)


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
    return {
        "kind": p.kind.value,
        "name": p.name,
        "region": p.region,
        "account_id": p.account_id,
        "account_alias": p.account_alias,
        "credential_ref": p.credential_ref,
    }


def provider_from(rec: Mapping[str, Any]) -> Provider:
    kind = fields.choice("kind", str(rec.get("kind") or ""), ProviderKind)
    name = _str(rec, "name", 100).strip()
    if not name:
        raise InputError("provider", rec.get("name"), "a provider needs a name")
    cred = _str(rec, "credential_ref", 200)
    if any(h in cred for h in _SECRET_HINTS) or len(cred) > 80 or " " in cred.strip():
        raise InputError(
            "credential_ref",
            cred[:12] + "...",
            "give a profile or environment variable name, never the secret itself",
        )
    return Provider(
        kind=kind,
        name=name,
        region=_str(rec, "region", 100),
        account_id=_str(rec, "account_id", 100),
        account_alias=_str(rec, "account_alias", 100),
        credential_ref=cred,
    )


def node_record(n: Node) -> Record:
    return {
        "name": n.name,
        "provider": n.provider,
        "ssh_host": n.ssh.host,
        "ssh_port": n.ssh.port,
        "ssh_user": n.ssh.user,
        "ssh_key_path": n.ssh.key_path,
        "ssh_jump": n.ssh.jump,
        "ssh_alias": n.ssh.alias,
        "gpu_model": n.gpu_model,
        "gpu_count": n.gpu_count,
        "vram_gib": n.vram_gib,
        "interconnect": n.interconnect.value,
        "tags": list(n.tags),
        "state": n.state.value,
        "local": n.local,
        "notes": n.notes,
    }


def node_from(rec: Mapping[str, Any]) -> Node:
    name = fields.node_name(str(rec.get("name") or ""))
    host = _opt_str(rec, "ssh_host")
    local = _bool(rec, "local")
    if host is None and not local:
        raise InputError("ssh", rec.get("ssh_host"), "a remote node needs an ssh target")
    port = _opt_int(rec, "ssh_port", minimum=1)
    if port is not None and port > 65535:
        raise InputError("ssh_port", port, "must be from 1 to 65535")
    raw_tags = rec.get("tags") or ()
    return Node(
        name=name,
        provider=_opt_str(rec, "provider"),
        ssh=SshTarget(
            host=host or "localhost",
            port=port,
            user=_opt_str(rec, "ssh_user"),
            key_path=_opt_str(rec, "ssh_key_path"),
            jump=_opt_str(rec, "ssh_jump"),
            alias=_bool(rec, "ssh_alias"),
        ),
        gpu_model=_str(rec, "gpu_model", 100),
        gpu_count=fields.count("gpu_count", rec.get("gpu_count") or 0, maximum=1024),
        vram_gib=_opt_int(rec, "vram_gib", minimum=1),
        interconnect=fields.choice(
            "interconnect", str(rec.get("interconnect") or "unknown"), Interconnect
        ),
        tags=fields.tags(raw_tags),
        state=fields.choice("state", str(rec.get("state") or "active"), NodeState),
        local=local,
        notes=_str(rec, "notes"),
    )


def lease_record(le: Lease) -> Record:
    return {
        "node": le.node,
        "billing_type": le.billing_type.value,
        "unit_price": str(le.unit_price),
        "currency": le.currency,
        "cards_billed": le.cards_billed,
        "start": _iso(le.start),
        "end": _iso(le.end),
        "billing_tz": le.billing_tz,
        "auto_renew": le.auto_renew,
        "min_commitment": le.min_commitment,
        "deposit": None if le.deposit is None else str(le.deposit),
        "deposit_paid_on": _iso(le.deposit_paid_on),
        "deposit_refund": le.deposit_refund.value,
        "deposit_refunded_on": _iso(le.deposit_refunded_on),
        "contract_no": le.contract_no,
        "notice_days": le.notice_days,
        "on_expiry": le.on_expiry.value,
        "release_after_stopped_days": le.release_after_stopped_days,
        "notes": le.notes,
        "ended_at": _iso(le.ended_at),
    }


def lease_from(rec: Mapping[str, Any]) -> Lease:
    node = fields.node_name(str(rec.get("node") or ""), "node")
    tz = str(_get(rec, "billing_tz") or fields.DEFAULT_TZ)
    fields.timezone(tz, "billing_tz")
    billing = fields.choice("billing_type", str(rec.get("billing_type") or ""), BillingType)
    if _get(rec, "unit_price") is None:
        raise InputError("unit_price", rec.get("unit_price"), "a lease needs a unit price")
    if _get(rec, "start") is None:
        raise InputError("start", rec.get("start"), "a lease needs a start")
    deposit = _get(rec, "deposit")
    lease = Lease(
        node=node,
        billing_type=billing,
        unit_price=fields.money("unit_price", rec["unit_price"]),
        currency=fields.currency(str(_get(rec, "currency") or "CNY")),
        cards_billed=_opt_int(rec, "cards_billed", minimum=1),
        start=fields.moment("start", rec["start"], tz),
        end=_opt_moment(rec, "end", tz),
        billing_tz=tz,
        auto_renew=_bool(rec, "auto_renew"),
        min_commitment=_opt_int(rec, "min_commitment", minimum=1),
        deposit=None if deposit is None else fields.money("deposit", deposit),
        deposit_paid_on=_opt_day(rec, "deposit_paid_on"),
        deposit_refund=fields.choice(
            "deposit_refund", str(rec.get("deposit_refund") or "none"), RefundState
        ),
        deposit_refunded_on=_opt_day(rec, "deposit_refunded_on"),
        contract_no=_str(rec, "contract_no", 100),
        notice_days=_opt_int(rec, "notice_days"),
        on_expiry=fields.choice("on_expiry", str(rec.get("on_expiry") or "released"), ExpiryAction),
        release_after_stopped_days=_opt_int(rec, "release_after_stopped_days", minimum=1),
        notes=_str(rec, "notes"),
        ended_at=_opt_moment(rec, "ended_at", tz),
    )
    check_lease(lease)
    return lease


def check_lease(le: Lease) -> None:
    """Rules that tie a lease's fields together."""
    if le.billing_type.prepaid and le.end is None:
        raise InputError(
            "end", None, f"a {le.billing_type.value} lease is prepaid and needs an end date"
        )
    if le.end is not None and le.end <= le.start:
        raise InputError("end", _iso(le.end), f"must be after the start {_iso(le.start)}")
    if le.ended_at is not None and le.ended_at < le.start:
        raise InputError("ended_at", _iso(le.ended_at), f"is before the start {_iso(le.start)}")
    if le.deposit_refund is RefundState.REFUNDED and le.deposit is None:
        raise InputError("deposit_refund", "refunded", "there is no deposit to refund")
    if le.deposit_refunded_on is not None and le.deposit_refund is not RefundState.REFUNDED:
        raise InputError(
            "deposit_refunded_on", _iso(le.deposit_refunded_on), "set only for a refunded deposit"
        )
    if le.deposit_paid_on is None and le.deposit is None:
        return
    if le.deposit is None:
        raise InputError("deposit_paid_on", _iso(le.deposit_paid_on), "there is no deposit amount")


def resource_record(r: Resource, node: str, lease_start: datetime) -> Record:
    return {
        "node": node,
        "lease_start": _iso(lease_start),
        "kind": r.kind.value,
        "native_id": r.native_id,
        "region": r.region,
        "endpoint": r.endpoint,
        "created": _iso(r.created),
        "deleted_at": _iso(r.deleted_at),
        "verified_at": _iso(r.verified_at),
        "notes": r.notes,
    }


def resource_from(rec: Mapping[str, Any], lease_id: int, tz: str) -> Resource:
    native_id = _str(rec, "native_id", 1000).strip()
    if not native_id:
        raise InputError("native_id", rec.get("native_id"), "a resource needs its provider id")
    kind = fields.choice("kind", str(rec.get("kind") or ""), ResourceKind)
    if kind is ResourceKind.SCRATCH_PATH and not native_id.startswith("/"):
        raise InputError("native_id", native_id, "a scratch_path must be an absolute path")
    return Resource(
        lease_id=lease_id,
        kind=kind,
        native_id=native_id,
        region=_str(rec, "region", 100),
        endpoint=_str(rec, "endpoint", 500),
        created=_opt_moment(rec, "created", tz),
        deleted_at=_opt_moment(rec, "deleted_at", tz),
        verified_at=_opt_moment(rec, "verified_at", tz),
        notes=_str(rec, "notes"),
    )
