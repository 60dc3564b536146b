"""How an alert says a ledger row changed behind zuka's back (leases.ledger.rowaudit.Drift),
as words that can be said again in another language (leases.alerts.said): the same facts
Drift.said() gives, with zuka's words marked for the catalogue and the row's values as data.
"""

from __future__ import annotations

from leases.alerts.said import Said, joined, phrase, say
from leases.core.errors import InputError
from leases.core.i18n import N_
from leases.core.textsafe import visible
from leases.ledger.rowaudit import Drift, _shown

# The rows a drift is of, in words (the entity itself stays English where it is typed:
# `zuka audit accept lease 1`).
ENTITY_WORDS = {
    "lease": N_("lease"),
    "node": N_("node"),
    "resource": N_("resource"),
    "provider": N_("provider"),
    "stop": N_("stop"),
}


def _entity(entity: str) -> Said:
    return phrase(ENTITY_WORDS.get(entity, entity))


def reason(exc: InputError) -> Said:
    """An InputError's field and reason ("unit_price: is not a number"), the reason said
    through the catalogue when it is one of its messages."""
    return say(N_("{field}: {reason}"), field=exc.field, reason=phrase(visible(exc.reason, 300)))


def drift_said(d: Drift) -> Said:
    """What changed of the row, in words (Drift.said())."""
    node = visible(d.node, 80) if d.node else ""
    who = (
        say(
            N_("{entity} {id} of node {node!r}"),
            entity=_entity(d.entity),
            id=d.entity_id,
            node=node,
        )
        if node
        else say(N_("{entity} {id}"), entity=_entity(d.entity), id=d.entity_id)
    )
    if d.what == "added":
        shown = ", ".join(
            f"{k} {_shown(v)}" for k, v in (d.row or {}).items() if v not in (None, "")
        )
        if shown:
            return say(
                N_("{who} is in the ledger but no audit entry wrote it: added outside zuka"
                   " ({row})"),
                who=who,
                row=visible(shown, 400),
            )  # fmt: skip
        return say(
            N_("{who} is in the ledger but no audit entry wrote it: added outside zuka"), who=who
        )
    if d.what == "removed":
        return say(
            N_("{who} was removed outside zuka: audit entry {entry} last wrote it"),
            who=who,
            entry=d.entry,
        )
    if d.problem:
        return say(
            N_("{who} was edited outside zuka and does not read: {problem}"),
            who=who,
            problem=d.problem,
        )
    changes = [
        say(
            N_("{name} {logged} on the audit log, {now} in the table"),
            name=name,
            logged=_shown(logged),
            now=_shown(now),
        )
        for name, logged, now in d.fields
    ]
    return say(
        N_("{who} was edited outside zuka since audit entry {entry}: {changes}"),
        who=who,
        entry=d.entry,
        changes=joined(N_("; "), *changes),
    )
