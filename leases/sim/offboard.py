"""What a simulated node prints for the offboarding scripts (leases.offboard.nodescripts), so
that `zuka offboard` can be tried on `zuka sim` and `zuka demo` fleets.

The sim has no shell: each script is known by its first line and a line of its body, and
answered from the node's in-memory file tree (`SimNode.files`, paths only, the login
user's home is /root) and its authorized_keys lines (`SimNode.keys`, which the simulated
fleet also checks logins against, so a revoked key is really refused). No symbolic links
and one ext4 disk: a plausible node, not a proof of anything.
"""

from __future__ import annotations

import re
import shlex
from typing import NamedTuple

from leases.sim.gpu import SimNode

HOME = "/root"
KEYS_FILE = f"{HOME}/.ssh/authorized_keys"


class Script(NamedTuple):
    stdout: str
    stderr: str
    exit_status: int


def _word(text: str) -> str:
    """The first shell word of text, unquoted ("" when it does not parse)."""
    try:
        words = shlex.split(text)
    except ValueError:
        return ""
    return words[0] if words else ""


def _under(node: SimNode, path: str) -> list[str]:
    prefix = path.rstrip("/") + "/"
    return sorted(f for f in node.files if f == path or f.startswith(prefix))


def _target(lines: list[str]) -> str | None:
    """The path a guarded script acts on: `p=PATH`, or `p="$h"/REL` in the home."""
    home = 'p="$h"/'
    for line in lines:
        if line.startswith(home):
            return HOME + "/" + _word(line.removeprefix(home))
        if line.startswith("p="):
            return _word(line[2:])
    return None


_JOB_RE = re.compile(r"<<'ZUKA_JOB'\n(.*)ZUKA_JOB\n", re.S)
_MARK_RE = re.compile(r'echo "(zuka-keys-[0-9a-f]+) \$f"')


def answer_script(node: SimNode, command: str) -> Script | None:
    """The answer to one of the offboarding scripts; None for any other command."""
    job = _JOB_RE.search(command) if command.startswith("umask 077\n") else None
    if job is not None:
        command = job.group(1)  # remote_job's body: the sim has no processes to manage
    lines = command.split("\n")
    first = lines[0]
    if first == 'w="${HOME:-}/.zuka-offboard"' and "rm -rf" in command:
        return Script("no run directory of zuka's left\n", "", 0)  # remote_job keeps none
    if first.startswith("t=") and "findmnt" in command:
        return _facts(_word(first[2:]))
    if first.startswith("set -- ") and "authorizedkeysfile" in command:
        if "mktemp" in command:
            return _revoke(node, command)
        mark = _MARK_RE.search(command)
        return _keys(node, mark.group(1) if mark else "")
    path = _target(lines[:8])
    if path is None:
        return None
    found = _under(node, path)
    if 'echo "exists yes"' in command:
        if not found:
            return Script("exists no\n", "", 0)
        return Script(f"exists yes\nfs ext4 /dev/vda1 /\nfiles {len(found)}\n", "", 0)
    if not found:
        return Script("absent\n", "", 0)
    if "-execdir shred" in command:
        node.files.difference_update(found)
        return Script("", "", 0)
    if "no regular file left" in command:
        if found == [path]:
            return Script("still there\n", "", 1)
        return Script("".join(f + "\n" for f in found[:50]), "", 1)
    return None


def _facts(path: str) -> Script:
    # One virtual disk, not rotational: the erasure caveats of an SSD and of ext4 apply.
    return Script(
        f"path {path}\nmount / /dev/vda1 ext4 rw,relatime\ndisk disk 0 Virtual_disk\n"
        "inside /\ninside /dev/shm\n",
        "",
        0,
    )


def _keys(node: SimNode, mark: str) -> Script:
    head = f"{mark} {KEYS_FILE}\n"
    if KEYS_FILE not in node.files:
        return Script(head + "#absent\n", "", 0)
    return Script(head + "".join(line + "\n" for line in node.keys), "", 0)


def _revoke(node: SimNode, command: str) -> Script:
    if KEYS_FILE not in node.files:
        return Script("absent\n", "", 0)
    grep = next(
        (ln.strip() for ln in command.split("\n") if ln.strip().startswith("grep -v -F ")), ""
    )
    try:
        words = shlex.split(grep.partition(" -- ")[0])
    except ValueError:
        return Script("", "sh: 1: Syntax error: Unterminated quoted string\n", 2)
    blobs = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "-e"]
    if not blobs:
        return Script("", "grep: no pattern\n", 2)
    node.keys[:] = [line for line in node.keys if not any(b in line for b in blobs)]
    return Script(f"{KEYS_FILE}: rewritten without the key\n", "", 0)
