"""The system config and its secrets file as real users of a lab find them: the editors
(and the service, given the file by an ACL) read the secrets, a viewer goes without them
and is told so, and a secrets file the lab's viewers could read is refused."""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from leases.config.load import load_config
from leases.core.errors import ConfigError
from tests.support.unixusers import LabUsers, lab_users, shared_tmp  # noqa: F401

DING = "https://oapi.dingtalk.com/robot/send?access_token=abcdef0123456789secret"


@dataclass(frozen=True)
class Host:
    system: Path
    secrets: Path
    ledger: Path

    @property
    def env(self) -> dict[str, str]:
        return {"ZUKA_SYSTEM_CONFIG": str(self.system)}


@pytest.fixture
def host(lab_users: LabUsers) -> Iterator[Host]:  # noqa: F811
    """A lab folder with its root-owned marker, a system config naming its ledger, and a
    secrets file root:editors 0640, all in a folder every user may pass through."""
    top = shared_tmp()
    try:
        etc, folder = top / "etc", top / "lab"
        etc.mkdir(mode=0o755)
        folder.mkdir(mode=0o755)
        lab = lab_users.lab(folder)
        lab.marker.write_text(lab.marker_text())
        lab.marker.chmod(0o644)
        system = etc / "config.toml"
        system.write_text(f'[lab]\nledger = "{lab.ledger}"\n[billing]\ntz = "UTC"\n')
        system.chmod(0o644)
        secrets = etc / "secrets.toml"
        secrets.write_text(f'[notify]\nurls = ["{DING}"]\n[alerts]\ntemperature_c = 77\n')
        os.chown(secrets, 0, grp.getgrnam(lab_users.editors).gr_gid)
        secrets.chmod(0o640)
        yield Host(system, secrets, lab.ledger)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _show(users: LabUsers, user: str, host: Host) -> dict[str, object]:
    done = users.zuka(user, "config", "show", "--json", env=host.env)
    assert done.returncode == 0, (user, done.stderr)
    data: dict[str, object] = json.loads(done.stdout)
    return data


def _secrets_state(data: dict[str, object]) -> str:
    layers = data["layers"]
    assert isinstance(layers, list)
    return next(str(layer["state"]) for layer in layers if layer["kind"] == "secrets file")


def test_the_editor_reads_the_secrets_and_the_viewer_goes_without_them(
    lab_users: LabUsers,  # noqa: F811
    host: Host,
) -> None:
    u = lab_users
    mine = _show(u, u.editor, host)
    settings = mine["settings"]
    assert isinstance(settings, dict)
    assert _secrets_state(mine) == "read"
    assert settings["notify.urls"]["source"] == str(host.secrets)
    assert settings["alerts.temperature_c"] == {"value": 77, "source": str(host.secrets)}
    assert settings["billing.tz"] == {"value": "UTC", "source": str(host.system)}
    assert "abcdef0123456789secret" not in json.dumps(mine)  # masked even for an editor

    theirs = _show(u, u.viewer, host)
    settings = theirs["settings"]
    assert isinstance(settings, dict)
    assert _secrets_state(theirs) == f"not readable by {u.viewer}: skipped"
    assert settings["notify.urls"] == {"value": [], "source": "default"}
    assert settings["alerts.temperature_c"]["source"] == "default"
    assert settings["billing.tz"]["source"] == str(host.system)  # the system config still read

    text = u.zuka(u.viewer, "config", "show", env=host.env)
    assert text.returncode == 0 and text.stderr == ""
    assert f"# secrets file: {host.secrets} (not readable by {u.viewer}: skipped" in text.stdout
    text = u.zuka(u.editor, "config", "show", env=host.env)
    assert f"# secrets file: {host.secrets}\n" in text.stdout
    check = u.zuka(u.viewer, "config", "check", env=host.env)
    assert check.returncode == 0 and f"not readable by {u.viewer}: skipped" in check.stdout
    # The outsider may read the system config (it is the host's) but not the secrets.
    assert _secrets_state(_show(u, u.outsider, host)).endswith(": skipped")


def test_the_service_reads_the_secrets_through_an_acl_of_its_own(
    lab_users: LabUsers,  # noqa: F811
    host: Host,
) -> None:
    u = lab_users
    assert _secrets_state(_show(u, u.service, host)).endswith(": skipped")  # not an editor
    _acl_read_for(host.secrets, pwd.getpwnam(u.service).pw_uid)
    assert (host.secrets.stat().st_mode & 0o777) == 0o640  # the mask: the check still holds
    assert _secrets_state(_show(u, u.service, host)) == "read"
    assert _secrets_state(_show(u, u.viewer, host)).endswith(": skipped")


def test_a_secrets_file_the_lab_s_viewers_could_read_is_refused_for_everyone(
    lab_users: LabUsers,  # noqa: F811
    host: Host,
) -> None:
    u = lab_users
    os.chown(host.secrets, 0, grp.getgrnam(u.viewers).gr_gid)
    with pytest.raises(ConfigError) as caught:
        load_config(None, env={}, system=host.system)
    said = "\n".join(caught.value.problems)
    assert f"{host.secrets}: its group is {u.viewers} (the lab's viewers" in said
    assert f"chgrp {u.editors} {host.secrets}" in said
    for user in (u.viewer, u.editor):
        done = u.zuka(user, "config", "check", env=host.env)
        assert done.returncode == 2 and f"its group is {u.viewers}" in done.stderr, user
        assert "abcdef0123456789secret" not in done.stdout + done.stderr
    # root's own group is fine (only root reads it then); so is the editors' group.
    os.chown(host.secrets, 0, 0)
    assert load_config(None, env={}, system=host.system).alerts.temperature_c == 77


def test_a_viewer_s_zuka_opens_the_lab_ledger_named_by_the_system_config(
    lab_users: LabUsers,  # noqa: F811
    host: Host,
) -> None:
    u = lab_users
    done = u.zuka(u.viewer, "node", "list", env=host.env)
    # No ledger yet: the words name the system config that chose it, not the viewer's home.
    assert done.returncode == 1
    assert f"no ledger at {host.ledger}, the lab's ledger ([lab] ledger of {host.system})" in (
        done.stderr
    )
    assert not (u.home(u.viewer) / ".local").exists()


def _acl_read_for(path: Path, uid: int) -> None:
    """A POSIX access ACL (the system.posix_acl_access xattr, as setfacl writes it): the
    owner rw, user uid r, the owning group gid r, mask r, others nothing."""
    user_obj, user, group_obj, mask, other = 0x01, 0x02, 0x04, 0x10, 0x20
    undefined = 0xFFFFFFFF
    entries = [
        (user_obj, 6, undefined),
        (user, 4, uid),
        (group_obj, 4, undefined),
        (mask, 4, undefined),
        (other, 0, undefined),
    ]
    blob = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)
    os.setxattr(path, "system.posix_acl_access", blob)


def test_a_system_config_a_user_may_not_read_is_said_with_its_fix(
    lab_users: LabUsers,  # noqa: F811
    host: Host,
) -> None:
    u = lab_users
    host.system.chmod(0o600)
    done = u.zuka(u.viewer, "config", "check", env=host.env)
    assert done.returncode == 2
    assert f"{host.system}: cannot be read by {u.viewer}" in done.stderr
    assert f"chmod 644 {host.system}" in done.stderr and "ZUKA_SYSTEM_CONFIG=" in done.stderr
    # The way out it names works: no system config, the user's own defaults.
    done = u.zuka(u.viewer, "config", "check", env={"ZUKA_SYSTEM_CONFIG": ""})
    assert done.returncode == 0, done.stderr
