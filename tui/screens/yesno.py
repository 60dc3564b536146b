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

from leases.core.i18n import N_, _
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
        Binding(
            "y", "answer(True)", N_("Trust"), id="trust-yes", tooltip=N_("Accept this host key")
        ),
        Binding(
            "n,escape",
            "answer(False)",
            N_("Leave untrusted"),
            id="trust-no",
            tooltip=N_("Do not poll this node until its key is checked"),
        ),
    ]

    def __init__(self, node: str, offered: OfferedHostKey) -> None:
        port = offered.port or 22
        algorithm = offered.key.get_algorithm()
        super().__init__(
            # The node's name and host come from the ledger: plain() shows them, never obeys.
            Static(
                plain(
                    _(
                        "{node} ({host}:{port}) presents a host key zuka has not seen before:"
                    ).format(node=node, host=offered.host, port=port),
                    wrap=True,
                )
            ),
            Static(
                Text.assemble("\n  ", plain(f"{algorithm}  {offered.fingerprint}"), "\n"),
                id="fingerprint",
            ),
            Static(
                _("Compare it with the fingerprint your provider shows. Trust it? [y] yes  [n] no"),
                markup=False,
            ),
        )
        self.node = node
        self.offered = offered


class ConsentScreen(YesNoScreen):
    """A decision that needs its own explicit answer (going on past GPU processes still
    running on a node)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", N_("Yes"), id="consent-yes", tooltip=N_("Yes, go on anyway")),
        Binding(
            "n,escape", "answer(False)", N_("No"), id="consent-no", tooltip=N_("No: stop here")
        ),
    ]

    def __init__(self, question: Text) -> None:
        """question: already safe to show (built with tui.screens.fleetview.plain)."""
        super().__init__(
            Static(question, id="consent-question"),
            Static("\n" + _("[y] yes, go on   [n] no"), markup=False),
            danger=True,
        )
        self.question = question
