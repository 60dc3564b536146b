"""A labelled form field with an inline message, and the modal form the ledger forms share.

A field is named by the record key it sets (`unit_price`), the key an InputError names, so
a refusal lands under the field it is about. The words are the command line's own
(leases.app.flags.describe_error); the fields follow the record's options
(leases.core.recordfields), so a form has what the CLI has, labelled with the CLI's flag.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Literal, TypeVar

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.events import Key
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Collapsible, Input, Label, Select, Static, Switch, TextArea

from leases.app.flags import describe_error
from leases.core import recordfields, valuewords
from leases.core.errors import InputError, LedgerError, each_error
from leases.core.i18n import N_, _
from leases.core.textsafe import visible
from leases.ledger.store import Ledger
from tui.dashboard.ledgerthread import in_thread
from tui.linebreak import wrap
from tui.screens.ask import AskScreen
from tui.widgets.fieldwords import FIELD_WORDS, field_words
from tui.widgets.typeahead import applies, apply_key
from tui.widgets.valuewords import value_words

Kind = Literal["text", "multiline", "choice", "switch"]
Value = str | bool
R = TypeVar("R")


@dataclass(frozen=True)
class FieldSpec:
    """One field: the record key it sets and how it is typed in."""

    key: str
    label: str
    help: str = ""
    kind: Kind = "text"
    choices: tuple[str, ...] = ()
    # The enum the choices are values of (their words: leases.core.valuewords), if known.
    enum: type[Enum] | None = None
    # Other fields an InputError may name that belong here (--ssh sets ssh_host, ...).
    also: tuple[str, ...] = ()


def label_of(key: str, flag: str) -> str:
    """`unit price  --price`: the words, then the option the command line takes."""
    words = field_words(key)
    return words if not flag.startswith("-") else f"{words}  {flag}"


def option_specs(cls: type, keys: Iterable[str]) -> list[FieldSpec]:
    """Fields for these record keys of cls, from its options: the CLI's flag and help; an
    enum's values as choices; a switch for a by-hand flag without a value (--auto-renew,
    --local)."""
    options = {o.key: o for o in recordfields.options(cls)}
    specs = []
    for key in keys:
        o = options[key]
        enum = recordfields.option_enum(cls, key)
        if enum is not None:
            choices = tuple(str(m.value) for m in enum)
            specs.append(
                FieldSpec(key, label_of(key, o.flag), _(o.help), "choice", choices, enum=enum)
            )
        elif key in ("auto_renew", "local"):
            specs.append(FieldSpec(key, label_of(key, o.flag), _(o.help), "switch"))
        elif key == "notes":
            specs.append(FieldSpec(key, label_of(key, o.flag), _(o.help), "multiline"))
        else:
            specs.append(FieldSpec(key, label_of(key, o.flag), _(o.help)))
    return specs


class FormSelect(Select[str]):
    """A form's choice: Enter opens the list and Enter chooses; the Enter after that moves
    on to the next field, as tab does, instead of opening the list again."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "enter",
            "enter",
            N_("Choose"),
            show=False,
            id="form-choose",
            tooltip=N_("Open the list, choose; once chosen, move on to the next field"),
        )
    ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.closed = False  # the list was just closed: Enter moves on

    def watch_expanded(self, expanded: bool) -> None:
        self.closed = not expanded and self.has_focus_within

    def on_blur(self) -> None:
        self.closed = False

    def action_enter(self) -> None:
        if self.closed:
            self.closed = False
            self.screen.focus_next()
        else:
            self.action_show_overlay()


LABEL_CELLS = 30  # a field's label column (FormField .form-label), where its input begins


def clear_of(text: str, cut: int) -> str:
    """text with a space before a character two cells wide that would straddle cell `cut`:
    the keys' line is docked over the fields as they scroll, and Textual cuts each screen
    line where a widget under it begins (the input, after the label), blanking a Chinese
    character split there (the hint read "tab   一项")."""
    cells = 0
    for i, ch in enumerate(text):
        width = cell_len(ch)
        if cells < cut < cells + width:
            return text[:i] + " " + text[i:]
        cells += width
    return text


def said_under(error: InputError) -> str:
    """A refusal in the CLI's words, its field named in words where the CLI names it by
    its key (a positional NAME: "name：…" read "名称：…"); English as the CLI says it."""
    text = describe_error(error)
    known = FIELD_WORDS.get(error.field)
    if known and _(known) != known and text.startswith(error.field):
        return _(known) + text[len(error.field) :]
    return text


class FormField(Vertical):
    """A label, the input, and a message under it (empty until a check refuses the value)."""

    DEFAULT_CSS = """
    FormField { height: auto; margin: 0 0 1 0; }
    FormField > Horizontal { height: auto; }
    FormField .form-label { width: 30; padding: 0 2 0 0; color: $text-muted; }
    FormField .form-input { width: 1fr; }
    FormField Switch.form-input { width: auto; height: 1; border: none; padding: 0; }
    FormField .form-switch-state { width: auto; padding: 0 0 0 1; }
    FormField TextArea.form-input { height: 3; padding: 0; }
    FormField .form-message { display: none; color: $error; padding: 0 0 0 30; }
    FormField.-invalid .form-message { display: block; }
    FormField.-invalid .form-label { color: $error; text-style: bold; }
    """

    def __init__(self, spec: FieldSpec, value: Value = "") -> None:
        super().__init__(id=f"field-{spec.key}")
        self.spec = spec
        self._initial = value

    def compose(self) -> ComposeResult:
        spec = self.spec
        with Horizontal():
            yield Label(Text(spec.label), classes="form-label")
            yield self._input(spec, self._initial)
            if spec.kind == "switch":
                yield Static(_on_off(bool(self._initial)), classes="form-switch-state")
        yield Refusal(classes="form-message")

    def on_switch_changed(self, event: Switch.Changed) -> None:
        self.query_one(".form-switch-state", Static).update(_on_off(event.value))
        self.show_message("")

    def on_input_changed(self) -> None:
        self.show_message("")  # a refusal is about the value it was given, now changed

    def on_select_changed(self) -> None:
        self.show_message("")

    def on_text_area_changed(self) -> None:
        self.show_message("")

    @staticmethod
    def _input(spec: FieldSpec, value: Value) -> Widget:
        ident = f"input-{spec.key}"
        if spec.kind == "switch":
            switch = Switch(value=bool(value), id=ident, classes="form-input")
            switch.tooltip = spec.help or None
            return switch
        if spec.kind == "choice":
            select = FormSelect(
                [
                    (valuewords.word(c, spec.enum) if spec.enum else value_words(c), c)
                    for c in spec.choices
                ],
                prompt=_("(not given)"),
                compact=True,
                id=ident,
                classes="form-input",
            )
            if value in spec.choices:
                select.value = str(value)
            select.tooltip = spec.help or None
            return select
        if spec.kind == "multiline":
            area = TextArea(
                str(value),
                soft_wrap=True,
                tab_behavior="focus",
                compact=True,
                id=ident,
                classes="form-input",
            )
            area.tooltip = spec.help or None
            return area
        field = Input(
            str(value), placeholder=spec.help, compact=True, id=ident, classes="form-input"
        )
        field.tooltip = spec.help or None
        return field

    @property
    def input(self) -> Widget:
        return self.query_one(f"#input-{self.spec.key}")

    @property
    def value(self) -> Value:
        """What the field holds: text (empty when not given), or a switch's state."""
        widget = self.input
        if isinstance(widget, Switch):
            return widget.value
        if isinstance(widget, Select):
            return "" if widget.is_blank() else str(widget.value)
        if isinstance(widget, TextArea):
            return widget.text
        assert isinstance(widget, Input)
        return widget.value

    @value.setter
    def value(self, new: Value) -> None:
        widget = self.input
        if isinstance(widget, Switch):
            widget.value = bool(new)
        elif isinstance(widget, Select):
            if new in self.spec.choices:
                widget.value = str(new)
            else:
                widget.clear()
        elif isinstance(widget, TextArea):
            widget.load_text(str(new))
        else:
            assert isinstance(widget, Input)
            widget.value = str(new)

    @property
    def message(self) -> str:
        return self.query_one(".form-message", Refusal).said

    def show_message(self, text: str) -> None:
        """Show text (a refusal) under the field; empty text hides it."""
        # Text, never markup: the message holds the value as typed.
        self.query_one(".form-message", Refusal).say(text)
        self.set_class(bool(text), "-invalid")


class Refusal(Static):
    """A refusal, broken into lines as the command line breaks them (tui.linebreak.wrap:
    never before a closing mark: Rich folded a long Chinese run anywhere, and a line
    started with the ） of '（1.98）'), at the width it is given. Text, never markup."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(Text(""), id=id, classes=classes)
        self.said = ""

    def say(self, text: str) -> None:
        self.said = text
        self.update(Text(text))

    def _lines(self, width: int) -> list[str]:
        return wrap(self.said, width) if self.said and width > 0 else [self.said]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if not self.said:
            return super().get_content_height(container, viewport, width)
        return len(self._lines(width))

    def render(self) -> Text:
        return Text("\n".join(self._lines(self.content_size.width)), end="")


def _on_off(value: bool) -> Text:
    return Text(_("on") if value else _("off"))


class FormScreen(ModalScreen[R]):
    """The modal every ledger form is: fields, a message line, Save and Cancel.

    A subclass says its title and fields (`specs`, `more` under a fold), may fill them
    from the ledger (`load`, in a thread), and writes in `write` (in a thread, on a
    connection of its own): an InputError from it is shown under the field it names, or
    on the message line, and nothing was written. ctrl+s saves, escape cancels; each
    subclass binds them with its own ids (the help screen and key remaps name them)."""

    DEFAULT_CSS = """
    FormScreen { align: center middle; }
    FormScreen > #form {
        width: 110; max-width: 100%; height: auto; max-height: 100%;
        border: thick $accent; background: $surface; padding: 0 1;
    }
    FormScreen #form-title { text-style: bold; }
    FormScreen #form-info { color: $text-muted; margin: 0 0 1 0; }
    FormScreen #form-fields { height: auto; }
    FormScreen #form-message { color: $error; height: auto; dock: bottom; margin: 0 0 1 0; }
    FormScreen #form-buttons { height: 1; dock: bottom; }
    FormScreen #form-keys { width: 1fr; color: $text-muted; }
    FormScreen #form-buttons Button { margin: 0 0 0 2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = []

    def __init__(self, ledger: Ledger, title: str, save_label: str = N_("Save")) -> None:
        super().__init__()
        self.ledger = ledger
        self.form_title = title
        self.save_label = save_label
        self._initial: dict[str, Value] = {}
        self._saving = False
        self._opened = False  # a field has had the cursor: keys typed ahead apply at once
        self._ahead: list[tuple[str, str | None]] = []  # typed before that, in order

    # -- what a subclass says ------------------------------------------------------------

    def specs(self) -> list[FieldSpec]:
        raise NotImplementedError

    def more(self) -> list[FieldSpec]:
        """Fields folded away (rarely given), after the others."""
        return []

    def defaults(self) -> dict[str, Value]:
        """Values the fields start with before load (no ledger read)."""
        return {}

    def load(self, ledger: Ledger) -> tuple[dict[str, Value], str]:
        """The fields' values from the ledger, and an info line (in a thread)."""
        return {}, ""

    def write(self, ledger: Ledger, values: Mapping[str, Value]) -> tuple[R, str]:
        """Write from the fields' values (in a thread): the result to dismiss with, and
        what the command line would have printed. Raises InputError to refuse."""
        raise NotImplementedError

    # -- the form ------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        start = self.defaults()
        # The whole form scrolls (its buttons docked): a long form at 80x24 shows the field
        # with the cursor, however far down.
        with VerticalScroll(id="form", can_focus=False):
            yield Static(Text(self.form_title), id="form-title")
            yield Static(Text(""), id="form-info")
            with Vertical(id="form-fields"):
                for spec in self.specs():
                    yield FormField(spec, start.get(spec.key, ""))
                folded = self.more()
                if folded:
                    with Collapsible(title=_("more fields"), id="form-more"):
                        for spec in folded:
                            yield FormField(spec, start.get(spec.key, ""))
            with Horizontal(id="form-buttons"):
                keys = clear_of(_("ctrl+s save · esc cancel · tab next"), LABEL_CELLS)
                yield Static(Text(keys), id="form-keys")
                yield Button(_(self.save_label), id="form-save", variant="primary", compact=True)
                yield Button(_("Cancel"), id="form-cancel", compact=True)
            yield Refusal(id="form-message")

    def first_focus(self) -> str | None:
        """The key of the field focused when the form opens (None: the first)."""
        return None

    def on_mount(self) -> None:
        self._ready()

    def _ready(self) -> None:
        try:
            for f in self.fields():
                f.input  # noqa: B018 (composed yet?)
        except NoMatches:  # its fields not composed yet (a busy machine): once they are
            self.call_after_refresh(self._ready)
            return
        # A field has the cursor from the start, so keys typed at once are not lost; the
        # ledger read below fills only the fields not typed into meanwhile.
        first = self.first_focus()
        self.set_focus(self.field(first).input if first is not None else self.fields()[0].input)
        self._initial = self.values()
        self._opened = True
        ahead, self._ahead = self._ahead, []
        for key, character in ahead:  # in the order typed, each where the cursor is then
            apply_key(self, key, character)
        self.run_worker(self._load(), name="form-load", exclusive=True, exit_on_error=False)

    async def _load(self) -> None:
        try:
            loaded, info = await in_thread(self.ledger, self.load)
        except InputError as exc:
            self.show_error(exc)
            return
        except LedgerError as exc:
            self.say(str(exc))
            return
        typed = self.changed()
        for key, value in loaded.items():
            if key not in typed:
                self.field(key).value = value
        self._initial = {**self.values(), **{k: self._initial[k] for k in typed}}
        self.query_one("#form-info", Static).update(Text(visible(info, 400)))

    def fields(self) -> list[FormField]:
        return list(self.query(FormField))

    def field(self, key: str) -> FormField:
        return self.query_one(f"#field-{key}", FormField)

    def values(self) -> dict[str, Value]:
        return {f.spec.key: f.value for f in self.fields()}

    def changed(self) -> dict[str, Value]:
        """The fields whose value differs from what the form was filled with."""
        return {k: v for k, v in self.values().items() if self._initial.get(k) != v}

    def say(self, text: str) -> None:
        self.query_one("#form-message", Refusal).say(text)

    def clear_messages(self) -> None:
        for f in self.fields():
            f.show_message("")
        self.say("")

    def show_error(self, exc: InputError) -> None:
        """Each refusal in the CLI's words, under the field it names (else on the message
        line), and the first field refused, top to bottom, focused."""
        fields = self.fields()
        said: list[str] = []
        refused: list[FormField] = []
        for error in each_error(exc):
            text = said_under(error)
            target = next((f for f in fields if error.field in (f.spec.key, *f.spec.also)), None)
            if target is None:
                said.append(text)
            elif target not in refused:  # the first word on a field is the one to fix
                target.show_message(text)
                refused.append(target)
        self.say("\n".join(said))
        if not refused:
            return
        folded = self.query("#form-more")
        if folded and any(f in folded.first().query(FormField) for f in refused):
            folded.first(Collapsible).collapsed = False
        first = min(refused, key=fields.index)
        first.input.focus(scroll_visible=False)
        # Once laid out: a fold just opened has not moved the fields yet.
        self.call_after_refresh(first.scroll_visible, animate=False)

    async def action_save(self) -> None:
        if self._saving:  # a second ctrl+s while the first write runs
            return
        self._saving = True
        self.clear_messages()
        values = self.values()
        try:
            result, message = await in_thread(
                self.ledger, lambda ledger: self.write(ledger, values)
            )
        except InputError as exc:
            self.show_error(exc)
            return
        except LedgerError as exc:
            self.say(str(exc))
            return
        finally:
            self._saving = False
        self.app.notify(visible(message, 400), markup=False)
        self.dismiss(result)

    def action_cancel(self) -> None:
        """Close; asks first when a field was changed (Escape must not lose typing)."""
        if not self.changed():
            self.dismiss(self.cancelled())
            return

        def answered(answer: str | None) -> None:
            if answer is not None and answer.strip().lower() in ("y", "yes"):
                self.dismiss(self.cancelled())

        prompt = Text(_("Close the form and lose what was typed? Type y and Enter to close."))
        self.app.push_screen(AskScreen(prompt, placeholder="y"), answered)

    @property
    def busy(self) -> str:
        """What quitting would lose (tui.dashboard.interrupt asks first): typing."""
        return _("a form with typing not saved") if self._opened and self.changed() else ""

    def cancelled(self) -> R:
        """The result of a form left without writing."""
        raise NotImplementedError

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "form-save":
            await self.action_save()
        else:
            self.action_cancel()

    def type_ahead(self, key: str, character: str | None) -> bool:
        """A key typed ahead (text, tab, deleting; see tui.widgets.typeahead): applied
        now to the widget with the cursor, or kept, in order, until a field has it.
        False: not such a key, or not one for the widget with the cursor."""
        if not applies(key, character):
            return False
        if not self._opened:
            self._ahead.append((key, character))
            return True
        return apply_key(self, key, character)

    def on_key(self, event: Key) -> None:
        # A key sent to the form itself, not to a field: typed while the form was opening,
        # before a field had the cursor. A text field takes every printable key itself, so
        # one that reaches here with a text field focused was never that field's.
        if (
            (not self._opened or isinstance(self.focused, Input | TextArea))
            and (event.is_printable or not self._opened)
            and self.type_ahead(event.key, event.character)
        ):
            event.stop()
            event.prevent_default()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        # Enter moves on, as in a paper form; ctrl+s saves from anywhere.
        event.stop()
        self.focus_next()


def given(values: Mapping[str, Value], keys: Iterable[str]) -> dict[str, Any]:
    """The keys' values that were given: text not empty (a CLI option not typed)."""
    return {k: values[k] for k in keys if k in values and values[k] != ""}


def form_bindings(screen: str) -> list[BindingType]:
    """ctrl+s and escape for a form, with ids `<screen>-save` and `<screen>-cancel`."""
    return [
        Binding("ctrl+s", "save", N_("Save"), id=f"{screen}-save",
                tooltip=N_("Save: write it to the ledger")),
        Binding("escape", "cancel", N_("Cancel"), id=f"{screen}-cancel",
                tooltip=N_("Close, writing nothing")),
        # A field with text selected copies it first (Textual's binding, nearer the cursor).
        Binding("ctrl+c", "app.interrupt", N_("Quit"), id=f"{screen}-quit", show=False,
                tooltip=N_("Leave zuka (asks first when a field was changed)")),
    ]  # fmt: skip
