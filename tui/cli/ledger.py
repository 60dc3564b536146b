"""Handlers of the ledger subcommands: provider, node, lease, resource, log, export, import."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from leases.core import fields
from leases.core.errors import (
    InputError,
    LedgerError,
    Problems,
    UnknownNode,
    each_error,
    ledger_failure,
    no_ledger,
    os_problem,
)
from leases.core.models import AuditEntry, Lease, Node, NodeState, Provider, ProviderKind, Resource
from leases.core.textsafe import visible
from leases.ledger import auditchain, recordfields, records, release, rowaudit, stops, transfer
from leases.ledger.lease_rows import billing_of as billing_of_leases
from leases.ledger.paths import resolve_ledger_path
from leases.ledger.stops import LeaseStop
from leases.ledger.store import Ledger
from leases.ledger.wording import describe_counts, describe_resources
from leases.money import billing, leasecost, renewals
from leases.money.renewals import BillingNow
from leases.ssh.login import parse_ssh_command, ssh_config_aliases
from tui.cli import output


def flag_table(cls: type) -> dict[str, tuple[str, str]]:
    """Record key -> (command-line flag, argparse dest) of cls's options, from the fields'
    metadata (leases.core.models). Options written out by hand (positional names, switches,
    --ssh) are not in it."""
    return {o.key: (o.flag, o.dest) for o in recordfields.options(cls) if not o.by_hand}


def help_table(cls: type) -> dict[str, str]:
    """Record key -> the help of its option, hand-written ones included."""
    return {o.key: o.help for o in recordfields.options(cls)}


# One table per record for options, parsing and errors.
NODE_FLAGS = flag_table(Node)
LEASE_FLAGS = flag_table(Lease)
RESOURCE_FLAGS = flag_table(Resource)
PROVIDER_FLAGS = flag_table(Provider)
NODE_HELP = help_table(Node)
LEASE_HELP = help_table(Lease)
RESOURCE_HELP = help_table(Resource)
PROVIDER_HELP = help_table(Provider)
_RECORDS = (Node, Lease, Resource, Provider)
_FLAG_OF = {o.key: o.flag for cls in _RECORDS for o in recordfields.options(cls)} | {
    "ssh_port": "--ssh",
    "until": "--until",
    # Options of the correction commands, written out by hand.
    "deleted_at": "--deleted",
    "verified_at": "--verified",
    "at": "--at",
    "ended_at": "--at",
    "whole_chain": "--whole-chain",
}
# For _add_flags without helps of its own; a key in two records (kind) has the resource's.
_HELP = {**PROVIDER_HELP, **NODE_HELP, **LEASE_HELP, **RESOURCE_HELP}


def describe_error(exc: InputError) -> str:
    """The error with the command-line flag named beside the field."""
    flag = _FLAG_OF.get(exc.field)
    same = flag is not None and flag.strip("-").replace("-", "_") == exc.field
    # The option as typed; beside the record's key where the two differ (--price is
    # unit_price in --json and exports).
    # A positional argument (NAME, NODE) is named by its field alone: `name: ...`.
    label = (flag if same else f"{exc.field} ({flag})") if flag and flag[0] == "-" else exc.field
    # The value as given, controls shown (ESC as ␛), cut to one readable line.
    value = exc.value
    shown = f"'{visible(value, 200)}'" if isinstance(value, str) else visible(repr(value), 200)
    got = "" if value is None else f" (got {shown})"
    if exc.field == "undo" and isinstance(value, int):
        got = f" (audit entry {value}; see `zuka log`)"
    return f"{label}: {exc.reason}{got}"


def _add_flags(
    p: argparse.ArgumentParser,
    table: Mapping[str, tuple[str, str]],
    required: set[str],
    helps: Mapping[str, str] | None = None,
) -> None:
    for key, (flag, dest) in table.items():
        text = (helps or {}).get(key, _HELP.get(key))
        p.add_argument(flag, dest=dest, required=key in required, help=text)


def _pick(args: argparse.Namespace, table: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    return {
        key: getattr(args, dest)
        for key, (_, dest) in table.items()
        if getattr(args, dest, None) is not None
    }


def _open(args: argparse.Namespace, *, create: bool = False, readonly: bool = False) -> Ledger:
    """The ledger of --ledger; readonly for commands that only read (see Ledger.open).
    A typo in --ledger must not pass unseen: a command that only reads refuses a missing
    ledger, and one that creates it says so on stderr."""
    path = resolve_ledger_path(args.ledger)
    try:
        existed = path.exists()
    except OSError as exc:  # a name too long, a part of the path not a directory
        raise ledger_failure(path, exc) from None
    if not existed and not create:
        raise no_ledger(path)
    if not existed:
        _refuse_missing_folder(args, path)
    ledger = Ledger.open(path, create=create, readonly=readonly)
    if not existed:
        print(f"zuka: created a new ledger at {visible(str(path))}", file=sys.stderr)
    return ledger


def _named(args: argparse.Namespace) -> bool:
    """Whether the ledger's path was named (--ledger or ZUKA_LEDGER), not the default."""
    return bool(getattr(args, "ledger", None) or os.environ.get("ZUKA_LEDGER"))


def _refuse_missing_folder(args: argparse.Namespace, path: Path) -> None:
    """A ledger named in a folder that does not exist is a typo far more often than a
    wish: creating /srv/zuak/lab.db's folders would start a second, empty ledger. The
    default place's folders are made (its first run)."""
    if _named(args) and not path.parent.is_dir():
        raise LedgerError(
            f"no folder {visible(str(path.parent))} for a ledger at {visible(str(path))}:"
            " a typo? Create the folder first if it is meant (mkdir -p)"
        )


# -- providers ---------------------------------------------------------------------------


def provider_options(p: argparse.ArgumentParser, required: bool) -> None:
    _add_flags(p, PROVIDER_FLAGS, {"kind"} if required else set(), PROVIDER_HELP)


def provider_add(args: argparse.Namespace, out: TextIO) -> int:
    provider = records.provider_from({"name": args.name, **_pick(args, PROVIDER_FLAGS)})
    with _open(args, create=True) as ledger:
        added = ledger.add_provider(provider)
    return _done(args, out, records.provider_record(added), f"added provider {added.name}")


def provider_edit_options(p: argparse.ArgumentParser) -> None:
    _add_flags(p, {k: PROVIDER_FLAGS[k] for k in Ledger.PROVIDER_EDITABLE}, set(), PROVIDER_HELP)


def provider_edit(args: argparse.Namespace, out: TextIO) -> int:
    changes = _pick(args, {k: PROVIDER_FLAGS[k] for k in Ledger.PROVIDER_EDITABLE})
    if not changes:
        raise InputError("provider edit", args.name, "nothing to change: give at least one option")
    with _open(args, create=False) as ledger:
        head = _head(ledger)
        edited = ledger.update_provider(args.name, changes)
        same = _head(ledger) == head
    message = (
        f"nothing changed: provider {edited.name} is already so"
        if same
        else f"updated provider {edited.name}"
    )
    return _done(args, out, records.provider_record(edited), message)


def provider_list(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, readonly=True) as ledger:
        provs = ledger.providers()
    if args.json:
        output.dump_json([records.provider_record(p) for p in provs], out)
    else:
        rows = [(p.name, p.kind.value, p.region, p.account_alias, p.credential_ref) for p in provs]
        output.table(("NAME", "CHANNEL", "REGION", "ACCOUNT", "CREDENTIAL"), rows, out)
    return 0


# -- nodes -------------------------------------------------------------------------------


def node_options(p: argparse.ArgumentParser, editing: bool = False) -> None:
    p.add_argument("--ssh", help=NODE_HELP["ssh"])
    p.add_argument("--local", action="store_true", default=None, help=NODE_HELP["local"])
    p.add_argument("--channel", help=f"for a new --provider: {recordfields.choices(ProviderKind)}")
    table = dict(NODE_FLAGS)
    if not editing:
        table.pop("state")
    _add_flags(p, table, set(), NODE_HELP)


def ssh_fields(command: str) -> dict[str, Any]:
    """The node's ssh_* record keys from a login command as --ssh takes it (also the
    dashboard's node form)."""
    config = Path("~/.ssh/config").expanduser()
    try:
        aliases = ssh_config_aliases(config.read_text(errors="replace"))
    except OSError:
        aliases = frozenset()
    t = parse_ssh_command(command, aliases)
    return {
        "ssh_host": t.host,
        "ssh_port": t.port,
        "ssh_user": t.user,
        "ssh_key_path": t.key_path,
        "ssh_jump": t.jump,
        "ssh_alias": t.alias,
    }


def node_changes(values: Mapping[str, Any], ssh: str | None, local: bool) -> dict[str, Any]:
    """A node's record keys from the options (values: NODE_FLAGS keys), --ssh and --local;
    also the dashboard's node form."""
    changes = dict(values)
    if ssh is not None:
        changes.update(ssh_fields(ssh))
    if local:
        changes["local"] = True
    return changes


def _node_changes(args: argparse.Namespace) -> dict[str, Any]:
    return node_changes(_pick(args, NODE_FLAGS), args.ssh, bool(args.local))


def new_provider(ledger: Ledger, provider: str | None, channel: str | None) -> Provider | None:
    """The provider to create with the node, when --channel names one that is not there."""
    if provider is None:
        if channel is not None:
            raise InputError("channel", channel, "give --provider with --channel")
        return None
    try:
        existing = ledger.provider(provider)
    except InputError:
        if channel is None:
            raise InputError(
                "provider", provider, "unknown provider: add --channel to create it"
            ) from None
        try:
            return records.provider_from({"name": provider, "kind": channel})
        except InputError as exc:
            raise InputError("channel", channel, exc.reason) from None
    if channel is not None and channel != existing.kind.value:
        raise InputError("channel", channel, f"{existing.name} is a {existing.kind.value}")
    return None


def _new_provider(args: argparse.Namespace, ledger: Ledger) -> Provider | None:
    return new_provider(ledger, args.provider, args.channel)


def new_node(name: str, changes: Mapping[str, Any]) -> Node:
    """The node `zuka node add NAME` records: a login command or --local is required."""
    p = Problems()  # every field's refusal, the missing login first (the form shows all)
    if not any(key in changes for key in records.SSH_KEYS) and not changes.get("local"):
        p.refuse(InputError("ssh", None, "give --ssh 'ssh -p PORT user@host' (or --local)"))
        changes = {**changes, "local": True}  # so that the other fields are still checked
    node = p(None, records.node_from, {"name": name, **changes})
    p.raise_found()
    assert node is not None
    return node


def node_add(args: argparse.Namespace, out: TextIO) -> int:
    node = new_node(args.name, _node_changes(args))
    with _open(args, create=True) as ledger:
        added, message = add_node(ledger, node, args.provider, args.channel)
    return _done(args, out, records.node_record(added), message)


def add_node(
    ledger: Ledger, node: Node, provider: str | None, channel: str | None
) -> tuple[Node, str]:
    """`zuka node add`: the node as recorded (with a new provider if --channel names one)
    and what the command says of it (also the dashboard's node form)."""
    added = ledger.add_node(node, new_provider=new_provider(ledger, provider, channel))
    return added, f"added node {added.name}"


def _node_row(n: Node, now: BillingNow | None, channels: Mapping[str, str]) -> tuple[Any, ...]:
    gpus = f"{n.gpu_count}x {n.gpu_model}" if n.gpu_count else n.gpu_model or "-"
    lease = now.lease if now else None
    return (
        n.name,
        channels.get(n.provider or "", "-"),
        n.provider,
        gpus,
        lease.billing_type.value if lease else "-",
        f"{lease.unit_price} {lease.currency}" if lease else "-",
        _ends(now),
        _when(now.paid_until if now else None) or "-",
        f"{n.state.value} (refused value: see node show)" if n.problem else n.state.value,
    )


def _ends(now: BillingNow | None) -> str:
    """The end of the lease billing now; for a lease booked but not started, when it starts."""
    if now is None:
        return "-"
    if not now.started and now.at is not None:
        return renewals.starts_in(now.lease, now.at)
    return _when(now.lease.end) or "-"


def _when(at: datetime | None) -> str | None:
    """A lease time as the tables print it, in the lease's billing zone (--lease-start
    takes it back)."""
    return at.strftime("%Y-%m-%d %H:%M") if at else None


def _day(at: datetime) -> str:
    """A time of the audit log as the log prints it, in this machine's zone."""
    return at.astimezone().strftime("%Y-%m-%d %H:%M %Z")


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at else None


def node_list(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, readonly=True) as ledger:
        states = None if args.all else [NodeState.ACTIVE, NodeState.OFFBOARDING]
        nodes = ledger.nodes(states)
        now = ledger.clock()
        # A lease or provider row the ledger refuses is left out and said, not fatal.
        leases, problems = ledger.readable_leases()
        providers, unread = ledger.readable_providers()
        # By node id: an archived node's own leases, never those of the live node that
        # took its name (nor the other way round).
        billing = billing_of_leases(leases, now)
        channels = {p.name: p.kind.value for p in providers}
    for problem in [*problems, *unread]:
        print(f"zuka: {problem}", file=sys.stderr)

    def billing_of(n: Node) -> BillingNow | None:
        return billing.get(n.id) if n.id is not None else None

    if args.json:
        output.dump_json(
            [
                {
                    **records.node_record(n),
                    "problem": n.problem or None,
                    "channel": channels.get(n.provider or ""),
                    # The lease billing now; paid_until: the end of its renewal chain.
                    "lease": records.lease_record(b.lease) if (b := billing_of(n)) else None,
                    "paid_until": _iso(b.paid_until) if b else None,
                }
                for n in nodes
            ],
            out,
        )
    else:
        rows = [_node_row(n, billing_of(n), channels) for n in nodes]
        headers = (
            "NAME", "CHANNEL", "PROVIDER", "GPUS", "BILLING", "PRICE", "ENDS", "PAID UNTIL",
            "STATE",
        )  # fmt: skip
        output.table(headers, rows, out)
    return 0


def node_show(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, readonly=True) as ledger:
        try:
            node = ledger.node(args.name)
        except UnknownNode:
            moved = ledger.renamed(args.name)
            if moved is None:
                raise
            raise InputError(
                "name",
                args.name,
                f"no node of that name; it was renamed to {moved[0]} on {_day(moved[1])}:"
                f" `zuka node show {moved[0]}`",
            ) from None
        leases = ledger.leases(node.name)
        resources = ledger.resources(node.name)
        at = ledger.clock()
        now = renewals.billing_now(leases, at)
        cost = leasecost.node_cost(node, leases, resources, None, at, stops=ledger.stop_spans())
    doc: dict[str, Any] = {
        "node": records.node_record(node),
        "ssh_command": node.ssh.command(),
        "problem": node.problem or None,
        "lease_now": records.lease_record(now.lease) if now else None,
        "bills_now": now.bills if now else False,
        "paid_until": _iso(now.paid_until) if now else None,
        "leases": [records.lease_record(le) for le in leases],
        "resources": [records.resource_record(r, n, s) for n, s, r in resources],
    }
    if args.json:
        output.dump_json(doc, out)
        return 0
    extra = [("problem", node.problem)] if node.problem else []
    output.fields([*doc["node"].items(), ("ssh command", doc["ssh_command"]), *extra], out)
    out.write(f"\n{billing_line(now)}\n")
    if cost is not None:
        out.write(f"{leasecost.cost_line(cost)}\n")
    out.write("\nleases\n")
    output.table(
        ("START", "END", "BILLING", "PRICE", "DEPOSIT", "CONTRACT", "ENDED"),
        [
            (
                le.start.strftime("%Y-%m-%d %H:%M"),
                le.end.strftime("%Y-%m-%d %H:%M") if le.end else None,
                le.billing_type.value,
                f"{le.unit_price} {le.currency}",
                _deposit(le),
                le.contract_no or None,
                "renewed" if now and le in now.chain[:-1] else _when(le.ended_at),
            )
            for le in leases
        ],
        out,
    )
    out.write("\nresources\n")
    _resource_table(doc["resources"], out)
    return 0


def billing_line(now: BillingNow | None) -> str:
    if now is None:
        return "bills now: no lease"
    le = now.lease
    if not now.started and now.at is not None:
        return (
            f"bills now: no lease; the lease from {_when(le.start)} ({le.billing_type.value}"
            f" {le.unit_price} {le.currency}) {renewals.starts_in(le, now.at)}"
        )
    span = f"{_when(le.start)} to {_when(le.end) or 'open end'}"
    if now.lapsed:
        return (
            f"bills now: no lease; the {le.billing_type.value} lease from {span} ended at its"
            f" end, not recorded as ended: run zuka lease end {le.node}"
            f" --at {shlex.quote(_when(le.end) or '')}"
        )
    if now.hourly_after_end:
        price = f"{le.hourly_price} {le.currency}" if le.hourly_price is not None else "?"
        return (
            f"bills now: hourly {price} an hour, past its end: the"
            f" {le.billing_type.value} lease from {span} falls back to hourly"
        )
    line = f"bills now: {le.billing_type.value} {le.unit_price} {le.currency}, {span}"
    if now.paid_until is None:
        return line
    renewed = len(now.chain) - 1 - now.chain.index(le)
    after = f" (renewed {renewed} time{'s' if renewed > 1 else ''} after it)" if renewed else ""
    return f"{line}; paid until {_when(now.paid_until)}{after}"


def node_edit(args: argparse.Namespace, out: TextIO) -> int:
    changes = _node_changes(args)
    if args.rename is not None:
        changes["name"] = args.rename
    if not changes and args.channel is None:
        raise InputError("node edit", args.name, "nothing to change: give at least one option")
    with _open(args, create=False) as ledger:
        edited, message = edit_node(ledger, args.name, changes, args.provider, args.channel)
    return _done(args, out, records.node_record(edited), message)


def edit_node(
    ledger: Ledger,
    name: str,
    changes: Mapping[str, Any],
    provider: str | None,
    channel: str | None,
) -> tuple[Node, str]:
    """`zuka node edit NAME`: the node as edited and what the command says of it (also the
    dashboard's node form)."""
    ledger.node(name)
    head = _head(ledger)
    edited = ledger.update_node(name, changes, new_provider=new_provider(ledger, provider, channel))
    same = _head(ledger) == head
    message = (
        f"nothing changed: node {edited.name} is already so"
        if same
        else f"updated node {edited.name}"
    )
    return edited, message


def _head(ledger: Ledger) -> int | None:
    """The id of the audit log's last entry: a command that left it so changed nothing
    (and gave `zuka undo` nothing new to take back)."""
    last = ledger.last_entries(1)
    return last[0].id if last else None


def node_archive(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, create=False) as ledger:
        try:
            node = ledger.archive_node(args.name)
        except InputError as exc:
            if exc.field != "state":
                raise
            # The user typed no state: name the command, not the field it sets.
            raise InputError(f"node archive {args.name}", None, exc.reason) from None
    return _done(args, out, records.node_record(node), f"archived node {node.name}")


def node_restore(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, create=False) as ledger:
        node = ledger.restore_node(args.name)
    return _done(args, out, records.node_record(node), f"restored node {node.name}")


def node_delete(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, create=False) as ledger:
        counts = ledger.delete_node(args.name, force=args.force)
    went = describe_counts(counts)
    tail = "" if went == "nothing" else f" with {went}"
    return _done(args, out, counts, f"deleted node {args.name}{tail} (`zuka undo` puts it back)")


# -- leases ------------------------------------------------------------------------------


def lease_options(
    p: argparse.ArgumentParser, required: bool, renewing: bool = False, editing: bool = False
) -> None:
    table = dict(LEASE_FLAGS)
    if renewing:
        for key in ("start", "end", "deposit_refund", "deposit_refunded_on"):
            table.pop(key)
    if editing:
        # --start picks the lease, as in lease delete; --new-start moves it.
        table.pop("start")
        p.add_argument("--start", dest="pick_start", metavar="WHEN", help=_PICK_HELP)
        p.add_argument("--new-start", dest="start", metavar="WHEN", help="move the start")
        p.add_argument(
            "--whole-chain",
            action="store_true",
            help="with --currency: record every lease of its renewal chain in that currency"
            " (one chain has one currency)",
        )
    _add_flags(p, table, {"billing_type", "unit_price"} if required else set(), LEASE_HELP)
    p.add_argument(
        "--auto-renew",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=LEASE_HELP["auto_renew"],
    )


def _lease_changes(args: argparse.Namespace) -> dict[str, Any]:
    changes = _pick(args, LEASE_FLAGS)
    if args.auto_renew is not None:
        changes["auto_renew"] = args.auto_renew
    return changes


def lease_add(args: argparse.Namespace, out: TextIO) -> int:
    rec = {"node": args.node, **_lease_changes(args)}
    if rec.get("start") is None:
        tz = fields.timezone(str(rec.get("billing_tz") or fields.DEFAULT_TZ), "billing_tz")
        rec["start"] = datetime.now(tz).replace(second=0, microsecond=0)
    lease = records.lease_from(rec)
    with _open(args, create=False) as ledger:
        ledger.node(args.node)
    with _open(args, create=True) as ledger:
        added, message = add_lease(ledger, lease)
    return _done(args, out, records.lease_record(added), message)


def add_lease(ledger: Ledger, lease: Lease) -> tuple[Lease, str]:
    """`zuka lease add`: the lease as recorded and what the command says of it (also the
    dashboard's lease form)."""
    added = ledger.add_lease(lease)
    return added, f"added a lease to {added.node}" + _terms_note(added)


def _terms_note(lease: Lease) -> str:
    """What the lease's figures will assume for want of a term (billing.off_grid): said
    when it is typed, not first found in a month's report."""
    why = billing.off_grid(lease)
    return f" (note: {why})" if why else ""


def renew_lease(
    ledger: Ledger, node: str, until: str, changes: Mapping[str, Any]
) -> tuple[Lease, str]:
    """`zuka lease renew NODE --until UNTIL`: the renewal and what the command says of it
    (also the dashboard's renew form)."""
    if not until.strip():  # an empty end would be read as no end: an open-ended renewal
        raise InputError("until", until, "is empty: give the end of the renewed period")
    try:
        lease = ledger.renew_lease(node, until, changes)
    except InputError as exc:
        if all(e.field != "end" for e in each_error(exc)):
            raise
        p = Problems()  # the renewal's end is --until: said as such
        for e in each_error(exc):
            if e.field == "end":
                e = InputError(
                    "until", until, e.reason.replace("the start", "the current lease's end")
                )
            p.refuse(e)
        p.raise_found()
        raise  # not reached: raise_found raised
    said = f"renewed {lease.node} until {until}: {_which(ledger, lease)}"
    return lease, said + _terms_note(lease)


def lease_renew(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, create=False) as ledger:
        lease, message = renew_lease(ledger, args.node, args.until, _lease_changes(args))
    return _done(args, out, records.lease_record(lease), message)


def _which(ledger: Ledger, lease: Lease) -> str:
    """Which lease of its node this is, as lease list shows it (renewals.describe)."""
    leases = ledger.leases(lease.node)
    found = next((le for le in leases if le.id == lease.id), lease)
    return renewals.describe(found, leases, ledger.clock())


def end_lease(ledger: Ledger, node_name: str, at_text: str | None) -> tuple[Lease, str]:
    """`zuka lease end NODE [--at AT]`: the ended lease and what the command says of it
    (also the dashboard's end form)."""
    node = ledger.node(node_name)
    lease = ledger.current_lease(node.name)
    tz = lease.billing_tz if lease else fields.DEFAULT_TZ
    at = fields.moment("at", at_text, tz) if at_text else None
    still_open = len(ledger.leases(node.name, open_only=True))
    which = _which(ledger, lease) if lease else "the lease"
    ended = ledger.end_lease(node_name, at)
    cancelled = still_open - 1 - len(ledger.leases(node.name, open_only=True))
    message = f"ended {which} of {ended.node}"
    if cancelled > 0:
        message += f", and its {cancelled} renewal(s) not started yet (they never billed)"
    return ended, message


def lease_end(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, create=False) as ledger:
        ended, message = end_lease(ledger, args.node, args.at)
    return _done(args, out, records.lease_record(ended), message)


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
        "full": "its lease bills in full while stopped",
        "storage_only": "its lease stops billing, its storage does not",
        "none": "nothing bills while it is stopped",
    }[lease.stopped_billing.value]
    message = (
        f"recorded {stop.node} stopped from {fields.shown(stop.start, lease.billing_tz)}"
        f" ({how}); when it runs again: zuka lease resume {stop.node}"
    )
    return stop, message


def resume_node(ledger: Ledger, node_name: str, at_text: str | None) -> tuple[LeaseStop, str]:
    """`zuka lease resume NODE [--at AT]`: the stop ended and what the command says of it."""
    node = ledger.node(node_name)
    tz = _stop_zone(ledger, node.name)
    at = fields.moment("at", at_text, tz) if at_text else None
    stop = ledger.resume_node(node.name, at)
    assert stop.end is not None
    message = (
        f"recorded {stop.node} running again from {fields.shown(stop.end, tz)}"
        f" (stopped since {fields.shown(stop.start, tz)})"
    )
    return stop, message


def lease_stop(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, create=False) as ledger:
        stop, message = stop_node(ledger, args.node, args.at)
    return _done(args, out, stops.record(stop), message)


def lease_resume(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, create=False) as ledger:
        stop, message = resume_node(ledger, args.node, args.at)
    return _done(args, out, stops.record(stop), message)


_PICK_HELP = (
    "the lease that starts then, as `zuka lease list` prints it (default: the lease billing"
    " now; if none does, the next to start; never a renewal while its lease still bills)"
)


def lease_edit(args: argparse.Namespace, out: TextIO) -> int:
    changes = _lease_changes(args)
    if not changes:
        raise InputError("lease edit", args.node, "nothing to change: give at least one option")
    with _open(args, create=False) as ledger:
        lease, message = edit_lease(
            ledger, args.node, changes, args.pick_start, whole_chain=args.whole_chain
        )
    return _done(args, out, records.lease_record(lease), message)


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
    head = _head(ledger)
    lease = ledger.update_lease(node, changes, start=pick_start, whole_chain=whole_chain)
    which = _which(ledger, lease)
    same = _head(ledger) == head
    message = (
        f"nothing changed: {which} of {lease.node} is already so"
        if same
        else f"updated {which} of {lease.node}" + _terms_note(lease)
    )
    return lease, message


def lease_delete(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, create=False) as ledger:
        bundle = ledger.delete_lease(args.node, args.start, force=args.force)
    went = bundle["resources"]
    tail = f" and its resources: {describe_resources(went)}" if went else ""
    message = f"deleted the lease of {args.node} from {bundle['start']}{tail}"
    if (reopened := bundle.get("reopened")) is not None:
        message += f"; the lease from {reopened['start']} it renewed runs on again"
    return _done(args, out, bundle, message + " (`zuka undo` puts it back)")


def lease_list(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, readonly=True) as ledger:
        every = ledger.leases(args.node)
        now = ledger.clock()
    leases = [le for le in every if not args.open or release.open_at(le, now)]
    # Each lease's renewal chain: which lease it renews, and until when the chain is paid.
    chain_of = {le.id: chain for chain in renewals.chains(every) for le in chain}
    billing = {
        b.lease.id
        for b in (renewals.billing_now(c, now) for c in _by_node(every).values())
        if b is not None and b.bills
    }
    lapsed = {le.id for le in every if renewals.lapsed(le, now)}

    def ended(le: Lease) -> str | None:
        if renewals.never_billed(le):
            return "cancelled"  # a renewal ended before it started: it never billed
        if le.start > now:
            return "not started"
        if le.id in lapsed:
            return "end, not recorded"  # released at its end: `zuka lease end` records it
        return "renewed" if chain_of[le.id][-1] is not le else _when(le.ended_at) or "open"

    def bills(le: Lease) -> str | None:
        if le.id in billing:
            return "hourly" if renewals.hourly_after_end(le, now) else "yes"
        if le.start > now and not renewals.never_billed(le):
            return renewals.starts_in(le, now)
        return None

    def renews(le: Lease) -> Lease | None:
        chain = chain_of[le.id]
        i = chain.index(le)
        return chain[i - 1] if i else None

    if args.json:
        output.dump_json(
            [
                {
                    **records.lease_record(le),
                    "renews": _iso(prev.start) if (prev := renews(le)) else None,
                    "paid_until": _iso(renewals.paid_until(chain_of[le.id], now)),
                    "bills_now": le.id in billing,
                }
                for le in leases
            ],
            out,
        )
        return 0
    rows = [
        (
            le.node,
            le.billing_type.value,
            f"{le.unit_price} {le.currency}",
            le.cards_billed,
            _when(le.start),
            _when(le.end),
            "renews" if renewals.auto_renews(le) else le.on_expiry.value,
            ended(le),
            _when(prev.start) if (prev := renews(le)) else None,
            _when(renewals.paid_until(chain_of[le.id], now)),
            bills(le),
        )
        for le in leases
    ]
    headers = (
        "NODE", "BILLING", "PRICE", "CARDS", "START", "END", "AT END", "ENDED", "RENEWS",
        "PAID UNTIL", "BILLS NOW",
    )  # fmt: skip
    output.table(headers, rows, out)
    return 0


def _by_node(leases: list[Lease]) -> dict[str, list[Lease]]:
    out: dict[str, list[Lease]] = {}
    for le in leases:
        out.setdefault(le.node, []).append(le)
    return out


# -- resources ---------------------------------------------------------------------------


def resource_options(p: argparse.ArgumentParser, editing: bool = False) -> None:
    if not editing:
        _add_flags(p, RESOURCE_FLAGS, {"kind", "native_id"}, RESOURCE_HELP)
        return
    keep = ("kind", "native_id", "lease_start", "region", "endpoint", "notes")
    _add_flags(
        p,
        {k: RESOURCE_FLAGS[k] for k in keep},
        {"kind", "native_id"},
        {
            **RESOURCE_HELP,
            "notes": "the notes (required with --verified: how it was checked)",
            "region": "correct the region it was recorded in (not once marked deleted)",
            "endpoint": "correct the endpoint it was recorded at (not once marked deleted)",
        },
    )
    p.add_argument(
        "--new-id",
        metavar="ID",
        help="correct its id (a typo), as checked when it is added (not once marked deleted)",
    )
    for flag, what in (("--deleted", "deleted"), ("--verified", "verified deleted")):
        p.add_argument(
            flag,
            nargs="?",
            const="now",
            metavar="WHEN",
            help=f"mark it {what} by hand, at WHEN (default: now)",
        )


def resource_add(args: argparse.Namespace, out: TextIO) -> int:
    rec = _pick(args, RESOURCE_FLAGS)
    with _open(args, create=False) as ledger:
        ledger.node(args.node)
    with _open(args, create=True) as ledger:
        doc, message = add_resource(ledger, args.node, rec)
    return _done(args, out, doc, message)


def add_resource(ledger: Ledger, node: str, rec: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """`zuka resource add NODE`: the resource's record and what the command says of it
    (also the dashboard's resource form)."""
    res = ledger.add_resource(node, rec)
    lease = next(le for le in ledger.leases(node) if le.id == res.lease_id)
    which = _which(ledger, lease)
    is_open = release.open_at(lease, ledger.clock())
    doc = records.resource_record(res, node, lease.start)
    # Say which lease took it: without --lease-start the lease billing now, else the latest.
    if not is_open and "lease_start" not in rec:
        which = f"its latest lease, {which.removeprefix('the lease ')} (none bills now)"
    return doc, f"recorded {res.kind.value} {res.native_id} on {node}, in {which}"


def resource_edit(args: argparse.Namespace, out: TextIO) -> int:
    changes = {
        key: value
        for key, value in (
            ("deleted_at", args.deleted),
            ("verified_at", args.verified),
            ("notes", args.notes),
            ("new_id", args.new_id),
            ("region", args.region),
            ("endpoint", args.endpoint),
        )
        if value is not None
    }
    with _open(args, create=False) as ledger:
        head = _head(ledger)
        doc = ledger.update_resource(
            args.node, args.kind, args.native_id, changes, lease_start=args.lease_start
        )
        same = _head(ledger) == head
    what = f"{doc['kind']} {doc['native_id']} on {doc['node']}"
    message = f"nothing changed: {what} is already so" if same else f"updated {what}"
    return _done(args, out, doc, message)


def _shown_iso(iso: str | None) -> str | None:
    """A record's time (ISO, in its lease's billing zone) as the tables print it."""
    if iso is None:
        return None
    return fields.shown(datetime.fromisoformat(iso).replace(tzinfo=None))


def _resource_table(rows: list[dict[str, Any]], out: TextIO) -> None:
    output.table(
        ("NODE", "LEASE START", "KIND", "ID", "REGION", "DELETED", "VERIFIED"),
        [
            (r["node"], _shown_iso(r["lease_start"]), r["kind"], r["native_id"],
             r["region"] or None, _shown_iso(r["deleted_at"]), _shown_iso(r["verified_at"]))
            for r in rows
        ],
        out,
    )  # fmt: skip


def resource_list(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, readonly=True) as ledger:
        rows = [records.resource_record(r, n, s) for n, s, r in ledger.resources(args.node)]
    if args.json:
        output.dump_json(rows, out)
    else:
        _resource_table(rows, out)
    return 0


# -- audit log, export, import -----------------------------------------------------------


def _summary(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> str:
    if before is None:
        name = (after or {}).get("name") or (after or {}).get("native_id")
        return f"added {name}" if name else "added"
    if after is None:
        return "removed"
    changed = [k for k in after if before.get(k) != after.get(k)]
    return "; ".join(
        f"{k}: {output.cell(before.get(k))} -> {output.cell(after[k])}" for k in changed
    )


def change_text(e: AuditEntry) -> str:
    """An entry's change; for a lease, which lease (its start as `lease list` prints it);
    for offboarding evidence, the plan, the step and its state (`zuka offboard --report`
    shows the rest)."""
    if e.entity == "offboard":
        said = e.after or {}
        step = f" {said['step']}" if said.get("step") else ""
        state = f": {said['state']}" if said.get("state") else ""
        return f"plan {said.get('plan')}{step}{state}"
    text = _summary(e.before, e.after)
    start = (e.after or e.before or {}).get("start") if e.entity == "lease" else None
    if isinstance(start, str):
        return f"lease from {start[:16].replace('T', ' ')}: {text}"
    return text


def log(args: argparse.Namespace, out: TextIO) -> int:
    if args.archived and args.node is None:
        raise InputError("archived", None, "give the NODE whose archived history to show")
    with _open(args, readonly=True) as ledger:
        entries = ledger.history(args.node, archived=args.archived)
        report = ledger.verify_audit()
        older = [] if args.node is None or args.archived else ledger.archived_nodes(args.node)
        live = bool(older) and ledger.node(args.node).state is not NodeState.RELEASED
        moved = None if args.node is None or args.archived else ledger.renamed(args.node)
    if moved is not None:
        print(
            f"zuka: {visible(args.node)} is now called {visible(moved[0])} (renamed on"
            f" {_day(moved[1])}): below is that node's whole history, as"
            f" `zuka log {visible(moved[0])}` shows it",
            file=sys.stderr,
        )
    if live:
        print(
            f"zuka: {visible(args.node)} is the node that has this name now; an archived node"
            f" had it too: `zuka log {visible(args.node)} --archived` shows that one",
            file=sys.stderr,
        )
    if not report.ok:
        print(f"zuka: {_chain_problem(report)}; run `zuka audit verify`", file=sys.stderr)
    if args.json:
        output.dump_json(
            [
                {"id": e.id, "at": e.at.isoformat(), "actor": e.actor, "action": e.action,
                 "node": e.node, "before": e.before, "after": e.after,
                 **({"problem": e.problem} if e.problem else {})}
                for e in entries
            ],
            out,
        )  # fmt: skip
        return 0
    rows = [
        (e.id, "?" if e.problem and e.at.year == 1 else
         e.at.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z"), e.actor, e.action, e.node,
         f"unreadable entry {e.id}: {e.problem}" if e.problem else change_text(e))
        for e in entries
    ]  # fmt: skip
    output.table(("ID", "WHEN", "WHO", "ACTION", "NODE", "CHANGE"), rows, out)
    return 0


def undo(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, create=False) as ledger:
        from leases.ledger.undo import undo_last

        undone = undo_last(ledger, any_user=args.any_user, entry=args.entry)
    if args.json:
        output.dump_json(
            [{"id": e.id, "action": e.action, "node": e.node, "actor": e.actor,
              "at": e.at.isoformat()} for e in undone],
            out,
        )  # fmt: skip
        return 0
    for e in undone:
        when = e.at.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
        line = f"undid entry {e.id}: {e.action} of {e.node or e.entity} by {e.actor} at {when}"
        out.write(visible(line) + "\n")
    gone = next((e.before.get("gpu_history") for e in undone if e.before), None)
    if isinstance(gone, dict) and any(gone.values()):
        out.write(f"(its GPU history, {describe_counts(gone)}, was not kept and stays gone)\n")
    out.write("(`zuka undo` again redoes it)\n")
    return 0


def _chain_problem(report: auditchain.ChainReport) -> str:
    where = f"entry {report.broken_at}" if report.broken_at is not None else "the audit log"
    return f"THE AUDIT LOG DOES NOT VERIFY: {where}: {report.reason}"


def audit_verify(args: argparse.Namespace, out: TextIO) -> int:
    anchor: tuple[int, str] | None = None
    if args.anchor:
        entry, _, digest = args.anchor.partition(":")
        if (
            not entry.isdigit()
            or len(digest) != 64
            or not all(c in "0123456789abcdef" for c in digest)
        ):
            raise InputError("anchor", args.anchor, "must be ID:HASH as `zuka audit verify` prints")
        anchor = (int(entry), digest)
    from leases.offboard import evidence

    with _open(args, readonly=True) as ledger:
        report = ledger.verify_audit(anchor)
        # The offboarding's plans and step states, each against its evidence on the chain.
        plans = evidence.problems(ledger) if report.ok else []
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
            out.write("THE OFFBOARDING EVIDENCE DOES NOT VERIFY:\n")
            out.writelines(f"- {visible(p, 500)}\n" for p in plans)
        if rows:
            out.write(
                f"ROWS CHANGED OUTSIDE ZUKA ({len(rows)}; the audit log itself is intact, with"
                f" {report.entries} entries):\n"
            )
            out.writelines(f"- {d.said()}\n  if it is right: {d.accept}\n" for d in rows)
    elif report.ok:
        out.write(f"audit log ok: {report.entries} entries, hash chain and triggers intact\n")
        if report.head_id is not None:
            out.write(
                f"head {report.head_id}:{report.head_hash}\n"
                "(keep this line elsewhere; `--anchor` checks it later)\n"
            )
    else:
        out.write(_chain_problem(report) + "\n")
    return 0 if ok else 1


def audit_accept(args: argparse.Namespace, out: TextIO) -> int:
    """`zuka audit accept ENTITY ID`: put a row changed outside zuka on the chain as it is."""
    with _open(args, create=False) as ledger:
        found = rowaudit.accept(ledger, args.entity, int(args.id))
    what = {"edited": "as edited", "added": "as added", "removed": "as removed"}[found.what]
    message = f"accepted {found.entity} {found.entity_id} {what} outside zuka: {found.said()}"
    return _done(args, out, {"entity": found.entity, "id": found.entity_id, "what": found.what},
                 message + " (`zuka undo` takes the acceptance back)")  # fmt: skip


def export(args: argparse.Namespace, out: TextIO) -> int:
    fmt = args.format
    if fmt is None and args.output:
        fmt = _format_of(args.output)
        if fmt is None:
            raise InputError(
                "--output",
                args.output,
                "cannot tell the format from its extension (.csv or .json): give --format",
            )
    with _open(args, readonly=True) as ledger:
        # An import takes every record as stated and chains it anew: a row changed outside
        # zuka would come out of it looking recorded.
        rowaudit.refuse(rowaudit.drifted(ledger), "the export")
        data = ledger.export_records()
    text = transfer.to_csv(data) if fmt == "csv" else transfer.to_json(data)
    if args.output:
        transfer.write_private(Path(args.output), text)
    else:
        out.write(text)
    return 0


def read_export(path: str, fmt: str | None) -> transfer.Export:
    """The export in a file (or stdin, "-"), in fmt; by default by the file name's
    extension, else by its first characters (see transfer.sniff)."""
    where = "stdin" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(where, None, os_problem(exc, path)) from None
    except UnicodeDecodeError:
        raise InputError(where, None, "is not UTF-8 text, so not a zuka export") from None
    if fmt is None:
        fmt = _format_of(path) or transfer.sniff(text)
        if fmt is None:
            raise InputError(where, None, f"{transfer.NOT_AN_EXPORT}; or give --format")
    try:
        return transfer.from_csv(text) if fmt == "csv" else transfer.from_json(text)
    except InputError as exc:
        if exc.field != "file":
            raise
        hint = "; if it is CSV, add --format csv" if fmt == "json" and path == "-" else ""
        raise InputError(where, exc.value, exc.reason + hint) from None


def _format_of(path: str) -> str | None:
    suffix = Path(path).suffix.lower()
    return {".csv": "csv", ".json": "json"}.get(suffix)


_RECORD_AT = re.compile(r"(provider|node|lease|resource|stop) \d+")


def import_(args: argparse.Namespace, out: TextIO) -> int:
    try:
        data = read_export(args.file, args.format)
        with _open(args, create=True) as ledger:
            counts = ledger.import_records(data)
    except InputError as exc:
        # "lease 2: end" -> "lease 2 in FILE: end": records count from 1, as people do.
        at = _RECORD_AT.match(exc.field)
        if at is None:
            raise
        where = "stdin" if args.file == "-" else args.file
        raise InputError(
            f"{at.group(0)} in {where}{exc.field[at.end() :]}", exc.value, exc.reason
        ) from None
    summary = ", ".join(f"{n} {k}" for k, n in counts.items())
    return _done(args, out, counts, f"imported {summary}")


# -- dashboard ---------------------------------------------------------------------------


def dashboard(args: argparse.Namespace, out: TextIO) -> int:
    from tui.dashboard.app import run_dashboard

    path = resolve_ledger_path(args.ledger)
    if _named(args) and not path.exists():
        # A typo (lab.dbb) opened an empty ledger, said only in the dashboard's header.
        raise LedgerError(
            f"no ledger at {visible(str(path))}: a typo? The dashboard opens a ledger that"
            " exists; start a new one there with `zuka node add NAME --ledger PATH ...`,"
            " or try `zuka demo`"
        )
    if not out.isatty():
        if path.exists():
            Ledger.open(path).close()  # the ledger's own problem first, as the dashboard does
        print(
            "zuka: the dashboard needs a terminal and stdout is not one: run it in a terminal,"
            " or for text use a listing (`zuka node list`, `zuka poll --once`)",
            file=sys.stderr,
        )
        return 2
    return run_dashboard(path)


def demo(args: argparse.Namespace, out: TextIO) -> int:
    from tui.cli.demo import run_demo

    return run_demo(args)


def _deposit(le: Lease) -> str | None:
    if le.deposit is None:
        return None
    paid = f", paid {le.deposit_paid_on}" if le.deposit_paid_on else ""
    return f"{le.deposit}{paid}, refund {le.deposit_refund.value}"


def _done(args: argparse.Namespace, out: TextIO, doc: Any, message: str) -> int:
    if args.json:
        output.dump_json(doc, out)
    else:
        out.write(visible(message) + "\n")
    return 0
