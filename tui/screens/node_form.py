"""Add or edit a node, or paste a platform's login command: `zuka node add/edit` as a form."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.binding import BindingType
from textual.widgets import Static, TextArea

from leases.app.flags import NODE_FLAGS, NODE_HELP, describe_error
from leases.app.nodes import add_node, edit_node, new_node, new_provider, node_changes
from leases.core import recordfields
from leases.core.errors import InputError, Problems
from leases.core.i18n import N_, _, is_chinese
from leases.core.models import Node, ProviderKind
from leases.core.textsafe import visible
from leases.ledger import records
from leases.ledger.records import SSH_KEYS, node_record
from leases.ledger.store import Ledger
from leases.ssh.login import parse_ssh_command, ssh_config_aliases
from tui.widgets.form import FieldSpec, FormScreen, Value, form_bindings, given, option_specs
from tui.widgets.valuewords import value_words


def ssh_spec() -> FieldSpec:
    """The login command's field, in the language in use."""
    return FieldSpec(
        "ssh",
        _("login command") + "  --ssh",
        _("{help}: paste it whole (a password line is dropped, never stored)").format(
            help=_(NODE_HELP["ssh"])
        ),
        "multiline",
        also=SSH_KEYS,
    )


def _channels() -> str:
    """The channels the field offers, as its list shows them (the CLI's words in English)."""
    if not is_chinese():
        return recordfields.choices(ProviderKind)
    return " | ".join(value_words(k.value) for k in ProviderKind)


def channel_spec() -> FieldSpec:
    """The channel's field (for a new provider), in the language in use."""
    return FieldSpec(
        "channel",
        _("channel") + "  --channel",
        _("for a new --provider: {choices}").format(choices=_channels()),
        "choice",
        tuple(k.value for k in ProviderKind),
    )


def _aliases() -> frozenset[str]:
    """The ~/.ssh/config Host names, as `--ssh` reads them (leases.app.nodes.ssh_fields)."""
    try:
        return ssh_config_aliases(Path("~/.ssh/config").expanduser().read_text(errors="replace"))
    except OSError:
        return frozenset()


def _shown_values(node: Node) -> dict[str, Value]:
    """The node as the form shows it: the record's values as text, the login command."""
    rec = node_record(node)
    out: dict[str, Value] = {
        key: "" if rec[key] is None else str(rec[key]) for key in NODE_FLAGS if key in rec
    }
    out["tags"] = ",".join(node.tags)
    out["name"] = node.name
    out["ssh"] = "" if node.local else node.ssh.command(tunnels=True)
    out["local"] = node.local
    return out


class NodeFormScreen(FormScreen[str | None]):
    """Add a node (name given: edit it). Dismissed with the saved node's name, or None."""

    BINDINGS: ClassVar[list[BindingType]] = form_bindings("node-form")

    def __init__(self, ledger: Ledger, *, name: str | None = None, paste: bool = False) -> None:
        editing = name is not None
        super().__init__(
            ledger,
            _("Edit node {name}").format(name=visible(name, 80)) if editing else _("Add a node"),
            N_("Save") if editing else N_("Add node"),
        )
        self.editing = name
        self.paste = paste
        self.aliases: frozenset[str] = frozenset()
        self.trimmed = False  # a multi-line paste was cut down to its command

    def specs(self) -> list[FieldSpec]:
        options = option_specs(Node, ("name", "provider"))
        rest = option_specs(Node, ("gpu_model", "gpu_count", "vram_gib"))
        return [options[0], ssh_spec(), options[1], channel_spec(), *rest]

    def more(self) -> list[FieldSpec]:
        keys = ["interconnect", "nvlinks", "ib_gbps", "tags", "local", "notes"]
        keys += ["instance_id", "instance_endpoint"]
        keys += ["reading_source", "prom_url", "prom_match", "prom_token_file"]
        if self.editing is not None:
            keys.insert(4, "state")  # `node add` takes no --state
        return option_specs(Node, keys)

    def first_focus(self) -> str | None:
        return "ssh" if self.paste else None

    def load(self, ledger: Ledger) -> tuple[dict[str, Value], str]:
        self.aliases = _aliases()
        if self.editing is None:
            return {}, _(
                "Paste the login command the platform's console gives"
                " (`ssh -p PORT user@host`, `登录指令：ssh ...`) into the login command field."
            )
        node = ledger.node(self.editing)
        info = _("Problem: {problem}").format(problem=node.problem) if node.problem else ""
        values = _shown_values(node)
        if node.provider:  # its provider's channel, as `zuka provider list` says it
            known = {p.name: p for p in ledger.providers()}
            if node.provider in known:
                values["channel"] = known[node.provider].kind.value
        return values, info

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        """The pasted command read at once: what zuka will log in to, or why not."""
        if event.text_area.id != "input-ssh":
            return
        field = self.field("ssh")
        text = event.text_area.text
        if not text.strip():
            field.show_message("")
            self.trimmed = False
            return
        try:
            target = parse_ssh_command(text, self.aliases)
        except InputError as exc:
            field.show_message(describe_error(exc))
            return
        field.show_message("")
        if "\n" in text:
            # A console paste: keep only the command, so a password line after it is not
            # left on the screen (nor in a screenshot); it is never stored either way.
            self.trimmed = True
            event.text_area.load_text(target.command(tunnels=True))  # read again as a Changed
            return
        said = _("zuka will log in with: {command}").format(command=target.command())
        if target.tunnels:
            said += " " + _("(its forwards {forwards} are kept, never opened)").format(
                forwards=", ".join(target.tunnels)
            )
        if self.trimmed:
            said += " " + _("(the rest of the paste was dropped)")
        self.query_one("#form-info", Static).update(Text(visible(said, 300)))

    def write(self, ledger: Ledger, values: Mapping[str, Value]) -> tuple[str | None, str]:
        # Every field is checked before anything is written, each refusal kept (Problems):
        # the form shows them all at once, each under its field.
        p = Problems()
        channel = str(values["channel"]) or None
        if self.editing is None:
            flags = given(values, NODE_FLAGS)
            ssh = str(values["ssh"]) if values["ssh"] != "" else None
            local = bool(values["local"])
            # A refused login: the rest still checked, as if local (no second word on it).
            changes = p(node_changes(flags, None, True), node_changes, flags, ssh, local)
            node = p(None, new_node, str(values["name"]), changes)
            p(None, new_provider, ledger, flags.get("provider"), channel)
            p.raise_found()
            assert node is not None
            added, message = add_node(ledger, node, flags.get("provider"), channel)
            return added.name, message
        changed = self.changed()
        # The channel shown is the provider's own: sent only when changed.
        channel = str(values["channel"]) or None if "channel" in changed else None
        flags = {k: v for k, v in changed.items() if k in NODE_FLAGS}
        ssh = str(changed["ssh"]) if "ssh" in changed else None
        changes = p(node_changes(flags, None, False), node_changes, flags, ssh, False)
        for key in ("name", "local"):  # --rename; --local, which a form can also switch off
            if key in changed:
                changes[key] = changed[key]
        # The provider as it stands, when a channel is given: new_provider checks the two.
        provider = str(values["provider"]) or None if "provider" in changed or channel else None
        p(None, new_provider, ledger, provider, channel)
        # The check update_node makes, made first so that its refusals join the others.
        p(None, records.node_from, {**node_record(ledger.node(self.editing)), **changes})
        p.raise_found()
        edited, message = edit_node(ledger, self.editing, changes, provider, channel)
        return edited.name, message

    def cancelled(self) -> str | None:
        return None
