"""Child processes for the ledger's durability and concurrency tests (not a test module).

    python tests/support/ledger_workers.py writer PATH ROUND
        adds nodes and hourly leases to the ledger for ever, one transaction each, and prints
        `node NAME` / `lease NAME START` only after that write committed.
    python tests/support/ledger_workers.py collector PATH SECONDS
        a collector: ends and starts leases, edits nodes, records resources, for SECONDS
        and at least MIN_WRITES writes.
    python tests/support/ledger_workers.py dashboard PATH SECONDS
        a dashboard: reads the whole ledger in one snapshot in a loop and checks that what it
        sees is consistent, for SECONDS and at least MIN_READS reads.
    python tests/support/ledger_workers.py open PATH AT
        waits until the time.time() AT, then opens (creating) the ledger and closes it.

collector and dashboard print one JSON summary line and exit 0; any failure is a traceback
on stderr and exit status 1.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from datetime import datetime, timedelta
from decimal import Decimal
from itertools import pairwise
from pathlib import Path
from zoneinfo import ZoneInfo

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from leases.core.models import BillingType, Lease, Node, SshTarget
from leases.ledger.store import Ledger

TZ = ZoneInfo("Asia/Shanghai")
BASE = datetime(2025, 1, 1, tzinfo=TZ)
LEASES_PER_NODE = 40
COLLECTOR_NODES = 8


def _node(name: str) -> Node:
    return Node(name=name, provider=None, ssh=SshTarget(host=f"{name}.example.net", port=22))


def _hourly(node: str, start: datetime, *, closed: bool) -> Lease:
    return Lease(
        node=node,
        billing_type=BillingType.HOURLY,
        unit_price=Decimal("12.50"),
        start=start,
        end=start + timedelta(hours=1) if closed else None,
    )


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def writer(path: str, round_no: int) -> None:
    """Write for ever; every line printed names a write that has committed."""
    ledger = Ledger.open(path, actor="writer")
    _say("ready")
    for k in range(10**9):
        name = f"r{round_no}-n{k}"
        ledger.add_node(_node(name))
        _say(f"node {name}")
        for i in range(LEASES_PER_NODE):
            start = BASE + timedelta(hours=i)
            ledger.add_lease(_hourly(name, start, closed=True))
            _say(f"lease {name} {start.isoformat()}")


# What the concurrency test asks of each, whatever the machine's load.
MIN_WRITES = 60
MIN_READS = 15


def collector(path: str, seconds: float) -> dict[str, int]:
    """Roll hourly leases forward on a few nodes, with node edits and resources between."""
    ledger = Ledger.open(path, actor="collector")
    names = [f"c-{i}" for i in range(COLLECTOR_NODES)]
    hours = dict.fromkeys(names, 0)
    for name in names:
        ledger.add_node(_node(name))
        ledger.add_lease(_hourly(name, BASE, closed=False))
    _say("ready")
    writes = 2 * len(names)
    deadline = time.monotonic() + seconds
    step = 0
    # For SECONDS, and at least MIN_WRITES: a loaded machine does few in two seconds.
    while time.monotonic() < deadline or writes < MIN_WRITES:
        name = names[step % len(names)]
        hours[name] += 1
        at = BASE + timedelta(hours=hours[name])
        ledger.end_lease(name, at)
        ledger.add_lease(_hourly(name, at, closed=False))
        writes += 2
        if step % 5 == 0:
            ledger.update_node(name, {"notes": f"step {step}"})
            writes += 1
        if step % 7 == 0:
            ledger.add_resource(name, {"kind": "snapshot", "native_id": f"s-{step}"})
            writes += 1
        step += 1
    ledger.close()
    return {"writes": writes}


def dashboard(path: str, seconds: float) -> dict[str, int]:
    """Read nodes, leases and the audit log in one snapshot, over and over, and check them."""
    ledger = Ledger.open(path, create=False, actor="dashboard")
    conn = ledger.conn
    reads = 0
    last: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline or reads < MIN_READS:
        conn.execute("BEGIN")  # one read snapshot for everything below
        try:
            nodes = ledger.nodes()
            leases = ledger.leases()
            open_leases = ledger.leases(open_only=True)
            resources = ledger.resources()
            audit = Counter(
                dict(conn.execute("SELECT action, count(*) FROM audit GROUP BY action").fetchall())
            )
        finally:
            conn.commit()
        _check(nodes, leases, open_leases, resources, audit, last)
        last = audit
        reads += 1
    ledger.close()
    return {"reads": reads, "nodes": len(nodes), "leases": len(leases)}


def _check(
    nodes: list[Node],
    leases: list[Lease],
    open_leases: list[Lease],
    resources: list[object],
    audit: Counter[str],
    last: Counter[str],
) -> None:
    names = {n.name for n in nodes}
    assert audit["node.add"] == len(nodes), (audit, len(nodes))
    assert audit["lease.add"] == len(leases), (audit, len(leases))
    assert audit["lease.end"] == sum(1 for le in leases if not le.open), audit
    assert audit["resource.add"] == len(resources), (audit, len(resources))
    assert [le for le in leases if le.open] == open_leases
    assert {le.node for le in leases} <= names
    per_node = Counter(le.node for le in open_leases)
    assert all(n <= 1 for n in per_node.values()), per_node
    by_node: dict[str, list[Lease]] = {}
    for le in leases:
        by_node.setdefault(le.node, []).append(le)
    for name, chain in by_node.items():
        for before, after in pairwise(chain):
            assert before.ended_at == after.start, (name, before, after)
    for action, count in last.items():
        assert audit[action] >= count, f"{action}: {count} then {audit[action]}"


def main(argv: list[str]) -> int:
    mode, path, arg = argv
    if mode == "writer":
        writer(path, int(arg))
        return 0
    if mode == "open":
        time.sleep(max(0.0, float(arg) - time.time()))
        Ledger.open(path).close()
        return 0
    run = collector if mode == "collector" else dashboard
    _say(json.dumps(run(path, float(arg))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
