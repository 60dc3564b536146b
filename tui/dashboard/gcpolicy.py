"""How the dashboard's own process collects garbage, so that a collection never holds the
UI loop for long (issue 9: the longest stall under 50 ms with 500 rows).

CPython's full collection walks every object it tracks. A dashboard that has imported
Textual, Rich and zuka and drawn 500 rows tracks ~120,000, and a full collection (one every
few seconds of refreshes) took 100-300 ms on a 2-core machine. Once the first paint is
drawn, `settle()` freezes what exists then (the modules, the screens, the first rows) out
of every later collection (gc.freeze): later collections walk only what was made since.
What of the frozen dies later is still freed by reference counting; only a cycle among it
would never be, at most what was garbage at that one moment.

After that, each refresh's survivors are frozen too (`keep()` after every refresh drawn):
what a full collection walks is only what was made since the last refresh. Frozen once,
full collections over what 1,000 rows and their history had piled up since still took
42-125 ms every few seconds (bench/tui.py's stalls); frozen each refresh they walk a
refresh's worth. Before each freeze a full collection runs, over the unfrozen only (a
refresh's worth, a few ms): garbage is never frozen, only what is alive. What is alive
then and dies later in a cycle is not freed while frozen, so nothing is frozen while
another screen is open over the fleet (a node's screen, a form: ~22k objects each, dead
once closed; frozen they piled up, 3.7 s of sweep after 100 s of opening and closing);
and every SWEEP_S, or once the frozen have doubled since the last sweep, everything is
unfrozen, collected and frozen again: one longer pause (~0.1 s at 1,000 nodes) instead of
one every few seconds.

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
_frozen_at_sweep = 0  # gc.get_freeze_count() right after the last sweep


def tune() -> None:
    """This process is the dashboard's: settle() will freeze once the table is drawn."""
    global _tuned
    _tuned = True


def tuned() -> bool:
    return _tuned


def managed() -> bool:
    """Does keep() do anything in this process (tuned, settled or not yet)?"""
    return _tuned or _swept_at is not None


def settle() -> bool:
    """Freeze what exists now out of later collections, once per process; True when done."""
    global _tuned, _swept_at, _frozen_at_sweep
    if not _tuned:
        return False
    gc.freeze()
    _tuned = False
    _swept_at = time.monotonic()
    _frozen_at_sweep = gc.get_freeze_count()
    return True


def keep(now: float | None = None, *, alone: bool = True) -> bool:
    """After a refresh is drawn: the first freeze (settle), then what the refresh left alive
    frozen too, the frozen swept now and then (see above); True when it froze anything.
    alone: the fleet is the only screen up (else nothing is frozen)."""
    global _swept_at, _frozen_at_sweep
    if not alone:
        return False
    if _swept_at is None:
        return settle()
    now = time.monotonic() if now is None else now
    if now - _swept_at >= SWEEP_S or gc.get_freeze_count() > 2 * _frozen_at_sweep:
        gc.unfreeze()
        gc.collect()
        _swept_at = now
        gc.freeze()
        _frozen_at_sweep = gc.get_freeze_count()
        return True
    gc.collect()  # the unfrozen only: never freeze garbage
    gc.freeze()
    return True
