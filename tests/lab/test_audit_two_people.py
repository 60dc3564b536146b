"""Two people on one jump host, each through their own SSH login, writing one ledger: the
audit log names both, and where each came from. Real users of the lab (an editor, an
offboarder), real sshds, this checkout's zuka in each login.

The ledger's folder here is only group-writable for the editors (setgid, umask 007): the
lab's own layout and its ACLs are `zuka lab init`'s and tested with it.
"""

from __future__ import annotations

import grp
import io
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from leases.ledger.store import Ledger
from tests.support.sshlogin import login_unavailable, ssh_login, utmp_file
from tests.support.unixusers import LabUsers, lab_users, shared_tmp  # noqa: F401
from tui.cli.main import main

_why_not = login_unavailable()
pytestmark = [
    pytest.mark.openssh,
    pytest.mark.skipif(_why_not is not None, reason=_why_not or ""),
]
UMASK = "umask 007 &&"


@pytest.fixture
def shared_ledger(lab_users: LabUsers) -> Iterator[Path]:  # noqa: F811
    top = shared_tmp()
    folder = top / "team"
    folder.mkdir()
    os.chown(folder, 0, grp.getgrnam(lab_users.editors).gr_gid)
    folder.chmod(0o2770)
    path = folder / "ledger.db"
    with Ledger.open(path):
        pass
    for made in folder.iterdir():
        os.chown(made, 0, grp.getgrnam(lab_users.editors).gr_gid)
        made.chmod(0o660)
    try:
        yield path
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_two_people_one_log_naming_both(
    lab_users: LabUsers,  # noqa: F811
    shared_ledger: Path,
    tmp_path: Path,
) -> None:
    u = lab_users
    with (
        utmp_file(),
        ssh_login(shared_ledger, tmp_path, user=u.editor) as editor,
        ssh_login(shared_ledger, tmp_path, user=u.offboarder) as offboarder,
    ):
        # The editor at a terminal from one address, the other from another, no terminal.
        out = editor.zuka("node", "add", "n1", "--ssh", "root@10.0.0.1", tty=True, env=UMASK)
        assert "added node n1" in out
        offboarder.zuka("node", "edit", "n1", "--notes", "re-cabled", tty=False,
                        source="127.0.0.3", env=UMASK)  # fmt: skip
        editor.zuka("node", "edit", "n1", "--gpus", "8", tty=True, env=UMASK)
        mine = json.loads(offboarder.zuka("log", "--json", "--user", u.offboarder, tty=False))
    buf = io.StringIO()
    assert main(["log", "--json", "--ledger", str(shared_ledger)], out=buf) == 0
    entries = json.loads(buf.getvalue())
    assert [(e["actor"], e["origin"], e["action"]) for e in entries] == [
        (u.editor, "ssh 127.0.0.1", "node.add"),
        (u.offboarder, "ssh 127.0.0.3 (env)", "node.edit"),
        (u.editor, "ssh 127.0.0.1", "node.edit"),
    ]
    assert [e["id"] for e in mine] == [2]
    buf = io.StringIO()
    assert main(["log", "n1", "--wide", "--ledger", str(shared_ledger)], out=buf) == 0
    table = buf.getvalue()
    assert f"{u.editor}" in table and "ssh 127.0.0.3 (env)" in table
    buf = io.StringIO()
    assert main(["audit", "verify", "--ledger", str(shared_ledger)], out=buf) == 0
