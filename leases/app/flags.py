"""The command-line flag of each record field, from the fields' metadata, and an input
error's words naming it (`describe_error`): what the command line and the dashboard's
forms both show."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from leases.core import recordfields
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import Lease, Node, Provider, Resource
from leases.core.textsafe import visible


def flag_table(cls: type) -> dict[str, tuple[str, str]]:
    """Record key -> (command-line flag, argparse dest) of cls's options, from the fields'
    metadata (leases.core.models). Options written out by hand (positional names, switches,
    --ssh) are not in it."""
    return {o.key: (o.flag, o.dest) for o in recordfields.options(cls) if not o.by_hand}


class HelpTable(Mapping[str, str]):
    """Record key -> the help of its option, hand-written ones included, said in the
    language in use when it is read (the tables are built at import, before the language
    is known; the dashboard switches it at run time). Of several records, a key in two
    has the later one's help."""

    def __init__(self, *classes: type) -> None:
        self._options = {o.key: o for cls in classes for o in recordfields.options(cls)}

    def __getitem__(self, key: str) -> str:
        return self._options[key].help

    def __iter__(self) -> Iterator[str]:
        return iter(self._options)

    def __len__(self) -> int:
        return len(self._options)


def help_table(cls: type) -> HelpTable:
    """Record key -> the help of its option, hand-written ones included."""
    return HelpTable(cls)


# One table per record for options, parsing and errors.
NODE_FLAGS = flag_table(Node)
LEASE_FLAGS = flag_table(Lease)
RESOURCE_FLAGS = flag_table(Resource)
PROVIDER_FLAGS = flag_table(Provider)
NODE_HELP = help_table(Node)
LEASE_HELP = help_table(Lease)
RESOURCE_HELP = help_table(Resource)
PROVIDER_HELP = help_table(Provider)
_RECORDS = (Node, Lease, Resource, Provider)
_FLAG_OF = {o.key: o.flag for cls in _RECORDS for o in recordfields.options(cls)} | {
    "ssh_port": "--ssh",
    "until": "--until",
    # Options of the correction commands, written out by hand.
    "deleted_at": "--deleted",
    "verified_at": "--verified",
    "at": "--at",
    "ended_at": "--at",
    "whole_chain": "--whole-chain",
}
# For tui.cli.options.add_flags without helps of its own; a key in two records (kind)
# has the resource's.
HELP = HelpTable(Provider, Node, Lease, Resource)


def describe_error(exc: InputError) -> str:
    """The error with the command-line flag named beside the field."""
    flag = _FLAG_OF.get(exc.field)
    same = flag is not None and flag.strip("-").replace("-", "_") == exc.field
    # The option as typed; beside the record's key where the two differ (--price is
    # unit_price in --json and exports).
    # A positional argument (NAME, NODE) is named by its field alone: `name: ...`.
    label = (flag if same else f"{exc.field} ({flag})") if flag and flag[0] == "-" else exc.field
    # The value as given, controls shown (ESC as ␛), cut to one readable line.
    value = exc.value
    shown = f"'{visible(value, 200)}'" if isinstance(value, str) else visible(repr(value), 200)
    if value is None:
        return _("{field}: {reason}").format(field=label, reason=exc.reason)
    if exc.field == "undo" and isinstance(value, int):
        return _("{field}: {reason} (audit entry {id}; see `zuka log`)").format(
            field=label, reason=exc.reason, id=value
        )
    return _("{field}: {reason} (got {value})").format(field=label, reason=exc.reason, value=shown)
