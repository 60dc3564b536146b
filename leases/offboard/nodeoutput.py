"""What a node printed for the offboarding scripts (leases.offboard.nodescripts), read: the
evidence kept of a command, its lines, the words for a shred or its read-back, the keys
files listed, a node's time. What the node prints is evidence, kept as it came; shown to a
person only through `visible`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from leases.core.i18n import N_
from leases.core.textsafe import visible
from leases.offboard.nodewalk import KEPT as _KEPT
from leases.ssh.stream import CommandResult

# Evidence kept per command: the end of what it printed (where errors are).
EVIDENCE_MAX = 64 * 1024


def as_evidence(result: CommandResult) -> str:
    text = f"exit {result.exit_status}\n{result.stdout}"
    stderr = result.stderr.replace("\x00", "")  # remote_job's heartbeats
    if stderr:
        text += f"\nstderr:\n{stderr}"
    return text[-EVIDENCE_MAX:]


def split_keys_files(text: str, mark: str) -> list[tuple[str, str]]:
    """(file name, its text) for each file keys_files_script printed."""
    out: list[tuple[str, list[str]]] = []
    for line in text.split("\n"):
        if line.startswith(mark + " "):
            out.append((line[len(mark) + 1 :], []))
        elif out:
            out[-1][1].append(line)
    return [(name, "\n".join(lines)) for name, lines in out]


def iso_utc(seconds: str) -> str:
    """A node's epoch seconds as buckets give times (ISO 8601 UTC); "" for no file (0);
    anything else as it came, made visible."""
    if seconds == "0":
        return ""
    try:
        at = datetime.fromtimestamp(int(seconds), UTC)
    except (ValueError, OverflowError, OSError):
        return visible(seconds, 40)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def node_lines(text: str) -> list[str]:
    """The node's output, a line per '\n' only: str.splitlines also ends a line at \r,
    \f, \x85, \u2028..., which a file name on the node may hold (a FIFO named
    'x\rabsent' read as the line 'absent')."""
    return text.split("\n")


def done_words(stdout: str, verify: bool) -> str:
    if "absent" in node_lines(stdout):
        # Read back after a shred, absent is the proof, not a sign nothing was there.
        return N_("not there: nothing left") if verify else N_("already gone")
    left = sum(1 for line in node_lines(stdout) if line.startswith("left: "))
    unlinked = sum(1 for line in node_lines(stdout) if line.startswith("unlinked only"))
    kept = any(line.startswith(_KEPT + ": ") for line in node_lines(stdout))
    if verify:
        # The login's own ~/.ssh was not looked at: said, never hidden in "nothing left".
        if kept:
            return N_(
                "no regular file left; the login's own ~/.ssh kept, not looked at (the lab's key"
                " has its own step)"
            )
        return N_("no regular file left")
    words = [N_("shredded file by file")]
    if unlinked:
        words.append(
            N_("{count} with other hard links unlinked, not overwritten").format(count=unlinked)
        )
    if left:
        words.append(
            N_("{count} symbolic link(s) or special file(s) left in place, never followed").format(
                count=left
            )
        )
    if kept:
        words.append(N_("the login's own ~/.ssh kept (zuka logs in with it until the revoke step)"))
    return "; ".join(words)
