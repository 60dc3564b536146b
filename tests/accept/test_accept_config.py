"""[accept] in the config: read, checked, turned into the engine's Settings; the
provider's return window on the command line; the local runner."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from leases.accept.engine import Settings
from leases.accept.localrun import LocalRunner, nvml_evidence
from leases.config.load import load_config
from leases.core.errors import ConfigError
from tests.support.cli import Cli


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_accept_settings_are_read_and_reach_the_engine(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
[accept]
vram_tolerance = 0.05
matmul_pass = 0.6
ports = [22, 6006, 22]
training_ports = "7000 - 7100"
data_paths = ["/", "/data/"]
min_free_gib = 500
burn_seconds = 60
young_days = 3
""",
    )
    config = load_config(path, env={"ZUKA_ACCEPT_MIN_FREE_GIB": "200"})
    s = config.accept
    assert s == Settings(0.05, 0.6, (22, 6006), (7000, 7100), ("/", "/data"), 200, 60, 3)
    assert config.alerts.accept_young_days == 3
    # The defaults are the engine's own.
    assert load_config(None, env={}).accept == Settings()


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ('training_ports = "9000-8000"', "FIRST-LAST"),
        ("ports = [0]", "from 1 to 65535"),
        ('data_paths = ["data"]', "absolute path"),
        ("young_days = 0", "from 1 to 365"),
        ("vram_tolerance = 0.9", "0.03 is 3 %"),
    ],
)
def test_bad_accept_values_are_refused_by_name(tmp_path: Path, line: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, f"[accept]\n{line}\n"), env={})
    assert words in str(caught.value) and "accept." in str(caught.value)


def test_the_return_window_is_recorded_on_the_provider(z: Cli) -> None:
    assert z("provider", "edit", "P", "--return-days", "7").code == 0
    listed = json.loads(z("provider", "list", "--json").out)
    assert listed[0]["return_days"] == 7
    bad = z("provider", "edit", "P", "--return-days", "-1")
    assert bad.code == 2 and "return" in bad.err
    assert z("undo").code == 0  # the edit is audited like any other
    assert json.loads(z("provider", "list", "--json").out)[0]["return_days"] is None
    assert z("audit", "verify").code == 0


async def test_the_local_runner_bounds_output_and_times_out() -> None:
    runner = LocalRunner(limit=1000)
    r = await runner.run("head -c 100000 /dev/zero | tr '\\0' x; echo err >&2; exit 3", 10)
    assert (r.exit_status, len(r.stdout), r.stderr) == (3, 1000, "err\n")
    with pytest.raises(TimeoutError):
        await runner.run("sleep 30", 0.2)


class _NoNvml:
    class NVMLError(Exception):
        value = 12  # NVML_ERROR_LIBRARY_NOT_FOUND

    def nvmlInit(self) -> None:
        raise self.NVMLError("NVML Shared Library Not Found")


def test_no_nvml_is_evidence_that_says_so() -> None:
    ev = nvml_evidence(_NoNvml())
    assert ev.key == "nvml" and ev.exit_status is None
    assert "no NVML on this host" in ev.failure
    assert asyncio.iscoroutinefunction(LocalRunner().run)
