"""A small modal that asks for one line of text (a node's name to confirm, a reason):
Enter gives what was typed, Escape gives None. The caller judges the answer."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from leases.core.i18n import N_, _


class AskScreen(ModalScreen[str | None]):
    DEFAULT_CSS = """
    AskScreen { align: center middle; }
    AskScreen > Vertical {
        width: 76;
        max-width: 100%;
        height: auto;
        border: thick $warning;
        background: $surface;
        padding: 1 2;
    }
    AskScreen Input { margin-top: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "escape", "cancel", N_("Cancel"), id="ask-cancel", tooltip=N_("Close without answering")
        ),
    ]

    def __init__(self, prompt: Text, *, placeholder: str = "", password: bool = False) -> None:
        """prompt: already safe to show (built with tui.screens.fleetview.plain)."""
        super().__init__()
        self.prompt = prompt
        self.placeholder = placeholder
        self.password = password

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.prompt, id="ask-prompt")
            yield Input(placeholder=self.placeholder, password=self.password, id="ask-input")
            yield Static(_("Enter: answer · Escape: cancel"), markup=False, classes="ask-keys")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
