"""The dashboard's footer: Textual's, its keys' descriptions in the language in use.

A Binding's description and tooltip are class constants, written before the language is
known (marked with N_ where written); the footer shows `_()` of them each time it is
composed, so a runtime switch (the palette's Language command) shows them anew once the
footer is recomposed (`tui.dashboard.language`)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel

from leases.core.i18n import N_, _

# Textual's own words in the footer: the command palette key's description.
TEXTUAL_WORDS = (N_("palette"), N_("Open the command palette"))


def translated(made: ComposeResult) -> ComposeResult:
    """Footer widgets, each key's description and tooltip in the language in use."""
    for widget in made:
        if isinstance(widget, FooterKey):
            widget.description = _(widget.description)
            if isinstance(widget.tooltip, str):
                widget.tooltip = _(widget.tooltip)
        elif isinstance(widget, FooterLabel):
            pass  # no zuka binding has a group
        yield widget


class ZukaFooter(Footer):
    """Textual's Footer, its descriptions translated."""

    def compose(self) -> ComposeResult:
        yield from translated(super().compose())
