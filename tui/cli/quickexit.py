"""Ending a short command's process without Python's teardown.

After main() returns, CPython frees every module and object one by one before the
process ends: about 100 ms once asyncssh and the poller are loaded (measured here: a
process that only imports asyncssh takes 0.31 s to end, 0.20 s with os._exit), which a
cron job's `zuka poll --once` pays on every run. The commands named here end with
os._exit instead, once nothing is left that the teardown would do for them: the atexit
handlers have run (logging's flush among them), stdout and stderr are flushed, and no
other thread is alive (one would be killed mid-work: then the normal exit). What they
write goes through `with` blocks (the ledger's transactions, files) that are closed by
then; a command that leaves a file open to be flushed by the teardown is not one of them.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import NoReturn

# The commands whose process ends at once after main (see above).
QUICK_EXIT = frozenset({"poll"})


def quick_exit(code: int) -> NoReturn:
    """End the process with status `code`, skipping the teardown when that is safe."""
    if threading.active_count() > 1:
        sys.exit(code)
    atexit._run_exitfuncs()  # what interpreter shutdown would run first
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing to keep
            stream.flush()
    os._exit(code)
