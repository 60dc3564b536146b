"""The program zuka runs ON A NODE (with the node's own python3) to shred, check or look at
a declared path without being redirected: sent as text (nodescripts._walk), never imported
there. Kept to Python 3.6 (no walrus, no new syntax) and the standard library: a node
has what it has.

Why a program and not `find -execdir shred`: between find listing a file and shred opening
it, anyone who may write a directory on the way can rename a symbolic link (or another
file) over the name, and shred follows it; a file outside every declared root is then
overwritten and truncated. Here every directory is opened relative to the one before it
with O_NOFOLLOW and checked to be the (device, inode) just listed, every file is opened
with O_NOFOLLOW | O_NONBLOCK and written only when the open file is the regular file listed
(same device and inode, one link); whatever changed in between is skipped, named, and the
run ends not done (exit CHANGED). The overwrite is GNU shred's own, given the open file
(/proc/self/fd/N reopens that file, not a name). Other file systems mounted inside are
never entered: a mount at or below a declared path of its own step is that step's; any
other is named and the run ends not done (exit MOUNTED).

The one directory spared is the login's own ~/.ssh (as sshd reads it, links followed): its
authorized_keys is how zuka logs in until the revoke step, which comes last. Any other
.ssh below a declared path (a copied home, a key beside a checkpoint) is the lease's data,
shredded like the rest and, when still there, counted as left.

    python3 - MODE PATH SKIPDIR [OWN_STEP_PATH ...] < nodewalk.py

MODE: shred | gone | inspect. SKIPDIR: zuka's own run directory on the node ("" none).
Prints one fact a line ("left: NAME", "files N", ...), names with \\n shown as \\\\n.
"""

import contextlib
import errno
import os
import re
import stat
import subprocess
import sys

# Exit statuses (nodescripts.py reads the same numbers).
DONE = 0
LEFT = 1  # gone: regular files are still there
FAILED = 5
MOUNTED = 8
CHANGED = 9
_LISTED = 50
KEPT = "kept (the login's own ~/.ssh)"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = (
    os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
)


class Walk:
    def __init__(self, mode: str, top: str, skip: str, own: "list[str]") -> None:
        self.mode = mode
        self.top = top
        self.skip = _identity(skip)
        self.own = own
        self.keys = _identity(os.path.join(os.environ.get("HOME", ""), ".ssh"))
        self.mounts = _mount_points()
        self.dev = 0
        self.counts = {"files": 0, "bytes": 0, "newest": 0, "shredded": 0}
        self.shown = {}  # type: dict[str, int]
        self.failed = self.changed = self.mounted = self.unread = False

    def say(self, kind: str, name: str) -> None:
        n = self.shown.get(kind, 0)
        self.shown[kind] = n + 1
        if n < _LISTED:
            text = "{}: {}\n".format(kind, name.replace("\n", "\\n"))
            sys.stdout.buffer.write(os.fsencode(text))

    def mine(self, name: str) -> bool:
        """A mount at or below another declared path: that path's own step."""
        return any(name == o or name.startswith(o.rstrip("/") + "/") for o in self.own)

    def walk(self, dfd: int, where: str) -> None:
        try:
            names = sorted(os.listdir(dfd))
        except OSError as exc:
            self.unread = True
            self.say("unreadable", f"{where} ({exc.strerror})")
            return
        for name in names:
            full = where.rstrip("/") + "/" + name
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                continue  # gone meanwhile
            except OSError as exc:
                self.unread = True
                self.say("unreadable", f"{full} ({exc.strerror})")
                continue
            if stat.S_ISDIR(st.st_mode):
                self.directory(dfd, name, full, st)
            elif stat.S_ISREG(st.st_mode):
                self.file(dfd, name, full, st)
            elif self.mode == "shred":
                self.say("left", full)  # a symbolic link, fifo, socket: never followed

    def directory(self, dfd: int, name: str, full: str, st: os.stat_result) -> None:
        if self.keys == (st.st_dev, st.st_ino):
            # Named in every mode (the read-back says it was not looked at).
            self.say(KEPT, full)
            return
        if self.skip == (st.st_dev, st.st_ino):
            return  # zuka's own run files
        # Another file system, or a bind mount of this one (same device: only the mount
        # table tells it from a plain directory): never entered.
        if st.st_dev != self.dev or full in self.mounts:
            if self.mine(full):
                self.say("own step", full)
            else:
                self.mounted = True
                self.say("mounted inside", full)
            return
        try:
            sub = os.open(name, _DIR_FLAGS, dir_fd=dfd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                self.changed = True
                self.say("changed since listed", full)
            else:
                self.unread = True
                self.say("unreadable", f"{full} ({exc.strerror})")
            return
        try:
            now = os.fstat(sub)
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                self.changed = True
                self.say("changed since listed", full)
                return
            self.walk(sub, full)
        finally:
            os.close(sub)
        if self.mode == "shred":
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=dfd)  # only when empty; rmdir never follows a link

    def file(self, dfd: int, name: str, full: str, st: os.stat_result) -> None:
        if self.mode != "shred":
            self.counts["files"] += 1
            self.counts["bytes"] += st.st_size
            self.counts["newest"] = max(self.counts["newest"], int(st.st_mtime))
            if self.mode == "gone":
                self.say("left", full)
            return
        if st.st_nlink > 1:
            # Another name elsewhere: overwriting would reach it. Unlink this name only
            # (unlink removes whatever the name is now, and never follows it).
            try:
                os.unlink(name, dir_fd=dfd)
                self.say("unlinked only", full)
            except OSError as exc:
                self.failed = True
                self.say("failed", f"{full} ({exc.strerror})")
            return
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=dfd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO, errno.ENOENT, errno.EISDIR):
                self.changed = True
                self.say("changed since listed", full)
            else:
                self.failed = True
                self.say("failed", f"{full} ({exc.strerror})")
            return
        try:
            now = os.fstat(fd)
            if (
                not stat.S_ISREG(now.st_mode)
                or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino)
                or now.st_nlink != 1
            ):
                self.changed = True
                self.say("changed since listed", full)
                return
            try:
                rc = subprocess.call(
                    ["shred", "-n", "1", "-z", "--", f"/proc/self/fd/{fd}"], pass_fds=(fd,)
                )
            except OSError as exc:
                rc = -1
                self.say("failed", f"shred could not run ({exc.strerror})")
            if rc != 0:
                self.failed = True
                self.say("failed", f"{full} (shred exit {rc})")
                return
            os.ftruncate(fd, 0)
            os.fsync(fd)
            try:
                there = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                if (there.st_dev, there.st_ino) == (st.st_dev, st.st_ino):
                    os.unlink(name, dir_fd=dfd)
            except OSError:
                pass
            if os.fstat(fd).st_nlink != 0:
                self.changed = True  # renamed meanwhile: overwritten, but still has a name
                self.say("overwritten, renamed meanwhile", full)
            else:
                self.counts["shredded"] += 1
        finally:
            os.close(fd)


def _identity(path: str) -> "tuple[int, int] | None":
    """(device, inode) of a directory that exists ("" or none: None)."""
    if not path.startswith("/"):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def _mount_points() -> "set[str]":
    """Every mount point, as /proc/self/mountinfo names them (octal escapes undone)."""
    found = set()
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            for line in f:
                fields = os.fsdecode(line).split(" ")
                if len(fields) > 4:
                    found.add(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    except OSError:
        pass
    return found


def _open_top(path: str) -> "tuple[int, os.stat_result]":
    """The declared path's directory, opened without following it, and checked to be where
    the path says (a directory on the way swapped for a link would put it elsewhere)."""
    fd = os.open(path, _DIR_FLAGS)
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        os.close(fd)
        raise
    if real != path:
        os.close(fd)
        raise OSError(errno.EXDEV, f"resolves to {real}")
    return fd, os.fstat(fd)


def main(argv: "list[str]") -> int:
    mode, path, skip, own = argv[0], argv[1], argv[2], argv[3:]
    walk = Walk(mode, path, skip, own)
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        print("absent")
        return DONE
    if stat.S_ISREG(st.st_mode):
        parent, name = os.path.split(path)
        dfd, top = _open_top(parent)
        walk.dev = top.st_dev
        walk.file(dfd, name, path, st)
        os.close(dfd)
    elif stat.S_ISDIR(st.st_mode):
        try:
            dfd, top = _open_top(path)
        except OSError as exc:
            print(f"refused: {path} ({exc.strerror or exc})")
            return CHANGED if exc.errno in (errno.EXDEV, errno.ELOOP) else FAILED
        if (top.st_dev, top.st_ino) != (st.st_dev, st.st_ino):
            print(f"changed since listed: {path}")
            return CHANGED
        walk.dev = top.st_dev
        try:
            walk.walk(dfd, path)
        except RecursionError:
            # Each level is two Python frames and an open directory: a tree some 500
            # deep ends Python's recursion (the open directories are closed on the way
            # out). What lies deeper was not reached: not done, not gone, said in words.
            walk.unread = True
            walk.say("unreadable", f"{path}: directories nested too deep to walk")
        os.close(dfd)
    else:
        print("refused: not a file or directory")
        return 6
    c = walk.counts
    if mode == "inspect":
        print(f"files {c['files']}\nbytes {c['bytes']}\nnewest {c['newest']}")
        if walk.unread:
            print("partial: some directories could not be read")
        return DONE
    if mode == "shred":
        print(f"shredded {c['shredded']}")
    if walk.failed or (mode == "shred" and walk.unread):
        return FAILED
    if walk.changed:
        return CHANGED
    if walk.mounted:
        return MOUNTED
    if mode == "gone":
        if walk.unread:
            print("could not look everywhere")
            return LEFT
        if c["files"]:
            return LEFT
        print("no regular file left")
    return DONE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
