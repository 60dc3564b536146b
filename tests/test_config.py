"""The TOML config: defaults, every kind of bad value named, env overrides, sources, masking."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from leases.config.load import default_config_path, load_config, resolve_config_path
from leases.config.sections import Config
from leases.core.errors import ConfigError
from leases.core.severity import Severity
from tui.cli.main import main

DING = "https://oapi.dingtalk.com/robot/send?access_token=abcdef0123456789secret"


def write(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def problems(path: Path, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(path, env=env or {})
    return list(caught.value.problems)


def test_no_file_gives_the_defaults(tmp_path: Path) -> None:
    config = load_config(None, env={})
    assert isinstance(config, Config)
    assert config.billing.currency == "CNY"
    assert config.billing.tz == "Asia/Shanghai"
    assert config.alerts.lease_end_notice_days == (7, 3, 1)
    assert config.alerts.underuse_window_days == 7
    assert config.alerts.underuse_threshold == 0.5
    assert config.alerts.forgotten_idle_hours == 2
    assert config.alerts.starved_minutes == 30
    assert config.alerts.starved_util == 40
    assert config.notify.urls == ()
    assert config.notify.min_severity is Severity.WARNING
    assert config.notify.digest_at is None
    assert config.users == {} and config.projects == {}
    assert {s.source for s in config.settings()} == {"default"}


def test_a_full_file_is_read(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
[billing]
currency = "USD"
tz = "UTC"
[alerts]
lease_end_notice_days = [1, 14, 3]
underuse_threshold = 0.3
starved_util = 25
[notify]
urls = ["{DING}", "json://127.0.0.1:9/hook"]
min_severity = "info"
rate_limit_per_hour = 5
digest = "daily at 09:30"
[users]
alice = "Alice Wang"
"bob.li" = "Bob Li"
[projects]
"Alice Wang" = "llm-pretrain"
""",
    )
    config = load_config(path, env={})
    assert config.billing.currency == "USD" and config.billing.tz == "UTC"
    # Sorted so that the earliest notice comes first.
    assert config.alerts.lease_end_notice_days == (14, 3, 1)
    assert config.alerts.underuse_threshold == 0.3
    assert config.notify.urls == (DING, "json://127.0.0.1:9/hook")
    assert config.notify.min_severity is Severity.INFO
    assert config.notify.digest_at is not None and config.notify.digest_at.hour == 9
    assert config.users == {"alice": "Alice Wang", "bob.li": "Bob Li"}
    assert config.projects == {"Alice Wang": "llm-pretrain"}
    sources = {s.key: s.source for s in config.settings()}
    assert sources["billing.tz"] == str(path)
    assert sources["alerts.starved_minutes"] == "default"
    assert sources["users.alice"] == str(path)


def test_every_bad_key_and_value_is_named_at_once(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[billing]
currency = "yuan"
tz = "Mars/Olympus"
[alerts]
lease_end_notice_days = [7, -1, "3"]
underuse_window_days = 0
underuse_threshold = 1.5
forgotten_idle_hours = "two"
starved_minutes = true
starved_util = 140
unreachable_minutes = 2.5
temprature_c = 80
[notify]
urls = ["https://example.com/hook", 42]
min_severity = "loud"
rate_limit_per_hour = -3
digest = "weekly"
retry_hours = -1
[users]
"bad user!" = "X"
carol = ""
[billing_x]
a = 1
""",
    )
    found = problems(path)
    text = "\n".join(found)
    for needle in (
        "billing.currency",
        "'yuan'",
        "billing.tz",
        "Mars/Olympus",
        "alerts.lease_end_notice_days",
        "-1",
        "alerts.underuse_window_days",
        "alerts.underuse_threshold",
        "1.5",
        "alerts.forgotten_idle_hours",
        "alerts.starved_minutes",
        "alerts.starved_util",
        "alerts.unreachable_minutes",
        "alerts.temprature_c",
        "did you mean alerts.temperature_c",
        "notify.urls",
        "https://example.com/hook",
        "notify.min_severity",
        "'loud'",
        "notify.rate_limit_per_hour",
        "notify.digest",
        "'weekly'",
        "notify.retry_hours",
        "users",
        "bad user!",
        "users.carol",
        "billing_x",
        "did you mean billing",
    ):
        assert needle in text, needle
    # One problem a line, each naming the file.
    assert all(line.startswith(f"{path}: ") for line in found)
    assert len(found) == 19
    assert any(line.endswith("notify.urls[1]: must be a string (got 42)") for line in found)


def test_toml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[alerts]\nstarved_minutes = = 3\n")
    [problem] = problems(path)
    assert "line 2" in problem and str(path) in problem


def test_a_section_that_is_not_a_table(tmp_path: Path) -> None:
    path = write(tmp_path, 'alerts = 3\nnotify = "x"\n')
    text = "\n".join(problems(path))
    assert "alerts" in text and "notify" in text and "table" in text


def test_an_explicit_path_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    [problem] = problems(tmp_path / "missing.toml")
    assert "missing.toml" in problem and "no such file" in problem


def test_env_overrides_the_file_and_says_so(tmp_path: Path) -> None:
    path = write(tmp_path, "[alerts]\nstarved_minutes = 45\nstarved_util = 30\n")
    env = {
        "ZUKA_ALERTS_STARVED_MINUTES": "60",
        "ZUKA_ALERTS_LEASE_END_NOTICE_DAYS": "10,2",
        "ZUKA_BILLING_TZ": "UTC",
        "ZUKA_NOTIFY_URLS": "json://127.0.0.1:9/a json://127.0.0.1:9/b",
    }
    config = load_config(path, env=env)
    assert config.alerts.starved_minutes == 60
    assert config.alerts.starved_util == 30
    assert config.alerts.lease_end_notice_days == (10, 2)
    assert config.billing.tz == "UTC"
    assert len(config.notify.urls) == 2
    sources = {s.key: s.source for s in config.settings()}
    assert sources["alerts.starved_minutes"] == "env ZUKA_ALERTS_STARVED_MINUTES"
    assert sources["alerts.starved_util"] == str(path)


def test_bad_env_values_and_unknown_env_keys_are_named(tmp_path: Path) -> None:
    env = {"ZUKA_ALERTS_STARVED_MINUTES": "soon", "ZUKA_ALERTS_STARVD_UTIL": "3"}
    text = "\n".join(problems(None, env))  # type: ignore[arg-type]
    assert "ZUKA_ALERTS_STARVED_MINUTES" in text and "'soon'" in text
    assert "ZUKA_ALERTS_STARVD_UTIL" in text and "did you mean ZUKA_ALERTS_STARVED_UTIL" in text


def test_config_path_resolution(tmp_path: Path) -> None:
    assert resolve_config_path("/x/c.toml", {"ZUKA_CONFIG": "/y"}) == (Path("/x/c.toml"), True)
    assert resolve_config_path(None, {"ZUKA_CONFIG": "/y/c.toml"}) == (Path("/y/c.toml"), True)
    path, explicit = resolve_config_path(None, {})
    assert path == default_config_path() and not explicit
    assert path.name == "config.toml" and "zuka" in str(path)


def test_a_readable_config_file_is_warned_about(tmp_path: Path) -> None:
    path = write(tmp_path, f'[notify]\nurls = ["{DING}"]\n', mode=0o644)
    config = load_config(path, env={})
    assert any("readable" in w and "chmod 600" in w for w in config.warnings)
    path.chmod(0o600)
    assert load_config(path, env={}).warnings == ()


# -- the command line -------------------------------------------------------------------


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(argv, out=out)
    return code, out.getvalue(), capsys.readouterr().err


def test_config_check_ok_and_bad(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path, "[alerts]\nstarved_minutes = 20\n")
    code, out, err = run(["--config", str(good), "config", "check"], capsys)
    assert code == 0 and "ok" in out and err == ""
    bad = tmp_path / "bad.toml"
    bad.write_text('[alerts]\nstarved_minutes = 0\nfoo = 1\n[notify]\nmin_severity = "x"\n')
    bad.chmod(0o600)
    code, out, err = run(["config", "check", "--config", str(bad)], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 3
    assert any("alerts.starved_minutes" in x for x in lines)
    assert any("alerts.foo" in x for x in lines)
    assert any("notify.min_severity" in x for x in lines)


def test_config_check_reads_zuka_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = write(tmp_path, "[alerts]\nstarved_minutes = -1\n")
    monkeypatch.setenv("ZUKA_CONFIG", str(bad))
    code, _, err = run(["config", "check"], capsys)
    assert code == 2 and "alerts.starved_minutes" in err


def test_config_show_masks_tokens_and_names_sources(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    feishu = "https://open.feishu.cn/open-apis/bot/v2/hook/0123abcd-4567-89ef-0123-456789abcdef"
    path = write(
        tmp_path,
        f'[notify]\nurls = ["{DING}&secret=SECtopsecretvalue", "{feishu}", '
        '"json://user:hunter2@127.0.0.1:9/hook"]\n',
    )
    code, out, _ = run(["--config", str(path), "config", "show"], capsys)
    assert code == 0
    for secret in ("abcdef0123456789secret", "SECtopsecretvalue", "0123abcd-4567", "hunter2"):
        assert secret not in out
    assert "oapi.dingtalk.com" in out and "open.feishu.cn" in out
    assert "notify.urls" in out and str(path) in out
    assert "alerts.starved_minutes = 30  (default)" in out
    code, out, _ = run(["--config", str(path), "config", "show", "--json"], capsys)
    data = json.loads(out)
    assert data["path"] == str(path)
    assert data["settings"]["alerts.lease_end_notice_days"] == {
        "value": [7, 3, 1],
        "source": "default",
    }
    urls = data["settings"]["notify.urls"]["value"]
    assert len(urls) == 3 and "abcdef0123456789secret" not in json.dumps(urls)


def test_config_show_warns_about_a_readable_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "", mode=0o640)
    code, _, err = run(["--config", str(path), "config", "show"], capsys)
    assert code == 0 and "readable" in err


# -- bounded reads: a config path is never trusted to be a small regular file -------------


def test_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    import os
    import threading

    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    got: list[list[str]] = []
    worker = threading.Thread(target=lambda: got.append(problems(fifo)), daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():  # unblock the reader so the test process can end
        with open(fifo, "w"):
            pass
        worker.join(5)
        pytest.fail("reading a FIFO as the config blocked")
    assert len(got[0]) == 1 and str(fifo) in got[0][0] and "not a regular file" in got[0][0]


def test_a_device_is_refused() -> None:
    found = problems(Path("/dev/zero"))  # it would read forever
    assert len(found) == 1 and "/dev/zero" in found[0] and "not a regular file" in found[0]


def test_a_directory_is_refused(tmp_path: Path) -> None:
    found = problems(tmp_path)
    assert len(found) == 1 and "not a regular file" in found[0]


def test_a_huge_file_is_refused_by_its_size(tmp_path: Path) -> None:
    path = write(tmp_path, "# padding\n" * 200_000)  # 2 MB
    found = problems(path)
    assert len(found) == 1 and "larger than" in found[0] and "MiB" in found[0]


def test_deep_nesting_is_a_config_problem(tmp_path: Path) -> None:
    path = write(tmp_path, "x = " + "[" * 5000 + "]" * 5000 + "\n")
    found = problems(path)
    assert len(found) == 1 and "nested too deeply" in found[0]


def test_too_many_urls_are_refused_before_any_is_checked(tmp_path: Path) -> None:
    import time

    urls = ", ".join(f'"json://h/{i}"' for i in range(20_000))
    path = write(tmp_path, f"[notify]\nurls = [{urls}]\n")
    started = time.monotonic()
    found = problems(path)
    assert time.monotonic() - started < 5
    assert len(found) == 1 and "notify.urls" in found[0] and "at most 50" in found[0]


def test_an_overlong_string_is_refused_and_not_echoed_whole(tmp_path: Path) -> None:
    long = "A" * 5000
    path = write(tmp_path, f'[users]\nalice = "{long}"\n[notify]\nurls = ["{DING}{long}"]\n')
    found = problems(path)
    assert any("users.alice" in p for p in found)
    assert any("notify.urls[0]" in p and "at most 2048" in p for p in found)
    assert all(len(p) < 600 for p in found)


def test_dev_null_means_the_defaults_without_chmod_advice(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(["--config", "/dev/null", "config", "check"], capsys)
    assert code == 0 and err == ""
    assert load_config(Path("/dev/null"), env={}).warnings == ()
