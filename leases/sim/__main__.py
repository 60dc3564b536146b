"""A fake command line for the real-OpenSSH test tier: `python -m leases.sim nvidia-smi ARGS`.

The node is described by environment variables: ZUKA_SIM_MODEL (a key of MODELS, default
A100), ZUKA_SIM_COUNT (8), ZUKA_SIM_SCENARIO (busy), ZUKA_SIM_SEED (0), ZUKA_SIM_NAME
(the host name), ZUKA_SIM_VRAM_GIB (the model's), ZUKA_SIM_TRAPS (comma-separated
leases.sim.traps names), ZUKA_SIM_TIME (an ISO time to freeze the
clock at). A `-l`/`-lms` stream prints rounds until its reader goes away.
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
import time
from collections.abc import Mapping
from datetime import datetime

from leases.sim.commands import answer, loop_interval
from leases.sim.gpu import Scenario, SimNode, utcnow
from leases.sim.traps import Trap


def node_from_env(env: Mapping[str, str]) -> SimNode:
    vram = env.get("ZUKA_SIM_VRAM_GIB")
    return SimNode(
        name=env.get("ZUKA_SIM_NAME") or socket.gethostname(),
        gpu_model=env.get("ZUKA_SIM_MODEL", "A100"),
        count=int(env.get("ZUKA_SIM_COUNT", "8")),
        scenario=Scenario(env.get("ZUKA_SIM_SCENARIO", "busy")),
        seed=int(env.get("ZUKA_SIM_SEED", "0")),
        vram_gib=int(vram) if vram else None,
        traps=frozenset(Trap(t) for t in env.get("ZUKA_SIM_TRAPS", "").split(",") if t),
    )


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    env = os.environ if env is None else env
    if not argv:
        print("usage: python -m leases.sim COMMAND [ARGS...]", file=sys.stderr)
        return 2
    node = node_from_env(env)
    frozen = env.get("ZUKA_SIM_TIME")

    def now() -> datetime:
        return datetime.fromisoformat(frozen) if frozen else utcnow()

    command = shlex.join(argv)
    interval = loop_interval(command)
    try:
        while True:
            out, err, status = answer(node, command, now())
            sys.stdout.write(out)
            sys.stdout.flush()
            sys.stderr.write(err)
            if interval is None or status != 0:
                return status
            time.sleep(interval)
    except (BrokenPipeError, KeyboardInterrupt):
        # The reader went away: stop quietly, as nvidia-smi does.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
