"""Handlers of the ledger subcommands: provider, node, lease, resource, log, export, import."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from leases import auditchain, fields, records, transfer
from leases.errors import InputError
from leases.ledger import Ledger, resolve_ledger_path
from leases.models import Lease, Node, NodeState, Provider
from leases.sshcmd import parse_ssh_command, ssh_config_aliases
from leases.textsafe import visible
from tui import output

# Record key -> (command-line flag, argparse dest). One table for options, parsing and errors.
NODE_FLAGS: dict[str, tuple[str, str]] = {
    "provider": ("--provider", "provider"),
    "gpu_model": ("--gpu-model", "gpu_model"),
    "gpu_count": ("--gpus", "gpus"),
    "vram_gib": ("--vram", "vram"),
    "interconnect": ("--interconnect", "interconnect"),
    "tags": ("--tags", "tags"),
    "notes": ("--notes", "notes"),
    "state": ("--state", "state"),
}
LEASE_FLAGS: dict[str, tuple[str, str]] = {
    "billing_type": ("--billing", "billing"),
    "unit_price": ("--price", "price"),
    "currency": ("--currency", "currency"),
    "cards_billed": ("--cards", "cards"),
    "start": ("--start", "start"),
    "end": ("--end", "end"),
    "billing_tz": ("--tz", "tz"),
    "min_commitment": ("--min-commitment", "min_commitment"),
    "deposit": ("--deposit", "deposit"),
    "deposit_paid_on": ("--deposit-paid-on", "deposit_paid_on"),
    "deposit_refund": ("--deposit-refund", "deposit_refund"),
    "deposit_refunded_on": ("--deposit-refunded-on", "deposit_refunded_on"),
    "contract_no": ("--contract", "contract"),
    "notice_days": ("--notice-days", "notice_days"),
    "on_expiry": ("--on-expiry", "on_expiry"),
    "release_after_stopped_days": ("--release-after-stopped-days", "release_after_stopped_days"),
    "notes": ("--notes", "notes"),
}
RESOURCE_FLAGS: dict[str, tuple[str, str]] = {
    "kind": ("--kind", "kind"),
    "native_id": ("--id", "native_id"),
    "region": ("--region", "region"),
    "endpoint": ("--endpoint", "endpoint"),
    "created": ("--created", "created"),
    "lease_start": ("--lease-start", "lease_start"),
    "notes": ("--notes", "notes"),
}
PROVIDER_FLAGS: dict[str, tuple[str, str]] = {
    "kind": ("--kind", "kind"),
    "region": ("--region", "region"),
    "account_id": ("--account-id", "account_id"),
    "account_alias": ("--account-alias", "account_alias"),
    "credential_ref": ("--credential-ref", "credential_ref"),
}
_FLAG_OF = {
    key: flag
    for table in (NODE_FLAGS, LEASE_FLAGS, RESOURCE_FLAGS, PROVIDER_FLAGS)
    for key, (flag, _) in table.items()
} | {"ssh": "--ssh", "name": "NAME", "ssh_port": "--ssh", "node": "NODE", "until": "--until"}

_HELP = {
    "billing_type": "per_second | hourly | card_hour | daily | weekly | monthly | contract",
    "unit_price": "price of one billing unit (yuan per hour, per card-hour, per month...)",
    "start": "YYYY-MM-DD or YYYY-MM-DDTHH:MM in the billing time zone (default: now)",
    "end": "end of the paid period; required for daily, weekly, monthly, contract",
    "billing_tz": "billing time zone (default Asia/Shanghai)",
    "cards_billed": "cards billed (card_hour leases)",
    "min_commitment": "minimum commitment, in billing units",
    "deposit_refund": "none | pending | refunded | forfeited",
    "on_expiry": "what the provider does at the end: released | hourly | renews",
    "release_after_stopped_days": "platform rule: released after N days stopped",
    "kind": "resource: disk | snapshot | image | bucket | bucket_prefix | ssh_key | "
    "scratch_path | eip",
    "native_id": "the provider's id (snapshot id, bucket name, absolute path...)",
    "gpu_count": "number of GPUs",
    "vram_gib": "nominal VRAM per GPU in GiB, as sold",
    "interconnect": "nvlink | pcie | unknown, as advertised",
    "tags": "comma-separated tags",
    "credential_ref": "profile or environment variable name (never the secret itself)",
}


def describe_error(exc: InputError) -> str:
    """The error with the command-line flag named beside the field."""
    flag = _FLAG_OF.get(exc.field)
    same = flag is not None and flag.strip("-").replace("-", "_") == exc.field
    label = f"{exc.field} ({flag})" if flag and not same else exc.field
    # The value as given, controls shown (ESC as ␛), cut to one readable line.
    value = exc.value
    shown = f"'{visible(value, 200)}'" if isinstance(value, str) else visible(repr(value), 200)
    got = "" if value is None else f" (got {shown})"
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
    """The ledger of --ledger; readonly for commands that only read (see Ledger.open)."""
    return Ledger.open(resolve_ledger_path(args.ledger), create=create, readonly=readonly)


# -- providers ---------------------------------------------------------------------------


def provider_options(p: argparse.ArgumentParser, required: bool) -> None:
    _add_flags(
        p,
        PROVIDER_FLAGS,
        {"kind"} if required else set(),
        {"kind": "channel: cloud | platform (GPU rental) | colo (data-centre hosting)"},
    )


def provider_add(args: argparse.Namespace, out: TextIO) -> int:
    provider = records.provider_from({"name": args.name, **_pick(args, PROVIDER_FLAGS)})
    with _open(args, create=True) as ledger:
        added = ledger.add_provider(provider)
    return _done(args, out, records.provider_record(added), f"added provider {added.name}")


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
    p.add_argument("--ssh", help="the login command as the platform gives it, or an alias")
    p.add_argument("--local", action="store_true", default=None, help="read via NVML here")
    p.add_argument(
        "--channel", help="for a new --provider: cloud | platform (GPU rental) | colo (hosting)"
    )
    table = dict(NODE_FLAGS)
    if not editing:
        table.pop("state")
    _add_flags(p, table, set())


def _ssh_fields(command: str) -> dict[str, Any]:
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


def _node_changes(args: argparse.Namespace) -> dict[str, Any]:
    changes = _pick(args, NODE_FLAGS)
    if args.ssh is not None:
        changes.update(_ssh_fields(args.ssh))
    if args.local:
        changes["local"] = True
    return changes


def _new_provider(args: argparse.Namespace, ledger: Ledger) -> Provider | None:
    """The provider to create with the node, when --channel names one that is not there."""
    if args.provider is None:
        if args.channel is not None:
            raise InputError("channel", args.channel, "give --provider with --channel")
        return None
    try:
        existing = ledger.provider(args.provider)
    except InputError:
        if args.channel is None:
            raise InputError(
                "provider", args.provider, "unknown provider: add --channel to create it"
            ) from None
        try:
            return records.provider_from({"name": args.provider, "kind": args.channel})
        except InputError as exc:
            raise InputError("channel", args.channel, exc.reason) from None
    if args.channel is not None and args.channel != existing.kind.value:
        raise InputError("channel", args.channel, f"{existing.name} is a {existing.kind.value}")
    return None


def node_add(args: argparse.Namespace, out: TextIO) -> int:
    if args.ssh is None and not args.local:
        raise InputError("ssh", None, "give --ssh 'ssh -p PORT user@host' (or --local)")
    node = records.node_from({"name": args.name, **_node_changes(args)})
    with _open(args, create=True) as ledger:
        added = ledger.add_node(node, new_provider=_new_provider(args, ledger))
    return _done(args, out, records.node_record(added), f"added node {added.name}")


def _node_row(n: Node, lease: Lease | None, channels: Mapping[str, str]) -> tuple[Any, ...]:
    gpus = f"{n.gpu_count}x {n.gpu_model}" if n.gpu_count else n.gpu_model or "-"
    return (
        n.name,
        channels.get(n.provider or "", "-"),
        n.provider,
        gpus,
        lease.billing_type.value if lease else "-",
        f"{lease.unit_price} {lease.currency}" if lease else "-",
        lease.end.strftime("%Y-%m-%d %H:%M") if lease and lease.end else "-",
        f"{n.state.value} (refused value: see node show)" if n.problem else n.state.value,
    )


def node_list(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, readonly=True) as ledger:
        states = None if args.all else [NodeState.ACTIVE, NodeState.OFFBOARDING]
        nodes = ledger.nodes(states)
        current = ledger.current_leases()
        channels = {p.name: p.kind.value for p in ledger.providers()}
    if args.json:
        output.dump_json(
            [
                {
                    **records.node_record(n),
                    "problem": n.problem or None,
                    "channel": channels.get(n.provider or ""),
                    "lease": records.lease_record(current[n.name]) if n.name in current else None,
                }
                for n in nodes
            ],
            out,
        )
    else:
        rows = [_node_row(n, current.get(n.name), channels) for n in nodes]
        headers = ("NAME", "CHANNEL", "PROVIDER", "GPUS", "BILLING", "PRICE", "ENDS", "STATE")
        output.table(headers, rows, out)
    return 0


def node_show(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, readonly=True) as ledger:
        node = ledger.node(args.name)
        leases = ledger.leases(node.name)
        resources = ledger.resources(node.name)
    doc = {
        "node": records.node_record(node),
        "ssh_command": node.ssh.command(),
        "problem": node.problem or None,
        "leases": [records.lease_record(le) for le in leases],
        "resources": [records.resource_record(r, n, s) for n, s, r in resources],
    }
    if args.json:
        output.dump_json(doc, out)
        return 0
    extra = [("problem", node.problem)] if node.problem else []
    output.fields([*doc["node"].items(), ("ssh command", doc["ssh_command"]), *extra], out)
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
                le.ended_at.strftime("%Y-%m-%d %H:%M") if le.ended_at else None,
            )
            for le in leases
        ],
        out,
    )
    out.write("\nresources\n")
    _resource_table(doc["resources"], out)
    return 0


def node_edit(args: argparse.Namespace, out: TextIO) -> int:
    changes = _node_changes(args)
    if args.rename is not None:
        changes["name"] = args.rename
    if not changes and args.channel is None:
        raise InputError("node edit", args.name, "nothing to change: give at least one option")
    with _open(args, create=False) as ledger:
        ledger.node(args.name)
        edited = ledger.update_node(args.name, changes, new_provider=_new_provider(args, ledger))
    return _done(args, out, records.node_record(edited), f"updated node {edited.name}")


def node_archive(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, create=False) as ledger:
        node = ledger.archive_node(args.name)
    return _done(args, out, records.node_record(node), f"archived node {node.name}")


# -- leases ------------------------------------------------------------------------------


def lease_options(p: argparse.ArgumentParser, required: bool, renewing: bool = False) -> None:
    table = dict(LEASE_FLAGS)
    if renewing:
        for key in ("start", "end", "deposit_refund", "deposit_refunded_on"):
            table.pop(key)
    _add_flags(p, table, {"billing_type", "unit_price"} if required else set())
    p.add_argument("--auto-renew", action=argparse.BooleanOptionalAction, default=None)


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
        added = ledger.add_lease(lease)
    return _done(args, out, records.lease_record(added), f"added a lease to {added.node}")


def lease_renew(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, create=False) as ledger:
        try:
            lease = ledger.renew_lease(args.node, args.until, _lease_changes(args))
        except InputError as exc:
            if exc.field != "end":
                raise
            raise InputError(
                "until", args.until, exc.reason.replace("the start", "the current lease's end")
            ) from None
    return _done(args, out, records.lease_record(lease), f"renewed {lease.node} until {args.until}")


def lease_end(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, create=False) as ledger:
        node = ledger.node(args.node)
        lease = ledger.current_lease(node.name)
        tz = lease.billing_tz if lease else fields.DEFAULT_TZ
        at = fields.moment("at", args.at, tz) if args.at else None
        ended = ledger.end_lease(args.node, at)
    return _done(args, out, records.lease_record(ended), f"ended the lease of {ended.node}")


def lease_edit(args: argparse.Namespace, out: TextIO) -> int:
    changes = _lease_changes(args)
    if not changes:
        raise InputError("lease edit", args.node, "nothing to change: give at least one option")
    with _open(args, create=False) as ledger:
        lease = ledger.update_lease(args.node, changes)
    return _done(args, out, records.lease_record(lease), f"updated the lease of {lease.node}")


def lease_list(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, readonly=True) as ledger:
        leases = ledger.leases(args.node, open_only=args.open)
    if args.json:
        output.dump_json([records.lease_record(le) for le in leases], out)
        return 0
    rows = [
        (
            le.node,
            le.billing_type.value,
            f"{le.unit_price} {le.currency}",
            le.cards_billed,
            le.start.strftime("%Y-%m-%d %H:%M"),
            le.end.strftime("%Y-%m-%d %H:%M") if le.end else None,
            le.on_expiry.value,
            le.ended_at.strftime("%Y-%m-%d %H:%M") if le.ended_at else "open",
        )
        for le in leases
    ]
    headers = ("NODE", "BILLING", "PRICE", "CARDS", "START", "END", "AT END", "ENDED")
    output.table(headers, rows, out)
    return 0


# -- resources ---------------------------------------------------------------------------


def resource_options(p: argparse.ArgumentParser) -> None:
    _add_flags(p, RESOURCE_FLAGS, {"kind", "native_id"})


def resource_add(args: argparse.Namespace, out: TextIO) -> int:
    rec = _pick(args, RESOURCE_FLAGS)
    with _open(args, create=False) as ledger:
        ledger.node(args.node)
    with _open(args, create=True) as ledger:
        res = ledger.add_resource(args.node, rec)
        lease = next(le for le in ledger.leases(args.node) if le.id == res.lease_id)
    doc = records.resource_record(res, args.node, lease.start)
    return _done(args, out, doc, f"recorded {res.kind.value} {res.native_id} on {args.node}")


def _resource_table(rows: list[dict[str, Any]], out: TextIO) -> None:
    output.table(
        ("NODE", "LEASE START", "KIND", "ID", "REGION", "DELETED", "VERIFIED"),
        [
            (r["node"], r["lease_start"][:16].replace("T", " "), r["kind"], r["native_id"],
             r["region"] or None, r["deleted_at"], r["verified_at"])
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


def log(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, readonly=True) as ledger:
        entries = ledger.history(args.node)
        report = ledger.verify_audit()
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
        ("?" if e.problem and e.at.year == 1 else
         e.at.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z"), e.actor, e.action, e.node,
         f"unreadable entry {e.id}: {e.problem}" if e.problem else _summary(e.before, e.after))
        for e in entries
    ]  # fmt: skip
    output.table(("WHEN", "WHO", "ACTION", "NODE", "CHANGE"), rows, out)
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
    with _open(args, readonly=True) as ledger:
        report = ledger.verify_audit(anchor)
    if args.json:
        output.dump_json(
            {"ok": report.ok, "entries": report.entries, "head_id": report.head_id,
             "head_hash": report.head_hash, "broken_at": report.broken_at,
             "reason": report.reason},
            out,
        )  # fmt: skip
    elif report.ok:
        out.write(f"audit log ok: {report.entries} entries, hash chain and triggers intact\n")
        if report.head_id is not None:
            out.write(
                f"head {report.head_id}:{report.head_hash}\n"
                "(keep this line elsewhere; `--anchor` checks it later)\n"
            )
    else:
        out.write(_chain_problem(report) + "\n")
    return 0 if report.ok else 1


def export(args: argparse.Namespace, out: TextIO) -> int:
    with _open(args, readonly=True) as ledger:
        data = ledger.export_records()
    text = transfer.to_csv(data) if args.format == "csv" else transfer.to_json(data)
    if args.output:
        transfer.write_private(Path(args.output), text)
    else:
        out.write(text)
    return 0


def read_export(path: str, fmt: str | None) -> transfer.Export:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError("file", path, exc.strerror or str(exc)) from None
    except UnicodeDecodeError:
        raise InputError("file", path, "is not UTF-8 text") from None
    if fmt is None:
        fmt = "csv" if path.lower().endswith(".csv") else "json"
    return transfer.from_csv(text) if fmt == "csv" else transfer.from_json(text)


def import_(args: argparse.Namespace, out: TextIO) -> int:
    data = read_export(args.file, args.format)
    with _open(args, create=True) as ledger:
        counts = ledger.import_records(data)
    summary = ", ".join(f"{n} {k}" for k, n in counts.items())
    return _done(args, out, counts, f"imported {summary}")


# -- dashboard ---------------------------------------------------------------------------


def dashboard(args: argparse.Namespace, out: TextIO) -> int:
    from tui.app import run_dashboard

    return run_dashboard(resolve_ledger_path(args.ledger))


def demo(args: argparse.Namespace, out: TextIO) -> int:
    from tui.demo import run_demo

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
