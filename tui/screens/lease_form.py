"""Add, edit, renew or end a node's lease, or record it stopped or running again: `zuka
lease add/edit/renew/end/stop/resume` as a form."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from enum import Enum
from typing import Any, ClassVar, Literal

from textual.binding import BindingType

from leases.app.flags import LEASE_FLAGS
from leases.app.leases import add_lease, edit_lease, end_lease, renew_lease, resume_node, stop_node
from leases.core import fields, valuewords
from leases.core.clock import Clock
from leases.core.i18n import N_, _
from leases.core.models import Lease
from leases.core.textsafe import visible
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.money import renewals
from tui.widgets.form import FieldSpec, FormScreen, Value, form_bindings, given, option_specs

Mode = Literal["add", "edit", "renew", "end", "stop", "resume"]

# The terms most leases need; the rest (deposit, contract, billing rules) fold away.
MAIN = (
    "billing_type", "unit_price", "currency", "cards_billed", "start", "end", "billing_tz",
    "auto_renew", "on_expiry", "notes",
)  # fmt: skip
EDITABLE = (*LEASE_FLAGS, "auto_renew")
# What `lease renew` does not take: the renewal starts at the lease's end and has no
# deposit refund of its own (tui.cli.leases.lease_options).
NOT_RENEWED = ("start", "end", "deposit_refund", "deposit_refunded_on")
# The fields a mode adds (key, label words, help), shown in the language in use.
UNTIL = ("until", N_("until"), N_("end of the renewed period"))
AT = ("at", N_("at"), N_("when it ended (default: now)"))
STOPPED_AT = ("at", N_("at"), N_("when it was stopped (default: now)"))
RESUMED_AT = ("at", N_("at"), N_("when it ran again (default: now)"))
# The forms of one `at` field: what each writes (leases.app.leases's, as the CLI does).
_AT_ONLY = {"end": AT, "stop": STOPPED_AT, "resume": RESUMED_AT}


def _spec(field: tuple[str, str, str]) -> FieldSpec:
    key, words, help_text = field
    return FieldSpec(key, f"{_(words)}  --{key}", _(help_text))


_TITLES = {
    "add": N_("Add a lease to {node}"),
    "edit": N_("Edit the lease of {node}"),
    "renew": N_("Renew the lease of {node}"),
    "end": N_("End the lease of {node}"),
    "stop": N_("Record stopped: {node}"),
    "resume": N_("Record running: {node}"),
}
_SAVE = {
    "add": N_("Add lease"),
    "edit": N_("Save"),
    "renew": N_("Renew"),
    "end": N_("End lease"),
    "stop": N_("Record stop"),
    "resume": N_("Record resume"),
}


def shown_value(value: Any, tz: str) -> Value:
    """A lease's value as the form shows it and the CLI takes it back."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return value
    if isinstance(value, datetime):
        return fields.shown(value, tz)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Enum):
        return str(value.value)
    return str(value)  # Decimal as typed: 1.50 stays 1.50


def lease_values(lease: Lease, keys: tuple[str, ...]) -> dict[str, Value]:
    return {key: shown_value(getattr(lease, key), lease.billing_tz) for key in keys}


class LeaseFormScreen(FormScreen[bool]):
    """One form, four commands; dismissed with True when it wrote."""

    BINDINGS: ClassVar[list[BindingType]] = form_bindings("lease-form")

    def __init__(self, ledger: Ledger, node: str, *, mode: Mode, clock: Clock, tz: str) -> None:
        super().__init__(ledger, _(_TITLES[mode]).format(node=visible(node, 80)), _SAVE[mode])
        self.node = node
        self.mode = mode
        self.clock = clock
        self.tz = tz
        self.lease: Lease | None = None  # the lease edited, renewed or ended

    def specs(self) -> list[FieldSpec]:
        if self.mode in _AT_ONLY:
            return [_spec(_AT_ONLY[self.mode])]
        main = option_specs(Lease, [k for k in MAIN if self._takes(k)])
        return [_spec(UNTIL), *main] if self.mode == "renew" else main

    def more(self) -> list[FieldSpec]:
        if self.mode in _AT_ONLY:
            return []
        return option_specs(Lease, [k for k in EDITABLE if k not in MAIN and self._takes(k)])

    def _takes(self, key: str) -> bool:
        return self.mode != "renew" or key not in NOT_RENEWED

    def defaults(self) -> dict[str, Value]:
        if self.mode != "add":
            return {}
        # As `lease add` without --start: now, to the minute, in the billing zone.
        now = self.clock().replace(second=0, microsecond=0)
        return {"start": fields.shown(now, self.tz), "billing_tz": self.tz}

    def load(self, ledger: Ledger) -> tuple[dict[str, Value], str]:
        ledger.node(self.node)  # an unknown node: the CLI's words, on the message line
        leases = ledger.leases(self.node)
        now = self.clock()
        if self.mode in ("stop", "resume"):
            return {}, _stops_said(ledger, self.node, leases, now, self.mode)
        if self.mode == "add":
            note = _("{header}: {value}").format(header=self.node, value=_said(leases, now))
            billing = renewals.billing_now(leases, now)
            if billing is None:
                return {}, note
            # Said before saving: the ledger refuses a lease that overlaps it. A lease to
            # follow it starts where what is paid for ends (now would be refused).
            ends = billing.paid_until or billing.lease.end
            if ends is None:
                return {}, note + _(". A new lease must start after it ends: end that one first.")
            when = fields.shown(ends, billing.lease.billing_tz or self.tz)
            return {"start": when}, note + _(
                ". A new lease starts after it ends: from {when}."
            ).format(when=when)
        if self.mode == "renew":
            # The lease `lease renew` renews: the latest, if not ended (Ledger.renew_lease).
            lease = leases[-1] if leases and leases[-1].ended_at is None else None
        else:
            # The lease `lease edit` and `lease end` pick without --start.
            lease = renewals.in_effect(leases, now)
        self.lease = lease
        if lease is None:
            return {}, _("{header}: {value}").format(header=self.node, value=_said(leases, now))
        which = renewals.describe(lease, leases, now)
        if self.mode == "end":
            return {}, _("Ends {which}.{cancels} Leave `at` empty for now.").format(
                which=which, cancels=_cancels(leases, lease, now))  # fmt: skip
        keys = tuple(k for k in EDITABLE if self._takes(k))
        values = lease_values(lease, keys)
        if self.mode == "renew":
            values["deposit"] = values["deposit_paid_on"] = ""  # a renewal's own, if any
            end = fields.shown(lease.end, lease.billing_tz) if lease.end else "?"
            return values, _("Renews {which}: the renewal starts at its end, {end}.").format(
                which=which, end=end)  # fmt: skip
        return values, _("Edits {which}.").format(which=which)

    def write(self, ledger: Ledger, values: Mapping[str, Value]) -> tuple[bool, str]:
        if self.mode == "end":
            _done, message = end_lease(ledger, self.node, str(values["at"]) or None)
            return True, message
        if self.mode in ("stop", "resume"):
            write = stop_node if self.mode == "stop" else resume_node
            _stop, message = write(ledger, self.node, str(values["at"]) or None)
            return True, message
        if self.mode == "add":
            rec: dict[str, Any] = {"node": self.node, **given(values, LEASE_FLAGS)}
            rec["auto_renew"] = values["auto_renew"]
            if "start" not in rec:  # as `lease add` without --start
                rec["start"] = self.clock().replace(second=0, microsecond=0)
            _done, message = add_lease(ledger, records.lease_from(rec))
            return True, message
        # Edit and renew send what was changed, as the CLI sends the options typed.
        changes = {k: v for k, v in self.changed().items() if k in EDITABLE}
        if self.mode == "renew":
            _done, message = renew_lease(ledger, self.node, str(values["until"]), changes)
            return True, message
        pick = self.lease.start if self.lease is not None else None
        _done, message = edit_lease(ledger, self.node, changes, pick)
        return True, message

    def cancelled(self) -> bool:
        return False


def _said(leases: list[Lease], now: datetime) -> str:
    """One line on a node's leases: the one billing now, or that none does."""
    billing = renewals.billing_now(leases, now)
    if billing is None:
        return _("no lease bills now")
    return renewals.describe(billing.lease, leases, now)


def _stops_said(ledger: Ledger, node: str, leases: list[Lease], now: datetime, mode: Mode) -> str:
    """What the stop or resume form says before it is saved: what bills while stopped,
    and whether the node is recorded stopped now."""
    lease = renewals.in_effect(leases, now)
    open_stop = next((s for s in ledger.stops(node) if s.end is None), None)
    tz = lease.billing_tz if lease else fields.DEFAULT_TZ
    if open_stop is not None:
        state = _("recorded stopped since {time}").format(time=fields.shown(open_stop.start, tz))
    else:
        state = _("not recorded as stopped")
    if lease is None:
        return _("{node}: {state}; no lease bills now.").format(node=node, state=state)
    bills = valuewords.word(lease.stopped_billing)  # full, storage only, none: in words
    return _("{node}: {state}; its lease bills {bills} while stopped.").format(
        node=node, state=state, bills=bills
    ) + (_(" Leave `at` empty for now.") if (mode == "stop") == (open_stop is None) else "")


def _cancels(leases: list[Lease], lease: Lease, now: datetime) -> str:
    """What ending the lease now also does to its renewals, said before it is saved."""
    later = renewals.cancelled_by_end(leases, lease, now)
    if not later:
        return ""
    starts = ", ".join(fields.shown(le.start, le.billing_tz) for le in later)
    if len(later) == 1:
        return _(
            " It also cancels the renewal not started yet (from {starts}): it never bills."
        ).format(starts=starts)
    return _(
        " It also cancels the renewals not started yet (from {starts}): they never bill."
    ).format(starts=starts)
