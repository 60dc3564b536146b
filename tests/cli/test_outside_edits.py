"""No change carries a row changed outside zuka onto the audit log as zuka's own
(leases.app.untouched, leases.ledger.undo): a lease's price set to 3 with sqlite3 was
laundered by `lease edit --notes` (its entry wrote the 3 as zuka's) and by `lease delete`
then `zuka undo` (the 3 came back with a chain that verifies)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.support.cli import Cli


def _tampered(z: Cli, ledger_path: Path) -> None:
    r = z("lease", "add", "n", "--billing", "monthly", "--price", "30000",
          "--start", "2026-08-01", "--end", "2026-09-01")  # fmt: skip
    assert r.code == 0, r.err
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE leases SET unit_price = '3'")


def test_an_edit_or_delete_resting_on_an_outside_value_is_refused(
    z: Cli, ledger_path: Path
) -> None:
    _tampered(z, ledger_path)
    before = ledger_path.read_bytes()
    for typed in (("lease", "edit", "n", "--notes", "x"),
                  ("lease", "delete", "n", "--start", "2026-08-01"),
                  ("node", "delete", "n", "--force")):  # fmt: skip
        r = z(*typed)
        assert r.code == 2, (typed, r.err)
        assert 'unit_price "30000" on the audit log, "3" in the table' in r.err
        assert "zuka audit accept lease" in r.err
        assert ledger_path.read_bytes() == before
    assert z("audit", "verify").code == 1  # still seen


def test_an_edit_that_sets_the_outside_field_itself_corrects_it_and_cannot_be_undone_back(
    z: Cli, ledger_path: Path
) -> None:
    _tampered(z, ledger_path)
    r = z("lease", "edit", "n", "--price", "30000")
    assert r.code == 0, r.err
    assert z("audit", "verify").code == 0
    # The edit's entry holds the 3 it found as `before`: undoing it would put the 3 back
    # as zuka's
    r = z("undo")
    assert r.code == 2 and "changed outside zuka" in r.err, r.err
    assert z("audit", "verify").code == 0


def test_an_accepted_row_is_edited_and_deleted_as_any(z: Cli, ledger_path: Path) -> None:
    _tampered(z, ledger_path)
    assert z("audit", "accept", "lease", "1").code == 0
    assert z("lease", "edit", "n", "--notes", "checked: the provider's discount").code == 0
    assert z("lease", "delete", "n", "--start", "2026-08-01").code == 0
    assert z("undo").code == 0
    assert z("audit", "verify").code == 0


def test_audit_accept_takes_every_kind_of_row_the_chain_checks(z: Cli, ledger_path: Path) -> None:
    """Every refusal names `zuka audit accept balance 1`; the parser took only the first
    five kinds, so a book row changed outside zuka blocked every figure for good."""
    from leases.ledger.rowaudit import ENTITIES
    from tui.cli.main import ACCEPTABLE

    assert ACCEPTABLE == ENTITIES
    assert z("provider", "topup", "P", "--amount", "5000", "--at", "2026-08-01T09:00").code == 0
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE balance_entries SET amount = '50000'")
    assert z("provider", "balance", "P").code == 2
    r = z("audit", "accept", "balance", "1")
    assert r.code == 0, r.err
    assert z("audit", "verify").code == 0
    assert z("provider", "balance", "P").code == 0


def test_ending_renewing_archiving_and_a_provider_edit_carry_no_outside_value(
    z: Cli, ledger_path: Path
) -> None:
    """lease end wrote a price set to 3 in SQLite onto the chain (a report of 1,368 for
    4,560), lease renew copied it into the renewal, node archive took a GPU count set to 1
    (480 for 3,840), provider edit a kind set to colo: each left `audit verify` clean."""
    _tampered(z, ledger_path)
    before = ledger_path.read_bytes()
    for typed in (("lease", "end", "n", "--at", "2026-08-20"),
                  ("lease", "renew", "n", "--until", "2026-10-01")):  # fmt: skip
        r = z(*typed)
        assert r.code == 2 and 'unit_price "30000"' in r.err, (typed, r.err)
        assert ledger_path.read_bytes() == before
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE leases SET unit_price = '30000'")
        conn.execute("UPDATE nodes SET gpu_count = 1")
        conn.execute("UPDATE providers SET kind = 'colo'")
    before = ledger_path.read_bytes()
    r = z("node", "archive", "n")
    assert r.code == 2 and "gpu_count 8 on the audit log, 1 in the table" in r.err, r.err
    r = z("provider", "edit", "P", "--region", "x")
    assert r.code == 2 and 'kind "platform" on the audit log' in r.err, r.err
    assert ledger_path.read_bytes() == before
    assert z("audit", "verify").code == 1
