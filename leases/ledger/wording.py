"""What a refused delete says of the rows in its way, in words: shared by the ledger's
messages and the command line's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from leases.core.textsafe import visible


def _plural(n: int, noun: str) -> str:
    if n == 1:
        return f"1 {noun}"
    return f"{n} {noun[:-1] + 'ies' if noun.endswith('y') else noun + 's'}"


def describe_counts(counts: Mapping[str, int]) -> str:
    """'2 leases, 1 resource, 3 gpu_minute rows' from delete_node's counts (zeros left out)."""
    nouns = {"leases": "lease", "resources": "resource"}
    parts = [_plural(n, nouns.get(k, f"{k} row")) for k, n in counts.items() if n]
    return ", ".join(parts) or "nothing"


def describe_resources(rows: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(f"{r['kind']} {visible(r['native_id'], 80)}" for r in rows)
