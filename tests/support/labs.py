"""A lab made by `zuka lab init` for tests with real Unix users (tests/support/unixusers.py),
and the checks they share: commands as root and as a member, the audit log's length, the
ledger's files as the lab wants them."""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator

from leases.lab import acl, perms
from leases.lab.layout import Lab
from tests.support.unixusers import ROOT, LabUsers, shared_tmp

NODE = ["node", "add", "gpu-1", "--ssh", "ssh lab@10.0.0.1", "--gpus", "8"]
LEASE = ["lease", "add", "gpu-1", "--billing", "monthly", "--price", "100", "--start",
         "2026-06-01", "--end", "2026-07-01"]  # fmt: skip


def made_lab(u: LabUsers) -> Iterator[Lab]:
    """A lab made by `zuka lab init` as root with the users' groups and service user (a
    generator for a fixture): the groups and user exist, so init makes none of them."""
    top = shared_tmp()
    target = u.lab(top / "lab")
    done = root(
        "lab", "init", "--folder", str(target.folder), "--viewers", u.viewers, "--editors",
        u.editors, "--offboard", u.offboard, "--service-user", u.service, "--yes",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "groupadd" not in done.stdout and "useradd" not in done.stdout
    try:
        yield target
    finally:
        shutil.rmtree(top, ignore_errors=True)


def root(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    # Never the host's /etc/zuka: `lab init` writes a system config where there is none.
    env = {"ZUKA_SYSTEM_CONFIG": "", **os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "tui.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        input=input,
        timeout=120,
        check=False,
    )


def zuka_in(u: LabUsers, lab: Lab, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    return u.zuka(user, "--ledger", str(lab.ledger), *args)


def audit_count(u: LabUsers, lab: Lab) -> int:
    out = zuka_in(u, lab, u.viewer, "--json", "log")
    assert out.returncode == 0, out.stderr
    return len(json.loads(out.stdout))


def shared_ok(lab: Lab) -> None:
    """The ledger and its SQLite companions are the lab's: owner, group, mode, ACL."""
    for name in ("ledger.db", "ledger.db-wal", "ledger.db-shm"):
        path = lab.folder / name
        info = path.lstat()
        assert stat.S_ISREG(info.st_mode), name
        assert (info.st_uid, info.st_gid) == (uid(lab.service_user), gid(lab.viewers)), name
        assert stat.S_IMODE(info.st_mode) == 0o660, name
        assert acl.read(path) == perms.shared_acl(lab, perms.Ids.system()), name
    assert [f for f in perms.check(lab) if f.path.name.startswith("ledger.db")] == []


def state(lab: Lab) -> dict[str, tuple[int, ...]]:
    """Each file's inode, owner, group and mode; the ledger's and marker's mtime too."""
    state = {}
    for p in lab.folder.iterdir():
        info = p.lstat()
        state[p.name] = (info.st_ino, info.st_uid, info.st_gid, info.st_mode)
    for p in (lab.ledger, lab.marker, lab.collector_key):
        state[p.name + " mtime"] = (p.stat().st_mtime_ns,)
    return state


def uid(name: str) -> int:
    return pwd.getpwnam(name).pw_uid


def gid(name: str) -> int:
    return grp.getgrnam(name).gr_gid
