"""The unit files: rendered by pure functions, every value quoted as systemd reads it back,
hostile paths refused, the hardening a mode allows, and `systemd-analyze verify` (Debian's
systemd) content with them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from leases.app import service as svc
from leases.core.errors import InputError
from leases.service.units import (
    COLLECT,
    MARKER,
    Mode,
    Runtime,
    UnitSpec,
    collect_args,
    parse_words,
    quote_word,
    render,
    settings,
    web_args,
)
from tests.service.support import ServiceFolder, make_service_folder
from tests.support.unixusers import LabUsers, lab_users  # noqa: F401

PY = Runtime(Path("/opt/zuka/venv/bin/python"))


def spec(**changes: object) -> UnitSpec:
    base: dict[str, object] = {
        "mode": Mode.SYSTEM,
        "name": COLLECT,
        "description": "zuka collector",
        "args": collect_args(Path("/var/lib/zuka/ledger.db"), Path("/var/lib/zuka/collector/k")),
        "runtime": PY,
        "home": Path("/var/lib/zuka/collector"),
        "writable": (Path("/var/lib/zuka"),),
        "user": "zuka",
        "group": "zuka",
    }
    base.update(changes)
    return UnitSpec(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "word",
    ["plain", "with space", 'a"quote', "back\\slash", "100%", "$HOME", "${X}", 'a b\\"c%d$e', "é"],
)
def test_a_word_reads_back_unchanged(word: str) -> None:
    assert parse_words(quote_word(word)) == [word]


def test_percent_and_dollar_never_reach_systemd_bare() -> None:
    assert quote_word("50%").strip('"') == "50%%"
    assert quote_word("$PATH").strip('"') == "$$PATH"
    assert quote_word("a b") == '"a b"'


@pytest.mark.parametrize(
    "bad", ["line\nExecStartPre=/bin/rm -rf /", "tab\there", "nul\x00", "\x7f"]
)
def test_a_control_character_is_refused(bad: str) -> None:
    with pytest.raises(InputError, match="control character"):
        quote_word(bad)
    with pytest.raises(InputError):
        render(spec(args=collect_args(Path("/srv/" + bad), None)))


def test_a_relative_path_is_refused() -> None:
    with pytest.raises(InputError, match="absolute"):
        collect_args(Path("ledger.db"), None)
    with pytest.raises(InputError, match="absolute"):
        render(spec(home=Path("home")))


def test_a_path_with_spaces_is_one_word_of_execstart() -> None:
    unit = render(spec(args=collect_args(Path("/srv/my lab/ledger.db"), None)))
    (line,) = settings(unit)["ExecStart"]
    assert parse_words(line)[-2:] == ["--ledger", "/srv/my lab/ledger.db"]


def test_a_system_unit_runs_as_the_service_user_hardened() -> None:
    unit = render(spec())
    conf = settings(unit)
    assert unit.startswith(MARKER + "\n")
    assert conf["User"] == ["zuka"] and conf["Group"] == ["zuka"]
    assert parse_words(conf["ExecStart"][0]) == [
        "/opt/zuka/venv/bin/python", "-m", "tui.cli.main", "collect",
        "--ledger", "/var/lib/zuka/ledger.db", "--identity", "/var/lib/zuka/collector/k",
    ]  # fmt: skip
    for key, value in {
        "Restart": "on-failure",
        "StandardOutput": "journal",
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ReadWritePaths": "/var/lib/zuka",
        "PrivateTmp": "yes",
        "ProtectHome": "yes",
        "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
        "UnsetEnvironment": "SSH_AUTH_SOCK SSH_AGENT_PID",
        "WantedBy": "multi-user.target",
    }.items():
        assert conf[key] == [value], key
    assert "ZUKA_SERVICE=zuka-collect" in conf["Environment"]
    assert "HOME=/var/lib/zuka/collector" in conf["Environment"]
    assert not any(e.startswith("PYTHONPATH=") for e in conf["Environment"])


def test_protect_home_is_read_only_where_a_path_lies_under_home_and_says_why() -> None:
    unit = render(spec(runtime=Runtime(Path("/home/ana/venv/bin/python"), Path("/home/ana/zuka"))))
    conf = settings(unit)
    assert conf["ProtectHome"] == ["read-only"]
    assert "/home/ana/venv/bin/python" in unit.split("ProtectHome=read-only")[0]
    assert "PYTHONPATH=/home/ana/zuka" in conf["Environment"]
    ledger_under_root = render(spec(writable=(Path("/root/zuka"),)))
    assert settings(ledger_under_root)["ProtectHome"] == ["read-only"]


def test_a_venv_whose_interpreter_lives_under_root_keeps_home_readable() -> None:
    """A venv in /opt whose python links to a pyenv build in /root (as on this machine):
    ProtectHome=yes would hide the interpreter and the unit would never start."""
    runtime = Runtime(
        Path("/opt/zuka/venv/bin/python"),
        None,
        (Path("/root/.pyenv/versions/3.11.7/bin/python3.11"), Path("/root/.pyenv/versions/3.11.7")),
    )
    unit = render(spec(runtime=runtime))
    assert settings(unit)["ProtectHome"] == ["read-only"]
    (why,) = [line for line in unit.splitlines() if line.startswith("# ProtectHome=")]
    assert "/root/.pyenv/versions/3.11.7/bin/python3.11" in why


def test_this_runtime_names_what_the_interpreter_reads() -> None:
    import sys

    from leases.app.service import this_runtime

    runtime = this_runtime()
    assert Path(sys.executable).resolve() in runtime.needs
    assert Path(sys.base_prefix).resolve() in runtime.needs


def test_a_user_unit_has_no_user_and_says_what_keeps_it_after_logout() -> None:
    unit = render(spec(mode=Mode.USER, user=None, group=None, home=Path("/home/ana")))
    conf = settings(unit)
    assert "User" not in conf and "Group" not in conf
    assert conf["WantedBy"] == ["default.target"]
    assert "ProtectSystem" not in conf  # a user manager applies it only with user namespaces
    assert conf["NoNewPrivileges"] == ["yes"]
    assert conf["UnsetEnvironment"] == ["SSH_AUTH_SOCK SSH_AGENT_PID"]
    assert "loginctl enable-linger" in unit


def test_web_words_are_checked() -> None:
    assert web_args(Path("/l/ledger.db"), "127.0.0.1", 8000)[-4:] == (
        "--host", "127.0.0.1", "--port", "8000",
    )  # fmt: skip
    with pytest.raises(InputError, match="port"):
        web_args(Path("/l/ledger.db"), "127.0.0.1", 70000)
    with pytest.raises(InputError, match="host"):
        web_args(Path("/l/ledger.db"), "0.0.0.0 --demo", 8000)


# -- systemd-analyze verify --------------------------------------------------------------


@pytest.fixture
def lab(lab_users: LabUsers) -> Iterator[ServiceFolder]:  # noqa: F811
    yield from make_service_folder(lab_users, node=False)


def verify(paths: list[Path], *extra: str) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        why = "systemd-analyze is not installed (Debian's systemd package)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}: CI installs it (.ci/run)")
        pytest.skip(why)
    return subprocess.run(
        [tool, "verify", "--man=no", *extra, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_system_units_pass_systemd_analyze_verify(
    lab: ServiceFolder,
    lab_users: LabUsers,  # noqa: F811
    tmp_path: Path,
) -> None:
    plan = svc.plan_install(
        svc.Request(Mode.SYSTEM, lab.lab.ledger, web=True, root=tmp_path / "root"), euid=0
    )
    paths = [u.path for u in plan.units]
    svc.install(plan)
    assert [p.name for p in paths] == ["zuka-collect.service", "zuka-web.service"]
    assert settings(paths[0].read_text())["User"] == [lab_users.service]
    assert parse_words(settings(paths[0].read_text())["ExecStart"][0])[0] == sys.executable
    r = verify(paths)
    assert r.returncode == 0, r.stderr
    assert "zuka-" not in r.stderr, r.stderr  # no warning about our units at all


def test_verify_can_fail_a_unit_ours_would_never_be(tmp_path: Path) -> None:
    """The check above can fail: a unit whose ExecStart is missing is refused."""
    bad = tmp_path / "zuka-broken.service"
    bad.write_text("[Service]\nExecStart=/nonexistent/python -m x\n")
    r = verify([bad])
    assert r.returncode != 0 and "nonexistent" in r.stderr


def test_the_user_unit_passes_systemd_analyze_verify(ledger_path: Path, tmp_path: Path) -> None:
    from leases.ledger.store import Ledger

    Ledger.open(ledger_path).close()
    plan = svc.plan_install(
        svc.Request(Mode.USER, ledger_path, root=tmp_path / "root", home=tmp_path, env={}), euid=0
    )
    svc.install(plan)
    (unit,) = plan.units
    assert unit.path == tmp_path / "root" / tmp_path.relative_to("/") / ".config/systemd/user" / (
        "zuka-collect.service"
    )
    r = verify([unit.path])
    assert r.returncode == 0, r.stderr
    assert "zuka-" not in r.stderr, r.stderr


def test_a_folder_with_a_space_and_a_percent_still_verifies(tmp_path: Path) -> None:
    """WorkingDirectory= takes its path whole: quoted, systemd read the quotes as part of it
    ("path is not absolute") and refused the unit."""
    folder = tmp_path / "sp ace%h$x" / "lab"
    (folder / "collector").mkdir(parents=True)
    unit = tmp_path / "zuka-collect.service"
    unit.write_text(
        render(
            spec(
                args=collect_args(folder / "ledger.db", folder / "collector" / "k"),
                runtime=Runtime(Path(sys.executable)),
                home=folder / "collector",
                writable=(folder,),
                user="root",
                group="root",
            )
        )
    )
    conf = settings(unit.read_text())
    assert conf["WorkingDirectory"] == [str(folder / "collector").replace("%", "%%")]
    assert conf["PrivateTmp"] == ["no"]  # the folder is under /tmp: PrivateTmp would hide it
    r = verify([unit])
    assert r.returncode == 0, r.stderr
    assert "zuka-" not in r.stderr, r.stderr
