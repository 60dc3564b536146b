"""The built wheel works away from the source tree: every runtime file ships in it.

The wheel is built from a copy of the sources (a stale build/ in the checkout cannot leak
into it), installed into a fresh venv outside the repository, and run there with the
working directory outside the repository too: `zuka demo --help`, then a headless demo
round (the demo ledger, its simulated fleet over SSH, the dashboard polling it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
# What a clean clone does not hold, and what the wheel must not need.
_NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis",
    "tests", "bench", "snapshot_report.html",
)  # fmt: skip

# Every file the packages read at runtime (through importlib.resources).
RUNTIME_FILES = (
    "leases/data/demo_fleet.json",
    "leases/data/ledger-template.csv",
    "leases/data/cloud/aliyun.toml",
    "leases/data/cloud/hcloud.toml",
    "leases/data/cloud/tccli.toml",
    "leases/locale/zh_CN/LC_MESSAGES/zuka.mo",
    "leases/locale/en/LC_MESSAGES/zuka.mo",
    "tui/dashboard/zuka.tcss",
)

# One demo round, headless: the demo's own ledger and fleet, the dashboard on it through
# Textual's test driver, until every simulated node has answered (ok or its fault).
_DEMO_ROUND = """
import asyncio, sys, tempfile
from pathlib import Path

import leases, tui
from textual.widgets import DataTable
from tui.dashboard.app import ZukaApp
from leases.sim.demofleet import prepare

WAITING = ("connecting",)

async def round_(path: Path) -> list[list[str]]:
    app = ZukaApp(path, refresh_s=0.2, interval_s=0.5)
    rows: list[list[str]] = []
    async with app.run_test(size=(150, 40)) as pilot:
        fleet = app.query_one("#fleet", DataTable)
        for _ in range(300):
            await pilot.pause(0.1)
            # (name, state): the columns by key, wherever the width puts them
            rows = [[fleet.get_cell(k, "node").plain, fleet.get_cell(k, "state").plain]
                    for k in fleet.rows]
            if rows and not any(r[1] in WAITING for r in rows):
                break
        await pilot.press("q")
    return rows

print("from", "leases", leases.__file__, sep="\\t")
print("from", "tui", tui.__file__, sep="\\t")
with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "demo.db"
    runner = prepare(path, days=0.05)
    try:
        for row in asyncio.run(round_(path)):
            print("row", row[0], row[1], sep="\\t")
    finally:
        runner.stop()
"""


def _clean_env(cwd: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ZUKA_LEDGER")}
    env["HOME"] = str(cwd)  # no ~/.ssh/config or user data directory of the runner's
    return env


def _wheel(tmp: Path) -> Path:
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=_NOT_SOURCES)
    wheels = tmp / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*build, "-w", str(wheels), str(src)], check=True, cwd=tmp)
    (wheel,) = wheels.glob("zuka-*.whl")
    return wheel


def _venv_with(wheel: Path, env: Path) -> Path:
    """A fresh venv with the wheel installed; its dependencies seen from the test's venv."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip
    # Textual, asyncssh... from the test's venv (no download); a plain path line, so the
    # editable install's finder there is not loaded: zuka comes only from the wheel.
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    subprocess.run([*install, "--no-deps", str(wheel)], check=True, cwd=env.parent)
    return env


def test_the_wheel_runs_the_demo_outside_the_repository(tmp_path: Path) -> None:
    tmp = tmp_path.resolve()
    assert not tmp.is_relative_to(ROOT), f"the wheel must be tried outside {ROOT}"
    wheel = _wheel(tmp)
    with zipfile.ZipFile(wheel) as zf:
        shipped = set(zf.namelist())
    for runtime_file in RUNTIME_FILES:
        assert runtime_file in shipped, f"{runtime_file} is not in {wheel.name}"

    venv = _venv_with(wheel, tmp / "venv")
    cwd, env = tmp, _clean_env(tmp)
    done = subprocess.run(
        [venv / "bin" / "zuka", "demo", "--help"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "usage: zuka demo" in done.stdout

    done = subprocess.run(
        [venv / "bin" / "python", "-c", _DEMO_ROUND],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line.split("\t") for line in done.stdout.splitlines() if line.count("\t") == 2]
    where = {name: Path(file) for kind, name, file in lines if kind == "from"}
    assert where["leases"].is_relative_to(venv), "leases was not loaded from the wheel"
    assert where["tui"].is_relative_to(venv), "tui was not loaded from the wheel"
    rows = {name: health for kind, name, health in lines if kind == "row"}
    assert len(rows) == 12, done.stdout
    assert rows["a100-monthly-1"] == "ok"
    # The simulated fleet's faults come through as faults, not as a crash of the round.
    assert rows["colo-njidc-4090"] == "needs reboot"  # the driver mismatch
