"""The host's lab ledger by default: the system config's [lab] ledger is the ledger of a
command given no --ledger and no $ZUKA_LEDGER, and both still win over it."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from leases.ledger.paths import default_ledger_path, ledger_choice
from tui.cli.main import main


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(list(argv), out=out)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A system config naming tmp_path/lab/ledger.db as the host's ledger (no ledger yet)."""
    folder = tmp_path / "lab"
    folder.mkdir()
    system = tmp_path / "config.toml"
    system.write_text(f'[lab]\nledger = "{folder / "ledger.db"}"\n', encoding="utf-8")
    system.chmod(0o644)
    monkeypatch.setenv("ZUKA_SYSTEM_CONFIG", str(system))
    monkeypatch.delenv("ZUKA_LEDGER", raising=False)
    return folder / "ledger.db"


def _add(name: str, *ledger: str) -> None:
    code, _, err = _run("node", "add", name, "--ssh", "root@10.0.0.9", "--gpus", "1", *ledger)
    assert code == 0, err


def _names(*ledger: str) -> list[str]:
    code, out, err = _run("node", "list", "--json", *ledger)
    assert code == 0, err
    return [row["name"] for row in json.loads(out)]


def test_node_list_reads_the_lab_ledger_when_no_ledger_is_named(
    lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _add("labnode", "--ledger", str(lab))
    _add("mine", "--ledger", str(tmp_path / "mine.db"))
    assert _names() == ["labnode"]
    # --ledger and $ZUKA_LEDGER still win, in that order.
    assert _names("--ledger", str(tmp_path / "mine.db")) == ["mine"]
    monkeypatch.setenv("ZUKA_LEDGER", str(tmp_path / "mine.db"))
    assert _names() == ["mine"]
    assert _names("--ledger", str(lab)) == ["labnode"]


def test_the_order_is_flag_environment_system_config_then_the_data_dir(
    lab: Path, tmp_path: Path
) -> None:
    system = {"ZUKA_SYSTEM_CONFIG": str(tmp_path / "config.toml")}
    assert ledger_choice("/srv/a.db", {**system, "ZUKA_LEDGER": "/srv/b.db"}) == (
        Path("/srv/a.db"),
        "--ledger",
    )
    assert ledger_choice(None, {**system, "ZUKA_LEDGER": "/srv/b.db"}) == (
        Path("/srv/b.db"),
        "$ZUKA_LEDGER",
    )
    assert ledger_choice(None, system) == (lab, f"[lab] ledger of {tmp_path / 'config.toml'}")
    assert ledger_choice(None, {"ZUKA_SYSTEM_CONFIG": ""}) == (
        default_ledger_path().resolve(),
        "",
    )


def test_a_missing_lab_ledger_is_said_with_the_file_that_names_it(
    lab: Path, tmp_path: Path
) -> None:
    code, _, err = _run("node", "list")
    assert code == 1
    assert (
        f"no ledger at {lab}, the lab's ledger ([lab] ledger of {tmp_path / 'config.toml'})" in err
    )
    assert "zuka lab init" in err
    for argv in (("dashboard",), ("poll", "--once"), ("ps",), ("ssh", "n")):
        code, _, err = _run(*argv)
        assert code == 1 and f"no ledger at {lab}, the lab's ledger" in err, (argv, err)
    assert not lab.exists()


def test_a_lab_ledger_in_a_folder_that_is_not_there_is_not_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = tmp_path / "config.toml"
    system.write_text(f'[lab]\nledger = "{tmp_path / "nolab" / "ledger.db"}"\n')
    system.chmod(0o644)
    monkeypatch.setenv("ZUKA_SYSTEM_CONFIG", str(system))
    monkeypatch.delenv("ZUKA_LEDGER", raising=False)
    code, _, err = _run("node", "add", "n", "--ssh", "root@10.0.0.9", "--gpus", "1")
    assert code == 1 and f"no folder {tmp_path / 'nolab'}" in err
    assert not (tmp_path / "nolab").exists()


def test_a_wrong_lab_ledger_is_a_config_error_for_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = tmp_path / "config.toml"
    system.write_text('[lab]\nledger = "ledger.db"\n')
    system.chmod(0o644)
    monkeypatch.setenv("ZUKA_SYSTEM_CONFIG", str(system))
    monkeypatch.delenv("ZUKA_LEDGER", raising=False)
    for argv in (("node", "list"), ("dashboard",), ("poll", "--once")):
        code, _, err = _run(*argv)
        assert code == 2, (argv, err)
        assert f"zuka: config: {system}: lab.ledger: must be an absolute path" in err, argv
    # A ledger named on the command line does not need the system config's.
    _add("n", "--ledger", str(tmp_path / "mine.db"))
