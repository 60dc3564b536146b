"""One source of truth for record fields: the dataclass fields' metadata (leases.core.models)
gives the record keys, the export columns and the command-line options with their help.
What cannot follow (the schema: migrations are frozen) is checked against it here."""

from __future__ import annotations

import argparse
import dataclasses
import sqlite3
import typing
from enum import Enum, StrEnum
from pathlib import Path

import pytest

from leases.app import flags
from leases.core import recordfields
from leases.core.models import BillingType, Lease, Node, Provider, Resource
from leases.core.recordfields import cli
from leases.ledger import records, transfer
from leases.ledger.store import Ledger
from tests.support.cli import Cli
from tui.cli.options import add_flags, pick

RECORDS: dict[str, type] = {
    "providers": Provider,
    "nodes": Node,
    "leases": Lease,
    "resources": Resource,
}
# A record names what it refers to; its row holds the id.
REFERENCES = {
    "nodes": {"provider": "provider_id"},
    "leases": {"node": "node_id"},
    "resources": {"node": "lease_id", "lease_start": "lease_id"},
}
INTERNAL_COLUMNS = {"id"}
# Record keys no option of their own sets (the rest must have one).
NOT_BY_OPTION = {
    Provider: set(),
    Node: set(records.SSH_KEYS),  # --ssh parses into them
    Lease: {"ended_at"},  # `zuka lease end`
    Resource: {"node", "deleted_at", "verified_at"},  # NODE is the lease's; offboarding
}
# (command, record, options it leaves out)
ADD_COMMANDS = [
    pytest.param(command, cls, left_out, id=" ".join(command))
    for command, cls, left_out in [
        (("provider", "add"), Provider, set()),
        (("node", "add"), Node, {"state"}),  # a new node is active
        (("node", "edit"), Node, set()),
        (("lease", "add"), Lease, set()),
        (("resource", "add"), Resource, set()),
    ]
]


def _columns(path: Path, table: str) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


@pytest.mark.parametrize("table", RECORDS)
def test_every_record_key_has_a_column_and_every_column_a_key(
    table: str, ledger_path: Path
) -> None:
    Ledger.open(ledger_path, create=True).close()  # every migration run
    columns = _columns(ledger_path, table)
    assert columns, f"no table {table}"
    keys = recordfields.record_keys(RECORDS[table])
    stored = {REFERENCES.get(table, {}).get(key, key) for key in keys}
    assert stored - set(columns) == set(), f"record keys of {table} without a column"
    assert set(columns) - stored - INTERNAL_COLUMNS == set(), f"{table} columns without a key"


def test_the_export_column_order_is_the_format() -> None:
    # The CSV header (and the JSON key order) is part of the export format: a field added
    # to a dataclass goes at the end of its record, or this changes on purpose.
    assert transfer.CSV_COLUMNS == (
        "record", "kind", "name", "region", "account_id", "account_alias", "credential_ref",
        "return_days", "reading_source", "prom_url", "prom_match", "prom_token_file",
        "provider", "ssh_host", "ssh_port", "ssh_user", "ssh_key_path", "ssh_jump",
        "ssh_alias", "ssh_tunnels", "gpu_model", "gpu_count", "vram_gib", "interconnect",
        "nvlinks", "ib_gbps", "tags", "state",
        "local", "notes", "instance_id", "instance_endpoint", "node", "billing_type", "unit_price", "currency", "cards_billed",
        "start", "end", "billing_tz", "auto_renew", "min_commitment", "deposit",
        "deposit_paid_on", "deposit_refund", "deposit_refunded_on", "contract_no",
        "notice_days", "on_expiry", "release_after_stopped_days", "ended_at",
        "stopped_billing", "month_count", "partial_unit", "renew_charge_days", "hourly_price",
        "refund_rule", "rounding", "payment_schedule", "lease_start", "native_id", "endpoint", "created",
        "deleted_at", "verified_at", "price", "price_per", "source", "who", "node_key",
        # The books (export version 4), after node_key; a bill's lines nest: JSON only.
        "amount", "refunded_on", "number", "issued_on", "period_start", "period_end",
        "vat_rate", "tax_included", "at", "channel", "gpus", "min_term", "quoted_on",
        "valid_until",
    )  # fmt: skip
    assert records.LEASE_KEYS[:6] == (
        "node", "billing_type", "unit_price", "currency", "cards_billed", "start",
    )  # fmt: skip
    assert records.RESOURCE_KEYS[:3] == ("node", "lease_start", "kind")


@pytest.mark.parametrize("cls", NOT_BY_OPTION, ids=lambda c: c.__name__)
def test_every_settable_key_has_an_option_and_every_option_help(cls: type) -> None:
    opts = recordfields.options(cls)
    by_option = {o.key for o in opts}
    # A dataclass field's own key, or the key its flag names (lease_start for lease_id).
    missing = set(recordfields.record_keys(cls)) - by_option - NOT_BY_OPTION[cls]
    assert missing == set(), f"{cls.__name__}: keys with no option"
    assert NOT_BY_OPTION[cls] & by_option == set(), "listed as not set by an option, but is"
    assert [o.flag for o in opts if not o.help.strip()] == []
    flags = [o.flag for o in opts]
    assert len(flags) == len(set(flags)), "two fields share a flag"


def _enum_fields(cls: type) -> list[tuple[str, type[Enum]]]:
    hints = typing.get_type_hints(cls)
    return [
        (f.name, hints[f.name])
        for f in dataclasses.fields(cls)
        if isinstance(hints[f.name], type) and issubclass(hints[f.name], Enum)
    ]


@pytest.mark.parametrize("cls", NOT_BY_OPTION, ids=lambda c: c.__name__)
def test_the_help_of_an_enum_field_lists_its_values(cls: type) -> None:
    helps = flags.help_table(cls)
    enums = _enum_fields(cls)
    assert enums, f"{cls.__name__} has an enum field"
    for name, enum in enums:
        assert recordfields.choices(enum) in helps[name], name
        assert all(str(m.value) in helps[name] for m in enum), name


def _help(cli: Cli, monkeypatch: pytest.MonkeyPatch, *command: str) -> str:
    monkeypatch.setenv("COLUMNS", "1000")  # help text unwrapped, as the table says it
    res = cli(*command, "--help")
    assert res.code == 0, res.err
    return res.out


def _options(text: str) -> dict[str, str]:
    """Each option's entry in --help, by its first flag (the help may be on the next line)."""
    entries: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("  -"):
            current = line.split()[0].rstrip(",")
            entries[current] = line.strip()
        elif current is not None and line.startswith("    ") and line.strip():
            entries[current] += " " + line.strip()
        else:
            current = None
    return entries


@pytest.mark.parametrize(("command", "cls", "left_out"), ADD_COMMANDS)
def test_help_lists_every_option_with_its_help(
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    command: tuple[str, ...],
    cls: type,
    left_out: set[str],
) -> None:
    text = _help(cli, monkeypatch, *command)
    lines = _options(text)
    for opt in recordfields.options(cls):
        if opt.key in left_out or not opt.flag.startswith("--"):
            continue
        assert opt.flag in lines, f"{opt.flag} missing from `zuka {' '.join(command)} --help`"
        assert opt.help in lines[opt.flag], opt.flag
    for key in left_out:
        assert dict(flags.flag_table(cls))[key][0] not in lines


def test_node_add_help_names_the_channels_from_the_enum(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _help(cli, monkeypatch, "node", "add")
    assert "--channel" in text
    assert "cloud | platform (GPU rental) | colo (data-centre hosting)" in text


def test_errors_name_the_flags_as_before() -> None:
    assert flags._FLAG_OF["unit_price"] == "--price"
    assert flags._FLAG_OF["native_id"] == "--id"
    assert flags._FLAG_OF["node"] == "NODE"
    assert flags._FLAG_OF["ssh_port"] == "--ssh"
    from leases.core.errors import InputError

    assert flags.describe_error(InputError("billing_type", "x", "no")) == (
        "billing_type (--billing): no (got 'x')"
    )
    assert flags.describe_error(InputError("auto_renew", "x", "no")) == (
        "--auto-renew: no (got 'x')"
    )


# -- one field added to a dataclass, and nothing else edited ------------------------------


class Colour(StrEnum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass(frozen=True)
class PaintedLease(Lease):
    colour: Colour = dataclasses.field(
        default=Colour.RED, metadata=cli("--colour", "what it is painted: {values}")
    )
    surface: str = ""  # in the record, set by no option


def test_a_field_added_to_a_dataclass_appears_as_key_flag_and_help() -> None:
    assert recordfields.record_keys(PaintedLease) == (*records.LEASE_KEYS, "colour", "surface")
    table = flags.flag_table(PaintedLease)
    assert table == {**flags.LEASE_FLAGS, "colour": ("--colour", "colour")}
    helps = flags.help_table(PaintedLease)
    assert helps["colour"] == "what it is painted: red | blue"

    parser = argparse.ArgumentParser()
    add_flags(parser, table, {"billing_type"}, helps)
    args = parser.parse_args(["--billing", "hourly", "--colour", "blue"])
    assert pick(args, table) == {"billing_type": "hourly", "colour": "blue"}
    assert "what it is painted: red | blue" in parser.format_help()

    lease = records.lease_from(
        {"node": "n1", "billing_type": "hourly", "unit_price": "3", "start": "2026-01-01"}
    )
    painted = PaintedLease(**{f.name: getattr(lease, f.name) for f in dataclasses.fields(lease)})
    rec = recordfields.record_values(painted)
    assert list(rec) == list(recordfields.record_keys(PaintedLease))
    assert rec["colour"] == "red"
    assert rec["billing_type"] == BillingType.HOURLY.value


def test_a_record_is_its_keys_in_order_with_plain_values() -> None:
    lease = records.lease_from(
        {"node": "n1", "billing_type": "monthly", "unit_price": "3.50", "start": "2026-01-01",
         "end": "2026-02-01", "deposit": "7", "deposit_paid_on": "2025-12-30"}
    )  # fmt: skip
    rec = records.lease_record(lease)
    assert tuple(rec) == records.LEASE_KEYS
    assert rec["unit_price"] == "3.50"
    assert rec["deposit_paid_on"] == "2025-12-30"
    assert rec["start"] == "2026-01-01T00:00:00+08:00"
    assert records.lease_from(rec) == lease
    node = records.node_from({"name": "n1", "ssh_host": "10.0.0.1", "tags": "a,b"})
    assert tuple(records.node_record(node)) == records.NODE_KEYS
    assert records.node_record(node)["tags"] == ["a", "b"]
