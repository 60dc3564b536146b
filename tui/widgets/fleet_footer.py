"""A footer that shows the keys that fit, the most needed first, and never a cut one
nor one that does nothing now (a disabled binding).

Textual's Footer lays out every shown binding and lets the terminal's edge cut the rest
('? Hel' at 80 columns). This one keeps, by the order given, the keys whose whole label
fits the width, and shows them in their usual order; the `?` help lists every key.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.events import Resize
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from tui.widgets.footer import ZukaFooter, translated

# A compact footer key: its key, a space, its description, a margin after it.
KEY_GAP = 2
# The command palette key, docked right: its border and margin.
PALETTE_EXTRA = 2


def label_width(key_display: str, description: str) -> int:
    """The cells one compact footer key takes, its margin included."""
    return cell_len(key_display) + cell_len(description) + KEY_GAP


def fitting(items: Sequence[tuple[str, int]], order: Sequence[str], width: int) -> set[str]:
    """The actions to show: (action, cells) items taken in `order` (an action not in it
    comes after those that are, in its own order) while they fit `width`."""
    rank = {a: i for i, a in enumerate(order)}
    ranked = sorted(range(len(items)), key=lambda i: (rank.get(items[i][0], len(rank)), i))
    keep: set[str] = set()
    used = 0
    for i in ranked:
        action, cells = items[i]
        if used + cells <= width:
            keep.add(action)
            used += cells
    return keep


class PriorityFooter(ZukaFooter):
    """A compact footer that drops the least needed keys rather than cut the last one."""

    def __init__(self, order: Iterable[str], **kwargs: object) -> None:
        super().__init__(compact=True, **kwargs)  # type: ignore[arg-type]
        self.order = tuple(order)  # actions, the most needed first
        self._width = 0

    def compose(self) -> ComposeResult:
        made = list(translated(Footer.compose(self)))
        width = self.size.width or self.app.size.width
        # A key that does nothing now (disabled) is left out: help lists it.
        made = [w for w in made if not (isinstance(w, FooterKey) and w.has_class("-disabled"))]
        keys = [w for w in made if isinstance(w, FooterKey)]
        palette = [k for k in keys if k.has_class("-command-palette")]
        plain = [k for k in keys if not k.has_class("-command-palette")]
        items = [(k.action, label_width(k.key_display, k.description)) for k in plain]
        # The palette key goes last (ctrl+p is in help too).
        order = (*self.order, *(k.action for k in palette))
        for k in palette:
            items.append((k.action, label_width(k.key_display, k.description) + PALETTE_EXTRA))
        keep = fitting(items, order, width)
        shown: list[Widget] = [w for w in made if not isinstance(w, FooterKey) or w.action in keep]
        yield from shown

    def on_resize(self, event: Resize) -> None:
        if event.size.width != self._width:
            self._width = event.size.width
            self.call_after_refresh(self.recompose)
