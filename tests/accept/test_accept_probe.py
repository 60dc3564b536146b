"""The probe: a command that did not finish in time fails only what rests on it (the
connection is kept, so the checks after it still run); a node that cannot be reached ends
the run's commands, each then "not checked" with the reason."""

from __future__ import annotations

from leases.accept.probe import Probe, why_unread
from leases.core.acceptance import Evidence
from leases.core.models import NodeHealth
from leases.ssh.errors import CommandTimeout, SshError
from leases.ssh.stream import CommandResult


class Runner:
    def __init__(self, fail: dict[str, SshError]) -> None:
        self.fail = fail
        self.sent: list[str] = []

    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
        self.sent.append(cmd)
        if cmd in self.fail:
            raise self.fail[cmd]
        return CommandResult(0, f"{cmd} ran\n", "")


async def test_a_command_that_hangs_spares_the_commands_after_it() -> None:
    runner = Runner({"dmesg": CommandTimeout("n1", NodeHealth.TIMEOUT, "'dmesg' did not finish")})
    probe = Probe(runner)
    hung = await probe.run("dmesg", "dmesg")
    assert hung.failure == "'dmesg' did not finish" and hung.exit_status is None
    after = await probe.run("sshd-T", "sshd -T")
    assert after.failure == "" and after.stdout == "sshd -T ran\n"
    assert probe.unreachable == "" and runner.sent == ["dmesg", "sshd -T"]


async def test_an_unreachable_node_ends_the_commands() -> None:
    down = SshError("n1", NodeHealth.UNREACHABLE, "connection refused")
    runner = Runner({"nvidia-smi -L": down})
    probe = Probe(runner)
    assert (await probe.run("list", "nvidia-smi -L")).failure == "connection refused"
    later = await probe.run("sshd-T", "sshd -T")
    assert later.failure == "connection refused" and runner.sent == ["nvidia-smi -L"]
    assert probe.unreachable == "connection refused"


def test_why_a_command_gave_nothing_is_said_in_words() -> None:
    def ev(status: int | None, err: str = "", failure: str = "") -> Evidence:
        return Evidence("k", "ss -ltnpH", status, "", err, 0.0, failure)

    assert why_unread(ev(0)) == ""
    assert why_unread(ev(None, failure="connection refused")) == "connection refused"
    assert why_unread(ev(127, "sh: 1: ss: not found\n")) == "ss: not found"
    assert why_unread(ev(None)).startswith("no exit status came back")
    assert why_unread(ev(1, "ss: \x1b[2Jdenied\nmore\n")) == "ss: \u241b[2Jdenied"
    assert why_unread(ev(2)) == "exit status 2"
