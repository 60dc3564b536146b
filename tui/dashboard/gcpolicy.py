"""How the dashboard's own process collects garbage, so that a collection never holds the
UI loop for long (issue 9: the longest stall under 50 ms with 500 rows).

CPython's full collection walks every object it tracks. A dashboard that has imported
Textual, Rich and zuka and drawn 500 rows tracks ~120,000, and a full collection (one every
few seconds of refreshes) took 100-300 ms on a 2-core machine. Once the first paint is
drawn, `settle()` freezes what exists then (the modules, the screens, the first rows) out
of every later collection (gc.freeze): later collections walk only what was made since.
What of the frozen dies later is still freed by reference counting; only a cycle among it
waits for the sweep (below).

After that, each refresh's survivors are frozen too (`keep()` after every refresh drawn):
what a full collection walks is only what was made since the last refresh. Frozen once,
full collections over what 1,000 rows and their history had piled up since still took
42-125 ms every few seconds (bench/tui.py's stalls); frozen each refresh they walk a
refresh's worth. The young generations are collected before each freeze (what died
young is not frozen; a full collection there took 19-45 ms, itself a stall). What is
frozen and dies later in a cycle is not freed while frozen, so nothing is frozen while
another screen is open over the fleet or within 5 s of one closing (a node's screen, a
form: ~22k objects each, dead once closed; frozen they piled up, 3.7 s of sweep after
100 s of opening and closing); and every SWEEP_S everything is unfrozen, collected and
frozen again: one longer pause (~0.1-0.3 s at 1,000 nodes) instead of one every few
seconds, and garbage held at most that long.

Only a process that is the dashboard's own does this (zuka dash, zuka demo, the app that
zuka web serves): `tune()` marks it so. Tests that drive the app in their own process leave
the collector as it is.
"""

from __future__ import annotations

import gc
import time

# How often the frozen objects are collected too (see above).
SWEEP_S = 900.0

_tuned = False
_swept_at: float | None = None  # monotonic; None until the first freeze


def tune() -> None:
    """This process is the dashboard's: keep() freezes from the first paint on."""
    global _tuned
    _tuned = True


def managed() -> bool:
    """Does keep() do anything in this process (tuned, settled or not yet)?"""
    return _tuned or _swept_at is not None


def settle() -> bool:
    """Freeze what exists now out of later collections, once per process; True when done."""
    global _tuned, _swept_at
    if not _tuned:
        return False
    gc.freeze()
    _tuned = False
    _swept_at = time.monotonic()
    return True


def keep(now: float | None = None, *, alone: bool = True) -> bool:
    """After a refresh is drawn: the first freeze (settle), then what the refresh left alive
    frozen too, the frozen swept now and then (see above); True when it froze anything.
    alone: the fleet is the only screen up (else nothing is frozen)."""
    global _swept_at
    if not alone:
        return False
    if _swept_at is None:
        return settle()
    now = time.monotonic() if now is None else now
    if now - _swept_at >= SWEEP_S:
        gc.unfreeze()
        gc.collect()
        _swept_at = now
    else:
        gc.collect(1)
    gc.freeze()
    return True
