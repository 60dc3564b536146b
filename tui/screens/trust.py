"""Accepting a node's SSH host key from the dashboard: the user sees the fingerprint first."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from leases.ssh.errors import OfferedHostKey
from tui.screens.fleetview import plain


class TrustScreen(ModalScreen[bool]):
    """y accepts the key shown, n or escape leaves it untrusted."""

    DEFAULT_CSS = """
    TrustScreen {
        align: center middle;
    }
    TrustScreen > Vertical {
        width: 80;
        height: auto;
        border: thick $warning;
        background: $surface;
        padding: 1 2;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Trust", id="trust-yes", tooltip="Accept this host key"),
        Binding(
            "n,escape",
            "answer(False)",
            "Leave untrusted",
            id="trust-no",
            tooltip="Do not poll this node until its key is checked",
        ),
    ]

    def __init__(self, node: str, offered: OfferedHostKey) -> None:
        super().__init__()
        self.node = node
        self.offered = offered

    def compose(self) -> ComposeResult:
        port = self.offered.port or 22
        algorithm = self.offered.key.get_algorithm()
        with Vertical():
            # The node's name and host come from the ledger: plain() shows them, never obeys.
            yield Static(plain(f"{self.node} ({self.offered.host}:{port}) presents a host key "
                               "zuka has not seen before:", wrap=True))  # fmt: skip
            yield Static(
                Text.assemble("\n  ", plain(f"{algorithm}  {self.offered.fingerprint}"), "\n"),
                id="fingerprint",
            )
            yield Static(
                "Compare it with the fingerprint your provider shows. Trust it? [y] yes  [n] no",
                markup=False,
            )

    def action_answer(self, trust: bool) -> None:
        self.dismiss(trust)
