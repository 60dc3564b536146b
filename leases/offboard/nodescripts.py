"""The shell scripts zuka sends a node to offboard it (leases.offboard.remote drives them):
the guard of a path, the shred and its read-back (zuka's walker, nodewalk.py, run by the
node's python3; find -P -xdev without it), what an inspection reads, the file-system facts,
the keys files sshd reads and their rewrite, the job wrapper a cancel can stop, and the exit
statuses they end with. One quoted value each; everything else is fixed text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from leases.core.i18n import N_
from leases.offboard import authkeys, erasure, paths, presets
from leases.offboard.nodewalk import KEPT as _KEPT

_LISTED = 50  # names of what a shred left behind, for the evidence

# Exit statuses of the scripts below (0: done; 1: not done, see output).
_REFUSED_LINK = 3
_REFUSED_ELSEWHERE = 4
_FAILED = 5
_REFUSED_KIND = 6
_UNSEEN = 7
_REFUSED_MOUNT = 8
_CHANGED = 9
SHARED_STORAGE = 10
_REFUSED_OPEN = 11
WHY = {
    _REFUSED_LINK: N_("is a symbolic link: refused, not followed"),
    _REFUSED_ELSEWHERE: N_("resolves elsewhere (a symbolic link on the way): refused"),
    _FAILED: N_("the command failed on the node"),
    _REFUSED_KIND: N_("is neither a regular file nor a directory: refused"),
    _UNSEEN: N_("the login user may not look there (a directory on the way): not proven"),
    _REFUSED_MOUNT: N_(
        "has another file system mounted inside (named in the evidence): refused, "
        "not verified; declare each mount as a scratch_path of its own (zuka resource add NODE "
        "--kind scratch_path --id MOUNT), or unmount it"
    ),
    _CHANGED: N_(
        "something changed while it was shredded (a name replaced, a directory moved: "
        "named in the evidence), skipped, never followed: not done; find who writes there, "
        "then run again"
    ),
    _REFUSED_OPEN: N_(
        "another user may rename things there and the node has no python3 to "
        "shred without following them: refused (named in the evidence)"
    ),
}


def guard(word: str) -> str:
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


def home_dir() -> str:
    """Sets h to the login user's real home (never / or a relative one)."""
    return (
        f'h=$(readlink -f -- "$HOME") || exit {_FAILED}\n'
        f'case "$h" in /?*) ;; *) echo "refused: the home directory is $h"; '
        f"exit {_FAILED} ;; esac\n"
    )


def home_path(rel: str) -> str:
    """Sets p to a path in the login user's real home."""
    return home_dir() + guard('"$h"/' + paths.quoted(paths.check_home_entry(rel)))


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
SHRED_BODY = (
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
GONE_BODY = (
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
INSPECT_BODY = (
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


def own_paths(paths_inside: Sequence[str]) -> str:
    """Sets own (newline-separated, for the mount check) and own_args (the walker's words)."""
    # Checked scratch paths are plain characters (no space, quote or glob): $own_args
    # splits into exactly these words.
    return (
        f"own={paths.quoted(chr(10).join(paths_inside))}\n"
        f"own_args={paths.quoted(' '.join(paths_inside))}\n"
    )


def shred_script(path: str, roots: Sequence[str], own: Sequence[str] = ()) -> str:
    """The shred of a declared path (own: declared paths inside it, each its own step)."""
    return guard(paths.quoted(paths.check_scratch_path(path, roots))) + own_paths(own) + SHRED_BODY


def gone_script(path: str, roots: Sequence[str], own: Sequence[str] = ()) -> str:
    return guard(paths.quoted(paths.check_scratch_path(path, roots))) + own_paths(own) + GONE_BODY


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
RUN_DIR_GONE = (
    'w="${HOME:-}/.zuka-offboard"\n'
    'case "$w" in /?*) ;; *) echo "no home directory: no run directory"; exit 0 ;; esac\n'
    'if [ -L "$w" ]; then echo "left: $w is a symbolic link, not zuka\'s"; exit 0; fi\n'
    'if [ ! -e "$w" ]; then echo "no run directory of zuka\'s left"; exit 0; fi\n'
    'if [ -d "$w" ] && [ -O "$w" ]; then rm -rf -- "$w"; fi\n'
    'if [ -e "$w" ]; then echo "could not remove zuka\'s run directory $w"; exit 1; fi\n'
    'echo "removed zuka\'s run directory $w"\n'
)


def shared_home_check() -> str:
    """After home_path's guard: a path on network or shared storage (or one whose file system
    cannot be read) is not cleared: the step asks first (exit SHARED_STORAGE)."""
    cases = "|".join(SHARED_FS)
    return (
        'm=$(findmnt -n -r -o FSTYPE,SOURCE,TARGET -T "$p" 2>/dev/null | head -n 1)\n'
        'case "${m%% *}" in\n'
        f'  {cases}) echo "shared storage: $m"; exit {SHARED_STORAGE} ;;\n'
        f'  "") echo "shared storage: unknown (findmnt gave nothing)"; exit {SHARED_STORAGE} ;;\n'
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
