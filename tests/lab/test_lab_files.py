"""A lab made by `zuka lab init` and used by real Unix users (as root in CI): the editor
writes, the viewer reads and is refused a write in words naming the editors group, with
nothing written, and cannot write with its own sqlite3 either; the outsider is refused at
open naming the viewers group; the ledger's, -wal's and -shm's owner, mode and ACL stay
the lab's after every kind of write, a checkpoint and root's own use.

Slow (about a minute): every command is a fresh `zuka` process run as its user.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from leases.lab import acl, perms
from leases.lab.layout import Lab
from tests.support.unixusers import LabUsers, as_user, lab_users, shared_tmp  # noqa: F401

pytestmark = pytest.mark.slow

NODE = ["node", "add", "gpu-1", "--ssh", "ssh lab@10.0.0.1", "--gpus", "8"]
LEASE = ["lease", "add", "gpu-1", "--billing", "monthly", "--price", "100", "--start",
         "2026-06-01", "--end", "2026-07-01"]  # fmt: skip


@pytest.fixture(scope="module")
def lab(lab_users: LabUsers) -> Iterator[Lab]:  # noqa: F811
    """A lab made by `zuka lab init` as root, with the test's groups and service user."""
    top = shared_tmp()
    target = lab_users.lab(top / "lab")
    u = lab_users
    done = _root(
        "lab", "init", "--folder", str(target.folder), "--viewers", u.viewers, "--editors",
        u.editors, "--offboard", u.offboard, "--service-user", u.service, "--yes",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # The groups and the user existed: init made none of them.
    assert "groupadd" not in done.stdout and "useradd" not in done.stdout
    try:
        yield target
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _root(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run(
        [sys.executable, "-m", "tui.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        input=input,
        timeout=120,
        check=False,
    )


def _z(u: LabUsers, lab: Lab, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    return u.zuka(user, "--ledger", str(lab.ledger), *args)


def _audit_count(u: LabUsers, lab: Lab) -> int:
    out = _z(u, lab, u.viewer, "--json", "log")
    assert out.returncode == 0, out.stderr
    return len(json.loads(out.stdout))


def _shared_ok(lab: Lab) -> None:
    """The ledger and its SQLite companions are the lab's: owner, group, mode, ACL."""
    for name in ("ledger.db", "ledger.db-wal", "ledger.db-shm"):
        path = lab.folder / name
        info = path.lstat()
        assert stat.S_ISREG(info.st_mode), name
        assert (info.st_uid, info.st_gid) == (_uid(lab.service_user), _gid(lab.viewers)), name
        assert stat.S_IMODE(info.st_mode) == 0o660, name
        assert acl.read(path) == perms.shared_acl(lab, perms.Ids.system()), name
    assert [f for f in perms.check(lab) if f.path.name.startswith("ledger.db")] == []


def _state(lab: Lab) -> dict[str, tuple[int, ...]]:
    """Each file's inode, owner, group and mode; the ledger's and marker's mtime too."""
    state = {}
    for p in lab.folder.iterdir():
        info = p.lstat()
        state[p.name] = (info.st_ino, info.st_uid, info.st_gid, info.st_mode)
    for p in (lab.ledger, lab.marker, lab.collector_key):
        state[p.name + " mtime"] = (p.stat().st_mtime_ns,)
    return state


def _uid(name: str) -> int:
    import pwd

    return pwd.getpwnam(name).pw_uid


def _gid(name: str) -> int:
    import grp

    return grp.getgrnam(name).gr_gid


def test_init_makes_the_layout_and_a_second_init_changes_nothing(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    assert perms.check(lab) == []
    _shared_ok(lab)
    folder = lab.folder.stat()
    assert (folder.st_uid, folder.st_gid, stat.S_IMODE(folder.st_mode)) == (
        0,
        _gid(lab.viewers),
        0o750,
    )
    key = lab.collector_key.stat()
    assert (key.st_uid, stat.S_IMODE(key.st_mode)) == (_uid(lab.service_user), 0o600)
    assert stat.S_IMODE(lab.collector_key_dir.stat().st_mode) == 0o700
    before = _state(lab)
    again = _root("lab", "init", "--folder", str(lab.folder), "--yes")
    assert again.returncode == 0, again.stderr
    assert "nothing to change" in again.stdout
    assert _state(lab) == before
    # Only the service user reads the collector's key; any member prints its public half.
    u = lab_users
    peek = u.python(u.editor, f"open({str(lab.collector_key)!r}).read()")
    assert peek.returncode != 0 and "Permission denied" in peek.stderr
    pub = _z(u, lab, u.viewer, "lab", "pubkey")
    assert pub.returncode == 0, pub.stderr
    assert pub.stdout.startswith("ssh-ed25519 ") and "authorized_keys" in pub.stdout
    mine = u.python(u.service, f"print(open({str(lab.collector_key)!r}).read()[:40])")
    assert mine.returncode == 0 and "OPENSSH PRIVATE KEY" in mine.stdout


def test_only_root_may_init(lab_users: LabUsers) -> None:  # noqa: F811
    top = shared_tmp()
    try:
        out = lab_users.zuka(lab_users.editor, "lab", "init", "--folder", str(top / "x"), "--yes")
        assert out.returncode == 1
        assert "run it as root" in out.stderr
        assert not (top / "x").exists()
    finally:
        shutil.rmtree(top)


def test_the_editor_writes_and_the_viewer_reads_and_is_refused(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    u = lab_users
    for args in (["provider", "add", "idc", "--kind", "cloud"], NODE, LEASE):
        done = _z(u, lab, u.editor, *args)
        assert done.returncode == 0, (args, done.stderr)
        _shared_ok(lab)
    listed = _z(u, lab, u.viewer, "node", "list")
    assert listed.returncode == 0, listed.stderr
    assert "gpu-1" in listed.stdout
    log = _z(u, lab, u.viewer, "log")
    assert log.returncode == 0 and u.editor in log.stdout
    count = _audit_count(u, lab)
    refused = _z(u, lab, u.viewer, "node", "add", "gpu-2", "--ssh", "ssh lab@10.0.0.2")
    assert refused.returncode == 1
    assert f"zuka node add needs group {u.editors}" in refused.stderr
    assert f"{u.viewer} is not in it" in refused.stderr
    assert f"zuka lab add-user {u.viewer} --role edit" in refused.stderr
    assert _audit_count(u, lab) == count
    assert "gpu-2" not in _z(u, lab, u.viewer, "node", "list").stdout
    _shared_ok(lab)


def test_the_viewers_own_sqlite_cannot_write(lab: Lab, lab_users: LabUsers) -> None:  # noqa: F811
    u = lab_users
    code = (
        "import sqlite3, sys\n"
        f"c = sqlite3.connect({str(lab.ledger)!r})\n"
        "try:\n"
        "    c.execute(\"INSERT INTO providers (name, kind) VALUES ('x', 'colo')\")\n"
        "    c.commit()\n"
        "except sqlite3.Error as e:\n"
        "    print(e)\n"
        "    sys.exit(3)\n"
    )
    out = u.python(u.viewer, code)
    assert out.returncode == 3, (out.stdout, out.stderr)
    assert "readonly database" in out.stdout
    for name in ("ledger.db", "ledger.db-wal", "ledger.db-shm"):
        raw = u.python(u.viewer, f"open({str(lab.folder / name)!r}, 'r+b')")
        assert raw.returncode != 0 and "Permission denied" in raw.stderr, name
    # Nor may a viewer make a file in the folder (a -journal, a swapped -wal).
    made = u.python(u.viewer, f"open({str(lab.folder / 'ledger.db-journal')!r}, 'w')")
    assert made.returncode != 0 and "Permission denied" in made.stderr


def test_the_outsider_is_refused_at_open_naming_the_viewers_group(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    u = lab_users
    for args in (["node", "list"], ["log"], NODE):
        out = _z(u, lab, u.outsider, *args)
        assert out.returncode == 1, args
        assert f"needs group {u.viewers}" in out.stderr, out.stderr
        assert f"{u.outsider} is not in it" in out.stderr
        assert "Traceback" not in out.stderr


def test_the_files_stay_the_labs_after_every_kind_of_write(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    u = lab_users
    steps = [
        ["node", "add", "gpu-9", "--ssh", "ssh lab@10.0.0.9"],
        ["node", "edit", "gpu-9", "--gpus", "4"],
        ["node", "delete", "gpu-9"],
        ["undo"],
    ]
    for args in steps:
        done = _z(u, lab, u.editor, *args)
        assert done.returncode == 0, (args, done.stderr)
        _shared_ok(lab)
    # An import: an export of the editor's own scratch ledger added to the lab's.
    scratch, dump = u.home(u.editor) / "scratch.db", u.home(u.editor) / "x.json"
    assert u.zuka(u.editor, "--ledger", str(scratch), "provider", "add", "gpucloud",
                  "--kind", "cloud").returncode == 0  # fmt: skip
    assert u.zuka(u.editor, "--ledger", str(scratch), "export", "-o", str(dump)).returncode == 0
    imported = _z(u, lab, u.editor, "import", str(dump))
    assert imported.returncode == 0, imported.stderr
    _shared_ok(lab)
    # A checkpoint by the editor's own sqlite3, then the viewer reads.
    code = (
        "import sqlite3\n"
        f"c = sqlite3.connect({str(lab.ledger)!r})\n"
        "print(c.execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchone())\n"
    )
    ck = u.python(u.editor, code)
    assert ck.returncode == 0 and ck.stdout.startswith("(0,"), (ck.stdout, ck.stderr)
    _shared_ok(lab)
    assert "gpucloud" in _z(u, lab, u.viewer, "provider", "list").stdout
    # Root's own open and close: SQLite removes the companions; they are made again.
    mine = _root("--ledger", str(lab.ledger), "provider", "add", "rootcloud", "--kind", "cloud")
    assert mine.returncode == 0, mine.stderr
    _shared_ok(lab)
    assert "rootcloud" in _z(u, lab, u.viewer, "provider", "list").stdout
    # The editor writes after root: the companions root's close left are the lab's.
    assert _z(u, lab, u.editor, "provider", "add", "after", "--kind", "cloud").returncode == 0
    _shared_ok(lab)


def test_the_viewer_reads_while_a_writer_is_connected(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    u = lab_users
    assert _z(u, lab, u.editor, "provider", "add", "held", "--kind", "cloud").returncode == 0
    code = (
        "import sqlite3, sys\n"
        f"c = sqlite3.connect({str(lab.ledger)!r}, isolation_level=None)\n"
        "c.execute('BEGIN IMMEDIATE')\n"
        "c.execute(\"UPDATE providers SET region = 'uncommitted' WHERE name = 'held'\")\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
        "c.execute('ROLLBACK')\n"
    )
    writer = subprocess.Popen(
        [*as_user(u.editor), sys.executable, "-c", code],
        env=u.env(u.editor),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        seen = _z(u, lab, u.viewer, "--json", "provider", "list")
        assert seen.returncode == 0, seen.stderr
        held = [p for p in json.loads(seen.stdout) if p["name"] == "held"]
        assert held and held[0]["region"] == ""  # what was committed, only
    finally:
        writer.communicate("\n", timeout=60)
    assert writer.returncode == 0, writer.stderr
    _shared_ok(lab)


def test_offboarding_by_an_editor_outside_the_offboard_group_is_refused(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    u = lab_users
    _z(u, lab, u.editor, "node", "add", "gpu-off", "--ssh", "ssh lab@10.0.0.3")
    count = _audit_count(u, lab)
    out = _z(u, lab, u.editor, "offboard", "gpu-off")
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert f"zuka offboard needs group {u.offboard}" in out.stderr
    assert f"{u.editor} is not in it" in out.stderr
    assert _audit_count(u, lab) == count
    # The offboarder is not refused by the lab (the plan is its own business).
    theirs = _z(u, lab, u.offboarder, "offboard", "gpu-off")
    assert "needs group" not in theirs.stderr


def test_the_poller_lock_and_the_trust_store_in_a_lab(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    u = lab_users
    lock = (
        "from pathlib import Path\n"
        "from leases.telemetry.lock import PollerLock\n"
        f"lock = PollerLock(Path({str(lab.ledger)!r}))\n"
        "print(lock.acquire(), lock.holder())\n"
    )
    viewer = u.python(u.viewer, lock)
    assert viewer.returncode == 0, viewer.stderr
    assert viewer.stdout.split() == ["False", "None"]
    service = u.python(u.service, lock)
    assert service.returncode == 0 and service.stdout.split()[0] == "True", service.stderr
    trust = (
        "import asyncssh\n"
        "from leases.ssh import hostkeys\n"
        "key = asyncssh.generate_private_key('ssh-ed25519').convert_to_public()\n"
        f"print(hostkeys.trust(HOST, 22, key, {str(lab.folder / 'known_hosts')!r}))\n"
    )
    editor = u.python(u.editor, trust.replace("HOST", "'10.0.0.7'"))
    assert editor.returncode == 0 and editor.stdout.strip() == "True", editor.stderr
    assert "10.0.0.7" in (lab.folder / "known_hosts").read_text()
    assert [f for f in perms.check(lab) if f.path.name == "known_hosts"] == []
    viewer_trust = u.python(u.viewer, trust.replace("HOST", "'10.0.0.8'"))
    assert viewer_trust.returncode != 0 and "Permission denied" in viewer_trust.stderr
    faults = (
        "from pathlib import Path\n"
        "from leases.telemetry.faultlog import fault_logger\n"
        f"fault_logger(Path({str(lab.ledger)!r})).error('boom \\x1b[2J')\n"
    )
    assert u.python(u.service, faults).returncode == 0
    log = lab.faults_dir / "ledger.db.faults.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o640
    seen = u.run(u.viewer, ["cat", str(log)])
    assert seen.returncode == 0 and "boom" in seen.stdout and "\x1b" not in seen.stdout


def test_check_finds_a_chmod_and_repair_fixes_it(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    u = lab_users
    os.chmod(lab.ledger, 0o600)  # an admin's slip: the ACL's mask is gone with it
    try:
        found = _z(u, lab, u.viewer, "lab", "check")
        assert found.returncode == 1
        assert f"{lab.ledger}: mode 0600, should be 0660" in found.stdout
        assert "sudo zuka lab repair" in found.stdout
        refused = _z(u, lab, u.editor, "provider", "add", "nope", "--kind", "cloud")
        assert refused.returncode == 1 and "needs group" in refused.stderr
        dry = _root("lab", "repair", "--folder", str(lab.folder), "--dry-run")
        assert dry.returncode == 0 and "nothing changed" in dry.stdout
        assert stat.S_IMODE(lab.ledger.stat().st_mode) == 0o600
        asked = _root("lab", "repair", "--folder", str(lab.folder))  # no tty, no --yes
        assert asked.returncode == 1 and "--yes" in asked.stderr
        fixed = _root("lab", "repair", "--folder", str(lab.folder), "--yes")
        assert fixed.returncode == 0, fixed.stderr
    finally:
        perms.apply(lab)
    assert _z(u, lab, u.viewer, "lab", "check").returncode == 0
    _shared_ok(lab)
    assert _z(u, lab, u.editor, "provider", "add", "again", "--kind", "cloud").returncode == 0


def test_repair_refuses_a_symlink_in_place_of_a_companion(lab: Lab, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("x")
    victim.chmod(0o600)
    trust = lab.folder / "known_hosts"
    saved = trust.read_bytes()
    trust.unlink()
    trust.symlink_to(victim)
    try:
        found = [f for f in perms.check(lab) if f.path == trust]
        assert found and "symlink" in found[0].problem
        with pytest.raises(perms.LabError, match="symlink"):
            perms.apply(lab)
        assert stat.S_IMODE(victim.stat().st_mode) == 0o600  # not followed
        assert acl.read(victim) is None
    finally:
        trust.unlink()
        trust.write_bytes(saved)
        perms.apply(lab)
    assert perms.check(lab) == []


def test_add_user_and_remove_user(lab: Lab, lab_users: LabUsers) -> None:  # noqa: F811
    u = lab_users
    assert _z(u, lab, u.outsider, "node", "list").returncode == 1
    try:
        added = _root("lab", "add-user", u.outsider, "--role", "view", "--folder",
                      str(lab.folder), "--yes")  # fmt: skip
        assert added.returncode == 0, added.stderr
        assert f"gpasswd -a {u.outsider} {u.viewers}" in added.stdout
        assert _z(u, lab, u.outsider, "node", "list").returncode == 0
        again = _root("lab", "add-user", u.outsider, "--role", "view", "--folder",
                      str(lab.folder), "--yes")  # fmt: skip
        assert "nothing to change" in again.stdout
        log = _z(u, lab, u.viewer, "log")
        assert "lab.add-user" in log.stdout
    finally:
        removed = _root("lab", "remove-user", u.outsider, "--folder", str(lab.folder), "--yes")
    assert removed.returncode == 0, removed.stderr
    assert _z(u, lab, u.outsider, "node", "list").returncode == 1
    bad = _root("lab", "add-user", "no-such-user-zk", "--role", "view", "--folder",
                str(lab.folder), "--yes")  # fmt: skip
    assert bad.returncode == 2 and "no user of this machine" in bad.stderr
    role = _root("lab", "add-user", u.outsider, "--role", "admin", "--folder", str(lab.folder))
    assert role.returncode == 2


def test_a_marker_not_roots_is_refused(lab_users: LabUsers) -> None:  # noqa: F811
    u = lab_users
    top = shared_tmp()
    try:
        ledger = top / "ledger.db"
        assert (
            _root("--ledger", str(ledger), "provider", "add", "p", "--kind", "cloud").returncode
            == 0
        )
        marker = top / "lab.toml"
        marker.write_text(f'viewers = "{u.viewers}"\n')
        os.chown(marker, _uid(u.editor), 0)
        out = _root("--ledger", str(ledger), "provider", "list")
        assert out.returncode == 1
        assert "is not root's alone" in out.stderr
    finally:
        shutil.rmtree(top)


def test_the_viewer_reads_what_a_killed_writer_left_in_the_wal(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    """Nobody has the ledger open, its -wal holds committed pages never checkpointed (the
    writer died), the -shm is read-only to the viewer: SQLite's unreliable-shm path reads
    the -wal itself, and the viewer sees the committed write."""
    u = lab_users
    code = (
        "import os\n"
        "from pathlib import Path\n"
        "from leases.ledger.records import provider_from\n"
        "from leases.ledger.store import Ledger\n"
        f"ledger = Ledger.open(Path({str(lab.ledger)!r}), create=False)\n"
        "ledger.conn.execute('PRAGMA wal_autocheckpoint = 0')\n"
        "ledger.add_provider(provider_from({'name': 'walonly', 'kind': 'cloud'}))\n"
        "os._exit(0)  # no close: no checkpoint\n"
    )
    done = u.python(u.editor, code)
    assert done.returncode == 0, done.stderr
    assert (lab.folder / "ledger.db-wal").stat().st_size > 0
    main_file = sqlite3.connect(f"file:{lab.ledger}?immutable=1", uri=True)
    try:  # the main file alone has not got it: only the -wal has
        assert main_file.execute("SELECT 1 FROM providers WHERE name = 'walonly'").fetchall() == []
    finally:
        main_file.close()
    seen = _z(u, lab, u.viewer, "provider", "list")
    assert seen.returncode == 0, seen.stderr
    assert "walonly" in seen.stdout
    assert (lab.folder / "ledger.db-wal").stat().st_size > 0  # the viewer changed nothing
    _shared_ok(lab)


def test_the_viewers_dashboard_opens_and_lists_the_labs_fleet(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    u = lab_users
    _z(u, lab, u.editor, "node", "add", "gpu-dash", "--ssh", "ssh lab@10.0.0.4")
    code = (
        "import asyncio\n"
        "from pathlib import Path\n"
        "from tui.dashboard.app import ZukaApp\n"
        "from tui.widgets.fleet_table import FleetTable\n"
        "from tests.support.waiting import wait_until\n"
        "async def main():\n"
        f"    app = ZukaApp(Path({str(lab.ledger)!r}), poll=False)\n"
        "    async with app.run_test(size=(150, 40)) as pilot:\n"
        "        fleet = app.screen.query_one('#fleet', FleetTable)\n"
        "        await wait_until(lambda: fleet.row_count > 0, what='the fleet')\n"
        "        print('rows', fleet.row_count)\n"
        "        await pilot.press('q')\n"
        "asyncio.run(main())\n"
    )
    count = _audit_count(u, lab)
    out = u.python(u.viewer, code)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("rows ")
    assert _audit_count(u, lab) == count
    _shared_ok(lab)


def test_missing_companions_and_an_unreadable_ledger_are_refused_in_words(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    u = lab_users
    shm = lab.folder / "ledger.db-shm"
    shm.unlink()  # only root can: what a careless admin's rm leaves
    try:
        out = _z(u, lab, u.editor, "provider", "add", "noshm", "--kind", "cloud")
        assert out.returncode == 1
        assert f"{shm}: is missing" in out.stderr and "sudo zuka lab repair" in out.stderr
        assert "noshm" not in _z(u, lab, u.viewer, "provider", "list").stdout
        # The editor's own read does not need it.
        assert _z(u, lab, u.editor, "provider", "list").returncode == 0
    finally:
        perms.apply(lab)
    assert _z(u, lab, u.editor, "provider", "add", "noshm", "--kind", "cloud").returncode == 0
    # A viewer whose group no longer reads the file (an ACL changed by hand).
    os.chmod(lab.ledger, 0o600)
    try:
        out = _z(u, lab, u.viewer, "provider", "list")
        assert out.returncode == 1
        assert f"reading the ledger needs group {u.viewers}" in out.stderr
    finally:
        perms.apply(lab)
    _shared_ok(lab)


def test_the_service_users_collector_writes_keep_the_files_the_labs(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    """What the collector writes (a gap in a node's readings, through the history store),
    as the service user, then a read by a viewer."""
    u = lab_users
    assert (
        _z(u, lab, u.editor, "node", "add", "gpu-flush", "--ssh", "ssh lab@10.0.0.5").returncode
        == 0
    )
    code = (
        "from datetime import UTC, datetime\n"
        "from pathlib import Path\n"
        "from leases.core.models import NodeHealth\n"
        "from leases.ledger.store import Ledger\n"
        "from leases.telemetry.lock import PollerLock\n"
        "from leases.telemetry.rollups import HistoryStore\n"
        f"path = Path({str(lab.ledger)!r})\n"
        "assert PollerLock(path).acquire()\n"
        "with Ledger.open(path, create=False, actor='zuka collect') as ledger:\n"
        "    store = HistoryStore(ledger)\n"
        "    store.open_gap('gpu-flush', datetime(2026, 6, 1, tzinfo=UTC),"
        " NodeHealth.UNREACHABLE, 'no route')\n"
        "    print(len(store.gaps('gpu-flush')))\n"
    )
    done = u.python(u.service, code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"
    _shared_ok(lab)
    read = (
        "from pathlib import Path\n"
        "from leases.ledger.store import Ledger\n"
        "from leases.telemetry.rollups import HistoryStore\n"
        f"with Ledger.open(Path({str(lab.ledger)!r}), readonly=True) as ledger:\n"
        "    print(HistoryStore(ledger).gaps('gpu-flush')[0][2:])\n"
    )
    seen = u.python(u.viewer, read)
    assert seen.returncode == 0, seen.stderr
    assert "no route" in seen.stdout
    _shared_ok(lab)


def test_the_service_users_folder_cannot_lend_root_a_file(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The service user owns collector/: a link it puts there is never followed by root's
    init (the public key copied for all to read) nor chown-ed by repair."""
    u = lab_users
    pub = lab.collector_key.with_name("id_ed25519.pub")
    saved_pub, saved_key = pub.read_bytes(), lab.collector_key.read_bytes()
    shared = lab.folder / perms.COLLECTOR_PUB
    saved_shared = shared.read_bytes()
    secret = tmp_path / "secret"
    secret.write_text("root's secret\n")
    secret.chmod(0o600)
    link = f"import os\nos.unlink({str(pub)!r})\nos.symlink({str(secret)!r}, {str(pub)!r})\n"
    assert u.python(u.service, link).returncode == 0
    shared.unlink()
    try:
        out = _root("lab", "init", "--folder", str(lab.folder), "--yes")
        assert out.returncode == 1, out.stdout
        assert "secret" not in out.stdout + out.stderr
        assert not shared.exists() or "secret" not in shared.read_text()
        # A hard link (as root could make; the service user is kept from it by the
        # kernel's protected_hardlinks) is refused by repair, the file left root's.
        lab.collector_key.unlink()
        os.link(secret, lab.collector_key)
        assert any("hard links" in f.problem for f in perms.check(lab))
        with pytest.raises(perms.LabError, match="hard links"):
            perms.apply(lab)
        info = secret.stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o600)
    finally:
        for path in (pub, lab.collector_key, shared):
            if path.is_symlink() or path.exists():
                path.unlink()
        pub.write_bytes(saved_pub)
        lab.collector_key.write_bytes(saved_key)
        shared.write_bytes(saved_shared)
        perms.apply(lab)
    assert perms.check(lab) == []


def test_init_makes_a_missing_public_key_copy_without_the_folders_acl(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    shared = lab.folder / perms.COLLECTOR_PUB
    saved = shared.read_bytes()
    shared.unlink()
    try:
        out = _root("lab", "init", "--folder", str(lab.folder), "--yes")
        assert out.returncode == 0, out.stderr
        assert "copy its public key" in out.stdout
        assert shared.read_bytes() == saved
        assert acl.read(shared) is None  # not the folder's default ACL
        assert perms.check(lab) == []
    finally:
        if not shared.exists():
            shared.write_bytes(saved)
            perms.apply(lab)


def test_init_on_a_lab_whose_permissions_drifted_repairs_them(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    wal = lab.folder / "ledger.db-wal"
    os.chown(wal, 0, 0)
    try:
        out = _root("lab", "init", "--folder", str(lab.folder), "--yes")
        assert out.returncode == 0, out.stderr
        assert f"{wal}: is root:root, should be {lab.service_user}:{lab.viewers}" in out.stdout
        _shared_ok(lab)
    finally:
        perms.apply(lab)


def test_only_the_service_user_collects_in_a_lab(lab: Lab, lab_users: LabUsers) -> None:  # noqa: F811
    u = lab_users
    out = _z(u, lab, u.editor, "collect")
    assert out.returncode == 1
    assert f"only its service user, {u.service}, collects" in out.stderr
    assert "pid None" not in out.stderr
