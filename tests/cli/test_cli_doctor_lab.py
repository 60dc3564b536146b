"""`zuka doctor` on a lab's ledger: the service's units, and what each member may do
(real users: the tests in tests/lab run doctor as each)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from leases.app import doctorservice
from leases.app.doctor import Level, Setting
from leases.lab.layout import Lab
from leases.service.units import MARKER

NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)


@pytest.fixture
def lab(tmp_path: Path) -> Lab:
    if os.geteuid() != 0:
        pytest.skip("a lab's marker counts only when root owns it")
    lab = Lab(tmp_path / "lab")
    lab.folder.mkdir()
    lab.marker.write_text(lab.marker_text())
    return lab


def _service(lab: Lab, root: Path) -> list[tuple[Level, str, str]]:
    setting = Setting(lab.ledger, "--ledger", NOW, env={}, home=root / "home")
    return [(f.level, f.what, f.fix) for f in doctorservice.units(setting, root=root)]


def test_a_lab_without_its_service_is_told_how_to_install_it(lab: Lab, tmp_path: Path) -> None:
    ((level, what, fix),) = _service(lab, tmp_path / "root")
    assert level is Level.WARN and "not installed as a service" in what
    assert fix == "sudo zuka service install --system"


def test_an_installed_unit_is_named_and_a_foreign_one_is_said(lab: Lab, tmp_path: Path) -> None:
    root = tmp_path / "root"
    units = root / "etc/systemd/system"
    units.mkdir(parents=True)
    unit = units / "zuka-collect.service"
    unit.write_text(MARKER + "\n[Service]\nExecStart=/bin/true\n")
    found = _service(lab, root)
    assert [f[0] for f in found] == [Level.OK]
    assert "zuka-collect.service is installed" in found[0][1]
    assert "systemd is not running here" in found[0][1]
    unit.write_text("[Service]\nExecStart=/usr/local/bin/something-else\n")
    found = _service(lab, root)
    assert found[0][0] is Level.WARN and "was not written by zuka" in found[0][1]
    assert "--dry-run" in found[0][2]


def test_root_is_told_that_modes_do_not_bind_it(lab: Lab, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("doctor", "--json", ledger=lab.ledger)
    assert "root: the lab's modes and ACLs do not bind root" in r.out
    assert "the ledger is the lab's in" in r.out
