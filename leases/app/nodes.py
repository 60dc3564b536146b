"""Node use cases: `zuka node add/edit/archive/restore/delete` and the dashboard's node
form, each with its result and what it says of it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from leases.app.changes import audit_head
from leases.app.promcheck import refuse_node_setting, refuse_prom_host, refuse_prom_token
from leases.app.untouched import refuse_outside_edits
from leases.core.errors import InputError, Problems
from leases.core.i18n import _
from leases.core.models import Node, Provider
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.ledger.wording import describe_counts
from leases.money.words import channel_word
from leases.ssh.login import parse_ssh_command, ssh_config_aliases
from leases.telemetry.promtarget import inherit, source_line


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
        "ssh_tunnels": list(t.tunnels),
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


def new_provider(ledger: Ledger, provider: str | None, channel: str | None) -> Provider | None:
    """The provider to create with the node, when --channel names one that is not there."""
    if provider is None:
        if channel is not None:
            raise InputError("channel", channel, _("give --provider with --channel"))
        return None
    try:
        existing = ledger.provider(provider)
    except InputError:
        if channel is None:
            raise InputError(
                "provider", provider, _("unknown provider: add --channel to create it")
            ) from None
        try:
            return records.provider_from({"name": provider, "kind": channel})
        except InputError as exc:
            raise InputError("channel", channel, exc.reason) from None
    if channel is not None and channel != existing.kind.value:
        raise InputError(
            "channel",
            channel,
            _("{provider} is a {channel}").format(
                provider=existing.name, channel=channel_word(existing.kind.value)
            ),
        )
    return None


def new_node(name: str, changes: Mapping[str, Any]) -> Node:
    """The node `zuka node add NAME` records: a login command or --local is required."""
    p = Problems()  # every field's refusal, the missing login first (the form shows all)
    if not any(key in changes for key in records.SSH_KEYS) and not changes.get("local"):
        p.refuse(InputError("ssh", None, _("give --ssh 'ssh -p PORT user@host' (or --local)")))
        changes = {**changes, "local": True}  # so that the other fields are still checked
    node = p(None, records.node_from, {"name": name, **changes})
    p.raise_found()
    assert node is not None
    return node


def readings_line(ledger: Ledger, node: Node) -> str:
    """Where the node's GPU readings come from, its provider's setting applied:
    `readings: Prometheus http://prom:9090 {Hostname="gpu-07"}`."""
    return source_line(inherit([node], ledger.readable_providers()[0])[0])


def add_node(
    ledger: Ledger, node: Node, provider: str | None, channel: str | None
) -> tuple[Node, str]:
    """`zuka node add`: the node as recorded (with a new provider if --channel names one)
    and what the command says of it (also the dashboard's node form)."""
    refuse_prom_host({"prom_url": node.prom_url})
    refuse_prom_token({"prom_token_file": node.prom_token_file})
    own = ("reading_source", "prom_url", "prom_match", "prom_token_file", "local")
    refuse_node_setting(
        ledger, node, {k: getattr(node, k) for k in own} | {"provider": provider or node.provider}
    )
    added = ledger.add_node(node, new_provider=new_provider(ledger, provider, channel))
    return added, _("added node {node}").format(node=added.name)


def edit_node(
    ledger: Ledger,
    name: str,
    changes: Mapping[str, Any],
    provider: str | None,
    channel: str | None,
) -> tuple[Node, str]:
    """`zuka node edit NAME`: the node as edited and what the command says of it (also the
    dashboard's node form)."""
    node = ledger.node(name)
    refuse_outside_edits(ledger, name, _("editing the node"), "node", changes)
    refuse_prom_host(changes)
    refuse_prom_token(changes)
    refuse_node_setting(ledger, node, changes)
    _keeps_its_books(ledger, node, changes.get("provider", node.provider))
    head = audit_head(ledger)
    edited = ledger.update_node(name, changes, new_provider=new_provider(ledger, provider, channel))
    same = audit_head(ledger) == head
    message = (
        _("nothing changed: node {node} is already so") if same else _("updated node {node}")
    ).format(node=edited.name)
    return edited, message


def _keeps_its_books(ledger: Ledger, node: Node, provider: Any) -> None:
    """A node whose leases were charged to its provider's prepaid account, or invoiced by
    it, keeps that provider: moved, its past charges would leave one account's balance and
    land on another's."""
    if provider == node.provider or node.provider is None:
        return
    leases = [le.id for le in ledger.leases(node)]
    if not leases:
        return
    old = ledger.provider(node.provider).id
    invoiced = [r for r in ledger.book_rows("invoice") if r["lease_id"] in leases]
    prepaid = ledger.book_rows("balance", "provider_id = ?", [old])
    if invoiced or prepaid:
        if invoiced:
            said = _(
                "node {node}'s leases were invoiced by {provider}: moved, their past charges"
                " would go with it; archive it (zuka node archive {node}) and add the node"
                " again at the other provider"
            )
        else:
            said = _(
                "node {node}'s leases were charged to its prepaid account by {provider}:"
                " moved, their past charges would go with it; archive it (zuka node archive"
                " {node}) and add the node again at the other provider"
            )
        raise InputError("provider", provider, said.format(node=node.name, provider=node.provider))


def archive_node(ledger: Ledger, name: str) -> tuple[Node, str]:
    """`zuka node archive NAME`: the node marked released and what the command says of it."""
    refuse_outside_edits(ledger, name, _("archiving the node"), "node", ("state",))
    try:
        node = ledger.archive_node(name)
    except InputError as exc:
        if exc.field != "state":
            raise
        # The user typed no state: name the command, not the field it sets.
        raise InputError(f"node archive {name}", None, exc.reason) from None
    return node, _("archived node {node}").format(node=node.name)


def restore_node(ledger: Ledger, name: str) -> tuple[Node, str]:
    """`zuka node restore NAME`: the latest archived node of the name, brought back."""
    refuse_outside_edits(ledger, name, _("restoring the node"), "node", ("state",))
    node = ledger.restore_node(name)
    return node, _("restored node {node}").format(node=node.name)


def delete_node(ledger: Ledger, name: str, *, force: bool) -> tuple[dict[str, int], str]:
    """`zuka node delete NAME`: what went with the node (counts) and what the command says."""
    refuse_outside_edits(ledger, name, _("deleting the node"))
    counts = ledger.delete_node(name, force=force)
    if not any(counts.values()):
        return counts, _("deleted node {node} (`zuka undo` puts it back)").format(node=name)
    return counts, _("deleted node {node} with {went} (`zuka undo` puts it back)").format(
        node=name, went=describe_counts(counts)
    )
