"""What the command line says, tried as a new user would (issue 22): every config problem
in one run, plan figures a reader can act on."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import Cli


def test_config_check_names_the_keys_errors_with_the_others_in_one_run(
    tmp_path: Path, cli: Cli
) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[alerts]\nidle_minutez = 3\n[keys]\nalerts-bak = "b"\n', encoding="utf-8")
    r = cli("config", "check", "--config", str(path))
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 2, r.err
    assert "alerts.idle_minutez: unknown key" in lines[0]
    assert "keys.alerts-bak: no binding has this id (did you mean alerts-back?)" in lines[1]
