"""Who may do what in a lab made by `zuka lab init`, with real Unix users (as root in CI):
the editor writes, the viewer reads (beside a connected writer, what a killed writer left in
the -wal, in its own dashboard) and is refused a write in words naming the editors group,
with nothing written, and cannot write with its own sqlite3 either; the outsider is refused
at open naming the viewers group; offboarding is the offboard group's; the service user
collects; add-user and remove-user.

Slow (about half a minute): every command is a fresh `zuka` process run as its user.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import stat
import subprocess
import sys

import pytest

from leases.lab import perms
from leases.lab.layout import Lab
from tests.support.labs import (
    LEASE,
    NODE,
    audit_count,
    root,
    shared_ok,
    zuka_in,
)
from tests.support.unixusers import LabUsers, as_user, lab_users, shared_tmp  # noqa: F401

pytestmark = pytest.mark.slow


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
        done = zuka_in(u, lab, u.editor, *args)
        assert done.returncode == 0, (args, done.stderr)
        shared_ok(lab)
    listed = zuka_in(u, lab, u.viewer, "node", "list")
    assert listed.returncode == 0, listed.stderr
    assert "gpu-1" in listed.stdout
    log = zuka_in(u, lab, u.viewer, "log")
    assert log.returncode == 0 and u.editor in log.stdout
    count = audit_count(u, lab)
    refused = zuka_in(u, lab, u.viewer, "node", "add", "gpu-2", "--ssh", "ssh lab@10.0.0.2")
    assert refused.returncode == 1
    assert f"zuka node add needs group {u.editors}" in refused.stderr
    assert f"{u.viewer} is not in it" in refused.stderr
    assert f"zuka lab add-user {u.viewer} --role edit" in refused.stderr
    assert audit_count(u, lab) == count
    assert "gpu-2" not in zuka_in(u, lab, u.viewer, "node", "list").stdout
    shared_ok(lab)


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
        out = zuka_in(u, lab, u.outsider, *args)
        assert out.returncode == 1, args
        assert f"needs group {u.viewers}" in out.stderr, out.stderr
        assert f"{u.outsider} is not in it" in out.stderr
        assert "Traceback" not in out.stderr


def test_the_viewer_reads_while_a_writer_is_connected(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    u = lab_users
    assert zuka_in(u, lab, u.editor, "provider", "add", "held", "--kind", "cloud").returncode == 0
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
        seen = zuka_in(u, lab, u.viewer, "--json", "provider", "list")
        assert seen.returncode == 0, seen.stderr
        held = [p for p in json.loads(seen.stdout) if p["name"] == "held"]
        assert held and held[0]["region"] == ""  # what was committed, only
    finally:
        writer.communicate("\n", timeout=60)
    assert writer.returncode == 0, writer.stderr
    shared_ok(lab)


def test_offboarding_by_an_editor_outside_the_offboard_group_is_refused(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    u = lab_users
    zuka_in(u, lab, u.editor, "node", "add", "gpu-off", "--ssh", "ssh lab@10.0.0.3")
    count = audit_count(u, lab)
    out = zuka_in(u, lab, u.editor, "offboard", "gpu-off")
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert f"zuka offboard needs group {u.offboard}" in out.stderr
    assert f"{u.editor} is not in it" in out.stderr
    assert audit_count(u, lab) == count
    # A viewer is told the group offboarding needs, not the editors' (which would not do).
    out = zuka_in(u, lab, u.viewer, "offboard", "gpu-off")
    assert out.returncode == 1 and f"zuka offboard needs group {u.offboard}" in out.stderr
    assert f"--role offboard --folder {lab.folder}`" in out.stderr  # not the default lab
    assert audit_count(u, lab) == count
    # The offboarder is not refused by the lab (the plan is its own business).
    theirs = zuka_in(u, lab, u.offboarder, "offboard", "gpu-off")
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
    # The lock is the service user's alone: a viewer may not open it, so may not hold it
    # either (flock needs no write access: a lock it could open, it could keep the
    # collector from ever starting); whether it is held is not the viewer's to see.
    assert viewer.stdout.split() == ["False", "-1"]
    grab = (
        "import fcntl, os\n"
        f"fd = os.open({str(lab.folder / 'ledger.db.poller.lock')!r}, os.O_RDONLY)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
    )
    held = u.python(u.viewer, grab)
    assert held.returncode != 0 and "Permission denied" in held.stderr
    off = grab.replace("poller.lock", "offboard.lock")
    for who in (u.viewer, u.editor):
        held = u.python(who, off)
        assert held.returncode != 0 and "Permission denied" in held.stderr, who
    service = u.python(u.service, lock)
    assert service.returncode == 0 and service.stdout.split()[0] == "True", service.stderr
    # While the service holds it, a viewer sees who does.
    holding = subprocess.Popen(
        [
            *as_user(u.service),
            sys.executable,
            "-u",
            "-c",
            lock + "import sys; sys.stdin.readline()\n",
        ],
        env=u.env(u.service),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holding.stdout is not None
        took, _holder = holding.stdout.readline().split()
        assert took == "True"
        seen = u.python(u.viewer, lock)
        assert seen.stdout.split() == ["False", "-1"], seen.stderr
    finally:
        holding.communicate("\n", timeout=60)
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


def test_add_user_and_remove_user(lab: Lab, lab_users: LabUsers) -> None:  # noqa: F811
    u = lab_users
    assert zuka_in(u, lab, u.outsider, "node", "list").returncode == 1
    try:
        added = root("lab", "add-user", u.outsider, "--role", "view", "--folder",
                      str(lab.folder), "--yes")  # fmt: skip
        assert added.returncode == 0, added.stderr
        assert f"gpasswd -a {u.outsider} {u.viewers}" in added.stdout
        assert zuka_in(u, lab, u.outsider, "node", "list").returncode == 0
        again = root("lab", "add-user", u.outsider, "--role", "view", "--folder",
                      str(lab.folder), "--yes")  # fmt: skip
        assert "nothing to change" in again.stdout
        log = zuka_in(u, lab, u.viewer, "log")
        assert "lab.add-user" in log.stdout
    finally:
        removed = root("lab", "remove-user", u.outsider, "--folder", str(lab.folder), "--yes")
    assert removed.returncode == 0, removed.stderr
    assert zuka_in(u, lab, u.outsider, "node", "list").returncode == 1
    bad = root("lab", "add-user", "no-such-user-zk", "--role", "view", "--folder",
                str(lab.folder), "--yes")  # fmt: skip
    assert bad.returncode == 2 and "no user of this machine" in bad.stderr
    role = root("lab", "add-user", u.outsider, "--role", "admin", "--folder", str(lab.folder))
    assert role.returncode == 2


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
    seen = zuka_in(u, lab, u.viewer, "provider", "list")
    assert seen.returncode == 0, seen.stderr
    assert "walonly" in seen.stdout
    assert (lab.folder / "ledger.db-wal").stat().st_size > 0  # the viewer changed nothing
    shared_ok(lab)


def test_the_viewers_dashboard_opens_and_lists_the_labs_fleet(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    u = lab_users
    zuka_in(u, lab, u.editor, "node", "add", "gpu-dash", "--ssh", "ssh lab@10.0.0.4")
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
    count = audit_count(u, lab)
    out = u.python(u.viewer, code)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("rows ")
    assert audit_count(u, lab) == count
    shared_ok(lab)


def test_the_service_users_collector_writes_keep_the_files_the_labs(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    """What the collector writes (a gap in a node's readings, through the history store),
    as the service user, then a read by a viewer."""
    u = lab_users
    assert (
        zuka_in(
            u, lab, u.editor, "node", "add", "gpu-flush", "--ssh", "ssh lab@10.0.0.5"
        ).returncode
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
    shared_ok(lab)
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
    shared_ok(lab)


def test_only_the_service_user_collects_in_a_lab(lab: Lab, lab_users: LabUsers) -> None:  # noqa: F811
    u = lab_users
    out = zuka_in(u, lab, u.editor, "collect")
    assert out.returncode == 1
    assert f"only its service user, {u.service}, collects" in out.stderr
    assert "pid None" not in out.stderr


def test_a_viewer_reads_processes_and_may_not_trust_a_host_key(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    u = lab_users
    zuka_in(u, lab, u.editor, "node", "add", "gpu-ps", "--ssh", "ssh lab@10.0.0.6")
    ps = zuka_in(u, lab, u.viewer, "ps")
    assert ps.returncode == 0, ps.stderr
    assert "no GPU processes" in ps.stdout
    trust = zuka_in(u, lab, u.viewer, "node", "trust", "gpu-ps")
    assert trust.returncode == 1
    assert f"zuka node trust needs group {u.editors}" in trust.stderr
