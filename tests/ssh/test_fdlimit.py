"""The open-file limit is raised before a fleet is polled (leases.ssh.fdlimit): the soft
limit up to the hard one, capped, never lowered. Each case in a child process started with
its own limits (setting them here would change this test process's)."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

HARD = resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def _child(soft: int, hard: int, code: str) -> list[str]:
    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          preexec_fn=limits, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


RAISE = (
    "import resource\n"
    "from leases.ssh.fdlimit import raise_open_files\n"
    "print(raise_open_files({wanted}), resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
)


@pytest.mark.skipif(HARD != resource.RLIM_INFINITY and HARD < 4096, reason="hard limit too low")
def test_the_soft_limit_goes_up_to_the_hard_one_capped() -> None:
    assert _child(256, 4096, RAISE.format(wanted=65536)) == ["4096", "4096"]  # the hard one
    assert _child(256, 4096, RAISE.format(wanted=1024)) == ["1024", "1024"]  # the cap
    assert _child(2048, 4096, RAISE.format(wanted=1024)) == ["2048", "2048"]  # never lowered


@pytest.mark.skipif(HARD != resource.RLIM_INFINITY and HARD < 4096, reason="hard limit too low")
def test_a_poller_made_from_the_ledger_raises_it(tmp_path: object) -> None:
    code = (
        "import resource, tempfile\n"
        "from pathlib import Path\n"
        "from leases.ledger.store import Ledger\n"
        "from leases.telemetry.wiring import make_poller\n"
        "path = Path(tempfile.mkdtemp()) / 'l.db'\n"
        "with Ledger.open(path) as ledger:\n"
        "    make_poller(ledger, path, store=False)\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
    )
    assert _child(256, 4096, code) == ["4096"]
