"""A second Ledger.open in a process that already holds the ledger must not drop that
process's SQLite locks. POSIX record locks belong to the process and closing ANY file
descriptor of the file releases all of them: a header check that opened and closed the
file let another process's last close delete the -wal file under the dashboard's open
connection ("disk I/O error", then "database disk image is malformed"). Real files, a
real second process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from leases.ledger import records
from leases.ledger.store import Ledger

OTHER = """
import sys
from leases.ledger.store import Ledger
with Ledger.open(sys.argv[1], readonly=True) as ledger:
    print(len(ledger.nodes()))
"""


def test_a_second_open_keeps_the_first_connections_locks(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    first = Ledger.open(path)
    first.add_node(records.node_from({"name": "n1", "ssh_host": "10.0.0.1"}))
    wal = path.with_name(path.name + "-wal")
    assert wal.exists()
    # The dashboard's reader thread, a form, the offboarding screen: more connections of
    # the same process, opened and closed while the first stays open.
    for _ in range(2):
        Ledger.open(path, create=False).close()
        Ledger.open(path, readonly=True).close()
    # Another process (a `zuka` command in another shell) opens and closes the ledger.
    done = subprocess.run([sys.executable, "-c", OTHER, str(path)], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"
    # Its close found our locks held: it left the -wal file alone.
    assert wal.exists()
    first.add_node(records.node_from({"name": "n2", "ssh_host": "10.0.0.2"}))
    assert [n.name for n in first.nodes()] == ["n1", "n2"]
    first.close()
    with Ledger.open(path, readonly=True) as again:
        assert [n.name for n in again.nodes()] == ["n1", "n2"]
