"""`zuka lab init` and its siblings in-process, as root: the steps said before any is taken,
a typed answer other than yes changes nothing, --dry-run changes nothing, the names are
checked, the marker's names are not overridden, and a primary group is not taken away."""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from leases.app import lab as labapp
from leases.lab import perms
from leases.lab.layout import LabError
from tests.support.unixusers import LabUsers, lab_users, shared_tmp  # noqa: F401
from tui.cli.main import main


@pytest.fixture
def top() -> Iterator[Path]:
    folder = shared_tmp()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _names(u: LabUsers) -> list[str]:
    return ["--viewers", u.viewers, "--editors", u.editors, "--offboard", u.offboard,
            "--service-user", u.service]  # fmt: skip


def _init(folder: Path, u: LabUsers, *more: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["lab", "init", "--folder", str(folder), *_names(u), *more], out)
    return code, out.getvalue()


def test_a_typed_no_and_a_dry_run_change_nothing(
    top: Path,
    lab_users: LabUsers,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = top / "lab"
    code, said = _init(folder, lab_users, "--dry-run")
    assert code == 0 and "(--dry-run: nothing changed)" in said
    assert "create the ledger" in said and "collector's SSH key" in said
    assert not folder.exists()
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "y")
    code, said = _init(folder, lab_users)
    assert code == 1 and "nothing changed" in said
    assert not folder.exists()
    monkeypatch.setattr("builtins.input", lambda prompt: "yes")
    code, said = _init(folder, lab_users)
    assert code == 0, said
    assert perms.check(lab_users.lab(folder)) == []


def test_names_are_checked_and_the_markers_names_stand(
    top: Path,
    lab_users: LabUsers,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = top / "lab"
    code = main(["lab", "init", "--folder", str(folder), "--viewers", "x;rm -rf /", "--yes"])
    assert code == 1
    assert "is not a usable Unix name" in capsys.readouterr().err
    assert not folder.exists()
    assert _init(folder, lab_users, "--yes")[0] == 0
    other = main(["lab", "init", "--folder", str(folder), "--editors", "somebody-else", "--yes"])
    assert other == 1
    err = capsys.readouterr().err
    assert f"names editors '{lab_users.editors}', not 'somebody-else'" in err


def test_a_users_primary_group_is_not_taken_away(
    top: Path,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    folder = top / "lab"
    assert _init(folder, lab_users, "--yes")[0] == 0
    lab = lab_users.lab(folder)
    # The test's viewer has the viewers group as its primary group: gpasswd cannot take it.
    with pytest.raises(LabError, match="primary group"):
        labapp.plan_remove_user(lab, lab_users.viewer)
    # Taking the edit role takes offboarding too (it implies editing), never viewing.
    ran: list[list[str]] = []
    plan = labapp.plan_remove_user(lab, lab_users.offboarder, "edit", run=ran.append)
    labapp.carry_out(plan)
    assert sorted(ran) == sorted(
        [
            ["gpasswd", "-d", lab_users.offboarder, lab_users.editors],
            ["gpasswd", "-d", lab_users.offboarder, lab_users.offboard],
        ]
    )
    added: list[list[str]] = []
    plan = labapp.plan_add_user(lab, lab_users.viewer, "offboard", run=added.append)
    assert [s.words for s in plan.steps] == [
        f"gpasswd -a {lab_users.viewer} {lab_users.editors}",
        f"gpasswd -a {lab_users.viewer} {lab_users.offboard}",
    ]


def test_only_root_may_change_a_lab(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(LabError, match=r"run it as root \(sudo zuka lab repair\)"):
        labapp.refuse_unless_root("zuka lab repair")


def test_init_names_the_lab_ledger_in_the_system_config_it_may_write(
    top: Path,
    lab_users: LabUsers,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Members' zuka opens the lab's ledger by default: init writes the system config when
    there is none, and only says what an admin's own file lacks."""
    from leases.lab import sysconfig

    folder = top / "lab"
    system = top / "etc" / "config.toml"
    monkeypatch.setenv("ZUKA_SYSTEM_CONFIG", str(system))
    code, said = _init(folder, lab_users, "--yes")
    assert code == 0, said
    assert f"write {system} (root:root 0644)" in said
    assert sysconfig.lab_ledger() == (folder / "ledger.db", system)
    assert oct(system.stat().st_mode & 0o777) == "0o644" and system.stat().st_uid == 0
    code, said = _init(folder, lab_users, "--yes")
    assert code == 0 and "nothing to change" in said
    other = top / "lab2"
    capsys.readouterr()
    code, said = _init(other, lab_users, "--yes")
    assert code == 0, said
    assert f"write {system}" not in said
    note = capsys.readouterr().err
    assert "does not name this lab's ledger" in note and str(other / "ledger.db") in note
    assert sysconfig.lab_ledger() == (folder / "ledger.db", system)  # the admin's file stands


def test_a_folder_a_member_owns_or_may_write_is_never_made_a_lab(
    top: Path,
    lab_users: LabUsers,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A member's folder (or one below a folder others may write) could be renamed away, or
    hold a ledger and audit entries the member made: init refuses it and changes nothing."""
    import os
    import pwd

    theirs = top / "theirs"
    theirs.mkdir()
    viewer = pwd.getpwnam(lab_users.viewer)
    os.chown(theirs, viewer.pw_uid, viewer.pw_gid)
    for folder in (theirs, theirs / "lab"):
        code, _ = _init(folder, lab_users, "--yes")
        assert code != 0
        assert f"belongs to {lab_users.viewer}, not root" in capsys.readouterr().err
    assert list(theirs.iterdir()) == []
    loose = top / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    code, _ = _init(loose / "lab", lab_users, "--yes")
    assert code != 0 and "may be written by others" in capsys.readouterr().err
    assert list(loose.iterdir()) == []


def test_the_suite_never_writes_the_hosts_system_config() -> None:
    """The lab tests run `zuka lab init` as root, which writes /etc/zuka/config.toml where
    there is none: tests/conftest.py turns the system config off for the whole session."""
    import os

    assert os.environ.get("ZUKA_SYSTEM_CONFIG") == ""
