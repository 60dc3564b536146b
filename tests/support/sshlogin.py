"""Real SSH logins to a private OpenSSH sshd (tests/support/sshd.py) that run this checkout's
zuka, with or without a terminal, from a chosen loopback address:

    with utmp_file(), ssh_login(ledger, user=...) as login:
        login.zuka("node", "add", ..., tty=True, source="127.0.0.2")

sshd writes a login's utmp record only where /run/utmp exists: `utmp_file` makes it for the
test where a container has none (root's, 0664, as a login system keeps it) and removes it
after. Needs root (sshd, its user, utmp).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncssh
import pytest

from leases.ssh import hostkeys
from tests.support.sshd import Sshd, sshd_unavailable
from tests.support.unixusers import ROOT

UTMP = Path("/run/utmp")
SSH = shutil.which("ssh")


def login_unavailable() -> str | None:
    """Why real logins cannot run here, or None when they can."""
    return (
        sshd_unavailable()
        or (None if SSH else "the OpenSSH client (ssh) is not installed")
        or (None if os.geteuid() == 0 else "sshd's utmp records and its login user need root")
    )


@dataclass
class Login:
    sshd: Sshd
    key: Path
    known: Path
    ledger: Path

    def ssh(self, command: str, *, tty: bool, source: str = "127.0.0.1") -> str:
        """command in a login of the sshd's user from source; it must succeed: its output."""
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
        """`zuka ARGS --ledger LEDGER` in a login (this checkout's); env: NAME=VALUE words
        the command line sets before it."""
        words = [sys.executable, "-m", "tui.cli.main", *args, "--ledger", str(self.ledger)]
        command = (
            f"cd {shlex.quote(str(ROOT))} && {env} PYTHONPATH={shlex.quote(str(ROOT))}"
            f" PYTHONDONTWRITEBYTECODE=1 {shlex.join(words)}"
        )
        return self.ssh(command, tty=tty, source=source)


# Tests in several xdist workers may hold utmp at once: the first makes it (where it was
# missing), the last removes it; the count and whether it was made, under a lock.
_UTMP_STATE = Path(tempfile.gettempdir()) / "zuka-utmp.state"


@contextlib.contextmanager
def _utmp_lock() -> Iterator[None]:
    with open(_UTMP_STATE.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _utmp_state() -> tuple[int, bool]:
    try:
        count, made = _UTMP_STATE.read_text().split()
        return int(count), made == "made"
    except (OSError, ValueError):
        return 0, False


@contextlib.contextmanager
def utmp_file() -> Iterator[Path]:
    """/run/utmp for sshd to write, made for the test where the machine has none."""
    with _utmp_lock():
        count, made = _utmp_state()
        if count == 0:
            made = not UTMP.exists()
            if made:
                UTMP.touch(mode=0o664)
                UTMP.chmod(0o664)
        _UTMP_STATE.write_text(f"{count + 1} {'made' if made else 'found'}")
    try:
        yield UTMP
    finally:
        with _utmp_lock():
            count, made = _utmp_state()
            if count <= 1:
                if made:
                    UTMP.unlink(missing_ok=True)
                _UTMP_STATE.unlink(missing_ok=True)
            else:
                _UTMP_STATE.write_text(f"{count - 1} {'made' if made else 'found'}")


@contextlib.contextmanager
def ssh_login(ledger: Path, folder: Path, **sshd_options: object) -> Iterator[Login]:
    """An sshd (its options: Sshd's, e.g. user=) and the client's key and trust in folder;
    skipped (failed under CI=true) where its user cannot run this checkout."""
    key = asyncssh.generate_private_key("ssh-ed25519")
    key_path = folder / f"id_ed25519.{os.getpid()}.{id(key)}"
    key.write_private_key(key_path)
    key_path.chmod(0o600)
    known = folder / f"known_hosts.{id(key)}"
    with Sshd.start_new([key], **sshd_options) as sshd:
        hostkeys.trust("127.0.0.1", sshd.port, sshd.host_key, known)
        login = Login(sshd, key_path, known, ledger)
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
        yield login
