"""zuka's own commands, one table for the help screen and the command palette (ctrl+p).

The table is read from the bindings active on a screen (so a key the user remapped shows
as remapped, and a screen's new binding appears in help and palette without being listed
here); the palette adds a command per node (open it, add a lease to it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from rich.align import Align
from rich.text import Text
from textual.app import App
from textual.command import CommandList, CommandPalette, DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.dom import DOMNode
from textual.fuzzy import Matcher
from textual.markup import escape
from textual.screen import Screen
from textual.system_commands import SystemCommandsProvider
from textual.widgets.option_list import Option

from leases.core.clock import Clock, utc_now
from leases.core.fields import DEFAULT_TZ
from leases.core.i18n import EN, LANGS, N_, NAMES, ZH, _
from leases.core.models import NodeState
from leases.core.textsafe import visible
from leases.fleet.data import FleetData
from leases.ledger.store import Ledger
from tui.dashboard import lazy

# (what the user types to find it, its help, what it runs, whether it is a node's)
Command = tuple[str, str, Callable[[], object], bool]
# The language commands' help, each in the language in use.
LANGUAGE_HELP = {
    EN: N_("Show the dashboard in English (this session)"),
    ZH: N_("Show the dashboard in Simplified Chinese (this session)"),
}


@dataclass(frozen=True)
class BoundCommand:
    """One row of the table: a binding with an id, as the user sees and reaches it."""

    id: str
    keys: tuple[str, ...]  # as displayed, after the user's remaps
    description: str
    tooltip: str
    action: str
    node: DOMNode  # where the action runs (the screen, the app, a widget)
    everywhere: bool  # bound on the app, so on every screen
    enabled: bool

    @property
    def title(self) -> str:
        return self.description or self.id


def bound_commands(screen: Screen[Any]) -> list[BoundCommand]:
    """Every binding with an id active on `screen`, in the order declared; the screen's own
    first, then the app's. Textual's system bindings (ctrl+c...) have no place here."""
    by_id: dict[str, BoundCommand] = {}
    app = screen.app
    for _key, active in screen.active_bindings.items():
        b = active.binding
        if not b.id or b.system:
            continue
        shown = app.get_key_display(b)
        found = by_id.get(b.id)
        if found is not None:
            if shown not in found.keys:
                by_id[b.id] = _with_key(found, shown)
            continue
        by_id[b.id] = BoundCommand(
            id=b.id,
            keys=(shown,),
            # Class constants marked with N_: said in the language in use.
            description=_(b.description),
            tooltip=_(active.tooltip or b.tooltip),
            action=b.action,
            node=active.node,
            everywhere=active.node is app,
            enabled=active.enabled,
        )
    rows = list(by_id.values())
    return [r for r in rows if not r.everywhere] + [r for r in rows if r.everywhere]


def _with_key(found: BoundCommand, key: str) -> BoundCommand:
    return BoundCommand(
        found.id, (*found.keys, key), found.description, found.tooltip, found.action,
        found.node, found.everywhere, found.enabled,
    )  # fmt: skip


def screen_under(top: Screen[Any]) -> Screen[Any]:
    """The screen a help screen or palette was opened over (the one the user was on)."""
    stack = [s for s in top.app.screen_stack if s is not top]
    return stack[-1] if stack else top


class _Ours(DiscoveryHit):
    """A zuka command, listed before Textual's own (Keys, Maximize, Screenshot...) when the
    palette opens: every discovery hit scores 0, so the order was whichever provider
    answered first, and ours reads the ledger first."""

    @property
    def score(self) -> float:
        return 1.0


class ZukaCommands(Provider):
    """The palette's zuka commands: the screen's bindings, then one per node."""

    async def startup(self) -> None:
        self._commands = [c for c in bound_commands(self.screen) if c.enabled]
        self._nodes = self._node_names()
        # Built once per opening, not at every keystroke (thousands with a large fleet).
        self._all = self._hits()

    def _node_names(self) -> list[str]:
        """The live nodes' names: those of the app's last fleet read (no query on the UI
        loop); the ledger is read here only when that read has none (before the first
        read, or when it failed: then it is cheap, or the fleet is broken anyway)."""
        data = getattr(self.app, "data", None)
        if isinstance(data, FleetData) and data.facts.nodes:
            return [n.name for n in data.facts.nodes]
        ledger = getattr(self.app, "ledger", None)
        live = (NodeState.ACTIVE, NodeState.OFFBOARDING)
        return [n.name for n in ledger.nodes(live)] if isinstance(ledger, Ledger) else []

    def _hits(self) -> list[Command]:
        """(text, help, run, of a node) for every command; text is
        what the user types to find it."""
        out: list[Command] = []
        for c in self._commands:
            keys = "/".join(c.keys)
            run = partial(self.app.run_action, c.action, c.node)
            out.append((f"{c.title} ({keys})", c.tooltip, run, False))
        ledger = getattr(self.app, "ledger", None)
        tz = getattr(getattr(self.app, "config", None), "billing", None)
        for name in self._nodes:
            shown = visible(name, 60)
            out.append((_("Go to node {name}").format(name=shown), _("Open the node's screen"),
                        partial(self._node, name), True))  # fmt: skip
            if isinstance(ledger, Ledger):
                zone = tz.tz if tz is not None else DEFAULT_TZ
                out.append((_("Add lease to {name}").format(name=shown),
                            _("Record a new lease on this node"),
                            partial(self._lease, ledger, name, zone), True))  # fmt: skip
        return out

    def _node(self, name: str) -> None:
        # The fleet's cursor goes to the node first: every node key after it (`o`
        # offboards) acts on the node the user went to, not on the one the cursor was on.
        fleet = getattr(self.app, "fleet", None)
        if fleet is not None:
            fleet.go_to(name)
        # The screen's module is imported when chosen (as the fleet screen's keys do).
        self.app.push_screen(lazy.node_screen(name))

    def _lease(self, ledger: Ledger, name: str, tz: str) -> None:
        clock: Clock = getattr(self.app, "clock", utc_now)
        self.app.push_screen(lazy.lease_form(ledger, name, mode="add", clock=clock, tz=tz))

    async def discover(self) -> Hits:
        for text, help_text, run, node in self._all:
            if not node:
                yield _Ours(Content(text), run, text=text, help=escape(help_text))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, run, _node in self._all:
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, highlight(matcher, text), run, text=text, help=escape(help_text))


# What else finds each language's command, besides its text (in both languages, whatever
# the language in use: they are how a reader of either asks for it).
FOUND_BY = {
    EN: ("语言", "英文", "英语", "English", "en"),
    ZH: ("语言", "中文", "汉语", "简体中文", "Chinese", "zh_CN"),
}


class _Language(DiscoveryHit):
    """A language command: listed after zuka's own commands, before Textual's."""

    @property
    def score(self) -> float:
        return 0.5


class LanguageCommands(Provider):
    """One command a language, named by the language's own name ("Language: 简体中文",
    "Language: English"): a user who cannot read the language in use still finds theirs,
    by either language's word for "language" or for the language (语言, 中文, 英文, English,
    Chinese). Choosing one speaks it at once, every screen redrawn, for the rest of the
    session."""

    def _commands(self) -> list[tuple[str, str, Callable[[], object], str]]:
        return [(f"Language: {NAMES[lang]}", _(LANGUAGE_HELP[lang]), partial(self._switch, lang),
                 lang) for lang in LANGS]  # fmt: skip

    def _switch(self, lang: str) -> None:
        from tui.dashboard.language import switch_language

        switch_language(self.app, lang)

    async def discover(self) -> Hits:
        for text, help_text, run, _lang in self._commands():
            yield _Language(Content(text), run, text=text, help=escape(help_text))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, run, lang in self._commands():
            score = matcher.match(text)
            shown = highlight(matcher, text) if score > 0 else Content(text)
            score = max(score, *(matcher.match(word) for word in FOUND_BY[lang]))
            if score > 0:
                yield Hit(score, shown, run, text=text, help=escape(help_text))


# Textual's own commands in the palette (App.get_system_commands), said in the language
# in use: their titles and help, by the English Textual writes.
SYSTEM_WORDS = {
    "Theme": N_("Theme"),
    "Change the current theme": N_("Change the current theme"),
    "Quit": N_("Quit"),
    "Quit the application as soon as possible": N_("Quit the application as soon as possible"),
    "Keys": N_("Keys"),
    "Hide the keys and widget help panel": N_("Hide the keys and widget help panel"),
    "Show help for the focused widget and a summary of available keys": N_(
        "Show help for the focused widget and a summary of available keys"
    ),
    "Minimize": N_("Minimize"),
    "Minimize the widget and restore to normal size": N_(
        "Minimize the widget and restore to normal size"
    ),
    "Maximize": N_("Maximize"),
    "Maximize the focused widget": N_("Maximize the focused widget"),
    "Screenshot": N_("Screenshot"),
    "Save an SVG 'screenshot' of the current screen": N_(
        "Save an SVG 'screenshot' of the current screen"
    ),
}
PALETTE_PLACEHOLDER = N_("Search for commands…")


def system_words(text: str) -> str:
    known = SYSTEM_WORDS.get(text)
    return _(known) if known else text


class ZukaSystemCommands(SystemCommandsProvider):
    """Textual's system commands (Theme, Quit, Keys, Screenshot...), in the language in use."""

    def _translated(self) -> list[tuple[str, str, Callable[[], object], bool]]:
        found = self.app.get_system_commands(self.screen)
        return [(system_words(name), system_words(help_text), run, discover)
                for name, help_text, run, discover in found]  # fmt: skip

    async def discover(self) -> Hits:
        for name, help_text, run, discover in sorted(self._translated(), key=lambda c: c[0]):
            if discover:
                yield DiscoveryHit(name, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, run, _discover in self._translated():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, highlight(matcher, name), run, help=help_text)


NO_MATCHES = N_("No matches found")


class ZukaPalette(CommandPalette):
    """Textual's command palette, its own words (the placeholder, "No matches found") in
    the language in use. Textual writes "No matches found" inside its countdown: the
    countdown is Textual's (textual 8.2), said here with the words translated."""

    def _start_no_matches_countdown(self, search_value: str) -> None:
        self._stop_no_matches_countdown()

        def _show_no_matches() -> None:
            if search_value:
                self.query_one(CommandList).add_option(
                    Option(Align.center(Text(_(NO_MATCHES), style="not bold")), disabled=True,
                           id=self._NO_MATCHES)
                )  # fmt: skip
                self._list_visible = True
            else:
                self._list_visible = False

        self._no_matches_timer = self.set_timer(self._NO_MATCHES_COUNTDOWN, _show_no_matches)


def open_palette(app: App[Any]) -> None:
    """Textual's command palette, its words in the language in use."""
    if app.use_command_palette and not CommandPalette.is_open(app):
        app.push_screen(ZukaPalette(id="--command-palette", placeholder=_(PALETTE_PLACEHOLDER)))


def highlight(matcher: Matcher, text: str) -> Content:
    """Matcher.highlight for plain text: Textual's parses its candidate as markup, so a
    node named `[@click=app.quit]x` would be a live action there and `x[/]` an error."""
    content = Content(text)
    score, offsets = matcher.fuzzy_search.match(matcher.query, text)
    if not score:
        return content
    for offset in offsets:
        if not text[offset].isspace():
            content = content.stylize(matcher.match_style, offset, offset + 1)
    return content
