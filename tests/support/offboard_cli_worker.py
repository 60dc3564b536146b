"""Run `zuka offboard ARGS...` (the real CLI and wiring) in processes of its own, each
driver the wiring builds wrapped in offboard_files.Killer: such a process SIGKILLs itself
at KILL_AT (STEP@before, STEP@after or STEP@verify). Nothing else is changed.

Started once, it imports zuka, then reads one JSON line [KILL_AT, OUTPUT_FILE, ARGS...]
at a time from stdin, forks a child that runs the CLI (its stdout and stderr to
OUTPUT_FILE), and prints the child's exit code (-9: killed) as one line: a child costs a
fork, not a Python start and zuka's imports (over a second on a busy machine).
"""

from __future__ import annotations

import json
import os
import sys

from offboard_files import Killer

from leases.offboard import wiring
from leases.offboard.steps import Driver
from tui.cli import offboard as cli_offboard  # noqa: F401  (imported here, once, before the forks)
from tui.cli.main import main

_built = wiring.drivers


def _killing(kill_at: str) -> None:
    def drivers(ctx: wiring.RunContext) -> dict[str, Driver]:
        return {name: Killer(d, kill_at) for name, d in _built(ctx).items()}

    wiring.drivers = drivers  # the CLI looks it up on the module at each run


def _child(kill_at: str, output: str, args: list[str]) -> None:
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    _killing(kill_at)
    try:
        code = main(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    sys.stdout.flush()
    os._exit(code)


def serve() -> None:
    import boto3  # noqa: F401  (the cloud drivers import it lazily: pay it once here)

    print("ready", flush=True)
    for line in sys.stdin:
        kill_at, output, *args = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                _child(kill_at, output, args)
            finally:
                os._exit(70)  # whatever happened, the child never returns to the loop
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)


if __name__ == "__main__":
    serve()
