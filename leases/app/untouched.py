"""No change carries rows changed outside zuka onto the audit log as zuka's own.

An edit writes the row's whole record after the change on the audit log, and a delete
takes the row away: a price set to 3 with sqlite3, then `lease edit --notes x`, left a
chain that verifies with the 3 on it as zuka's; a delete of it left a chain that verifies
(the row gone, as the log says) and an undo that puts the 3 back. So deleting a node or a
lease first checks the node's rows (and the providers) against the chain
(leases.ledger.rowaudit), and refuses, naming each, until somebody has checked them
(`zuka audit accept`); an edit is refused the same way unless it sets every field changed
outside zuka itself (`zuka node edit --ssh` fixes a quarantined SSH target). `zuka undo`
never puts back values the chain did not hold (leases.ledger.undo). The books check their
own rows (leases.ledger.book_rows.check_untouched)."""

from __future__ import annotations

from collections.abc import Collection

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.ledger import rowaudit
from leases.ledger.store import Ledger


def refuse_outside_edits(
    ledger: Ledger,
    node: str,
    change: str,
    entity: str | None = None,
    setting: Collection[str] = (),
) -> None:
    """Refuse `change` (words: "deleting the lease") when a row of the node, or a provider,
    is not what the audit log last wrote of it. An edit (`entity`: what it writes,
    `setting`: the fields it sets) is refused only for rows of that kind whose fields
    changed outside zuka are not all among those it sets."""
    found = [
        d
        for d in rowaudit.drifted(ledger, rowaudit.FIGURES)
        if d.node == node or (entity is None and d.entity == "provider")
    ]
    if entity is not None:
        found = [
            d
            for d in found
            if d.entity == entity
            and not (
                d.what == "edited"
                and not d.problem
                and {name for name, _was, _now in d.fields} <= set(setting)
            )
        ]
    _refuse(found, change)


def refuse_provider_edits(ledger: Ledger, name: str, setting: Collection[str]) -> None:
    """As refuse_outside_edits, for an edit of provider `name` setting these fields."""
    provider = ledger.provider(name)
    found = [
        d
        for d in rowaudit.drifted(ledger, ("provider",))
        if d.entity_id == provider.id
        and not (
            d.what == "edited"
            and not d.problem
            and {f for f, _was, _now in d.fields} <= set(setting)
        )
    ]
    _refuse(found, _("editing the provider"))


def _refuse(found: list[rowaudit.Drift], change: str) -> None:
    if not found:
        return
    said = "; ".join(d.said() for d in found[:3])
    if len(found) > 3:
        said = _("{said}; and {n} more").format(said=said, n=len(found) - 3)
    raise InputError(
        "ledger",
        None,
        _(
            "{said}. {change} would write those values onto the audit log as zuka's (and an"
            " undo would put them back as such): nothing was written. Check each, take it as"
            " it is with {accept}, then change it with zuka"
        ).format(said=said, change=change[:1].upper() + change[1:], accept=found[0].accept),
    )
