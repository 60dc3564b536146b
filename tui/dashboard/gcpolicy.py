"""How the dashboard's own process collects garbage, so that a collection never holds the
UI loop for long (issue 9: the longest stall under 50 ms with 500 rows).

CPython's full collection walks every object it tracks. A dashboard that has imported
Textual, Rich and zuka and drawn 500 rows tracks ~120,000, and a full collection (one every
few seconds of refreshes) took 100-300 ms on a 2-core machine. Once the first full table is
drawn, `settle()` freezes what exists then (the modules, the screens, the first rows) out
of every later collection (gc.freeze): later collections walk only what was made since.
What of the frozen dies later is still freed by reference counting; only a cycle among it
would never be, at most what was garbage at that one moment.

Only a process that is the dashboard's own does this (zuka dash, zuka demo, the app that
zuka web serves): `tune()` marks it so. Tests that drive the app in their own process leave
the collector as it is.
"""

from __future__ import annotations

import gc

_tuned = False


def tune() -> None:
    """This process is the dashboard's: settle() will freeze once the table is drawn."""
    global _tuned
    _tuned = True


def tuned() -> bool:
    return _tuned


def settle() -> bool:
    """Freeze what exists now out of later collections, once per process; True when done."""
    global _tuned
    if not _tuned:
        return False
    gc.freeze()
    _tuned = False
    return True
