"""The config in layers: the system config, its secrets file, the user's own file, the
environment, later winning key by key; tokens kept out of the system config; the system
config's and the secrets file's owners and modes; [lab] checked."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from leases.config.load import load_config, load_user_config
from leases.core.errors import ConfigError
from leases.lab.sysconfig import lab_ledger, system_config_path
from tui.cli.main import main

DING = "https://oapi.dingtalk.com/robot/send?access_token=abcdef0123456789secret"
NOBODY = 65534


def put(path: Path, text: str, mode: int = 0o644) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def problems_of(user: Path | None, system: Path | None, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(user, env=env or {}, system=system)
    return "\n".join(caught.value.problems)


@pytest.fixture
def etc(tmp_path: Path) -> Path:
    folder = tmp_path / "etc-zuka"
    folder.mkdir()
    return folder


def test_later_layers_win_key_by_key_and_each_value_says_where_it_came_from(
    etc: Path, tmp_path: Path
) -> None:
    system = put(
        etc / "config.toml",
        '[billing]\ntz = "UTC"\ncurrency = "USD"\n'
        "[alerts]\nstarved_minutes = 10\ntemperature_c = 80\nunreachable_minutes = 9\n"
        '[users]\nalice = "Alice"\nbob = "Bob"\n'
        '[money.rates."2026-11"]\nCNY = 0.14\n'
        '[bills]\ntolerance = "2%"\n',
    )
    secrets = put(
        etc / "secrets.toml", f'[notify]\nurls = ["{DING}"]\n[alerts]\ntemperature_c = 81\n', 0o600
    )
    user = put(
        tmp_path / "mine.toml",
        '[alerts]\nstarved_minutes = 20\n[users]\nbob = "Robert"\n'
        '[money.rates."2026-12"]\nCNY = 0.15\n'
        '[bills.mine]\nresource_id = "Id"\nperiod = "Month"\namount = "Sum"\n',
        0o600,
    )
    env = {"ZUKA_ALERTS_UNREACHABLE_MINUTES": "30"}
    config = load_config(user, env=env, system=system)
    assert config.billing.tz == "UTC" and config.billing.currency == "USD"  # system only
    assert config.alerts.temperature_c == 81  # secrets over system
    assert config.alerts.starved_minutes == 20  # user over system
    assert config.alerts.unreachable_minutes == 30  # env over all
    assert config.notify.urls == (DING,)
    assert dict(config.users) == {"alice": "Alice", "bob": "Robert"}  # merged, not replaced
    assert set(config.money.rates) == {"2026-11", "2026-12"}
    assert config.bills.tolerance == "2%" and "mine" in config.bills.formats
    src = config.sources
    assert src["billing.tz"] == str(system)
    assert src["alerts.temperature_c"] == str(secrets)
    assert src["notify.urls"] == str(secrets)
    assert src["alerts.starved_minutes"] == str(user)
    assert src["alerts.unreachable_minutes"] == "env ZUKA_ALERTS_UNREACHABLE_MINUTES"
    assert src["users.alice"] == str(system) and src["users.bob"] == str(user)
    assert [(layer.kind, layer.state) for layer in config.layers] == [
        ("system config", "read"),
        ("secrets file", "read"),
        ("config file", "read"),
    ]


def test_a_token_in_the_system_config_is_refused_naming_the_key_and_the_secrets_file(
    etc: Path,
) -> None:
    system = put(etc / "config.toml", f'[notify]\nurls = ["{DING}"]\nmin_severity = "info"\n')
    said = problems_of(None, system)
    assert f"{system}: notify.urls: may hold tokens" in said
    assert str(etc / "secrets.toml") in said  # where to move it
    assert "abcdef0123456789secret" not in said  # the token itself never shown
    assert "min_severity" not in said  # the other keys are fine
    # The same URL in the user's own file, or in the environment, is fine.
    user = put(etc / "mine.toml", f'[notify]\nurls = ["{DING}"]\n', 0o600)
    assert load_config(user, env={}, system=None).notify.urls == (DING,)
    assert load_config(None, env={"ZUKA_NOTIFY_URLS": DING}).notify.urls == (DING,)


@pytest.mark.parametrize("mode", [0o664, 0o646, 0o666])
def test_a_system_config_others_may_write_is_refused(etc: Path, mode: int) -> None:
    system = put(etc / "config.toml", '[billing]\ntz = "UTC"\n', mode)
    said = problems_of(None, system)
    assert str(system) in said and f"mode {mode:04o}" in said and "chmod 644" in said


def test_a_world_readable_system_config_is_normal_and_not_warned_about(etc: Path) -> None:
    system = put(etc / "config.toml", '[billing]\ntz = "UTC"\n', 0o644)
    config = load_config(None, env={}, system=system)
    assert config.billing.tz == "UTC" and config.warnings == ()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_system_config_of_another_users_is_refused(etc: Path) -> None:
    system = put(etc / "config.toml", '[lab]\nledger = "/srv/theirs.db"\n')
    os.chown(system, NOBODY, NOBODY)
    said = problems_of(None, system)
    assert f"owned by uid {NOBODY}, not root" in said
    with pytest.raises(ConfigError):  # nor does it choose anyone's ledger
        lab_ledger({"ZUKA_SYSTEM_CONFIG": str(system)})


def test_the_system_layer_is_turned_off_by_an_empty_value_or_dev_null(etc: Path) -> None:
    put(etc / "config.toml", '[billing]\ntz = "UTC"\n')
    assert system_config_path({"ZUKA_SYSTEM_CONFIG": ""}) is None
    assert system_config_path({"ZUKA_SYSTEM_CONFIG": "  "}) is None
    assert system_config_path({"ZUKA_SYSTEM_CONFIG": os.devnull}) is None
    assert str(system_config_path({})) == "/etc/zuka/config.toml"
    named = {"ZUKA_SYSTEM_CONFIG": str(etc / "config.toml")}
    assert load_user_config("/dev/null", env=named).billing.tz == "UTC"
    # An explicit --config still lays over the system config; the argument turns it off.
    assert load_user_config("/dev/null", env=named, system=Path(os.devnull)).billing.tz != "UTC"
    kinds = [
        layer.kind for layer in load_user_config("/dev/null", env={"ZUKA_SYSTEM_CONFIG": ""}).layers
    ]
    assert kinds == ["config file"]


def test_a_missing_system_config_and_secrets_file_are_no_layers(etc: Path) -> None:
    config = load_config(None, env={}, system=etc / "config.toml")
    assert [(layer.kind, layer.state) for layer in config.layers] == [
        ("system config", "absent"),
        ("secrets file", "absent"),
    ]
    # The secrets file beside a missing system config is still read (the default place).
    put(etc / "secrets.toml", f'[notify]\nurls = ["{DING}"]\n', 0o600)
    assert load_config(None, env={}, system=etc / "config.toml").notify.urls == (DING,)


def test_a_secrets_file_named_in_lab_secrets_must_exist(etc: Path) -> None:
    gone = etc / "elsewhere.toml"
    system = put(etc / "config.toml", f'[lab]\nsecrets = "{gone}"\n')
    said = problems_of(None, system)
    assert f"{system}: lab.secrets: no such file {gone}" in said
    put(gone, '[notify]\nmin_severity = "info"\n', 0o600)
    config = load_config(None, env={}, system=system)
    assert config.notify.min_severity.value == "info"
    assert config.sources["notify.min_severity"] == str(gone)
    assert config.sources["lab.secrets"] == str(system)


@pytest.mark.parametrize(
    ("mode", "words"),
    [(0o644, "open to every user (mode 0644)"), (0o604, "open to every user"),
     (0o660, "may be written by its group (mode 0660)")],
)  # fmt: skip
def test_a_secrets_file_others_may_read_or_its_group_write_is_refused(
    etc: Path, mode: int, words: str
) -> None:
    system = put(etc / "config.toml", "")
    secrets = put(etc / "secrets.toml", f'[notify]\nurls = ["{DING}"]\n', mode)
    said = problems_of(None, system)
    assert f"{secrets}: is {words}" in said or f"{secrets}: {words}" in said
    assert "abcdef0123456789secret" not in said


@pytest.mark.skipif(os.geteuid() != 0, reason="a secrets file of another user's needs root")
def test_a_secrets_file_not_roots_is_refused(etc: Path) -> None:
    system = put(etc / "config.toml", "")
    secrets = put(etc / "secrets.toml", "", 0o600)
    os.chown(secrets, NOBODY, 0)
    assert f"{secrets}: is owned by uid {NOBODY}, not root" in problems_of(None, system)


def test_lab_is_read_from_the_system_config_only(etc: Path) -> None:
    user = put(etc / "mine.toml", '[lab]\nledger = "/srv/lab.db"\n', 0o600)
    said = problems_of(user, None)
    assert f"{user}: lab: is read from the system config only" in said and "--ledger" in said
    system = put(etc / "config.toml", "")
    secrets = put(etc / "secrets.toml", '[lab]\nledger = "/srv/lab.db"\n', 0o600)
    assert f"{secrets}: lab: is read from the system config only" in problems_of(None, system)
    said = problems_of(None, None, {"ZUKA_LAB_LEDGER": "/srv/lab.db"})
    assert "env ZUKA_LAB_LEDGER: [lab] is set in the system config only" in said


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ('ledger = "lab.db"', "must be an absolute path"),
        ('ledger = "~/lab.db"', "must be an absolute path"),
        ('ledger = "/var/lib/zuka/"', "must name a file"),
        ('ledger = "/var/lib/../zuka/ledger.db"', "must name a file"),
        ('ledger = "/proc/self/cwd/ledger.db"', "must not be under /proc"),
        ('ledger = "/dev/shm/ledger.db"', "must not be under /proc, /sys, /dev"),
        ('ledger = "/tmp"', "is a folder, not a file"),
        ('ledger = ""', "must be the absolute path of a file"),
        ("ledger = 7", "must be the absolute path of a file"),
        ('ledger = "/srv/a\\u001b[31mb.db"', "one line"),
        ('secrets = "secrets.toml"', "lab.secrets: must be an absolute path"),
        ('ledgr = "/srv/lab.db"', "lab.ledgr: unknown key (known: ledger, secrets)"),
    ],
)
def test_bad_lab_values_are_config_errors_naming_the_file(etc: Path, line: str, words: str) -> None:
    system = put(etc / "config.toml", f"[lab]\n{line}\n")
    said = problems_of(None, system)
    assert said.startswith(f"{system}: lab.") and words in said
    assert "\x1b" not in said
    with pytest.raises(ConfigError):  # the ledger's path refuses it too
        lab_ledger({"ZUKA_SYSTEM_CONFIG": str(system)})


def test_lab_as_a_value_not_a_table_is_refused(etc: Path) -> None:
    system = put(etc / "config.toml", 'lab = "/srv/lab.db"\n')
    assert f"{system}: lab: must be a table ([lab])" in problems_of(None, system)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(argv, out=out)
    return code, out.getvalue(), capsys.readouterr().err


def test_config_show_names_every_layer_and_where_each_value_came_from(
    etc: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    system = put(
        etc / "config.toml", '[lab]\nledger = "/srv/lab/ledger.db"\n[billing]\ntz = "UTC"\n'
    )
    secrets = put(etc / "secrets.toml", f'[notify]\nurls = ["{DING}"]\n', 0o600)
    monkeypatch.setenv("ZUKA_SYSTEM_CONFIG", str(system))
    code, out, err = _run(["config", "show", "--config", "/dev/null"], capsys)
    assert code == 0, err
    assert f"# system config: {system}\n" in out and f"# secrets file: {secrets}\n" in out
    assert f'billing.tz = "UTC"  ({system})' in out
    assert f'lab.ledger = "/srv/lab/ledger.db"  ({system})' in out
    assert f"({secrets})" in out and "abcdef0123456789secret" not in out
    code, out, _ = _run(["config", "show", "--json", "--config", "/dev/null"], capsys)
    data = json.loads(out)
    assert [layer["kind"] for layer in data["layers"]] == [
        "system config",
        "secrets file",
        "config file",
    ]
    assert data["settings"]["notify.urls"]["source"] == str(secrets)
    code, out, _ = _run(["config", "check", "--config", "/dev/null"], capsys)
    assert code == 0 and f"system config {system}: ok" in out
    monkeypatch.setenv("ZUKA_SYSTEM_CONFIG", "")
    code, out, _ = _run(["config", "show", "--config", "/dev/null"], capsys)
    assert "# system config: off" in out


def test_a_bad_system_config_stops_every_command_naming_it(
    etc: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    system = put(etc / "config.toml", "[billing\n")
    monkeypatch.setenv("ZUKA_SYSTEM_CONFIG", str(system))
    monkeypatch.delenv("ZUKA_LEDGER", raising=False)
    for argv in (["config", "check"], ["node", "list"]):
        code, _, err = _run(argv, capsys)
        assert code == 2 and f"zuka: config: {system}: not valid TOML" in err, argv


def test_a_system_config_or_secrets_file_in_a_folder_others_may_write_is_refused(
    etc: Path,
) -> None:
    system = put(etc / "config.toml", '[billing]\ntz = "UTC"\n')
    etc.chmod(0o777)  # anyone could put another config.toml in its place
    said = problems_of(None, system)
    assert f"{system}: its folder {etc} may be written by its group or others (mode 0777)" in said
    etc.chmod(0o1777)  # sticky, as /tmp: nobody removes root's file
    assert load_config(None, env={}, system=system).billing.tz == "UTC"
    etc.chmod(0o755)
    elsewhere = etc / "private"
    elsewhere.mkdir(mode=0o770)
    elsewhere.chmod(0o770)
    secrets = put(elsewhere / "secrets.toml", "[alerts]\ntemperature_c = 70\n", 0o600)
    system = put(etc / "config.toml", f'[lab]\nsecrets = "{secrets}"\n')
    said = problems_of(None, system)
    assert f"{secrets}: its folder {elsewhere} may be written by its group" in said
    elsewhere.chmod(0o750)
    assert load_config(None, env={}, system=system).alerts.temperature_c == 70


def test_a_system_config_that_is_a_fifo_or_a_folder_is_refused_without_waiting(
    etc: Path,
) -> None:
    fifo = etc / "config.toml"
    os.mkfifo(fifo)  # nobody writes it: a blocking open would hang here
    assert f"{fifo}: not a regular file" in problems_of(None, fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        lab_ledger({"ZUKA_SYSTEM_CONFIG": str(fifo)})
    assert f"{etc}: not a regular file" in problems_of(None, etc)
