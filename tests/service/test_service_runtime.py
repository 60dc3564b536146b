"""A system unit runs as the service user, who owns the lab's ledger and reads the
collector's key: `zuka service install --system` refuses to run code someone but root may
change (a member's checkout, a venv in a folder others may write) or that the service user
cannot reach, naming each path."""

from __future__ import annotations

import os
import pwd
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from leases.app import service as svc
from leases.app import serviceruntime
from leases.core.errors import InputError
from leases.service.units import Mode, Runtime
from tests.service.support import ServiceFolder, make_service_folder
from tests.support.unixusers import LabUsers, lab_users, shared_tmp  # noqa: F401


@pytest.fixture
def lab(lab_users: LabUsers) -> Iterator[ServiceFolder]:  # noqa: F811
    yield from make_service_folder(lab_users, node=False)


def _plan(lab: ServiceFolder, runtime: Runtime, root: Path) -> svc.ServicePlan:
    req = svc.Request(Mode.SYSTEM, lab.lab.ledger, root=root)
    return svc.plan_install(req, runtime=runtime, euid=0)


def test_this_checkout_run_by_root_is_taken(lab: ServiceFolder, tmp_path: Path) -> None:
    plan = _plan(lab, svc.this_runtime(), tmp_path / "root")
    assert [u.name for u in plan.units] == ["zuka-collect.service"]


def test_a_members_checkout_is_refused_naming_it(
    lab: ServiceFolder,
    lab_users: LabUsers,  # noqa: F811
    tmp_path: Path,
) -> None:
    top = shared_tmp()
    theirs = top / "zuka"
    theirs.mkdir()
    viewer = pwd.getpwnam(lab_users.viewer)
    os.chown(theirs, viewer.pw_uid, viewer.pw_gid)
    runtime = Runtime(Path(sys.executable), theirs, svc.this_runtime().needs)
    with pytest.raises(InputError) as refused:
        _plan(lab, runtime, tmp_path / "root")
    said = str(refused.value)
    assert f"{theirs}: {theirs} belongs to {lab_users.viewer}, not root" in said
    assert "/opt/zuka" in said
    assert not (tmp_path / "root").exists()  # nothing written


def test_a_folder_others_may_write_is_refused(tmp_path: Path) -> None:
    top = shared_tmp()
    loose = top / "venv"
    loose.mkdir()
    loose.chmod(0o777)
    python = loose / "python"
    python.write_text("")
    why = serviceruntime.changeable_by_others(python)
    assert why == f"{loose} may be written by others (mode 0777)"
    loose.chmod(0o755)
    assert serviceruntime.changeable_by_others(python) is None  # /tmp is sticky: fine


def test_a_folder_the_service_user_cannot_pass_is_said(
    lab_users: LabUsers,  # noqa: F811
) -> None:
    top = shared_tmp()
    closed = top / "closed"
    (closed / "bin").mkdir(parents=True)
    closed.chmod(0o700)
    python = closed / "bin" / "python"
    python.write_text("")
    why = serviceruntime.unreachable(python, lab_users.service)
    assert why == (f"{lab_users.service} may not pass {closed} (mode 0700) on the way to {python}")
    closed.chmod(0o711)
    assert serviceruntime.unreachable(python, lab_users.service) is None


def test_the_system_configs_lab_is_the_default(
    lab: ServiceFolder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    """With no --ledger, a system install and its status take the lab the system config
    names, as every other command does (not /var/lib/zuka)."""
    import io

    from tui.cli.main import main

    system = tmp_path / "config.toml"
    system.write_text(f'[lab]\nledger = "{lab.lab.ledger}"\n')
    monkeypatch.setenv("ZUKA_SYSTEM_CONFIG", str(system))
    monkeypatch.delenv("ZUKA_LEDGER", raising=False)
    out = io.StringIO()
    root = tmp_path / "root"
    code = main(["service", "install", "--system", "--dry-run", "--root", str(root)], out)
    assert code == 0, out.getvalue()
    assert f"--ledger {lab.lab.ledger}" in out.getvalue()
    out = io.StringIO()
    assert main(["service", "status", "--root", str(root)], out) == 0
    assert f"ledger: {lab.lab.ledger}" in out.getvalue()
    assert "/etc/systemd/system" in out.getvalue()  # the lab's: the system's units
