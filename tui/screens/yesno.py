"""The one yes/no modal: y answers yes (True); n or Escape answers no (False). Each use is
a subclass that gives its words and its bindings, whose ids (`trust-yes`, `consent-no`...)
are what a user remaps in [keys]: trusting a node's SSH host key after seeing its
fingerprint, and going on past GPU processes still running on a node."""

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


class YesNoScreen(ModalScreen[bool]):
    """Shows its lines in a box; a subclass binds y to answer(True), n/escape to
    answer(False). danger: a red box, for a decision that can cost something."""

    DEFAULT_CSS = """
    YesNoScreen {
        align: center middle;
    }
    YesNoScreen > Vertical {
        width: 80;
        height: auto;
        border: thick $warning;
        background: $surface;
        padding: 1 2;
    }
    YesNoScreen > Vertical.-danger {
        width: 76;
        max-width: 100%;
        border: thick $error;
    }
    """

    def __init__(self, *lines: Static, danger: bool = False) -> None:
        super().__init__()
        self.lines = lines
        self.danger = danger

    def compose(self) -> ComposeResult:
        with Vertical(classes="-danger" if self.danger else ""):
            yield from self.lines

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class TrustScreen(YesNoScreen):
    """Accepting a node's SSH host key from the dashboard: the user sees the fingerprint
    first. y accepts the key shown, n or escape leaves it untrusted."""

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
        port = offered.port or 22
        algorithm = offered.key.get_algorithm()
        super().__init__(
            # The node's name and host come from the ledger: plain() shows them, never obeys.
            Static(
                plain(
                    f"{node} ({offered.host}:{port}) presents a host key zuka has not seen before:",
                    wrap=True,
                )
            ),
            Static(
                Text.assemble("\n  ", plain(f"{algorithm}  {offered.fingerprint}"), "\n"),
                id="fingerprint",
            ),
            Static(
                "Compare it with the fingerprint your provider shows. Trust it? [y] yes  [n] no",
                markup=False,
            ),
        )
        self.node = node
        self.offered = offered


class ConsentScreen(YesNoScreen):
    """A decision that needs its own explicit answer (going on past GPU processes still
    running on a node)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="consent-yes", tooltip="Yes, go on anyway"),
        Binding("n,escape", "answer(False)", "No", id="consent-no", tooltip="No: stop here"),
    ]

    def __init__(self, question: Text) -> None:
        """question: already safe to show (built with tui.screens.fleetview.plain)."""
        super().__init__(
            Static(question, id="consent-question"),
            Static("\n[y] yes, go on   [n] no", markup=False),
            danger=True,
        )
        self.question = question
