"""The install and uninstall use cases where systemd runs: the systemctl commands run in
order through the injected runner, a failed one stops the rest and is reported; files are
written atomically."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from leases.app import service as svc
from leases.ledger.store import Ledger
from leases.service import files
from leases.service.units import MARKER, Mode


class Recorder:
    def __init__(self, fail: str | None = None) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.fail = fail

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]:
        self.calls.append(tuple(argv))
        if self.fail is not None and self.fail in argv:
            return 1, "Failed to enable unit: Access denied"
        return 0, ""


@pytest.fixture
def plan(ledger_path: Path, tmp_path: Path) -> svc.ServicePlan:
    Ledger.open(ledger_path).close()
    req = svc.Request(Mode.USER, ledger_path, web=True, root=tmp_path / "r", home=tmp_path, env={})
    made = svc.plan_install(req)
    assert not made.run_commands  # another root: never systemctl
    return dataclasses.replace(made, run_commands=True)  # as where systemd runs


def test_install_runs_reload_then_enable(plan: svc.ServicePlan) -> None:
    runner = Recorder()
    done = svc.install(plan, runner=runner)
    assert runner.calls == [
        ("systemctl", "--user", "daemon-reload"),
        ("systemctl", "--user", "enable", "--now", "zuka-collect.service", "zuka-web.service"),
    ]
    assert [code for _, code, _ in done.ran] == [0, 0] and done.not_run == ()


def test_a_failed_command_stops_the_rest_and_is_reported(plan: svc.ServicePlan) -> None:
    runner = Recorder(fail="daemon-reload")
    done = svc.install(plan, runner=runner)
    assert runner.calls == [("systemctl", "--user", "daemon-reload")]
    assert done.ran[0][1] == 1 and "Access denied" in done.ran[0][2]


def test_uninstall_stops_the_units_before_removing_them(
    plan: svc.ServicePlan, tmp_path: Path
) -> None:
    svc.install(plan, runner=Recorder())
    removal = svc.plan_uninstall(Mode.USER, tmp_path / "r", tmp_path, env={})
    seen: list[tuple[tuple[str, ...], bool]] = []

    def runner(argv: Sequence[str]) -> tuple[int, str]:
        seen.append((tuple(argv), all(u.path.exists() for u in removal.units)))
        return 0, ""

    svc.uninstall(dataclasses.replace(removal, run_commands=True), runner=runner)
    assert seen == [
        (("systemctl", "--user", "disable", "--now", "zuka-collect.service",
          "zuka-web.service"), True),
        (("systemctl", "--user", "daemon-reload"), False),
    ]  # fmt: skip
    assert not any(u.path.exists() for u in removal.units)


def test_a_write_leaves_no_temporary_file_and_replaces_whole(tmp_path: Path) -> None:
    unit = tmp_path / "units" / "zuka-collect.service"
    files.write_atomic(unit, MARKER + "\nfirst\n")
    files.write_atomic(unit, MARKER + "\nsecond\n")
    assert unit.read_text() == MARKER + "\nsecond\n"
    assert os.listdir(unit.parent) == ["zuka-collect.service"]
    assert files.is_ours(unit) is True


def test_a_failed_write_keeps_the_old_unit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    unit = tmp_path / "zuka-collect.service"
    files.write_atomic(unit, MARKER + "\nold\n")

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        files.write_atomic(unit, MARKER + "\nnew\n")
    assert unit.read_text() == MARKER + "\nold\n"
    assert os.listdir(tmp_path) == ["zuka-collect.service"]


def test_the_user_units_folder_follows_xdg_config_home(tmp_path: Path) -> None:
    home = Path("/home/ana")
    assert files.units_dir(Mode.USER, None, home, {}) == home / ".config/systemd/user"
    xdg = {"XDG_CONFIG_HOME": "/srv/conf"}
    assert files.units_dir(Mode.USER, None, home, xdg) == Path("/srv/conf/systemd/user")
    # A relative XDG_CONFIG_HOME is ignored, as the XDG spec says.
    assert files.units_dir(Mode.USER, None, home, {"XDG_CONFIG_HOME": "conf"}) == (
        home / ".config/systemd/user"
    )
    assert files.units_dir(Mode.SYSTEM, tmp_path, home, {}) == tmp_path / "etc/systemd/system"


def test_a_unit_that_could_not_be_stopped_keeps_its_file(
    plan: svc.ServicePlan, tmp_path: Path
) -> None:
    svc.install(plan, runner=Recorder())
    removal = svc.plan_uninstall(Mode.USER, tmp_path / "r", tmp_path, env={})
    runner = Recorder(fail="disable")
    done = svc.uninstall(dataclasses.replace(removal, run_commands=True), runner=runner)
    assert done.files == () and done.ran[0][1] == 1
    assert len(runner.calls) == 1  # no daemon-reload either
    assert all(u.path.exists() for u in removal.units)
