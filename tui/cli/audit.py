"""Handlers of the audit log's commands: `zuka log`, `zuka undo`, `zuka audit
verify/accept`."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from leases.core.errors import InputError
from leases.core.fields import user_name
from leases.core.i18n import _, pgettext
from leases.core.models import NodeState
from leases.core.origin import MAX_ORIGIN, who
from leases.core.textsafe import visible
from leases.core.valuewords import action_word
from leases.ledger import auditchain, rowaudit
from leases.ledger.wording import describe_counts
from tui.cli import output
from tui.cli.opening import lab_zone, open_ledger
from tui.words import change_text, clock, day, zone_header


def log(args: argparse.Namespace, out: TextIO) -> int:
    if args.archived and args.node is None:
        raise InputError("archived", None, _("give the NODE whose archived history to show"))
    user = None if args.user is None else user_name(args.user, "--user")
    tz = lab_zone(args)
    with open_ledger(args, readonly=True) as ledger:
        now = ledger.clock()
        entries = ledger.history(args.node, archived=args.archived, user=user)
        report = ledger.verify_audit()
        older = [] if args.node is None or args.archived else ledger.archived_nodes(args.node)
        live = bool(older) and ledger.node(args.node).state is not NodeState.RELEASED
        moved = None if args.node is None or args.archived else ledger.renamed(args.node)
    if moved is not None:
        print(
            _(
                "zuka: {old} is now called {new} (renamed on {day}): below is that node's"
                " whole history, as `zuka log {new}` shows it"
            ).format(old=visible(args.node), new=visible(moved[0]), day=day(moved[1], tz)),
            file=sys.stderr,
        )
    if live:
        print(
            _(
                "zuka: {node} is the node that has this name now; an archived node had it"
                " too: `zuka log {node} --archived` shows that one"
            ).format(node=visible(args.node)),
            file=sys.stderr,
        )
    if not report.ok:
        print(
            _("zuka: {problem}; run `zuka audit verify`").format(problem=_chain_problem(report)),
            file=sys.stderr,
        )
    if args.json:
        output.dump_json(
            [
                {"id": e.id, "at": e.at.isoformat(), "actor": e.actor, "origin": e.origin,
                 "action": e.action, "node": e.node, "before": e.before, "after": e.after,
                 **({"problem": e.problem} if e.problem else {})}
                for e in entries
            ],
            out,
        )  # fmt: skip
        return 0
    rows = [
        (e.id, "?" if e.problem and e.at.year == 1 else clock(e.at, tz, seconds=True),
         e.actor, visible(e.origin, MAX_ORIGIN) or "-", action_word(e.action), e.node,
         _("unreadable entry {id}: {problem}").format(id=e.id, problem=e.problem)
         if e.problem else change_text(e))
        for e in entries
    ]  # fmt: skip
    out.write(zone_header(tz, now) + "\n")
    output.fit_table(
        (
            _("ID"),
            _("WHEN"),
            _("WHO"),
            _("FROM"),
            pgettext("audit log", "ACTION"),
            _("NODE"),
            _("CHANGE"),
        ),
        rows,
        out,
        columns=output.fitted_columns(args, out),
        below=(_("CHANGE"),),
        key=2,
    )
    return 0


def undo(args: argparse.Namespace, out: TextIO) -> int:
    with open_ledger(args, create=False) as ledger:
        from leases.ledger.undo import undo_last

        undone = undo_last(ledger, any_user=args.any_user, entry=args.entry)
    if args.json:
        output.dump_json(
            [{"id": e.id, "action": e.action, "node": e.node, "actor": e.actor,
              "origin": e.origin, "at": e.at.isoformat()} for e in undone],
            out,
        )  # fmt: skip
        return 0
    tz = lab_zone(args)
    for e in undone:
        when = day(e.at, tz)
        by = who(e.actor, e.origin)
        line = _("undid entry {id}: {action} of {what} by {who} at {when}").format(
            id=e.id,
            action=action_word(e.action),
            what=e.node or _entity(e.entity),
            who=by,
            when=when,
        )
        out.write(visible(line) + "\n")
    gone = next((e.before.get("gpu_history") for e in undone if e.before), None)
    if isinstance(gone, dict) and any(gone.values()):
        out.write(
            _("(its GPU history, {counts}, was not kept and stays gone)").format(
                counts=describe_counts(gone)
            )
            + "\n"
        )
    out.write(_("(`zuka undo` again redoes it)") + "\n")
    return 0


def _entity(entity: str) -> str:
    """What an entry without a node changed, as a sentence names it."""
    words = {
        "provider": pgettext("entity", "provider"),
        "deposit_refund": pgettext("entity", "deposit_refund"),
        "invoice": pgettext("entity", "invoice"),
        "balance": pgettext("entity", "balance"),
        "bill": pgettext("entity", "bill"),
        "offer": pgettext("entity", "offer"),
        "lab": pgettext("entity", "lab"),
        "import": pgettext("entity", "import"),
    }
    return words.get(entity, entity)


def _chain_problem(report: auditchain.ChainReport) -> str:
    if report.broken_at is not None:
        where = _("entry {id}").format(id=report.broken_at)
    else:
        where = _("the audit log")
    return _("THE AUDIT LOG DOES NOT VERIFY: {where}: {reason}").format(
        where=where, reason=report.reason
    )


def audit_verify(args: argparse.Namespace, out: TextIO) -> int:
    anchor: tuple[int, str] | None = None
    if args.anchor:
        entry, _sep, digest = args.anchor.partition(":")
        if (
            not entry.isdigit()
            or len(digest) != 64
            or not all(c in "0123456789abcdef" for c in digest)
        ):
            raise InputError(
                "anchor", args.anchor, _("must be ID:HASH as `zuka audit verify` prints")
            )
        anchor = (int(entry), digest)
    from leases.ledger import acceptance_rows
    from leases.offboard import evidence

    with open_ledger(args, readonly=True) as ledger:
        report = ledger.verify_audit(anchor)
        # The offboarding's plans and step states, each against its evidence on the chain.
        plans = evidence.problems(ledger) if report.ok else []
        # The acceptance runs, each against the digest its chained entry holds.
        plans += acceptance_rows.problems(ledger) if report.ok else []
        # Each row against the record the chain last wrote of it: an edit with sqlite3
        # leaves the chain whole.
        rows = rowaudit.drifted(ledger) if report.ok else []
    ok = report.ok and not plans and not rows
    if args.json:
        output.dump_json(
            {"ok": ok, "entries": report.entries,
             "head_id": report.head_id, "head_hash": report.head_hash,
             "broken_at": report.broken_at, "reason": report.reason,
             "offboarding": plans,
             "rows": [{"entity": d.entity, "id": d.entity_id, "node": d.node, "what": d.what,
                       "entry": d.entry, "problem": d.problem or None,
                       "fields": [{"field": f, "logged": a, "now": b} for f, a, b in d.fields],
                       "said": d.said(), "accept": d.accept} for d in rows]},
            out,
        )  # fmt: skip
    elif plans or rows:
        if plans:
            out.write(
                _("THE OFFBOARDING EVIDENCE DOES NOT VERIFY (acceptance runs included):") + "\n"
            )
            out.writelines(f"- {visible(p, 500)}\n" for p in plans)
        if rows:
            out.write(
                _(
                    "ROWS CHANGED OUTSIDE ZUKA ({count}; the audit log itself is intact, with"
                    " {entries} entries):"
                ).format(count=len(rows), entries=report.entries)
                + "\n"
            )
            right = _("{said}\n  if it is right: {accept}")
            out.writelines("- " + right.format(said=d.said(), accept=d.accept) + "\n" for d in rows)
    elif report.ok:
        out.write(
            _("audit log ok: {entries} entries, hash chain and triggers intact").format(
                entries=report.entries
            )
            + "\n"
        )
        if report.head_id is not None:
            out.write(
                _("head {id}:{hash}").format(id=report.head_id, hash=report.head_hash)
                + "\n"
                + _("(keep this line elsewhere; `--anchor` checks it later)")
                + "\n"
            )
    else:
        out.write(_chain_problem(report) + "\n")
    return 0 if ok else 1


def audit_accept(args: argparse.Namespace, out: TextIO) -> int:
    """`zuka audit accept ENTITY ID`: put a row changed outside zuka on the chain as it is."""
    with open_ledger(args, create=False) as ledger:
        found = rowaudit.accept(ledger, args.entity, int(args.id))
    said = {
        "edited": _(
            "accepted {entity} {id} as edited outside zuka: {said} (`zuka undo` takes the"
            " acceptance back)"
        ),
        "added": _(
            "accepted {entity} {id} as added outside zuka: {said} (`zuka undo` takes the"
            " acceptance back)"
        ),
        "removed": _(
            "accepted {entity} {id} as removed outside zuka: {said} (`zuka undo` takes the"
            " acceptance back)"
        ),
    }[found.what]
    message = said.format(entity=found.entity, id=found.entity_id, said=found.said())
    doc = {"entity": found.entity, "id": found.entity_id, "what": found.what}
    return output.done(args, out, doc, message)
