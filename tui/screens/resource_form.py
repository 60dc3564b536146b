"""Record a resource of a node's lease (a disk, snapshot, bucket, scratch path...):
`zuka resource add` as a form."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from textual.binding import BindingType

from leases.app.flags import RESOURCE_FLAGS
from leases.app.resources import add_resource
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
        super().__init__(ledger, f"Record a resource of {visible(node, 80)}", "Record")
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
            return {}, f"{self.node} has no lease yet: add one first (l)."
        which = renewals.describe(lease, leases, now)
        return {}, f"Without a lease start it goes to {which}."

    def write(self, ledger: Ledger, values: Mapping[str, Value]) -> tuple[bool, str]:
        ledger.node(self.node)
        _, message = add_resource(ledger, self.node, given(values, RESOURCE_FLAGS))
        return True, message

    def cancelled(self) -> bool:
        return False
