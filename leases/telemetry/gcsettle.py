"""Full garbage collections in a long-lived poller: after start-up, the objects that live as
long as the process (modules, classes, the SSH connections, the ledger) are moved out of the
collector's sight (gc.freeze), so a full collection walks only what came after.

Measured on 300 simulated nodes, warm exec sweeps (scratch profile, same run): a full
collection paused the loop for 0.21-0.57 s without it and 0.03 s with it, and a sweep's CPU
fell by about a quarter. Once per process: a second poller in the same process (tests, a
dashboard that restarts its poller) does not freeze again. `zuka collect` asks for it; the
dashboard's process has its own policy (tui.dashboard.gcpolicy, frozen once the first full
table is drawn), so its poller does not.

Then the young generation is collected every THRESHOLDS[0] allocations, not CPython's 700:
a warm sweep of 300 nodes allocates some 100,000 objects that die young by reference
counting, and 700 made it 16 collections a sweep (scratch run, 300 nodes, 18 warm sweeps:
292 collections, 286 ms of pauses; with THRESHOLDS 2 collections, 37 ms, and 14 % less
CPU a plain sweep). Cycles among what is made later are still found, a little later.
"""

from __future__ import annotations

import gc

_settled = False
# gc.set_threshold for a long-lived poller once settled (see above).
THRESHOLDS = (20_000, 20, 20)


def settle() -> bool:
    """Collect once, then freeze what is left; True when this call did it."""
    global _settled
    if _settled:
        return False
    _settled = True
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    return True


def settled() -> bool:
    return _settled
