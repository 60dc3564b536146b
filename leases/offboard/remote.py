"""Offboarding on the node, over SSH: the steps (plan_remote) and their driver ("ssh").

In order: GPU processes still running (the checklist waits for the user's consent when
any are), each declared path's file-system facts (with where shred cannot guarantee
erasure), shred of the declared scratch paths file by file, the declared histories, caches
and credentials in the login user's home, the lab's key out of every keys file sshd reads
and zuka's run directory off the node (the last SSH step), and a fresh login with that key
refused (the proof).

Every value that reaches a command is checked at its one entry (leases.offboard.paths,
authkeys) and quoted, after `--`; the node's own names never come back into a command.
Shred and read-back run zuka's walker (nodewalk.py) with the node's python3: it never
follows a link, writes a file only if it is the one listed, only unlinks a hard-linked
file, refuses mounts inside, and spares only the login's own ~/.ssh. Without python3, find
-P -xdev hands names to shred on the node itself, only where no other user may rename
anything. What the node prints is evidence, kept as it came; shown to a person only
through `visible`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import secrets
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import asyncssh

from leases.core.errors import InputError
from leases.core.models import Node, NodeHealth, ResourceKind
from leases.core.textsafe import visible
from leases.offboard import authkeys, erasure, paths, presets
from leases.offboard.nodewalk import KEPT as _KEPT
from leases.offboard.steps import Outcome, Phase, PlanInput, Sighting, Step, params
from leases.ssh.errors import SshError
from leases.ssh.options import SshOptions
from leases.ssh.session import NodeSession
from leases.ssh.stream import CommandResult
from leases.telemetry import nvsmi

# Shredding a data disk file by file takes as long as writing it twice (one random pass,
# one of zeros): hours for a large disk.
SHRED_TIMEOUT_S = 12 * 3600.0
# Evidence kept per command: the end of what it printed (where errors are).
EVIDENCE_MAX = 64 * 1024
_LISTED = 50  # names of what a shred left behind, for the evidence

# Exit statuses of the scripts below (0: done; 1: not done, see output).
_REFUSED_LINK = 3
_REFUSED_ELSEWHERE = 4
_FAILED = 5
_REFUSED_KIND = 6
_UNSEEN = 7
_REFUSED_MOUNT = 8
_CHANGED = 9
_SHARED_STORAGE = 10
_REFUSED_OPEN = 11
_WHY = {
    _REFUSED_LINK: "is a symbolic link: refused, not followed",
    _REFUSED_ELSEWHERE: "resolves elsewhere (a symbolic link on the way): refused",
    _FAILED: "the command failed on the node",
    _REFUSED_KIND: "is neither a regular file nor a directory: refused",
    _UNSEEN: "the login user may not look there (a directory on the way): not proven",
    _REFUSED_MOUNT: "has another file system mounted inside (named in the evidence): refused, "
    "not verified; declare each mount as a scratch_path of its own (zuka resource add NODE "
    "--kind scratch_path --id MOUNT), or unmount it",
    _CHANGED: "something changed while it was shredded (a name replaced, a directory moved: "
    "named in the evidence), skipped, never followed: not done; find who writes there, "
    "then run again",
    _REFUSED_OPEN: "another user may rename things there and the node has no python3 to "
    "shred without following them: refused (named in the evidence)",
}


class Runner(Protocol):
    """What the driver needs of a node's SSH session (leases.ssh.session.NodeSession)."""

    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult: ...


@dataclasses.dataclass(frozen=True)
class LoginAttempt:
    refused: bool  # the node itself refused authentication: the only proof that counts
    words: str


STILL_WORKS = "the login still works"
# Tries a fresh login offering only the key named by the step (param key_path).
LoginProbe = Callable[[Step], Awaitable[LoginAttempt]]


# -- the plan ---------------------------------------------------------------------


def plan_remote(facts: PlanInput) -> list[Step]:
    """The SSH steps for one node, from the ledger's facts and the presets. Raises
    InputError naming a declared path that may not be shredded (nothing is planned)."""
    node = facts.node
    if node.local:
        return []  # read through NVML here: there is no node to log in to
    preset = presets.preset_for(facts.provider)
    roots = scratch_roots(facts)
    declared: dict[str, int | None] = {p: None for p in preset.paths}
    for res in facts.resources:
        if res.kind is ResourceKind.SCRATCH_PATH:
            paths.check_scratch_path(
                res.native_id, roots, field=f"scratch_path resource {visible(res.native_id, 80)}"
            )
            declared[res.native_id] = res.id
    for path in declared:
        paths.check_scratch_path(path, roots)
    shred_paths = sorted(declared)
    looked_at = sorted({*shred_paths, *preset.shared})

    steps = [
        Step(
            key="gpu-processes",
            phase=Phase.PROCESSES,
            driver="ssh",
            action="gpu-processes",
            target=node.name,
            destructive=False,
            describe=nvsmi.APPS_COMMAND,
        )
    ]
    for path in looked_at:
        shared = path in preset.shared
        steps.append(
            Step(
                key=f"facts:{path}",
                phase=Phase.FACTS,
                driver="ssh",
                action="fs-facts",
                target=path,
                destructive=False,
                describe=f"findmnt -T {paths.quoted(path)}; lsblk -s (file system, mount "
                "options, disk)" + (f"; outlives the instance: {preset.note}" if shared else ""),
                params=params(path=path, shared="yes" if shared else "no"),
            )
        )
    for path in shred_paths:
        outer = next((o for o in shred_paths if o != path and paths.under(path, o)), None)
        # A path inside another is a declared resource (preset paths do not nest): its
        # step stays, as the one that marks that resource deleted once read back.
        inside = (
            ""
            if outer is None
            else f" (inside {outer}, shredded by that step first: this one reads back what"
            " is left and marks the ledger's resource deleted)"
        )
        steps.append(
            Step(
                key=f"shred:{path}",
                phase=Phase.SHRED,
                driver="ssh",
                action="shred",
                target=path,
                destructive=True,
                describe=f"shred -n 1 -z and unlink each regular file in {paths.quoted(path)} "
                + _WALK_RULES
                + inside,
                params=params(
                    path=path,
                    root=paths.root_of(path, roots),
                    inside="\n".join(x for x in shred_paths if x != path and paths.under(x, path)),
                ),
                resource_id=declared[path],
            )
        )
    for rel in presets.HOME_ENTRIES:
        steps.append(
            Step(
                key=f"clear:~/{rel}",
                phase=Phase.CLEAR,
                driver="ssh",
                action="clear",
                target=f"~/{rel}",
                destructive=True,
                describe=f"shred -n 1 -z and unlink ~/{paths.check_home_entry(rel)} (each "
                f"regular file in it) {_WALK_RULES}; on network storage, asks first",
                params=params(home=rel),
            )
        )
    steps += _key_steps(facts)
    return steps


# What the walker (nodewalk.py) promises, in the words of each step that runs it: the plan
# a person confirms says what runs, not a find command that would not.
_WALK_RULES = (
    "by zuka's walker (python3 on the node): no link followed, a file written only if it is "
    "the file listed, hard-linked files only unlinked, mounts inside refused, the login's own "
    "~/.ssh kept; without python3, find -P -xdev -execdir shred, only where no other user "
    "may rename"
)


def scratch_roots(facts: PlanInput) -> tuple[str, ...]:
    """Where declared paths may lie on this node: its provider's preset and the config's
    [offboard] scratch_roots (what RemoteDriver checks every path against again)."""
    preset = presets.preset_for(facts.provider)
    return tuple(dict.fromkeys((*preset.roots, *facts.config.offboard.scratch_roots)))


def _key_steps(facts: PlanInput) -> list[Step]:
    """Revoke, then prove, for each ssh_key resource (by fingerprint), else for the key
    the node's login names (key_path); without either, a revoke step that says so."""
    key_path = facts.node.ssh.key_path or ""
    keys: list[tuple[str, str, int | None]] = []  # (fingerprint, key_path, resource id)
    for res in facts.resources:
        if res.kind is ResourceKind.SSH_KEY:
            fp = authkeys.check_fingerprint(
                res.native_id, f"ssh_key resource {visible(res.native_id, 80)}"
            )
            keys.append((fp, key_path, res.id))
    if not keys:
        keys.append(("", key_path, None))
    keys_file = presets.KEYS_FILE
    steps = []
    for fp, path, res_id in keys:
        # A fingerprint in full is a random-looking word: in a step's key it would reach the
        # ledger's notes (the resource marked verified), which refuse such words as secrets.
        name = f"{fp[:15]}#{res_id}" if fp else path or "unknown"
        steps.append(
            Step(
                key=f"revoke-key:{name}",
                phase=Phase.REVOKE,
                driver="ssh",
                action="revoke-key",
                target=fp or name,
                destructive=True,
                describe=f"remove the lines holding {_holder(fp, path)} from every keys "
                f"file sshd reads (~/{keys_file}, authorized_keys2, sshd's AuthorizedKeysFile)"
                ", each rewritten by a file beside it and mv, links refused; first removes "
                "~/.zuka-offboard (zuka's run files)",
                params=params(fingerprint=fp, key_path=path, keys_file=keys_file),
                resource_id=res_id,
            )
        )
        steps.append(
            Step(
                key=f"prove-refused:{name}",
                phase=Phase.PROVE,
                driver="ssh",
                action="prove-refused",
                target=fp or name,
                destructive=False,
                describe=f"a fresh login offering only {name}: must be refused",
                params=params(fingerprint=fp, key_path=path),
            )
        )
    return steps


def _holder(fingerprint: str, key_path: str) -> str:
    """The key a revoke step removes, as a person reads it in the plan."""
    if fingerprint:
        return f"the public key {fingerprint}"
    if key_path:
        return f"the public key of {key_path} (its fingerprint is in the evidence)"
    return "the lab's key: none recorded (the step says so when it runs)"


# -- the scripts (one quoted value each; everything else is fixed text) ------------------


def _guard(word: str) -> str:
    """Sets p, refuses a symbolic link or a path that resolves elsewhere; absent is done."""
    return (
        f"p={word}\n"
        f'if [ -L "$p" ]; then echo "refused: a symbolic link"; exit {_REFUSED_LINK}; fi\n'
        # `-e` is also false where a directory on the way may not be searched: absent only
        # when the nearest existing ancestor is a directory this user may search.
        'if [ ! -e "$p" ]; then\n'
        '  d=$(dirname -- "$p"); while [ ! -e "$d" ]; do d=$(dirname -- "$d"); done\n'
        '  if [ -d "$d" ] && [ -x "$d" ]; then echo "absent"; exit 0; fi\n'
        f'  echo "refused: cannot look inside a directory on the way"; exit {_UNSEEN}\n'
        "fi\n"
        f'r=$(readlink -f -- "$p") || exit {_FAILED}\n'
        f'if [ "$r" != "$p" ]; then echo "refused: resolves elsewhere"; '
        f"exit {_REFUSED_ELSEWHERE}; fi\n"
    )


def _home_dir() -> str:
    """Sets h to the login user's real home (never / or a relative one)."""
    return (
        f'h=$(readlink -f -- "$HOME") || exit {_FAILED}\n'
        f'case "$h" in /?*) ;; *) echo "refused: the home directory is $h"; '
        f"exit {_FAILED} ;; esac\n"
    )


def _home(rel: str) -> str:
    """Sets p to a path in the login user's real home."""
    return _home_dir() + _guard('"$h"/' + paths.quoted(paths.check_home_entry(rel)))


# The login's own ~/.ssh is the one directory spared (as the walker does, and why): $ki is
# its inode when it lies on the path's file system (find -xdev stays on it), else 0.
_LOGIN_SSH = (
    'ki=0; if [ -d "${HOME:-}/.ssh" ] && [ "$(stat -L -c %d -- "$HOME/.ssh")" = '
    '"$(stat -L -c %d -- "$p")" ]; then ki=$(stat -L -c %i -- "$HOME/.ssh"); fi\n'
)
# find's words that skip the login's own ~/.ssh and zuka's own run directory on the node
# (by inode: $wi is set by remote_job, 0 otherwise), and all in them.
_NOT_SSH = '\\( -type d -inum "$ki" -o -type d -inum "${wi:-0}" \\) -prune -o'

# Other file systems (and bind mounts, which find -xdev cannot tell from a directory)
# mounted strictly inside the path: refused, named, unless at or below a declared path of
# their own step ($own, newline-separated): that step shreds them.
_MOUNTS = (
    f'[ -r /proc/self/mountinfo ] || {{ echo "refused: cannot read the mount table"; '
    f"exit {_REFUSED_MOUNT}; }}\n"
    'inside=$(P="$p/" O="$own" awk \'BEGIN { n = split(ENVIRON["O"], o, "\\n") } '
    'index($5, ENVIRON["P"]) == 1 { for (i = 1; i <= n; i++) if (o[i] != "" && ($5 == o[i] '
    '|| index($5, o[i] "/") == 1)) next; print $5 }\' /proc/self/mountinfo)\n'
    'if [ -n "$inside" ]; then echo "refused: a file system is mounted inside:"; '
    f'printf "%s\\n" "$inside" | head -n {_LISTED} | sed "s/^/mounted inside: /"; '
    f"exit {_REFUSED_MOUNT}; fi\n"
)
# The walker (leases/offboard/nodewalk.py) is sent as text and run by the node's python3.
_WALKER = (Path(__file__).with_name("nodewalk.py")).read_text()
_WALK_END = "ZUKA_WALK"


def _walk(mode: str) -> str:
    """Runs the walker in mode on $p when the node has python3 (the rest of the script is
    the fallback); exits with its status."""
    return (
        "if command -v python3 >/dev/null 2>&1; then\n"
        f'python3 - {mode} "$p" "${{w:-}}" $own_args <<\'{_WALK_END}\'\n'
        f"{_WALKER}{_WALK_END}\n"
        "exit $?\n"
        "fi\n"
    )


# Without python3, nothing on a node opens a file without following a link and checks it
# is the one listed; so shred runs only where no one but the login user can rename
# anything: every entry owned by the login user, every directory writable by no one else
# (or sticky and the login user's). Anything else is named and refused.
_PIN = (
    # Work from inside the path (or its file's directory), entered once: a directory on
    # the way swapped for a link afterwards cannot redirect find or shred.
    'if [ -d "$p" ]; then d=$p; n=.; else d=${p%/*}; d=${d:-/}; n=./${p##*/}; fi\n'
    f'cd -P -- "$d" || exit {_FAILED}\n'
    f'if [ "$(pwd -P)" != "$d" ]; then echo "refused: resolves elsewhere"; '
    f"exit {_REFUSED_ELSEWHERE}; fi\n"
)
_NOBODY_ELSE = (
    "u=$(id -u)\n"
    "open=$( { find -P . -xdev -maxdepth 0 -type d \\( -perm -0002 -o -perm -0020 \\) "
    '! \\( -perm -1000 -user "$u" \\) -print; '
    'find -P "$n" -xdev \\( -type d \\( -perm -0002 -o -perm -0020 \\) ! \\( -perm -1000 '
    '-user "$u" \\) -o ! -user "$u" \\) -print; } | head -n 50)\n'
    'if [ -n "$open" ]; then echo "refused: python3 is not on the node, and another user may '
    "rename things here (a link renamed over a file would redirect shred): install python3, "
    'or chown/chmod these (relative to $d):"; printf "%s\\n" "$open" | sed "s/^/writable by '
    f'others: /"; exit {_REFUSED_OPEN}; fi\n'
)
_SHRED_BODY = (
    f'[ -f "$p" ] || [ -d "$p" ] || {{ echo "refused: not a file or directory"; '
    f"exit {_REFUSED_KIND}; }}\n"
    + _MOUNTS
    + _walk("shred")
    + _PIN
    + _NOBODY_ELSE
    # A regular file: shred it; one with other names (hard links) is only unlinked, or
    # shred would overwrite a file outside the root through its other name.
    + 'if [ "$n" != . ]; then\n'
    '  if [ "$(stat -c %h -- "$n")" = 1 ]; then shred -n 1 -z -u -- "$n" '
    f'|| exit {_FAILED}; else rm -f -- "$n" || exit {_FAILED}; echo \'unlinked only: other '
    "hard links'; fi\n"
    "  exit 0\n"
    "fi\n"
    # find -execdir refuses a PATH that holds the current directory ("", "." or any
    # relative entry): keep only absolute entries.
    'PATH=$(printf "%s" "$PATH" | tr ":" "\\n" | grep "^/" | paste -s -d ":" -)\n'
    '[ -n "$PATH" ] || PATH=/usr/bin:/bin\n'
    # Every other .ssh below is the lease's data, shredded like the rest.
    + _LOGIN_SSH
    + f"find -P . -xdev {_NOT_SSH} -type f -links 1 -execdir shred -n 1 -z -u -- {{}} +; s=$?\n"
    f"find -P . -xdev {_NOT_SSH} -type f -links +1 -print -execdir rm -f -- {{}} + "
    '| sed "s/^/unlinked only: /"\n'
    f"find -P . -xdev -mindepth 1 {_NOT_SSH} -depth -type d -empty -delete\n"
    'find -P "$PWD" -xdev -mindepth 1 -type d -inum "$ki" -print -prune '
    f'| sed "s|^|{_KEPT}: |"\n'
    f"find -P . -xdev -mindepth 1 {_NOT_SSH} ! -type d -print | head -n {_LISTED} "
    '| sed "s/^/left: /"\n'
    f"[ $s = 0 ] || exit {_FAILED}\n"
)
_GONE_BODY = (
    # Verified gone: no regular file left (symbolic links are listed, never followed). A
    # directory find could not read hides what is in it: that is not "none left".
    'if [ -f "$p" ]; then echo "still there"; exit 1; fi\n'
    + _MOUNTS
    + _walk("gone")
    + f'cd -P -- "$p" || exit {_FAILED}\n'
    + _LOGIN_SSH
    + 'find -P "$PWD" -xdev -mindepth 1 -type d -inum "$ki" -print -prune '
    f'| sed "s|^|{_KEPT}: |"\n'
    f"left=$( {{ find -P . -xdev {_NOT_SSH} -type f -print || "
    'echo "find could not look everywhere"; } '
    f"| head -n {_LISTED})\n"
    'if [ -z "$left" ]; then echo "no regular file left"; exit 0; fi\n'
    'printf "%s\\n" "$left"; exit 1\n'
)
# What is there now, for a person to check before confirming: never changes anything.
_INSPECT_BODY = (
    'if [ -L "$p" ]; then echo "exists yes"; echo "kind symbolic link (refused)"; exit 0; fi\n'
    'if [ ! -e "$p" ]; then\n'
    '  d=$(dirname -- "$p"); while [ ! -e "$d" ]; do d=$(dirname -- "$d"); done\n'
    '  if [ -d "$d" ] && [ -x "$d" ]; then echo "exists no"; else echo "exists unknown"; fi\n'
    "  exit 0\n"
    "fi\n"
    'echo "exists yes"\n'
    'findmnt -n -r -o FSTYPE,SOURCE,TARGET -T "$p" | head -n 1 | sed "s/^/fs /"\n'
    'P="$p/" awk \'index($5, ENVIRON["P"]) == 1 { print "mounted inside: " $5 }\' '
    "/proc/self/mountinfo 2>/dev/null | head -n 50\n"
    + _walk("inspect")
    + _LOGIN_SSH
    + f'find -P "$p" -xdev {_NOT_SSH} \\( -type f -exec stat -c "f %s %Y" -- {{}} + \\) '
    "-o \\( -type d "
    '! -readable -printf "u\\n" \\) 2>/dev/null | awk \'$1 == "f" { n++; b += $2; '
    'if ($3 > m) m = $3 } $1 == "u" { u = 1 } END { printf "files %d\\nbytes %.0f\\n'
    'newest %d\\n", n, b, m; if (u) print "partial: some directories could not be read" }\'\n'
)


def _own(paths_inside: Sequence[str]) -> str:
    """Sets own (newline-separated, for the mount check) and own_args (the walker's words)."""
    # Checked scratch paths are plain characters (no space, quote or glob): $own_args
    # splits into exactly these words.
    return (
        f"own={paths.quoted(chr(10).join(paths_inside))}\n"
        f"own_args={paths.quoted(' '.join(paths_inside))}\n"
    )


def shred_script(path: str, roots: Sequence[str], own: Sequence[str] = ()) -> str:
    """The shred of a declared path (own: declared paths inside it, each its own step)."""
    return _guard(paths.quoted(paths.check_scratch_path(path, roots))) + _own(own) + _SHRED_BODY


def gone_script(path: str, roots: Sequence[str], own: Sequence[str] = ()) -> str:
    return _guard(paths.quoted(paths.check_scratch_path(path, roots))) + _own(own) + _GONE_BODY


_JOB_END = "ZUKA_JOB"
# Network and shared file systems: a home there belongs to every machine that mounts it.
SHARED_FS = (
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "ceph",
    "fuse.ceph",
    "fuse.ceph-fuse",
    "glusterfs",
    "fuse.glusterfs",
    "lustre",
    "beegfs",
    "gpfs",
    "juicefs",
    "fuse.juicefs",
    "sshfs",
    "fuse.sshfs",
    "9p",
    "virtiofs",
    "afs",
    "fuse.s3fs",
    "fuse.rclone",
    "fuse.gcsfuse",
    "fuse.ossfs",
    "fuse.cosfs",
)


def job_tag(key: str) -> str:
    """A step's name for its run files on the node (a hash: never a word from the plan)."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def remote_job(tag: str, body: str) -> str:
    """body run on the node as a job of its own that a cancel or a resume can stop.

    It runs in a session of its own (setsid), its pid in ~/.zuka-offboard/TAG-HOST.pid and
    its output in TAG-HOST.out there. While it runs, the shell sshd started writes a NUL to
    stderr each second: when the SSH channel is gone (Ctrl-C, a cancelled task, a killed
    zuka, a dropped connection) that write fails and the job's process group is killed.
    A later run of the same step first stops a job still at work there, and prints what a
    job that was cut off printed (its output stays in the evidence). Exits with the
    body's status."""
    return (
        "umask 077\n"
        'w="${HOME:-}/.zuka-offboard"\n'
        'case "$w" in /?*) ;; *) echo "refused: no home directory for zuka\'s run files"; '
        f"exit {_FAILED} ;; esac\n"
        f'if [ -L "$w" ]; then echo "refused: $w is a symbolic link"; exit {_FAILED}; fi\n'
        'mkdir -p -- "$w" 2>/dev/null; if [ ! -d "$w" ] || [ ! -O "$w" ]; then '
        f'echo "refused: $w is not the login user\'s directory"; exit {_FAILED}; fi\n'
        'chmod 700 -- "$w"; wi=$(stat -c %i -- "$w")\n'
        f't="$w/{tag}-$(uname -n | tr -cd "A-Za-z0-9.-")"\n'
        'old=$(cat -- "$t.pid" 2>/dev/null)\n'
        'case "$old" in ""|*[!0-9]*) ;; *) if kill -0 "-$old" 2>/dev/null; then\n'
        '  echo "zuka: an earlier run of this step was still at work (process group $old): '
        'stopped it first"\n'
        '  kill -TERM "-$old" 2>/dev/null; i=0\n'
        '  while kill -0 "-$old" 2>/dev/null; do i=$((i + 1))\n'
        '    [ $i -lt 50 ] || kill -KILL "-$old" 2>/dev/null\n'
        f'    [ $i -lt 300 ] || {{ echo "zuka: it would not stop"; exit {_FAILED}; }}\n'
        "    sleep 0.1; done\n"
        "fi ;; esac\n"
        'if [ -f "$t.out" ]; then echo "zuka: an earlier run of this step was cut off; it '
        'printed:"; tail -c 16384 -- "$t.out" | sed "s/^/| /"; echo "zuka: (end of that run)"; fi\n'
        'rm -f -- "$t.pid" "$t.out" "$t.rc"\n'
        f"cat > \"$t.sh\" <<'{_JOB_END}'\n{body}{_JOB_END}\n"
        "export w wi\n"
        'if ! command -v setsid >/dev/null 2>&1; then echo "zuka: no setsid on the node: this '
        'run cannot be stopped from afar" >&2; sh "$t.sh"; s=$?; rm -f -- "$t.sh"; exit $s; fi\n'
        'setsid sh -c \'echo $$ > "$1.pid"; sh "$1.sh"; echo $? > "$1.rc"\' sh "$t" '
        '> "$t.out" 2>&1 < /dev/null &\n'
        "c=$!\n"
        "( trap '' PIPE; while sleep 1 >/dev/null 2>&1; do printf '\\0' >&2 || break; done\n"
        '  g=$(cat -- "$t.pid" 2>/dev/null); [ -z "$g" ] || kill -TERM "-$g" 2>/dev/null ) &\n'
        "h=$!\n"
        'wait "$c"\n'
        # setsid forks when it leads a process group already: wait for the job itself.
        'g=$(cat -- "$t.pid" 2>/dev/null)\n'
        'while [ ! -f "$t.rc" ] && [ -n "$g" ] && kill -0 "-$g" 2>/dev/null; do sleep 0.1; done\n'
        'kill "$h" 2>/dev/null\n'
        f's=$(cat -- "$t.rc" 2>/dev/null); s=${{s:-{_FAILED}}}\n'
        'cat -- "$t.out" && rm -f -- "$t.pid" "$t.out" "$t.rc" "$t.sh"\n'
        "exit $s\n"
    )


# zuka's run directory off the node (remote_job's ~/.zuka-offboard): only a directory the
# login user owns; a link there is not zuka's and is left, never followed (rm -r does not
# follow links inside). Never fails the revoke: the lab's key going matters more.
_RUN_DIR_GONE = (
    'w="${HOME:-}/.zuka-offboard"\n'
    'case "$w" in /?*) ;; *) echo "no home directory: no run directory"; exit 0 ;; esac\n'
    'if [ -L "$w" ]; then echo "left: $w is a symbolic link, not zuka\'s"; exit 0; fi\n'
    'if [ ! -e "$w" ]; then echo "no run directory of zuka\'s left"; exit 0; fi\n'
    'if [ -d "$w" ] && [ -O "$w" ]; then rm -rf -- "$w"; fi\n'
    'if [ -e "$w" ]; then echo "could not remove zuka\'s run directory $w"; exit 1; fi\n'
    'echo "removed zuka\'s run directory $w"\n'
)


def _shared_home_check() -> str:
    """After _home's guard: a path on network or shared storage (or one whose file system
    cannot be read) is not cleared: the step asks first (exit _SHARED_STORAGE)."""
    cases = "|".join(SHARED_FS)
    return (
        'm=$(findmnt -n -r -o FSTYPE,SOURCE,TARGET -T "$p" 2>/dev/null | head -n 1)\n'
        'case "${m%% *}" in\n'
        f'  {cases}) echo "shared storage: $m"; exit {_SHARED_STORAGE} ;;\n'
        f'  "") echo "shared storage: unknown (findmnt gave nothing)"; exit {_SHARED_STORAGE} ;;\n'
        "esac\n"
    )


def fallback(script: str) -> str:
    """The script without its python3 walker: what a node without python3 runs."""
    return script.replace("if command -v python3 >/dev/null 2>&1; then", "if false; then")


def facts_script(path: str) -> str:
    """Prints `path`, `mount`, `disk` and `inside` lines (leases.offboard.erasure)."""
    return (
        f"t={paths.quoted(path)}\n"
        'while [ ! -e "$t" ] && [ "$t" != / ]; do t=$(dirname -- "$t"); done\n'
        'echo "path $t"\n'
        'findmnt -n -r -o TARGET,SOURCE,FSTYPE,OPTIONS -T "$t" | head -n 1 '
        f'| sed "s/^/{erasure.MOUNT} /"\n'
        'src=$(findmnt -n -r -o SOURCE -T "$t" | head -n 1)\n'
        'case "$src" in /dev/*) lsblk -n -s -r -o TYPE,ROTA,MODEL -- "$src" 2>/dev/null '
        f'| sed "s/^/{erasure.DISK} /" ;; esac\n'
        f'findmnt -n -r -o TARGET | sed "s/^/{erasure.INSIDE} /"\n'
    )


# Every keys file sshd reads for the login user: ~/.ssh/authorized_keys and
# authorized_keys2 (OpenSSH's default AuthorizedKeysFile), and what the node's sshd
# configuration names (sshd -T where the login user may run it, else sshd_config), with
# %h, %u and %% expanded and relative paths taken from the home. Sets $files, one a line.
_KEYS_FILES = (
    "set -f\n"
    "u=$(id -un)\n"
    'files=$( { printf "%s\\n" "$HOME/$1" "$HOME/.ssh/authorized_keys" '
    '"$HOME/.ssh/authorized_keys2"; { sshd -T 2>/dev/null || cat /etc/ssh/sshd_config '
    '2>/dev/null; } | awk \'tolower($1) == "authorizedkeysfile" { for (i = 2; i <= NF; i++) '
    'print $i }\' | head -n 20 | U="$u" awk \'$0 != "none" { s = $0; o = ""; '
    'while ((i = index(s, "%")) > 0) { c = substr(s, i + 1, 1); o = o substr(s, 1, i - 1); '
    'if (c == "h") o = o ENVIRON["HOME"]; else if (c == "u") o = o ENVIRON["U"]; '
    'else if (c == "%") o = o "%"; else { o = ""; s = ""; break } s = substr(s, i + 2) } '
    'o = o s; if (o == "") next; if (substr(o, 1, 1) != "/") o = ENVIRON["HOME"] "/" o; '
    "print o }'; } | awk '!seen[$0]++')\n"
)


def keys_files_script(keys_file: str, mark: str) -> str:
    """Prints each keys file sshd reads after a line `MARK NAME` (absent ones as `#absent`).
    mark is a fresh random word: no line of a file can pose as the next file's head."""
    rel = paths.check_home_entry(keys_file or presets.KEYS_FILE, keys=True)
    return (
        f"set -- {paths.quoted(rel)}\n"
        + _KEYS_FILES
        + 'printf "%s\\n" "$files" | while IFS= read -r f; do\n'
        f'  echo "{mark} $f"; if [ -e "$f" ]; then cat -- "$f"; echo; else echo "#absent"; fi\n'
        "done\n"
    )


def split_keys_files(text: str, mark: str) -> list[tuple[str, str]]:
    """(file name, its text) for each file keys_files_script printed."""
    out: list[tuple[str, list[str]]] = []
    for line in text.split("\n"):
        if line.startswith(mark + " "):
            out.append((line[len(mark) + 1 :], []))
        elif out:
            out[-1][1].append(line)
    return [(name, "\n".join(lines)) for name, lines in out]


def revoke_script(keys_file: str, blobs: Sequence[str]) -> str:
    """Rewrites each keys file sshd reads without the lines holding these blobs,
    atomically (a temporary file beside it, its mode and owner, then mv)."""
    patterns = " ".join(f"-e {paths.quoted(authkeys.check_blob(b))}" for b in blobs)
    rel = paths.check_home_entry(keys_file or presets.KEYS_FILE, keys=True)
    return (
        f"set -- {paths.quoted(rel)}\n" + _KEYS_FILES + "r=0\n" + "while IFS= read -r f; do\n"
        '  [ -e "$f" ] || [ -L "$f" ] || continue\n'
        f'  grep -q -F {patterns} -- "$f" 2>/dev/null || continue\n'
        f'  if [ -L "$f" ]; then echo "refused: $f is a symbolic link"; r={_REFUSED_LINK}; '
        "continue; fi\n"
        f'  t=$(mktemp -- "$f.zuka.XXXXXX") || {{ r={_FAILED}; continue; }}\n'
        f'  grep -v -F {patterns} -- "$f" > "$t"; s=$?\n'
        f'  if [ $s -gt 1 ]; then rm -f -- "$t"; r={_FAILED}; continue; fi\n'
        '  chmod --reference="$f" -- "$t" 2>/dev/null; '
        'chown --reference="$f" -- "$t" 2>/dev/null\n'
        f'  mv -f -- "$t" "$f" || {{ rm -f -- "$t"; r={_FAILED}; continue; }}\n'
        '  echo "$f: rewritten without the key"\n'
        "done <<ZUKA_FILES\n$files\nZUKA_FILES\n"
        "exit $r\n"
    )


# -- the driver -------------------------------------------------------------------


def _evidence(result: CommandResult) -> str:
    text = f"exit {result.exit_status}\n{result.stdout}"
    stderr = result.stderr.replace("\x00", "")  # remote_job's heartbeats
    if stderr:
        text += f"\nstderr:\n{stderr}"
    return text[-EVIDENCE_MAX:]


class RemoteDriver:
    """Carries out and verifies the "ssh" steps on one node through its session."""

    name = "ssh"

    def __init__(
        self,
        session: Runner,
        *,
        roots: Sequence[str],
        login: LoginProbe,
        shred_timeout_s: float = SHRED_TIMEOUT_S,
        fingerprint_of: Callable[[str], str] = authkeys.fingerprint_of,
        host: str = "",
    ) -> None:
        self.session = session
        self.roots = tuple(roots)
        self.login = login
        self.shred_timeout_s = shred_timeout_s
        self._fingerprint_of = fingerprint_of
        # Where inspect looked, for a person checking the facts (NodeSession's node name).
        self._host = host or str(getattr(session, "name", ""))

    async def run(self, step: Step) -> Outcome:
        return await self._do(step, verify=False)

    async def verify(self, step: Step, *, patient: bool = True) -> Outcome:
        return await self._do(step, verify=True)

    async def _do(self, step: Step, *, verify: bool) -> Outcome:
        try:
            if step.action == "gpu-processes":
                return await self._processes(verify=verify)
            if step.action == "fs-facts":
                return await self._facts(step)
            if step.action in ("shred", "clear"):
                return await self._shred(step, verify=verify)
            if step.action == "revoke-key":
                return await self._revoke(step, verify=verify)
            if step.action == "prove-refused":
                return await self._prove(step)
        except SshError as exc:
            return await self._unreachable(step, exc)
        except InputError as exc:
            return Outcome(False, str(exc), f"refused: {visible(exc, 300)}")
        return Outcome(False, "", f"the ssh driver has no action {visible(step.action, 60)!r}")

    async def _unreachable(self, step: Step, exc: SshError) -> Outcome:
        if step.action == "revoke-key" and exc.health is NodeHealth.AUTH_FAILED:
            # A rerun after the key went (the process was killed before it recorded so)
            # can no longer log in to read the file: the node refusing the key is the proof.
            attempt = await self.login(step)
            if attempt.refused:
                return Outcome(True, attempt.words, "the node refuses a login with the key")
        words = f"SSH failed: {visible(exc, 300)}"
        if exc.health is NodeHealth.AUTH_FAILED:
            words += " (after the lab's key is revoked, nothing on the node can be checked)"
        return Outcome(False, str(exc), words)

    async def _processes(self, *, verify: bool) -> Outcome:
        result = await self.session.run(nvsmi.APPS_COMMAND)
        if not result.ok:
            health = nvsmi.classify_failure(result.exit_status, result.stdout, result.stderr)
            words = f"GPU processes unknown: {nvsmi.human_reason(health)}"
            # Unknown is not none: the user decides whether to go on.
            return Outcome(False, _evidence(result), words, needs_consent=not verify)
        try:
            found = nvsmi.parse_compute_apps(result.stdout, "node")
        except nvsmi.NvsmiParseError as exc:
            return Outcome(
                False, _evidence(result), f"GPU processes unknown: {exc}", needs_consent=not verify
            )
        if not found:
            return Outcome(True, _evidence(result), "no GPU process running")
        listed = ", ".join(f"{p.pid} {visible(p.process_name, 60)}" for p in found[:10])
        words = f"{len(found)} GPU process(es) still running: {listed}"
        facts = {"gpu_processes": str(len(found))}
        if verify:
            return Outcome(False, _evidence(result), words, facts)
        return Outcome(True, _evidence(result), words, facts, needs_consent=True)

    async def _facts(self, step: Step) -> Outcome:
        path = step.param("path")
        result = await self.session.run(facts_script(path))
        if not result.ok:
            return Outcome(False, _evidence(result), "the node did not give its file-system facts")
        found = erasure.parse_facts(path, result.stdout)
        facts = found.as_facts()
        if step.param("shared") == "yes":
            facts["outlives_instance"] = "yes"
        said = facts["caveats"] or "no known limit to shred here"
        where = f"{found.fstype or '?'} ({found.options or '?'}) on {found.source or '?'}"
        return Outcome(True, _evidence(result), f"{where}: {visible(said, 400)}", facts)

    def _target(self, step: Step) -> str:
        """The script's head for a shred or clear step: sets p (and own) after the guard."""
        if step.action == "shred":
            word = paths.quoted(paths.check_scratch_path(step.param("path"), self.roots))
            own = [paths.check_scratch_path(x, self.roots) for x in _inside(step)]
            return _guard(word) + _own(own)
        return _home(step.param("home")) + _own(())

    async def _shred(self, step: Step, *, verify: bool) -> Outcome:
        # The file system's facts are read on every run and read-back of a shred (the facts
        # step ran once, maybe long ago: the mount table may have changed since).
        script = self._target(step)  # checks the path before anything reaches the node
        facts: dict[str, str] = {}
        if step.action == "shred":
            read = await self.session.run(facts_script(step.param("path")))
            if read.ok:
                facts = erasure.parse_facts(step.param("path"), read.stdout).as_facts()
        if step.action == "clear" and not verify:
            script += _shared_home_check()
        script += _GONE_BODY if verify else _SHRED_BODY
        timeout = None if verify else self.shred_timeout_s
        result = await self.session.run(remote_job(job_tag(step.key), script), timeout)
        status = result.exit_status
        if status == 0:
            return Outcome(True, _evidence(result), _done_words(result.stdout, verify), facts)
        if status == _SHARED_STORAGE:
            said = next(
                (ln for ln in _lines(result.stdout) if ln.startswith("shared storage: ")),
                "shared storage: unknown",
            ).removeprefix("shared storage: ")
            words = (
                f"{step.target} is on shared or network storage ({visible(said, 200)}): every "
                "machine that mounts it would lose it; not cleared. Clear it by hand where it "
                "belongs, then go on (--go-on)"
            )
            return Outcome(False, _evidence(result), words, {"home_fs": said}, needs_consent=True)
        why = _WHY.get(status or 0, "files are still there" if verify else "not done")
        return Outcome(False, _evidence(result), f"{step.target}: {why}", facts)

    async def inspect(self, step: Step) -> Sighting:
        """What is at a destructive step's target now: never changes anything."""
        try:
            if step.action in ("shred", "clear"):
                return await self._inspect_path(step)
            if step.action == "revoke-key":
                return await self._inspect_key(step)
        except SshError as exc:
            return Sighting(None, str(exc), f"could not look: {visible(exc, 300)}")
        except InputError as exc:
            return Sighting(None, str(exc), f"refused: {visible(exc, 300)}")
        return Sighting(None, "", f"the ssh driver cannot inspect {visible(step.action, 60)!r}")

    async def _inspect_path(self, step: Step) -> Sighting:
        if step.action == "shred":
            head = f"p={paths.quoted(paths.check_scratch_path(step.param('path'), self.roots))}\n"
        else:
            rel = paths.quoted(paths.check_home_entry(step.param("home")))
            head = _home_dir() + f'p="$h"/{rel}\n'
        result = await self.session.run(head + _own(()) + _INSPECT_BODY)
        facts: dict[str, str] = {"host": self._host, "path": step.target}
        exists: bool | None = None
        for line in _lines(result.stdout)[:200]:
            word, _, rest = line.partition(" ")
            if word == "exists":
                exists = {"yes": True, "no": False}.get(rest)
            elif word in ("files", "bytes"):
                facts[word] = visible(rest, 40)
            elif word == "newest":
                facts[word] = _iso_utc(rest)
            elif line.startswith(_KEPT + ": "):
                facts["kept"] = visible(line[len(_KEPT) + 2 :], 300)
            elif word == "fs":
                fstype, _, more = rest.partition(" ")
                facts["fstype"] = visible(fstype, 80)
                facts["mount"] = visible(more, 300)
            elif word == "kind":
                facts["kind"] = visible(rest, 80)
            elif line.startswith("mounted inside: "):
                facts["mounts_inside"] = (
                    facts.get("mounts_inside", "") + " " + visible(line[16:], 300)
                ).strip()
            elif line.startswith("partial: "):
                facts["partial"] = "yes"
        if exists is None:
            return Sighting(None, _evidence(result), "the node did not say whether it is there")
        if not exists:
            return Sighting(False, _evidence(result), f"not found: {step.target}", facts)
        said = f"{facts.get('files', '?')} file(s), {facts.get('bytes', '?')} bytes"
        if "fstype" in facts:
            said += f" on {facts['fstype']}"
        if "mounts_inside" in facts:
            said += f"; mounted inside: {facts['mounts_inside']}"
        return Sighting(True, _evidence(result), said, facts)

    async def _inspect_key(self, step: Step) -> Sighting:
        fp = await self._fingerprint(step)
        listed, files = await self._keys_files(step)
        if not listed.ok or not files:
            return Sighting(None, _evidence(listed), "cannot read the authorized keys files")
        holding: list[str] = []
        unread = False
        for name, text in files:
            found = authkeys.find_key(text, fp)
            unread = unread or bool(found.unread)
            if found.lines:
                holding.append(f"{visible(name, 200)} ({found.lines} line(s))")
        facts = {"host": self._host, "fingerprint": fp, "in": ", ".join(holding)}
        if holding:
            return Sighting(True, _evidence(listed), f"the key is in {', '.join(holding)}", facts)
        if unread:
            return Sighting(None, _evidence(listed), "a keys file is longer than zuka reads")
        return Sighting(False, _evidence(listed), "not found: the key is in no keys file", facts)

    async def _fingerprint(self, step: Step) -> str:
        fp = step.param("fingerprint")
        if fp:
            return authkeys.check_fingerprint(fp)
        key_path = step.param("key_path")
        if not key_path:
            raise InputError(
                "ssh_key",
                "",
                "no key recorded for this node: add its key path, or an ssh_key resource "
                "with the key's SHA256 fingerprint",
            )
        return await asyncio.to_thread(self._fingerprint_of, key_path)

    async def _keys_files(self, step: Step) -> tuple[CommandResult, list[tuple[str, str]]]:
        mark = f"zuka-keys-{secrets.token_hex(8)}"
        listed = await self.session.run(keys_files_script(step.param("keys_file"), mark))
        return listed, split_keys_files(listed.stdout, mark) if listed.ok else []

    async def _revoke(self, step: Step, *, verify: bool) -> Outcome:
        fp = await self._fingerprint(step)
        cleaned = ""
        if not verify:
            # The last step that can still log in: zuka's run directory goes before the
            # key does. A rerun's first job makes it again (remote_job's mkdir -p).
            gone = await self.session.run(_RUN_DIR_GONE)
            cleaned = _evidence(gone)[-4096:] + "\n"
        listed, files = await self._keys_files(step)
        if not listed.ok or not files:
            words = "cannot read the authorized keys files"
            return Outcome(False, cleaned + _evidence(listed), words)
        # The step's words never hold the fingerprint: they end up in the ledger's notes,
        # where a random-looking word is refused as a secret (the facts keep it).
        facts = {"fingerprint": fp, "keys_files": " ".join(visible(n, 200) for n, _ in files)}
        blobs: list[str] = []
        holding: list[str] = []
        for name, text in files:
            found = authkeys.find_key(text, fp)
            if found.unread and (verify or not found.lines):
                # The key may be in the part not read: neither clean nor revoked.
                why = f"{visible(name, 200)} has {found.unread} more lines than zuka reads: "
                return Outcome(False, _evidence(listed), why + "not read, so not proven; trim it")
            if found.lines:
                holding.append(visible(name, 200))
                blobs += [b for b in found.blobs if b not in blobs]
        names = ", ".join(visible(n, 200) for n, _ in files)
        if not holding:
            words = f"the key is in none of {names}"
            return Outcome(True, cleaned + _evidence(listed), words, facts)
        if verify:
            words = f"the key is still in {', '.join(holding)}"
            return Outcome(False, _evidence(listed), words, facts)
        result = await self.session.run(revoke_script(step.param("keys_file"), blobs))
        if not result.ok:
            why = _WHY.get(result.exit_status or 0, "not done")
            words = f"{', '.join(holding)}: {why}"
            return Outcome(False, cleaned + _evidence(result), words, facts)
        words = f"the key's lines removed from {', '.join(holding)}"
        return Outcome(True, cleaned + _evidence(result), words, facts)

    async def _prove(self, step: Step) -> Outcome:
        attempt = await self.login(step)
        if attempt.refused:
            return Outcome(True, attempt.words, "a fresh login with the key was refused")
        words = f"not proven: {visible(attempt.words, 300)}"
        if attempt.words == STILL_WORKS:
            words += (
                " (the key may be authorised elsewhere: sshd's AuthorizedKeysFile, another "
                "user, or a platform that puts it back)"
            )
        return Outcome(False, attempt.words, words)


def _inside(step: Step) -> list[str]:
    """The declared paths inside a shred step's path (each its own step)."""
    return [x for x in step.param("inside").split("\n") if x]


def _iso_utc(seconds: str) -> str:
    """A node's epoch seconds as buckets give times (ISO 8601 UTC); "" for no file (0);
    anything else as it came, made visible."""
    if seconds == "0":
        return ""
    try:
        at = datetime.fromtimestamp(int(seconds), UTC)
    except (ValueError, OverflowError, OSError):
        return visible(seconds, 40)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _lines(text: str) -> list[str]:
    """The node's output, a line per '\n' only: str.splitlines also ends a line at \r,
    \f, \x85, \u2028..., which a file name on the node may hold (a FIFO named
    'x\rabsent' read as the line 'absent')."""
    return text.split("\n")


def _done_words(stdout: str, verify: bool) -> str:
    if "absent" in _lines(stdout):
        # Read back after a shred, absent is the proof, not a sign nothing was there.
        return "not there: nothing left" if verify else "already gone"
    left = sum(1 for line in _lines(stdout) if line.startswith("left: "))
    unlinked = sum(1 for line in _lines(stdout) if line.startswith("unlinked only"))
    kept = any(line.startswith(_KEPT + ": ") for line in _lines(stdout))
    if verify:
        # The login's own ~/.ssh was not looked at: said, never hidden in "nothing left".
        return "no regular file left" + (
            "; the login's own ~/.ssh kept, not looked at (the lab's key has its own step)"
            if kept
            else ""
        )
    words = "shredded file by file"
    if unlinked:
        words += f"; {unlinked} with other hard links unlinked, not overwritten"
    if left:
        words += f"; {left} symbolic link(s) or special file(s) left in place, never followed"
    if kept:
        words += "; the login's own ~/.ssh kept (zuka logs in with it until the revoke step)"
    return words


def fresh_login(node: Node, options: SshOptions) -> LoginProbe:
    """A probe that opens a new connection to node offering only the step's key file (no
    agent, no other key), and reports whether the node itself refused it."""

    async def probe(step: Step) -> LoginAttempt:
        key_path = step.param("key_path")
        if not key_path:
            return LoginAttempt(False, "no key file recorded to try a login with")
        wanted = step.param("fingerprint")
        if wanted:
            # Another key being refused would prove nothing about this one.
            try:
                have = await asyncio.to_thread(authkeys.fingerprint_of, key_path)
            except InputError as exc:
                return LoginAttempt(False, visible(exc, 400))
            if have != wanted:
                return LoginAttempt(
                    False, f"{visible(key_path, 200)} holds {have}, not {wanted}: no proof"
                )
        opts = dataclasses.replace(options, client_keys=[], agent_path=None)
        ssh = dataclasses.replace(node.ssh, key_path=key_path)
        session = NodeSession(dataclasses.replace(node, ssh=ssh), opts)
        try:
            await session.run("true")
        except SshError as exc:
            return LoginAttempt(login_refused(exc), visible(exc, 400))
        finally:
            await session.close()
        return LoginAttempt(False, STILL_WORKS)

    return probe


def login_refused(exc: SshError) -> bool:
    """Whether the node itself refused authentication (not a jump host, a timeout, or a
    key file zuka could not read): asyncssh's PermissionDenied from the node's connect."""
    if exc.health is not NodeHealth.AUTH_FAILED:
        return False
    hop = exc.__cause__
    # leases.ssh.session wraps a node's connect failure in words that start "node ", a jump
    # host's in "jump host ...".
    return (
        hop is not None
        and str(hop).startswith("node ")
        and isinstance(hop.__cause__, asyncssh.PermissionDenied)
    )
