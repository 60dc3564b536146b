"""A yes/no modal for a decision that needs its own explicit answer (going on past GPU
processes still running on a node): y says yes; n or Escape says no."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class ConsentScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConsentScreen { align: center middle; }
    ConsentScreen > Vertical {
        width: 76;
        max-width: 100%;
        height: auto;
        border: thick $error;
        background: $surface;
        padding: 1 2;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="consent-yes", tooltip="Yes, go on anyway"),
        Binding("n,escape", "answer(False)", "No", id="consent-no", tooltip="No: stop here"),
    ]

    def __init__(self, question: Text) -> None:
        """question: already safe to show (built with tui.screens.fleetview.plain)."""
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question, id="consent-question")
            yield Static("\n[y] yes, go on   [n] no", markup=False)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
