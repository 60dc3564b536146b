"""The kept-open shell's frame (leases.ssh.shell.framed) run by the real shells a node's `sh`
may be (dash, bash, busybox), one shell process for a run of commands, as on a node: what
each command printed comes back whole, with its own exit status, the shell lives on after
an `exit`, a NUL is dropped, an output without end is cut where the frame says, and a cut
one gives no status. Through real sshd and a session: tests/ssh/test_ssh_openssh.py."""

from __future__ import annotations

import asyncio
import codecs
import shutil

import pytest

from leases.ssh.shell import FRAME_CHARS, AnswerReader, framed, new_marker
from leases.ssh.stream import Capped, OverCap

SHELLS = [
    pytest.param(argv, id=argv[0])
    for argv in (["dash"], ["bash", "--posix"], ["busybox", "sh"])
    if shutil.which(argv[0])
]


async def _ask(
    proc: asyncio.subprocess.Process, cmd: str, cap: int = 1 << 20
) -> tuple[str, int | None] | None:
    """One framed command and its answer, read as zuka's channel reads it: what comes fed to
    an AnswerReader (leases.ssh.shell) until it has the answer or the shell's output ends."""
    assert proc.stdin is not None and proc.stdout is not None
    marker = new_marker()
    proc.stdin.write(framed(cmd, marker, 4 * (cap + 1)).encode())
    await proc.stdin.drain()
    reader = AnswerReader(marker, Capped(cap + FRAME_CHARS, 1 << 20))  # as the session caps it
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    while chunk := await proc.stdout.read(65536):
        got = reader.feed(decoder.decode(chunk))
        if got is not None:
            return got
    return reader.end()


async def _run(argv: list[str], commands: list[tuple[str, int]]) -> list[object]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    answers: list[object] = []
    try:
        for cmd, cap in commands:
            try:
                answers.append(await asyncio.wait_for(_ask(proc, cmd, cap), 30))
            except OverCap as exc:
                answers.append(("over", str(exc).split(" ")[0]))
                break  # zuka drops the shell here: what is left of the answer is unread
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
    return answers


@pytest.mark.parametrize("argv", SHELLS)
def test_each_command_comes_back_whole_with_its_own_status(argv: list[str]) -> None:
    big = "".join(f"{i:07d}\n" for i in range(20_000))  # 160 KB: several of sh's writes
    commands = [
        ("printf 'a\\n\\n'", 1 << 20),  # trailing newlines kept
        ("printf 'no newline'; echo err >&2; false", 1 << 20),
        ("exit 7", 1 << 20),  # ends the frame's subshell, not the shell
        ("echo after", 1 << 20),
        ("case x in x) echo casex;; esac # a comment )", 1 << 20),
        ("printf ''", 1 << 20),
        ("printf 'x\\n3\\n'", 1 << 20),  # an output that ends like a status line
        ("i=0; while [ $i -lt 20000 ]; do printf '%07d\\n' $i; i=$((i+1)); done", 1 << 20),
        ("printf 'a\\000b\\n'", 1 << 20),  # sh drops a NUL from what it holds
        ("echo __zuka_done_", 1 << 20),
        ("", 1 << 20),  # an empty command: the frame's subshell still parses
        ("# only a comment )", 1 << 20),
        ("cat <<EOF\nhere\nEOF", 1 << 20),  # a heredoc (bash re-parses $( ) differently)
        ('echo "[$__z]"', 1 << 20),  # what the frame held is not left in the shell
        # NULs that sh drops, cut by head, then what would read as a status: none is taken.
        ("head -c 4000 /dev/zero; printf 'x\\n42'; exit 1", 100),
    ]
    answers = asyncio.run(_run(argv, commands))
    assert answers == [
        ("a\n\n", 0),
        ("no newline", 1),
        ("", 7),
        ("after\n", 0),
        ("casex\n", 0),
        ("", 0),
        ("x\n3\n", 0),
        (big, 0),
        ("ab\n", 0),
        ("__zuka_done_\n", 0),
        ("", 0),
        ("", 0),
        ("here\n", 0),
        ("[]\n", 0),
        ("\n", None),
    ]


@pytest.mark.parametrize("argv", SHELLS)
def test_an_output_without_end_is_cut_by_the_shell_and_refused_by_the_cap(
    argv: list[str],
) -> None:
    """`yes` never ends: sh holds 4 bytes a character past the cap, then the cap refuses
    the answer (a shell without the cut would hold all it is given until the timeout)."""
    answers = asyncio.run(_run(argv, [("echo before", 100), ("yes 0123456789", 100)]))
    assert answers == [("before\n", 0), ("over", "output")]
