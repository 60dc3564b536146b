"""Which cloud things a lease claims, and where two leases claim the same one.

Offboarding deletes what the ledger says belongs to a lease. If two leases still holding
their resources claim the same bucket, a bucket and a prefix in it, two prefixes one inside
the other, or the same image, snapshot or disk id in the same region and account, the
first offboarding deletes the other lease's data, and the other's verified "gone" proves
nothing. Such a claim is refused when it is recorded (`zuka resource add`, `zuka import`:
leases.ledger.store calls overlaps_with) and blocks a plan made from a ledger that already holds
one (the planner calls overlaps on ledger_claims).

A claim is live while its resource is not verified deleted. Buckets are compared by
endpoint and name (bucket names are global in a store, whoever owns them; a public cloud's
regional host names are one store, and a bucket recorded without an endpoint matches one
at any), images,
snapshots and disks by id, region and account; an empty region or account (not recorded)
matches any, so that a missing fact never hides an overlap.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from leases.core import valuewords
from leases.core.cloudids import same_endpoint
from leases.core.i18n import _
from leases.core.models import ResourceKind
from leases.core.textsafe import visible

_BUCKETS = (ResourceKind.BUCKET, ResourceKind.BUCKET_PREFIX)
_BY_ID = (ResourceKind.IMAGE, ResourceKind.SNAPSHOT, ResourceKind.DISK)


@dataclass(frozen=True)
class Claim:
    """One live cloud resource of a lease, as the ledger records it (values unchecked: they
    are only compared, and shown through visible)."""

    lease_id: int
    node: str
    kind: ResourceKind
    native_id: str
    region: str  # the resource's, else its provider's
    endpoint: str
    account: str  # its provider's account id
    resource_id: int | None = None

    def shown(self) -> str:
        where = ", ".join(
            p
            for p in (
                f"region {self.region}" if self.region else "",
                f"endpoint {self.endpoint}" if self.endpoint else "",
                f"account {self.account}" if self.account else "",
            )
            if p
        )
        return visible(
            f"{self.kind.value} {self.native_id} of node {self.node}'s lease {self.lease_id}"
            + (f" ({where})" if where else ""),
            300,
        )


@dataclass(frozen=True)
class Overlap:
    first: Claim
    second: Claim
    why: str  # "the same bucket", "a bucket and a prefix in it", ...

    def text(self) -> str:
        return f"{self.first.shown()} and {self.second.shown()}: {self.why}"


def claim_from(row: Mapping[str, Any]) -> Claim | None:
    """A claim from a ledger row (resource joined with its lease's node and provider:
    lease_id, node, kind, native_id, region, endpoint, provider_region, account_id, id);
    None for what is no cloud resource."""
    try:
        kind = ResourceKind(str(row.get("kind") or ""))
    except ValueError:
        return None
    if kind not in _BUCKETS + _BY_ID:
        return None
    return Claim(
        lease_id=int(row["lease_id"]),
        node=str(row.get("node") or ""),
        kind=kind,
        native_id=str(row.get("native_id") or ""),
        region=str(row.get("region") or row.get("provider_region") or ""),
        endpoint=str(row.get("endpoint") or ""),
        account=str(row.get("account_id") or ""),
        resource_id=None if row.get("id") is None else int(row["id"]),
    )


def _bucket_prefix(c: Claim) -> tuple[str, str]:
    if c.kind is ResourceKind.BUCKET:
        return c.native_id, ""
    bucket, _, prefix = c.native_id.partition("/")
    return bucket, prefix


# Public object stores whose bucket names are one namespace across all their regional
# (and internal) host names: a bucket named at any of them is the same bucket.
_STORES = (
    (".amazonaws.com.cn", "aws-cn"),
    (".amazonaws.com", "aws"),
    (".aliyuncs.com", "aliyun-oss"),
    (".myqcloud.com", "tencent-cos"),
    (".myhuaweicloud.com", "huawei-obs"),
)


def _store(endpoint: str) -> str:
    host = (urlsplit(endpoint).hostname or "").lower().rstrip(".")
    return next((name for suffix, name in _STORES if host.endswith(suffix)), "")


def _endpoints_alike(a: str, b: str) -> bool:
    """Two endpoints may name one store. An endpoint not recorded is the provider's default
    (AWS, or a CLI template's store), which may be the other: it matches any, as an empty
    region or account does. A host's case, trailing dot, '/' and default port aside; and a
    public cloud's regional host names are one bucket namespace."""
    if not a or not b:
        return True
    return same_endpoint(a, b) or (_store(a) != "" and _store(a) == _store(b))


def overlap(a: Claim, b: Claim) -> str:
    """Why a and b claim the same thing, or "" if they do not."""
    if a.kind in _BUCKETS and b.kind in _BUCKETS:
        (bucket_a, prefix_a), (bucket_b, prefix_b) = _bucket_prefix(a), _bucket_prefix(b)
        if bucket_a != bucket_b or not _endpoints_alike(a.endpoint, b.endpoint):
            return ""
        if not prefix_a and not prefix_b:
            return _("the same bucket")
        if not prefix_a or not prefix_b:
            return _("a bucket and a prefix in it")
        if prefix_a == prefix_b:
            return _("the same prefix")
        if prefix_a.startswith(prefix_b) or prefix_b.startswith(prefix_a):
            return _("one prefix inside the other")
        return ""
    if a.kind in _BY_ID and b.kind in _BY_ID and a.native_id == b.native_id:
        if a.region and b.region and a.region != b.region:
            return ""
        if a.account and b.account and a.account != b.account:
            return ""
        return _("the same {kind} id in the same region and account").format(
            kind=valuewords.word(a.kind)
        )
    return ""


def overlaps_with(new: Claim, claims: Iterable[Claim]) -> list[Overlap]:
    """The live claims of other leases that new overlaps."""
    found = []
    for c in claims:
        if c.lease_id == new.lease_id:
            continue
        why = overlap(c, new)
        if why:
            found.append(Overlap(c, new, why))
    return found


def overlaps(claims: Iterable[Claim]) -> list[Overlap]:
    """Every pair of claims of different leases that overlap, each pair once, in the
    order given (the planner blocks a plan on any that names its lease)."""
    seen: list[Claim] = []
    found: list[Overlap] = []
    for c in claims:
        found += overlaps_with(c, seen)
        seen.append(c)
    return found


CLAIMS_SQL = (
    "SELECT r.id, r.lease_id, r.kind, r.native_id, r.region, r.endpoint, n.name AS node,"
    " p.region AS provider_region, p.account_id FROM resources r"
    " JOIN leases l ON l.id = r.lease_id JOIN nodes n ON n.id = l.node_id"
    " LEFT JOIN providers p ON p.id = n.provider_id"
    " WHERE r.verified_at IS NULL ORDER BY r.id"
)


def ledger_claims(conn: sqlite3.Connection) -> list[Claim]:
    """Every live cloud claim in the ledger (its connection), for overlaps()."""
    cur = conn.execute(CLAIMS_SQL)
    names = [d[0] for d in cur.description]
    rows = (dict(zip(names, row, strict=True)) for row in cur)
    return [c for c in (claim_from(r) for r in rows) if c is not None]
