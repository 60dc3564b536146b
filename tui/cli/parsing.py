"""The parser class of every `zuka` command: no prefixes of flags taken for the flag, a
mistyped flag or command named with what was probably meant, and a short usage (the
command's required words and `[options]`, not every flag it has) before the error."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Collection, Sequence
from typing import Any, NoReturn

from leases.core import valuewords
from leases.core.i18n import N_, _, is_chinese
from leases.core.textsafe import visible
from tui.cli.argwords import commands_of
from tui.cli.helpformat import CellFormatter

_NUMBER_RE = re.compile(r"^-\d+$|^-\d*\.\d+$")
# argparse's words (tui/cli/argwords.py) that _with_guess reads back: it says them in the
# language in use, so they are read back in it (`_said`).
_ARGUMENT = "argument %(argument_name)s: %(message)s"
_INVALID_CHOICE = "invalid choice: %(value)r (choose from %(choices)s)"
_INVALID_TYPE = "invalid %(type)s value: %(value)r"
# argparse names a number's type as Python does (`int`): said in words instead.
_NUMBERS = {
    "int": N_("argument {argument}: invalid int value: {value}"),
    "float": N_("argument {argument}: invalid float value: {value}"),
}
_PLACEHOLDER_RE = re.compile(r"%\((\w+)\)[rs]")
_COMMANDS = ("command", "action", "COMMAND", "ACTION")
_QUOTED_RE = re.compile(r"'((?:[^'\\]|\\.)*)'")


def closest(word: str, candidates: Sequence[str]) -> str | None:
    """The candidate a typo of `word` most likely meant, if one is close enough."""
    found = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return found[0] if found else None


class Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # --pric is not --price
        kwargs.setdefault("formatter_class", CellFormatter)  # Chinese help wrapped by cells
        super().__init__(*args, **kwargs)

    def short_usage(self) -> str:
        """`usage: zuka lease add [options] --billing BILLING --price PRICE node`: the words
        the command needs; `--help` lists the rest."""
        needed = [a for a in self._actions if a.required or not a.option_strings]
        formatter = self._get_formatter()
        formatter.add_usage(None, needed, [], prefix="")
        words = " ".join(formatter.format_help().split())
        rest = words[len(self.prog) :].strip()
        usage = _("usage: {command} [options]").format(command=self.prog)
        return f"{usage}{' ' + rest if rest else ''}\n"

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(self.short_usage())
        # argparse quotes some values with repr() but not all (unrecognized arguments).
        said = _("zuka: error: {message}").format(
            message=visible(_with_guess(message, commands_of(self)))
        )
        self.exit(2, said + "\n")

    def unknown_option(self, token: str) -> None:
        name = token.split("=", 1)[0]
        flags = [s for s in self._option_string_actions if s.startswith("--")]
        guess = closest(name, flags) if name.startswith("--") else None
        if guess:
            said = _("unknown option {option}; did you mean {guess}?")
        else:
            said = _("unknown option {option} (`{command} --help` lists them)")
        self.error(said.format(option=name, guess=guess, command=self.prog))

    def _unknown(self, args: Sequence[str]) -> str | None:
        """The first word of args that looks like an option this parser has not got (none
        for a parser that passes the rest of its words on, nargs=REMAINDER: `ls -la`)."""
        if any(a.nargs == argparse.REMAINDER for a in self._actions):
            return None
        for token in args:
            if token == "--":
                return None
            if not token.startswith("-") or token == "-" or " " in token:
                continue
            if _NUMBER_RE.match(token):
                continue
            name = token.split("=", 1)[0] if token.startswith("--") else token[:2]
            if name not in self._option_string_actions:
                return token
        return None

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        words = list(sys.argv[1:] if args is None else args)
        if self._subparsers is None:
            # A command's own parser: a mistyped flag is said before a missing one.
            bad = self._unknown(words)
            if bad is not None:
                self.unknown_option(bad)
        parsed, extras = super().parse_known_args(words, namespace)
        bad = self._unknown(extras)
        if bad is not None:
            self.unknown_option(bad)
        return parsed, extras


def _said(msgid: str, message: str) -> dict[str, str] | None:
    """The values of argparse's message msgid in message, as the language in use says
    it (each %(name)s or %(name)r a group); None when message is not that one."""
    parts = _PLACEHOLDER_RE.split(_(msgid))
    pattern = "".join(
        re.escape(part) if i % 2 == 0 else f"(?P<{part}>.*?)" for i, part in enumerate(parts)
    )
    m = re.match(f"^{pattern}$", message, re.S)
    return m.groupdict() if m else None


def _with_guess(message: str, commands: Collection[str] = ()) -> str:
    """argparse's "invalid choice" with the choice probably meant (`lease ad` -> add), in
    either language; commands: what the parser's subcommand slots are named (argwords)."""
    argument = _said(_ARGUMENT, message)
    if argument is None:
        return message
    number = _said(_INVALID_TYPE, argument["message"])
    if number is not None and number["type"] in _NUMBERS:
        said = _(_NUMBERS[number["type"]])
        return said.format(argument=argument["argument_name"], value=number["value"])
    choice = _said(_INVALID_CHOICE, argument["message"])
    if choice is None or not choice["value"].startswith("'"):
        return message
    got = choice["value"][1:-1]
    choices = _QUOTED_RE.findall(choice["choices"])
    guess = closest(got, choices)
    arg = argument["argument_name"]
    listed = ", ".join(choices)
    enum = valuewords.enum_of(choices) if is_chinese() else None
    if enum is not None:
        listed = valuewords.listed(enum, choices)
    if arg in _COMMANDS or arg in commands:
        if guess:
            return _("unknown command '{got}'; did you mean '{guess}'?").format(
                got=got, guess=guess
            )
        return _("unknown command '{got}' (choose from {choices})").format(got=got, choices=listed)
    if guess:
        return _("{argument}: invalid choice '{got}'; did you mean '{guess}'?").format(
            argument=arg, got=got, guess=guess
        )
    return _("{argument}: invalid choice '{got}' (choose from {choices})").format(
        argument=arg, got=got, choices=listed
    )


def tty_flag_first(argv: list[str]) -> list[str]:
    """`zuka ssh NODE -t -- CMD` as ssh takes it: argparse cannot match an option between
    NODE and the command's words, so -t/--tty there is moved before NODE."""
    if "ssh" not in argv or "--" not in argv:
        return argv
    start, end = argv.index("ssh") + 1, argv.index("--")
    flags = [a for a in argv[start:end] if a in ("-t", "--tty")]
    rest = [a for a in argv[start:end] if a not in ("-t", "--tty")]
    return [*argv[:start], *flags, *rest, *argv[end:]]
