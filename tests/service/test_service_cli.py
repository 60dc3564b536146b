"""`zuka service install | status | uninstall` from the command line: nothing written
without a yes, --dry-run writes nothing, install and uninstall into a temporary root, a
unit zuka did not write kept, --system refused without root or a lab."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from leases.ledger.store import Ledger
from leases.service.units import MARKER, parse_words, settings
from tests.service.support import ServiceFolder, make_service_folder
from tests.support.cli import Cli
from tests.support.unixusers import LabUsers, lab_users  # noqa: F401


@pytest.fixture
def lab(lab_users: LabUsers) -> Iterator[ServiceFolder]:  # noqa: F811
    yield from make_service_folder(lab_users, node=False)


def system_dir(root: Path) -> Path:
    return root / "etc/systemd/system"


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_dry_run_shows_the_units_and_writes_nothing(
    cli: Cli, lab: ServiceFolder, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    r = cli("service", "install", "--system", "--web", "--dry-run", "--root", str(root),
            ledger=lab.lab.ledger)  # fmt: skip
    assert r.code == 0, r.err
    assert files_under(root) == []
    assert "ExecStart=" in r.out and "zuka-web.service" in r.out
    assert "systemctl enable --now zuka-collect.service zuka-web.service" in r.out
    assert "dry run: nothing written" in r.out


def test_without_a_terminal_and_without_yes_nothing_is_written(
    cli: Cli, lab: ServiceFolder, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    r = cli("service", "install", "--system", "--root", str(root), ledger=lab.lab.ledger)
    assert r.code == 2 and "--yes" in r.err and "nothing written" in r.err, r.err
    assert files_under(root) == []


def test_an_answer_other_than_yes_writes_nothing(
    cli: Cli, lab: ServiceFolder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    for answer, code in (("y", 1), ("YES please", 1), ("yes", 0)):
        monkeypatch.setattr("builtins.input", lambda prompt, a=answer: a)
        r = cli("service", "install", "--system", "--root", str(root), ledger=lab.lab.ledger)
        assert r.code == code, (answer, r.err)
        written = files_under(root)
        assert written == ([] if code else [system_dir(root) / "zuka-collect.service"])


def test_install_then_uninstall_in_a_temporary_root(
    cli: Cli,
    lab: ServiceFolder,
    lab_users: LabUsers,  # noqa: F811
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    r = cli("service", "install", "--system", "--web", "--yes", "--root", str(root),
            ledger=lab.lab.ledger)  # fmt: skip
    assert r.code == 0, r.err
    collect = system_dir(root) / "zuka-collect.service"
    web = system_dir(root) / "zuka-web.service"
    assert files_under(root) == [collect, web]
    assert collect.stat().st_mode & 0o777 == 0o644
    conf = settings(collect.read_text())
    assert conf["User"] == [lab_users.service] and conf["Group"] == [lab_users.viewers]
    assert parse_words(conf["ExecStart"][0])[-4:] == [
        "--ledger", str(lab.lab.ledger), "--identity", str(lab.lab.collector_key),
    ]  # fmt: skip
    # systemctl is not run into another root: said instead, with what to run.
    assert "systemctl was not run" in r.out
    assert "systemctl daemon-reload" in r.out
    st = cli("service", "status", "--system", "--root", str(root), ledger=lab.lab.ledger)
    assert st.code == 0, st.err
    assert "zuka-collect.service: installed" in st.out
    assert "poller: nobody polls this ledger" in st.out and "last reading: none yet" in st.out
    # Again: zuka's own units are replaced without --force.
    again = cli("service", "install", "--system", "--yes", "--root", str(root),
                ledger=lab.lab.ledger)  # fmt: skip
    assert again.code == 0, again.err
    gone = cli("service", "uninstall", "--system", "--yes", "--root", str(root),
               ledger=lab.lab.ledger)  # fmt: skip
    assert gone.code == 0, gone.err
    assert files_under(root) == []
    assert "systemctl disable --now zuka-collect.service zuka-web.service" in gone.out
    st = cli("service", "status", "--system", "--root", str(root), ledger=lab.lab.ledger)
    assert "zuka-collect.service: not installed" in st.out


def test_a_unit_zuka_did_not_write_is_kept_without_force(
    cli: Cli, lab: ServiceFolder, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    theirs = system_dir(root) / "zuka-collect.service"
    theirs.parent.mkdir(parents=True)
    theirs.write_text("[Service]\nExecStart=/usr/local/bin/their-own-collector\n")
    r = cli("service", "install", "--system", "--web", "--yes", "--root", str(root),
            ledger=lab.lab.ledger)  # fmt: skip
    assert r.code == 2 and "not written by zuka" in r.err and "--force" in r.err, r.err
    assert "their-own-collector" in theirs.read_text()
    assert not (system_dir(root) / "zuka-web.service").exists()  # nothing half-written
    r = cli("service", "uninstall", "--system", "--yes", "--root", str(root),
            ledger=lab.lab.ledger)  # fmt: skip
    assert r.code == 2 and theirs.exists()
    r = cli("service", "install", "--system", "--yes", "--force", "--root", str(root),
            ledger=lab.lab.ledger)  # fmt: skip
    assert r.code == 0, r.err
    assert theirs.read_text().startswith(MARKER)


def test_system_without_a_lab_says_to_make_one(cli: Cli, ledger_path: Path, tmp_path: Path) -> None:
    Ledger.open(ledger_path).close()
    root = tmp_path / "root"
    r = cli("service", "install", "--system", "--yes", "--root", str(root))
    assert r.code == 2 and "sudo zuka lab init" in r.err, r.err
    assert files_under(root) == []


def test_a_mode_must_be_said(cli: Cli, tmp_path: Path) -> None:
    r = cli("service", "install", "--yes", "--root", str(tmp_path))
    assert r.code == 2 and "--system" in r.err and "--user" in r.err
    assert cli("service", "install", "--user", "--system").code == 2


def test_system_is_refused_to_a_member_who_is_not_root(
    lab: ServiceFolder,
    lab_users: LabUsers,  # noqa: F811
) -> None:
    r = lab_users.zuka(lab_users.editor, "service", "install", "--system", "--yes",
                       "--ledger", str(lab.lab.ledger))  # fmt: skip
    assert r.returncode == 2 and "as root" in r.stderr, r.stderr


def test_a_user_install_into_a_temporary_root(cli: Cli, ledger_path: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    missing = cli("service", "install", "--user", "--yes", "--root", str(root))
    assert missing.code == 2 and "no ledger there yet" in missing.err
    Ledger.open(ledger_path).close()
    r = cli("service", "install", "--user", "--yes", "--root", str(root))
    assert r.code == 0, r.err
    (unit,) = files_under(root)
    assert unit.name == "zuka-collect.service" and "systemd/user" in str(unit)
    conf = settings(unit.read_text())
    assert "User" not in conf
    assert parse_words(conf["ExecStart"][0])[-2:] == ["--ledger", str(ledger_path)]
    assert "loginctl enable-linger" in r.out
    assert "systemctl --user daemon-reload" in r.out


def test_a_user_install_refuses_a_key_others_may_read(
    cli: Cli, ledger_path: Path, tmp_path: Path
) -> None:
    Ledger.open(ledger_path).close()
    key = tmp_path / "id_ed25519"
    key.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_private_key())
    key.chmod(0o644)
    root = tmp_path / "root"
    r = cli("service", "install", "--user", "--yes", "--identity", str(key), "--root", str(root))
    assert r.code == 2 and f"chmod 600 {key}" in r.err, r.err
    assert files_under(root) == []
    key.chmod(0o600)
    r = cli("service", "install", "--user", "--yes", "--identity", str(key), "--root", str(root))
    assert r.code == 0, r.err
    (unit,) = files_under(root)
    assert parse_words(settings(unit.read_text())["ExecStart"][0])[-2:] == ["--identity", str(key)]


def test_a_system_install_says_what_is_wrong_with_the_collectors_key(
    cli: Cli, lab: ServiceFolder, tmp_path: Path
) -> None:
    key = lab.lab.collector_key
    os.chown(key, 0, 0)
    key.chmod(0o644)
    r = cli("service", "install", "--system", "--dry-run", "--root", str(tmp_path / "r"),
            ledger=lab.lab.ledger)  # fmt: skip
    assert r.code == 0, r.err
    assert f"chown {lab.lab.service_user} {key}" in r.out and f"chmod 600 {key}" in r.out
    key.unlink()
    r = cli("service", "install", "--system", "--dry-run", "--root", str(tmp_path / "r"),
            ledger=lab.lab.ledger)  # fmt: skip
    assert "does not exist yet" in r.out and "zuka lab init" in r.out
