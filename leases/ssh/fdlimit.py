"""The process's open-file limit, raised before a fleet is polled.

A poller holds one socket per node (more while connecting: up to the connect bounds of
leases.ssh.options), and a collector on 1,000 direct nodes needs about 1,000 descriptors
beside its ledger and logs, against the soft limit of 1,024 that many systems start a
process with. Out of descriptors, connects fail and a known_hosts file cannot be read.
The hard limit is what the administrator allows: the soft one is raised to it (at most
WANTED), never above, and never lowered.
"""

from __future__ import annotations

import resource

# Enough for several thousand nodes; a hard limit of "unlimited" is not taken literally.
WANTED = 65536


def raise_open_files(wanted: int = WANTED) -> int:
    """Raise the soft RLIMIT_NOFILE towards min(hard, wanted); the soft limit now. A
    refusal (a container that forbids it) leaves it as it was."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
    if soft != resource.RLIM_INFINITY and soft < ceiling:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
        except (ValueError, OSError):
            return soft
        return ceiling
    return soft
