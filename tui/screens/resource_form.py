"""Record a resource of a node's lease (a disk, snapshot, bucket, scratch path...):
`zuka resource add` as a form."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from textual.binding import BindingType

from leases.app.flags import RESOURCE_FLAGS
from leases.app.resources import add_resource
from leases.core.i18n import N_, _
from leases.core.models import Resource
from leases.core.textsafe import visible
from leases.ledger.store import Ledger
from leases.money import renewals
from tui.widgets.form import FieldSpec, FormScreen, Value, form_bindings, given, option_specs

MAIN = ("kind", "native_id", "region", "lease_start")


class ResourceFormScreen(FormScreen[bool]):
    """Dismissed with True when it recorded the resource."""

    BINDINGS: ClassVar[list[BindingType]] = form_bindings("resource-form")

    def __init__(self, ledger: Ledger, node: str) -> None:
        super().__init__(
            ledger, _("Record a resource of {node}").format(node=visible(node, 80)), N_("Record")
        )
        self.node = node

    def specs(self) -> list[FieldSpec]:
        return option_specs(Resource, MAIN)

    def more(self) -> list[FieldSpec]:
        return option_specs(Resource, [k for k in RESOURCE_FLAGS if k not in MAIN])

    def load(self, ledger: Ledger) -> tuple[dict[str, Value], str]:
        ledger.node(self.node)  # an unknown node: the CLI's words, on the message line
        leases = ledger.leases(self.node)
        now = ledger.clock()
        lease = renewals.resource_default(leases, now)  # as Ledger.add_resource picks
        if lease is None:
            return {}, _("{node} has no lease yet: add one first (l).").format(node=self.node)
        which = renewals.describe(lease, leases, now)
        return {}, _("Without a lease start it goes to {which}.").format(which=which)

    def write(self, ledger: Ledger, values: Mapping[str, Value]) -> tuple[bool, str]:
        ledger.node(self.node)
        _done, message = add_resource(ledger, self.node, given(values, RESOURCE_FLAGS))
        return True, message

    def cancelled(self) -> bool:
        return False
