"""What a refused delete says of the rows in its way, in words: shared by the ledger's
messages and the command line's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from leases.core import valuewords
from leases.core.i18n import _, ngettext
from leases.core.textsafe import visible


def _counted(n: int, key: str) -> str:
    if key == "leases":
        return ngettext("{count} lease", "{count} leases", n).format(count=n)
    if key == "resources":
        return ngettext("{count} resource", "{count} resources", n).format(count=n)
    return ngettext("{count} {table} row", "{count} {table} rows", n).format(count=n, table=key)


def describe_counts(counts: Mapping[str, int]) -> str:
    """'2 leases, 1 resource, 3 gpu_minute rows' from delete_node's counts (zeros left out)."""
    parts = [_counted(n, k) for k, n in counts.items() if n]
    return ", ".join(parts) or _("nothing")


def describe_resources(rows: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(f"{r['kind']} {visible(r['native_id'], 80)}" for r in rows)


def entity_word(entity: str) -> str:
    """A kind of row (as the audit log stores it: "lease", "deposit_refund") in the words
    of the language in use; the stored name itself in English, or for one not known."""
    return valuewords.word(entity, "audit entity")
