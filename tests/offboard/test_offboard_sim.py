"""`zuka offboard` on a simulated node (leases.sim answers the offboarding's scripts from
its in-memory file tree and authorized_keys, and refuses a revoked key), so that a new
user can try it on `zuka sim` and `zuka demo`; and the plans of the demo ledger."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

from leases.ledger.store import Ledger
from leases.sim.demoledger import build_demo_ledger
from leases.sim.ledger import register_sim_nodes, serve_ledger_nodes
from tests.support.cli import Cli


def test_zuka_offboard_runs_to_the_end_on_a_simulated_node(
    cli: Cli, ledger_path: Path, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[offboard]\nscratch_roots = ["/data"]\n')
    cfg = ("--config", str(config))
    with Ledger.open(ledger_path) as ledger:
        nodes = register_sim_nodes(ledger, 1, datetime.now(UTC))  # sim-001: busy RTX 4090s
        served = serve_ledger_nodes(ledger, ledger_path, nodes)
    try:
        sim = served.fleet["sim-001"].node
        lab_key, ops_key = sim.keys
        assert cli("resource", "add", "sim-001", "--kind", "scratch_path",
                   "--id", "/data/ckpt").code == 0  # fmt: skip
        assert cli("offboard", "sim-001", *cfg).code == 0
        first = cli("offboard", "sim-001", *cfg, "--execute", "--confirm", "sim-001")
        # Its GPUs are busy: the run stops for the user to decide.
        assert first.code == 1 and "stopped at gpu-processes" in first.out, first.out
        assert "--go-on" in first.out and "/data/ckpt/step-20000.pt" in sim.files
        done = cli("offboard", "sim-001", *cfg, "--execute", "--confirm", "sim-001", "--go-on",
                   "--skip", "manual:release-instance", "--reason", "a simulated node stays up",
                   "--json")  # fmt: skip
        assert done.code == 0, done.out + done.err
        states = {s["key"]: s["state"] for s in json.loads(done.out)["steps"]}
        assert states["gpu-processes"] == "consented" and states["shred:/data/ckpt"] == "verified"
        assert {states[k] for k in states if k.startswith(("clear:", "revoke", "prove"))} == {
            "verified"
        }
        # What was declared and the home's histories and tokens went; the rest stays.
        assert sim.files == {"/root/.ssh/authorized_keys", "/data/datasets/train.jsonl"}
        assert sim.keys == [ops_key] and lab_key not in sim.keys
        facts = json.loads(cli("offboard", "sim-001", "--report", "--format", "json").out)
        said = [e for e in facts["evidence"] if e["step"] == "facts:/data/ckpt" and e["facts"]]
        assert said and "ext4" in json.dumps(said[0]["facts"])
    finally:
        served.stop()


def test_every_demo_node_has_a_plan_or_says_what_to_declare(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "demo.db"
    build_demo_ledger(path, date.today()).close()
    with Ledger.open(path) as ledger:
        names = [n.name for n in ledger.nodes()]
    planned = []
    for name in names:
        r = cli("offboard", name, ledger=path)
        if r.code == 0:
            planned.append(name)
            assert "nothing was touched" in r.out and "manual:release-instance" in r.out
        else:
            # A colo machine has no usual scratch roots: the user declares them.
            assert r.code == 2 and "scratch_roots" in r.err, (name, r.err)
    assert len(planned) >= len(names) - 1, planned
