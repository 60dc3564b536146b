"""What was sold of a node's interconnect (nvlinks, ib_gbps) and the tunnels its login
command carried (ssh_tunnels): checked, stored, read back, exported and imported, and a
row holding a refused value read with its problem said (migration m018_node_sold)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from leases.core.errors import InputError, InputErrors
from leases.core.models import Interconnect
from leases.ledger import records, transfer
from leases.ledger.rowaudit import drifted
from leases.ledger.store import Ledger

HGX = {
    "name": "hgx",
    "ssh_host": "ssh.intern-ai.org.cn",
    "ssh_port": 41234,
    "ssh_user": "root",
    "ssh_tunnels": ["-L 7860:127.0.0.1:7860", "-D 1080"],
    "gpu_model": "H100 80GB HBM3",
    "gpu_count": 8,
    "interconnect": "nvlink",
    "nvlinks": 18,
    "ib_gbps": 400,
}


def test_a_node_keeps_what_was_sold_and_its_tunnels(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        ledger.add_node(records.node_from(HGX))
        node = ledger.node("hgx")
        assert (node.interconnect, node.nvlinks, node.ib_gbps) == (Interconnect.NVLINK, 18, 400)
        assert node.ssh.tunnels == ("-L 7860:127.0.0.1:7860", "-D 1080")
        assert node.problem == ""
        row = ledger.conn.execute(
            "SELECT nvlinks, ib_gbps, ssh_tunnels FROM nodes WHERE name = 'hgx'"
        ).fetchone()
        assert tuple(row) == (18, 400, '["-L 7860:127.0.0.1:7860", "-D 1080"]')
        # Written by zuka: nothing drifted from what the audit log says.
        assert drifted(ledger) == []
        ledger.update_node("hgx", {"ssh_tunnels": [], "ib_gbps": 200})
        node = ledger.node("hgx")
        assert (node.ssh.tunnels, node.ib_gbps) == ((), 200)
        assert drifted(ledger) == []


def test_a_node_without_them_stores_nulls_and_no_tunnels(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        ledger.add_node(records.node_from({"name": "plain", "ssh_host": "h"}))
        row = ledger.conn.execute("SELECT nvlinks, ib_gbps, ssh_tunnels FROM nodes").fetchone()
        assert tuple(row) == (None, None, "[]")


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"interconnect": "pcie"}, "nvlinks", "need --interconnect nvlink (this node's is pcie)"),
        ({"interconnect": "unknown"}, "nvlinks", "this node's is unknown"),
        ({"nvlinks": 0}, "nvlinks", "at least 1"),
        ({"nvlinks": 65}, "nvlinks", "at most 64"),
        ({"nvlinks": "NV18"}, "nvlinks", ""),
        ({"ib_gbps": 0}, "ib_gbps", "at least 1"),
        ({"ib_gbps": 100_000}, "ib_gbps", "at most 3200"),
        ({"ssh_tunnels": ["-L /tmp/s:h:1"]}, "ssh_tunnels", "socket path"),
        ({"ssh_tunnels": ["-L 1:h;id:2"]}, "ssh_tunnels", "not a valid host"),
        ({"ssh_tunnels": [f"-L {p}:h:{p}" for p in range(1, 18)]}, "ssh_tunnels", "at most 16"),
    ],
)
def test_bad_values_are_refused_naming_the_field(
    changes: dict[str, object], field: str, words: str
) -> None:
    with pytest.raises(InputError) as caught:
        records.node_from({**HGX, **changes})
    assert not isinstance(caught.value, InputErrors)
    assert caught.value.field == field
    assert words in caught.value.reason


def test_nvlinks_is_cleared_by_an_empty_value() -> None:
    node = records.node_from({**HGX, "interconnect": "pcie", "nvlinks": ""})
    assert node.nvlinks is None


def test_export_and_import_carry_them_in_json_and_csv(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "a.db") as ledger:
        ledger.add_node(records.node_from(HGX))
        data = ledger.export_records()
    for name, text, back in (
        ("j", transfer.to_json(data), transfer.from_json),
        ("c", transfer.to_csv(data), transfer.from_csv),
    ):
        with Ledger.open(tmp_path / f"{name}.db") as other:
            other.import_records(back(text))
            node = other.node("hgx")
            assert node.ssh.tunnels == ("-L 7860:127.0.0.1:7860", "-D 1080")
            assert (node.nvlinks, node.ib_gbps) == (18, 400)
    # The CSV cell: one cell, the forwards comma-separated, kept from formula reading.
    line = transfer.to_csv(data).splitlines()[1]
    assert ",'-L 7860:127.0.0.1:7860,-D 1080," not in line  # csv quotes a cell with commas
    assert '"\'-L 7860:127.0.0.1:7860,-D 1080"' in line


def test_a_row_edited_to_a_refused_tunnel_is_quarantined(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with Ledger.open(path) as ledger:
        ledger.add_node(records.node_from(HGX))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE nodes SET ssh_tunnels = '[\"-L 1:$(id):2\"]'")
    with Ledger.open(path) as ledger:
        node = ledger.node("hgx")
        assert node.ssh.host == records.QUARANTINED_HOST
        assert node.ssh.tunnels == ()
        assert "ssh_tunnels" in node.problem and "not a valid host" in node.problem
        # And the stored value is seen as an edit behind zuka's back.
        (drift,) = drifted(ledger)
        assert drift.entity == "node" and "ssh_tunnels" in {f[0] for f in drift.fields}


def test_a_row_edited_to_nvlinks_on_pcie_reads_with_its_problem(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with Ledger.open(path) as ledger:
        ledger.add_node(records.node_from(HGX))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE nodes SET interconnect = 'pcie'")
    with Ledger.open(path) as ledger:
        node = ledger.node("hgx")
        assert (node.interconnect, node.nvlinks) == (Interconnect.PCIE, None)
        assert node.problem.startswith("nvlinks: NVLinks as sold need --interconnect nvlink")
