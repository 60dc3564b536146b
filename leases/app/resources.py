"""Resource use cases: `zuka resource add/edit` and the dashboard's resource form, each
with its result and what it says of it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leases.app.changes import audit_head, which_lease
from leases.app.untouched import refuse_outside_edits
from leases.core import valuewords
from leases.core.i18n import _
from leases.core.models import ResourceKind
from leases.ledger import records, release
from leases.ledger.store import Ledger


def add_resource(ledger: Ledger, node: str, rec: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """`zuka resource add NODE`: the resource's record and what the command says of it
    (also the dashboard's resource form)."""
    res = ledger.add_resource(node, rec)
    lease = next(le for le in ledger.leases(node) if le.id == res.lease_id)
    which = which_lease(ledger, lease)
    is_open = release.open_at(lease, ledger.clock())
    doc = records.resource_record(res, node, lease.start)
    # Say which lease took it: without --lease-start the lease billing now, else the latest.
    if not is_open and "lease_start" not in rec:
        which = _("its latest lease, {which} (none bills now)").format(
            which=which.removeprefix("the lease ")
        )
    # The kind's display word, as tui.words.shown marks it.
    kind = valuewords.word(res.kind)
    return doc, _("recorded {kind} {id} on {node}, in {which}").format(
        kind=kind, id=res.native_id, node=node, which=which
    )


def edit_resource(
    ledger: Ledger,
    node: str,
    kind: str,
    native_id: str,
    changes: Mapping[str, Any],
    lease_start: Any,
) -> tuple[dict[str, Any], str]:
    """`zuka resource edit NODE --kind K --id ID`: the resource's record as edited (or
    marked deleted or verified by hand) and what the command says of it."""
    refuse_outside_edits(ledger, node, _("editing the resource"), "resource", changes)
    head = audit_head(ledger)
    doc = ledger.update_resource(node, kind, native_id, changes, lease_start=lease_start)
    same = audit_head(ledger) == head
    said = (
        _("nothing changed: {kind} {id} on {node} is already so")
        if same
        else _("updated {kind} {id} on {node}")
    )
    message = said.format(
        kind=valuewords.word(doc["kind"], ResourceKind), id=doc["native_id"], node=doc["node"]
    )
    return doc, message
