"""Commands handed to sh whatever the login's shell (leases.ssh.posixsh): quoted so that
any command comes back whole, and only what under_sh made is unwrapped."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from leases.sim import Scenario, SimNode
from leases.sim.commands import answer
from leases.ssh.posixsh import under_sh, unwrap_sh
from leases.telemetry.owners import APPS_OWNERS_COMMAND


@given(st.text(alphabet=st.characters(blacklist_characters="\x00"), max_size=200))
def test_any_command_comes_back_whole(command: str) -> None:
    assert unwrap_sh(under_sh(command)) == command


def test_a_real_sh_runs_the_command_it_was_handed() -> None:
    tricky = 'printf \'%s|\' "it\'s" $((1+2)) `echo x`; echo "$0"'
    said = subprocess.run(
        ["sh", "-c", under_sh(tricky)], capture_output=True, text=True, check=True
    )
    assert said.stdout == "it's|3|x|sh\n"


def test_only_what_under_sh_made_is_unwrapped() -> None:
    assert unwrap_sh("sh -c ls") == "ls"  # shlex.quote leaves a plain word bare
    for line in ("sh -c 'a' 'b'", "sh -c 'unclosed", "bash -c 'ls'", "ls"):
        assert unwrap_sh(line) is None, line


def test_the_simulated_node_answers_a_wrapped_command_as_the_bare_one() -> None:
    node = SimNode("n", "A100", 2, Scenario.BUSY, seed=1)
    now = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
    assert answer(node, under_sh(APPS_OWNERS_COMMAND), now) == answer(
        node, APPS_OWNERS_COMMAND, now
    )
