"""A real SSH login to a real OpenSSH sshd (the integration tier; we are root), running this
checkout's zuka in it: the audit entry names the client's address.

With a terminal (ssh -tt) sshd writes the login's utmp record, and zuka finds its own
terminal's record there: `ssh 127.0.0.1`, even when the user sets SSH_CONNECTION to
something else. Without one, only the environment sshd set says it: `ssh 127.0.0.2 (env)`
(the client bound to 127.0.0.2, so the two logins differ).

sshd writes utmp only where the file exists: a container without one gets /run/utmp made
for the test (root's, 0664, as a login system keeps it) and removed after.
"""

from __future__ import annotations

import json
import os
import pwd
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncssh
import pytest

from leases.core import origin
from leases.ssh import hostkeys
from tests.support.sshd import Sshd, sshd_unavailable
from tests.support.unixusers import ROOT, shared_tmp

UTMP = Path("/run/utmp")
SSH = shutil.which("ssh")

_why_not = (
    sshd_unavailable()
    or (None if SSH else "the OpenSSH client (ssh) is not installed")
    or (None if os.geteuid() == 0 else "sshd's utmp records and its login user need root")
)
pytestmark = [
    pytest.mark.openssh,
    pytest.mark.skipif(_why_not is not None, reason=_why_not or ""),
]


@dataclass
class Login:
    sshd: Sshd
    key: Path
    known: Path
    ledger: Path

    def ssh(self, command: str, *, tty: bool, source: str = "127.0.0.1") -> str:
        assert SSH is not None
        argv = [
            SSH, "-F", "/dev/null", "-i", str(self.key), "-o", "IdentitiesOnly=yes",
            "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={self.known}",
            "-o", "StrictHostKeyChecking=yes", "-o", "LogLevel=ERROR",
            "-p", str(self.sshd.port), "-b", source, "-tt" if tty else "-T",
            f"{self.sshd.user}@127.0.0.1", command,
        ]  # fmt: skip
        r = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 0, (command, r.stdout, r.stderr)
        return r.stdout.replace("\r\n", "\n")

    def zuka(self, *args: str, tty: bool, source: str = "127.0.0.1", env: str = "") -> str:
        """`zuka ARGS --ledger LEDGER` in a login of the test user: this checkout's."""
        words = [sys.executable, "-m", "tui.cli.main", *args, "--ledger", str(self.ledger)]
        command = (
            f"cd {shlex.quote(str(ROOT))} && {env} PYTHONPATH={shlex.quote(str(ROOT))}"
            f" PYTHONDONTWRITEBYTECODE=1 {shlex.join(words)}"
        )
        return self.ssh(command, tty=tty, source=source)


@pytest.fixture
def login(tmp_path: Path) -> Iterator[Login]:
    key = asyncssh.generate_private_key("ssh-ed25519")
    key_path = tmp_path / "id_ed25519"
    key.write_private_key(key_path)
    key_path.chmod(0o600)
    made_utmp = not UTMP.exists()
    if made_utmp:
        UTMP.touch(mode=0o664)
        UTMP.chmod(0o664)
    folder = shared_tmp()
    try:
        with Sshd.start_new([key]) as sshd:
            user = pwd.getpwnam(sshd.user)
            os.chown(folder, user.pw_uid, user.pw_gid)
            known = tmp_path / "known_hosts"
            hostkeys.trust("127.0.0.1", sshd.port, sshd.host_key, known)
            here = Login(sshd, key_path, known, folder / "ledger.db")
            probe = subprocess.run(
                [SSH or "ssh", "-F", "/dev/null", "-i", str(key_path), "-o", "BatchMode=yes",
                 "-o", f"UserKnownHostsFile={known}", "-p", str(sshd.port), "-T",
                 f"{sshd.user}@127.0.0.1",
                 f"cd {shlex.quote(str(ROOT))} && {shlex.quote(sys.executable)} -c 'import leases'"],
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            if probe.returncode != 0:
                reason = (
                    f"the login user cannot run this checkout ({ROOT}, {sys.executable}):"
                    f" {probe.stderr.strip()[-300:]}"
                )
                if os.environ.get("CI") == "true":
                    pytest.fail(reason)
                pytest.skip(reason)
            yield here
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if made_utmp:
            UTMP.unlink(missing_ok=True)


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
