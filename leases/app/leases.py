"""Lease use cases: `zuka lease add/edit/renew/end/stop/resume/delete` and the dashboard's
lease forms, each with its result and what it says of it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leases.app.changes import audit_head, which_lease
from leases.app.untouched import refuse_outside_edits
from leases.core import fields
from leases.core.errors import InputError, Problems, each_error
from leases.core.i18n import _
from leases.core.models import Lease
from leases.ledger.stops import LeaseStop
from leases.ledger.store import Ledger
from leases.ledger.wording import describe_resources
from leases.money import billing


def add_lease(ledger: Ledger, lease: Lease) -> tuple[Lease, str]:
    """`zuka lease add`: the lease as recorded and what the command says of it (also the
    dashboard's lease form)."""
    _near_enough(ledger, lease, ("start", "end"))
    added = ledger.add_lease(lease)
    return added, _("added a lease to {node}").format(node=added.node) + _terms_note(added)


def _near_enough(ledger: Ledger, lease: Lease, keys: tuple[str, ...], said: str = "") -> None:
    """Refuse a lease date typed years too far ahead (2036 for 2026), naming the field."""
    now = ledger.clock()
    for key in keys:
        at = lease.start if key == "start" else lease.end
        if at is not None:
            fields.within_horizon(said or key, fields.shown(at, lease.billing_tz), at, now)


def _terms_note(lease: Lease) -> str:
    """What the lease's figures will assume for want of a term (billing.off_grid): said
    when it is typed, not first found in a month's report."""
    why = billing.off_grid(lease)
    return " " + _("(note: {why})").format(why=why) if why else ""


def _until_refused(ledger: Ledger, node: str, refused: InputError) -> str:
    """Why a renewal's --until was refused, said of the current lease's end (the renewed
    period starts there), not of "the start" the lease check names."""
    current = next((le for le in reversed(ledger.leases(node)) if le.ended_at is None), None)
    if current is None or current.end is None:
        return refused.reason
    return _("must be after the current lease's end {shown}").format(
        shown=fields.shown(current.end, current.billing_tz)
    )


def renew_lease(
    ledger: Ledger, node: str, until: str, changes: Mapping[str, Any]
) -> tuple[Lease, str]:
    """`zuka lease renew NODE --until UNTIL`: the renewal and what the command says of it
    (also the dashboard's renew form)."""
    if not until.strip():  # an empty end would be read as no end: an open-ended renewal
        raise InputError("until", until, _("is empty: give the end of the renewed period"))
    # A renewal copies the lease's terms (and ends it): none may be an outside value.
    refuse_outside_edits(ledger, node, _("renewing the lease"), "lease")
    try:
        # (read in the default zone: a zone's hours do not matter to years ahead)
        at = fields.moment("until", until)
        fields.within_horizon("until", until, at, ledger.clock())
        lease = ledger.renew_lease(node, until, changes)
    except InputError as exc:
        if all(e.field != "end" for e in each_error(exc)):
            raise
        p = Problems()  # the renewal's end is --until: said as such
        for e in each_error(exc):
            if e.field == "end":  # the renewal starts where the current lease ends
                e = InputError("until", until, _until_refused(ledger, node, e))
            p.refuse(e)
        p.raise_found()
        raise  # not reached: raise_found raised
    said = _("renewed {node} until {until}: {which}").format(
        node=lease.node, until=until, which=which_lease(ledger, lease)
    )
    return lease, said + _terms_note(lease)


def end_lease(ledger: Ledger, node_name: str, at_text: str | None) -> tuple[Lease, str]:
    """`zuka lease end NODE [--at AT]`: the ended lease and what the command says of it
    (also the dashboard's end form)."""
    node = ledger.node(node_name)
    refuse_outside_edits(ledger, node.name, _("ending the lease"), "lease", ("ended_at",))
    lease = ledger.current_lease(node.name)
    tz = lease.billing_tz if lease else fields.DEFAULT_TZ
    at = fields.moment("at", at_text, tz) if at_text else None
    still_open = len(ledger.leases(node.name, open_only=True))
    which = which_lease(ledger, lease) if lease else _("the lease")
    ended = ledger.end_lease(node_name, at)
    cancelled = still_open - 1 - len(ledger.leases(node.name, open_only=True))
    message = _("ended {which} of {node}").format(which=which, node=ended.node)
    if cancelled > 0:
        message += _(", and its {n} renewal(s) not started yet (they never billed)").format(
            n=cancelled
        )
    return ended, message


def _stop_zone(ledger: Ledger, node: str) -> str:
    """The zone a stop's --at is read in: the billing zone of the node's lease now."""
    lease = ledger.current_lease(node)
    return lease.billing_tz if lease else fields.DEFAULT_TZ


def stop_node(ledger: Ledger, node_name: str, at_text: str | None) -> tuple[LeaseStop, str]:
    """`zuka lease stop NODE [--at AT]`: the stop recorded and what the command says of
    it (also the dashboard's stop key). --at is read as `lease end --at` reads it."""
    node = ledger.node(node_name)
    tz = _stop_zone(ledger, node.name)
    at = fields.moment("at", at_text, tz) if at_text else None
    stop = ledger.stop_node(node.name, at)
    lease = next(le for le in ledger.leases(node) if le.id == stop.lease_id)
    how = {
        "full": _("its lease bills in full while stopped"),
        "storage_only": _("its lease stops billing, its storage does not"),
        "none": _("nothing bills while it is stopped"),
    }[lease.stopped_billing.value]
    message = _(
        "recorded {node} stopped from {start} ({how}); when it runs again: zuka lease resume {node}"
    ).format(node=stop.node, start=fields.shown(stop.start, lease.billing_tz), how=how)
    return stop, message


def resume_node(ledger: Ledger, node_name: str, at_text: str | None) -> tuple[LeaseStop, str]:
    """`zuka lease resume NODE [--at AT]`: the stop ended and what the command says of it."""
    node = ledger.node(node_name)
    tz = _stop_zone(ledger, node.name)
    at = fields.moment("at", at_text, tz) if at_text else None
    stop = ledger.resume_node(node.name, at)
    assert stop.end is not None
    message = _("recorded {node} running again from {end} (stopped since {start})").format(
        node=stop.node, end=fields.shown(stop.end, tz), start=fields.shown(stop.start, tz)
    )
    return stop, message


def edit_lease(
    ledger: Ledger,
    node: str,
    changes: Mapping[str, Any],
    pick_start: Any,
    *,
    whole_chain: bool = False,
) -> tuple[Lease, str]:
    """`zuka lease edit NODE [--start PICK]`: the lease as edited and what the command says
    of it (also the dashboard's lease form)."""
    refuse_outside_edits(ledger, node, _("editing the lease"), "lease", changes)
    for key in ("start", "end"):
        value = changes.get(key)
        if isinstance(value, str) and value.strip():
            at = fields.moment(key, value, str(changes.get("billing_tz") or fields.DEFAULT_TZ))
            fields.within_horizon(key, value, at, ledger.clock())
    head = audit_head(ledger)
    lease = ledger.update_lease(node, changes, start=pick_start, whole_chain=whole_chain)
    which = which_lease(ledger, lease)
    same = audit_head(ledger) == head
    message = (
        _("nothing changed: {which} of {node} is already so").format(which=which, node=lease.node)
        if same
        else _("updated {which} of {node}").format(which=which, node=lease.node)
        + _terms_note(lease)
    )
    return lease, message


def delete_lease(
    ledger: Ledger, node: str, start: Any, *, force: bool
) -> tuple[dict[str, Any], str]:
    """`zuka lease delete NODE --start WHEN`: what was deleted (the lease, its resources)
    and what the command says of it."""
    refuse_outside_edits(ledger, node, _("deleting the lease"))
    bundle = ledger.delete_lease(node, start, force=force)
    went = bundle["resources"]
    if went:
        message = _("deleted the lease of {node} from {start} and its resources: {went}").format(
            node=node, start=bundle["start"], went=describe_resources(went)
        )
    else:
        message = _("deleted the lease of {node} from {start}").format(
            node=node, start=bundle["start"]
        )
    if (reopened := bundle.get("reopened")) is not None:
        message = _("{said}; the lease from {start} it renewed runs on again").format(
            said=message, start=reopened["start"]
        )
    return bundle, _("{said} (`zuka undo` puts it back)").format(said=message)
