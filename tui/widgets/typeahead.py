"""Keys typed ahead into a form, applied in the order typed to the field with the cursor.

Over a slow jump host keys arrive in bursts: `n`, then `n1<Tab>ssh root@h` at once. Left
to Textual, a printable key is handled in the focused field's own queue while a Tab is a
binding run when the key has bubbled up to the app: the Tab then moved the cursor after
the text that followed it had already been typed into the name. Here each such key is
applied at once, when the app takes it, to the widget that has the cursor at that moment:
text, tab and shift+tab, backspace, delete, left and right; anything else takes Textual's
way.
"""

from __future__ import annotations

from typing import Any

from textual.screen import Screen
from textual.widgets import Input, TextArea

# Keys a form applies in order beside text: moving between fields and deleting, never
# saving or closing (a Save typed ahead would write what the user has not seen).
MOVES = frozenset({"tab", "shift+tab", "backspace", "delete", "left", "right"})


def applies(key: str, character: str | None) -> bool:
    """Whether this key is one typed ahead is applied for (text or MOVES)."""
    return key in MOVES or (character is not None and character.isprintable())


def apply_key(screen: Screen[Any], key: str, character: str | None) -> bool:
    """Apply the key now to the widget with the cursor on `screen`; False: it is not a key
    for that widget (left to Textual)."""
    if key == "tab":
        screen.focus_next()
        return True
    if key == "shift+tab":
        screen.focus_previous()
        return True
    focused = screen.focused
    text = character if character is not None and character.isprintable() else None
    # Input and TextArea take the same edits (their selections are ints or locations).
    editable = isinstance(focused, Input) or (
        isinstance(focused, TextArea) and not focused.read_only
    )
    if not editable:
        return False
    assert isinstance(focused, (Input, TextArea))
    if text is not None:
        first, last = focused.selection
        focused.replace(text, min(first, last), max(first, last))  # type: ignore[arg-type]
    elif key == "backspace":
        focused.action_delete_left()
    elif key == "delete":
        focused.action_delete_right()
    elif key == "left":
        focused.action_cursor_left()
    elif key == "right":
        focused.action_cursor_right()
    else:
        return False
    return True
