"""Real Unix users and groups made for a test session (as root), and commands run as them.

The users and groups get names nobody else uses (a random suffix) and are removed when the
session ends. A command runs as a user through setpriv with --init-groups, so that the
user's groups are what /etc/group says, as at a real login, and with a small environment
of its own (HOME its own folder, no SSH agent, no config of the person running the tests).

The users must reach this checkout and the interpreter of its venv: CI's .ci/run makes the
folders above them traversable. Where they cannot (a checkout in a 0700 home), the tests
that need real users are skipped with the reason, except under CI=true, where it is a
failure: a CI that skipped them would prove nothing.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from leases.lab.layout import Lab

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class LabUsers:
    """One lab's groups, its service user and a person of each kind, all real."""

    viewers: str  # the lab's group: every member, and the service user's own group
    editors: str
    offboard: str
    service: str  # the collector's user
    viewer: str
    editor: str
    offboarder: str  # an editor who may also offboard
    outsider: str  # a user of the machine who is not in the lab
    homes: Path

    def lab(self, folder: Path) -> Lab:
        return Lab(
            folder=folder,
            viewers=self.viewers,
            editors=self.editors,
            offboard=self.offboard,
            service_user=self.service,
        )

    def people(self) -> tuple[str, ...]:
        return (self.service, self.viewer, self.editor, self.offboarder, self.outsider)

    def home(self, user: str) -> Path:
        return self.homes / user

    def env(self, user: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment a command of this user runs with: a login's, not the tests' (no
        system config unless extra names one, ZUKA_SYSTEM_CONFIG)."""
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home(user)),
            "USER": user,
            "LOGNAME": user,
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(ROOT),
            "PYTHONDONTWRITEBYTECODE": "1",
            "TERM": "dumb",
            "COLUMNS": "200",
            # The host's own /etc/zuka is not the test's: a test names its system config.
            "ZUKA_SYSTEM_CONFIG": "",
        }
        env.update(extra or {})
        return env

    def run(
        self,
        user: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        timeout: float = 120,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """argv run as user, with the user's own groups, to its end."""
        return subprocess.run(
            [*as_user(user), *argv],
            env=self.env(user, env),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd or ROOT,
            check=False,
        )

    def zuka(
        self,
        user: str,
        *args: str,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """`zuka ARGS` as user (this checkout's, with the venv's interpreter)."""
        return self.run(
            user,
            [sys.executable, "-m", "tui.cli.main", *args],
            env=env,
            input=input,
            timeout=timeout,
        )

    def python(
        self, user: str, code: str, *, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """A Python snippet run as user: what the user's own tools (sqlite3) could do."""
        return self.run(user, [sys.executable, "-c", code], env=env)


def as_user(user: str) -> list[str]:
    """The words that run a command as user with the groups /etc/group gives it."""
    return [
        "setpriv",
        "--reuid",
        user,
        "--regid",
        str(pwd.getpwnam(user).pw_gid),
        "--init-groups",
        "--",
    ]


def _run(argv: Sequence[str]) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60)


def _refuse_or_skip(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"tests with real Unix users cannot run in CI: {reason}")
    pytest.skip(reason)


def make_lab_users() -> Iterator[LabUsers]:
    """Make the groups and users, yield them, remove them (a generator for a fixture)."""
    if os.geteuid() != 0:
        _refuse_or_skip("making real Unix users needs root")
    for tool in ("useradd", "groupadd", "userdel", "groupdel", "setpriv"):
        if shutil.which(tool) is None:
            _refuse_or_skip(f"{tool} is not installed")
    tag = secrets.token_hex(3)
    names = {
        "viewers": f"zkv{tag}",
        "editors": f"zke{tag}",
        "offboard": f"zko{tag}",
        "service": f"zksvc{tag}",
        "viewer": f"zkview{tag}",
        "editor": f"zkedit{tag}",
        "offboarder": f"zkoff{tag}",
        "outsider": f"zkout{tag}",
    }
    homes = Path(tempfile.mkdtemp(prefix="zuka-homes-", dir="/tmp"))
    homes.chmod(0o755)
    made_groups: list[str] = []
    made_users: list[str] = []
    try:
        for key in ("viewers", "editors", "offboard"):
            _run(["groupadd", names[key]])
            made_groups.append(names[key])
        members = {
            "service": [],
            "viewer": [],
            "editor": [names["editors"]],
            "offboarder": [names["editors"], names["offboard"]],
        }
        for key, extra in members.items():
            argv = ["useradd", "-M", "-N", "-g", names["viewers"], "-s", "/bin/sh"]
            if key == "service":
                argv.append("--system")
            if extra:
                argv += ["-G", ",".join(extra)]
            _run([*argv, names[key]])
            made_users.append(names[key])
        _run(["useradd", "-M", "-U", "-s", "/bin/sh", names["outsider"]])
        made_users.append(names["outsider"])
        users = LabUsers(homes=homes, **names)
        for user in users.people():
            home = users.home(user)
            home.mkdir(mode=0o700)
            entry = pwd.getpwnam(user)
            os.chown(home, entry.pw_uid, entry.pw_gid)
        probe = users.python(users.viewer, "import leases, tui")
        if probe.returncode != 0:
            _refuse_or_skip(
                f"a user made for the test cannot run this checkout's Python ({sys.executable}"
                f" from {ROOT}): make the folders above them traversable (chmod o+x);"
                f" it said: {probe.stderr.strip()[-300:]}"
            )
        yield users
    finally:
        for user in made_users:
            subprocess.run(["userdel", user], capture_output=True, check=False)
        for group in made_groups:
            subprocess.run(["groupdel", group], capture_output=True, check=False)
        shutil.rmtree(homes, ignore_errors=True)


@pytest.fixture(scope="session")
def lab_users() -> Iterator[LabUsers]:
    """Real users for a lab (see the module): import this fixture into a test module."""
    yield from make_lab_users()


def shared_tmp() -> Path:
    """A fresh folder under /tmp that every user may pass through (pytest's tmp_path
    lies in a 0700 folder of root's): the lab folder goes inside it."""
    folder = Path(tempfile.mkdtemp(prefix="zuka-lab-", dir="/tmp"))
    folder.chmod(0o755)
    return folder
