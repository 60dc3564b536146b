"""argparse's own words (usage, the headings of a help, its errors), marked here for
zuka's catalogue: tui/cli/language.py sends argparse's gettext calls to it. Written out as
this Python's argparse has them; a newer one's new words stay English until added."""

from __future__ import annotations

import argparse

from leases.core.i18n import N_, ngettext

WORDS = (
    N_("%(prog)s: error: %(message)s\n"),
    N_("%r is not callable"),
    N_("'required' is an invalid argument for positionals"),
    N_(".__call__() not defined"),
    N_("ambiguous option: %(option)s could match %(matches)s"),
    N_('argument "-" with mode %r'),
    N_("argument %(argument_name)s: %(message)s"),
    N_("can't open '%(filename)s': %(error)s"),
    N_("cannot have multiple subparser arguments"),
    N_("cannot merge actions - two groups are named %r"),
    N_("conflicting subparser alias: %s"),
    N_("conflicting subparser: %s"),
    N_("dest= is required for options like %r"),
    N_("expected at least one argument"),
    N_("expected at most one argument"),
    N_("expected one argument"),
    N_("ignored explicit argument %r"),
    N_("invalid %(type)s value: %(value)r"),
    N_("invalid choice: %(value)r (choose from %(choices)s)"),
    N_("invalid conflict_resolution value: %r"),
    N_("invalid option string %(option)r: must start with a character %(prefix_chars)r"),
    N_("mutually exclusive arguments must be optional"),
    N_("not allowed with argument %s"),
    N_("one of the arguments %s is required"),
    N_("options"),
    N_("positional arguments"),
    N_("show this help message and exit"),
    N_("the following arguments are required: %s"),
    N_("unexpected option string: %s"),
    N_("unknown parser %(parser_name)r (choices: %(choices)s)"),
    N_("unrecognized arguments: %s"),
    N_("usage: "),
)


def _plurals(n: int) -> tuple[str, ...]:
    return (
        ngettext("conflicting option string: %s", "conflicting option strings: %s", n),
        ngettext("expected %s argument", "expected %s arguments", n),
    )


def name_positionals(parser: argparse.ArgumentParser) -> None:
    """Every positional of parser and its subcommands named as a Chinese usage and error
    shows it: argparse names one without a metavar by its dest in errors ("缺少必需的参数：
    node", an English word), though usage shows a subcommand's choices. Under zh_CN, a
    positional is named by its dest in capitals as the options' metavariables are (NODE,
    ENTITY: its error lists the choices), and a subcommand's slot by its choices
    ({add,list}), which its usage showed already. English keeps argparse's names (called for Chinese
    only)."""
    seen: set[int] = set()

    def walk(p: argparse.ArgumentParser) -> None:
        if id(p) in seen:
            return
        seen.add(id(p))
        for action in p._actions:
            if action.option_strings or action.metavar is not None:
                pass
            elif isinstance(action, argparse._SubParsersAction):
                action.metavar = "{" + ",".join(action.choices) + "}"
            elif action.dest not in (None, argparse.SUPPRESS):
                action.metavar = action.dest.upper()
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)

    walk(parser)


def commands_of(parser: argparse.ArgumentParser) -> set[str]:
    """The names argparse gives parser's subcommand slots in its errors."""
    return {
        str(a.metavar or a.dest)
        for a in parser._actions
        if isinstance(a, argparse._SubParsersAction)
    }
