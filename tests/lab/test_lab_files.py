"""A lab's files, with real Unix users (as root in CI): what `zuka lab init` makes, and
the ledger's, -wal's and -shm's owner, mode and ACL after every kind of write, a checkpoint
and root's own use; `zuka lab check` and `repair`; links and hard links refused; a marker
not root's refused.

Slow (about half a minute): every command is a fresh `zuka` process run as its user.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from leases.lab import acl, perms
from leases.lab.layout import Lab
from tests.support.labs import (
    gid,
    root,
    shared_ok,
    state,
    uid,
    zuka_in,
)
from tests.support.unixusers import LabUsers, as_user, lab_users, shared_tmp  # noqa: F401

pytestmark = pytest.mark.slow


def test_init_makes_the_layout_and_a_second_init_changes_nothing(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    assert perms.check(lab) == []
    shared_ok(lab)
    folder = lab.folder.stat()
    assert (folder.st_uid, folder.st_gid, stat.S_IMODE(folder.st_mode)) == (
        0,
        gid(lab.viewers),
        0o750,
    )
    key = lab.collector_key.stat()
    assert (key.st_uid, stat.S_IMODE(key.st_mode)) == (uid(lab.service_user), 0o600)
    assert stat.S_IMODE(lab.collector_key_dir.stat().st_mode) == 0o700
    before = state(lab)
    again = root("lab", "init", "--folder", str(lab.folder), "--yes")
    assert again.returncode == 0, again.stderr
    assert "nothing to change" in again.stdout
    assert state(lab) == before
    # Only the service user reads the collector's key; any member prints its public half.
    u = lab_users
    peek = u.python(u.editor, f"open({str(lab.collector_key)!r}).read()")
    assert peek.returncode != 0 and "Permission denied" in peek.stderr
    pub = zuka_in(u, lab, u.viewer, "lab", "pubkey")
    assert pub.returncode == 0, pub.stderr
    assert pub.stdout.startswith("ssh-ed25519 ") and "authorized_keys" in pub.stdout
    mine = u.python(u.service, f"print(open({str(lab.collector_key)!r}).read()[:40])")
    assert mine.returncode == 0 and "OPENSSH PRIVATE KEY" in mine.stdout


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
        done = zuka_in(u, lab, u.editor, *args)
        assert done.returncode == 0, (args, done.stderr)
        shared_ok(lab)
    # An import: an export of the editor's own scratch ledger added to the lab's.
    scratch, dump = u.home(u.editor) / "scratch.db", u.home(u.editor) / "x.json"
    assert u.zuka(u.editor, "--ledger", str(scratch), "provider", "add", "gpucloud",
                  "--kind", "cloud").returncode == 0  # fmt: skip
    assert u.zuka(u.editor, "--ledger", str(scratch), "export", "-o", str(dump)).returncode == 0
    imported = zuka_in(u, lab, u.editor, "import", str(dump))
    assert imported.returncode == 0, imported.stderr
    shared_ok(lab)
    # A checkpoint by the editor's own sqlite3, then the viewer reads.
    code = (
        "import sqlite3\n"
        f"c = sqlite3.connect({str(lab.ledger)!r})\n"
        "print(c.execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchone())\n"
    )
    ck = u.python(u.editor, code)
    assert ck.returncode == 0 and ck.stdout.startswith("(0,"), (ck.stdout, ck.stderr)
    shared_ok(lab)
    assert "gpucloud" in zuka_in(u, lab, u.viewer, "provider", "list").stdout
    # Root's own open and close: SQLite removes the companions; they are made again.
    mine = root("--ledger", str(lab.ledger), "provider", "add", "rootcloud", "--kind", "cloud")
    assert mine.returncode == 0, mine.stderr
    shared_ok(lab)
    assert "rootcloud" in zuka_in(u, lab, u.viewer, "provider", "list").stdout
    # The editor writes after root: the companions root's close left are the lab's.
    assert zuka_in(u, lab, u.editor, "provider", "add", "after", "--kind", "cloud").returncode == 0
    shared_ok(lab)


def test_check_finds_a_chmod_and_repair_fixes_it(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    u = lab_users
    os.chmod(lab.ledger, 0o600)  # an admin's slip: the ACL's mask is gone with it
    try:
        found = zuka_in(u, lab, u.viewer, "lab", "check")
        assert found.returncode == 1
        assert f"{lab.ledger}: mode 0600, should be 0660" in found.stdout
        assert "sudo zuka lab repair" in found.stdout
        refused = zuka_in(u, lab, u.editor, "provider", "add", "nope", "--kind", "cloud")
        assert refused.returncode == 1 and "needs group" in refused.stderr
        dry = root("lab", "repair", "--folder", str(lab.folder), "--dry-run")
        assert dry.returncode == 0 and "nothing changed" in dry.stdout
        assert stat.S_IMODE(lab.ledger.stat().st_mode) == 0o600
        asked = root("lab", "repair", "--folder", str(lab.folder))  # no tty, no --yes
        assert asked.returncode == 1 and "--yes" in asked.stderr
        fixed = root("lab", "repair", "--folder", str(lab.folder), "--yes")
        assert fixed.returncode == 0, fixed.stderr
    finally:
        perms.apply(lab)
    assert zuka_in(u, lab, u.viewer, "lab", "check").returncode == 0
    shared_ok(lab)
    assert zuka_in(u, lab, u.editor, "provider", "add", "again", "--kind", "cloud").returncode == 0


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


def test_a_marker_not_roots_is_refused(lab_users: LabUsers) -> None:  # noqa: F811
    u = lab_users
    top = shared_tmp()
    try:
        ledger = top / "ledger.db"
        assert (
            root("--ledger", str(ledger), "provider", "add", "p", "--kind", "cloud").returncode == 0
        )
        marker = top / "zuka-lab.toml"
        marker.write_text(f'viewers = "{u.viewers}"\n')
        os.chown(marker, uid(u.editor), 0)
        out = root("--ledger", str(ledger), "provider", "list")
        assert out.returncode == 1
        assert "is not root's alone" in out.stderr
    finally:
        shutil.rmtree(top)


def test_missing_companions_and_an_unreadable_ledger_are_refused_in_words(
    lab: Lab,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    u = lab_users
    # Committed pages left in the -wal alone (a writer killed before its checkpoint).
    code = (
        "import os\n"
        "from pathlib import Path\n"
        "from leases.ledger.records import provider_from\n"
        "from leases.ledger.store import Ledger\n"
        f"ledger = Ledger.open(Path({str(lab.ledger)!r}), create=False)\n"
        "ledger.conn.execute('PRAGMA wal_autocheckpoint = 0')\n"
        "ledger.add_provider(provider_from({'name': 'inwal', 'kind': 'cloud'}))\n"
        "os._exit(0)\n"
    )
    assert u.python(u.editor, code).returncode == 0
    shm = lab.folder / "ledger.db-shm"
    shm.unlink()  # only root can: what a careless admin's rm leaves
    try:
        out = zuka_in(u, lab, u.editor, "provider", "add", "noshm", "--kind", "cloud")
        assert out.returncode == 1
        assert f"{shm}: is missing" in out.stderr and "sudo zuka lab repair" in out.stderr
        # Nor can a read do without it while the -wal holds pages: it says the same.
        for user in (u.viewer, u.editor):
            read = zuka_in(u, lab, user, "provider", "list")
            assert read.returncode == 1
            assert f"{shm}: is missing" in read.stderr, read.stderr
    finally:
        perms.apply(lab)
    seen = zuka_in(u, lab, u.viewer, "provider", "list")
    assert "inwal" in seen.stdout and "noshm" not in seen.stdout
    assert zuka_in(u, lab, u.editor, "provider", "add", "noshm", "--kind", "cloud").returncode == 0
    # A viewer whose group no longer reads the file (an ACL changed by hand).
    os.chmod(lab.ledger, 0o600)
    try:
        out = zuka_in(u, lab, u.viewer, "provider", "list")
        assert out.returncode == 1
        assert f"reading the ledger needs group {u.viewers}" in out.stderr
    finally:
        perms.apply(lab)
    shared_ok(lab)


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
        out = root("lab", "init", "--folder", str(lab.folder), "--yes")
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
        out = root("lab", "init", "--folder", str(lab.folder), "--yes")
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
    # (Not the -wal: root's SQLite gives a -wal it opens to the ledger's owner by itself.)
    trust = lab.folder / "known_hosts"
    os.chown(trust, 0, 0)
    try:
        out = root("lab", "init", "--folder", str(lab.folder), "--yes")
        assert out.returncode == 0, out.stderr
        assert f"{trust}: is root:root, should be {lab.service_user}:{lab.viewers}" in out.stdout
        assert perms.check(lab) == []
    finally:
        perms.apply(lab)


def test_check_finds_the_lab_of_zuka_ledger(lab: Lab, lab_users: LabUsers) -> None:  # noqa: F811
    u = lab_users
    out = u.zuka(u.viewer, "lab", "check", env={"ZUKA_LEDGER": str(lab.ledger)})
    assert out.returncode == 0, out.stderr
    assert f"the lab at {lab.folder} is as it should be" in out.stdout
    assert "(not looked at, this user may not: id_ed25519, id_ed25519.pub; root may)" in out.stdout
    outsider = u.zuka(u.outsider, "lab", "check", env={"ZUKA_LEDGER": str(lab.ledger)})
    assert outsider.returncode == 1 and f"needs group {u.viewers}" in outsider.stderr
