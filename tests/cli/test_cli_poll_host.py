"""`zuka poll` with the node's host beyond its GPUs: DISK and RAM columns, the whole host
record in --json (simulated nodes over SSH)."""

from __future__ import annotations

import json
from pathlib import Path

from leases.sim import SimFleet
from tests.cli.test_cli_fleet import sim_ledger  # noqa: F401
from tests.support.cli import Cli


def test_poll_shows_and_prints_the_host(cli: Cli, sim_ledger: tuple[Path, SimFleet]) -> None:  # noqa: F811
    r = cli("poll", "--once", "--json")
    assert r.code == 0, r.err
    rows = {row["node"]: row for row in json.loads(r.out)}
    host = rows["sim-001"]["host"]
    assert host["cpus"] and host["mem_total_kib"] and host["load1"] is not None
    assert host["cpu_pct"] is None  # one reading: no delta yet
    mounts = {m["path"]: m for m in host["mounts"]}
    assert mounts["/data"]["kind"] == "data" and mounts["/data"]["label"] == "data disk"
    assert mounts["/dev/shm"]["kind"] == "shm"
    human = cli("poll", "--once", "sim-001")
    assert human.code == 0
    header, line = human.out.splitlines()[:2]
    assert "DISK" in header and "RAM" in header
    assert "5%" in line.split()  # the fullest data disk: /data, 412 of 7501 GB
