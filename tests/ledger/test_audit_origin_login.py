"""A real SSH login to a real OpenSSH sshd (the integration tier; we are root), running this
checkout's zuka in it: the audit entry names the client's address.

With a terminal (ssh -tt) sshd writes the login's utmp record, and zuka finds its own
terminal's record there: `ssh 127.0.0.1`, even when the user sets SSH_CONNECTION to
something else. Without one, only the environment sshd set says it: `ssh 127.0.0.2 (env)`
(the client bound to 127.0.0.2, so the two logins differ).

sshd writes utmp only where the file exists: a container without one gets /run/utmp made
for the test (tests/support/sshlogin.py).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from leases.core import origin
from tests.support.sshlogin import UTMP, Login, login_unavailable, ssh_login, utmp_file
from tests.support.unixusers import shared_tmp

_why_not = login_unavailable()
pytestmark = [
    pytest.mark.openssh,
    pytest.mark.skipif(_why_not is not None, reason=_why_not or ""),
]


@pytest.fixture
def login(tmp_path: Path) -> Iterator[Login]:
    folder = shared_tmp()
    try:
        with utmp_file(), ssh_login(folder / "ledger.db", tmp_path) as here:
            user = pwd.getpwnam(here.sshd.user)
            os.chown(folder, user.pw_uid, user.pw_gid)
            yield here
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_login_with_a_terminal_is_named_by_its_utmp_record(login: Login) -> None:
    out = login.zuka("node", "add", "n1", "--ssh", "root@10.0.0.1", tty=True)
    assert "added node n1" in out
    # The user's own word does not move it: utmp is root's.
    lie = "SSH_CONNECTION='192.0.2.66 1 2 3'"
    login.zuka("node", "edit", "n1", "--notes", "x", tty=True, env=lie)
    entries = json.loads(login.zuka("log", "--json", tty=False))
    assert [(e["actor"], e["origin"]) for e in entries] == [
        (login.sshd.user, "ssh 127.0.0.1"),
        (login.sshd.user, "ssh 127.0.0.1"),
    ]
    # sshd wrote the logins' records (closed now: a logout clears a record's user).
    assert any(r.line.startswith("pts/") for r in origin.read_utmp([UTMP]))


def test_a_login_without_a_terminal_is_named_by_its_environment(login: Login) -> None:
    login.zuka("node", "add", "n1", "--ssh", "root@10.0.0.1", tty=True)
    login.zuka("node", "edit", "n1", "--notes", "x", tty=False, source="127.0.0.2")
    entries = json.loads(login.zuka("log", "--json", "--user", login.sshd.user, tty=False))
    assert [e["origin"] for e in entries] == ["ssh 127.0.0.1", "ssh 127.0.0.2 (env)"]
    table = login.zuka("log", "n1", "--wide", tty=False)
    assert "ssh 127.0.0.1 " in table and "ssh 127.0.0.2 (env)" in table
    assert login.zuka("audit", "verify", tty=False).startswith("audit log ok")
