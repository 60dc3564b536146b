"""The import-linter contracts in pyproject.toml (issue 19) can fail: each is broken on
purpose in a copy of the source, by one import a later change might add, and lint-imports
must name that contract broken (a break low in the layers may break others through it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).with_name("lint-imports")

# contract name (its start) -> (file in the copy, the import line added to it)
BREAKS = {
    "leases (the domain) never imports the UI": ("leases/money/amounts.py", "import tui.words"),
    "the front ends but the command line": ("tui/screens/help.py", "import tui.cli.output"),
    "offboarding is orchestrated once": ("tui/cli/offboard.py", "import leases.offboard.readback"),
    "leases.core is the vocabulary": ("leases/core/fields.py", "import leases.ledger.records"),
    "leases.ssh knows the vocabulary only": (
        "leases/ssh/route.py",
        "import leases.config.sections",
    ),
    "leases.lab knows the vocabulary and the operating system only": (
        "leases/lab/roles.py",
        "import leases.ledger.store",
    ),
    "leases.service renders and writes unit files": (
        "leases/service/files.py",
        "import leases.ledger.paths",
    ),
    "leases.money is pure maths": ("leases/money/billing.py", "import leases.ledger.store"),
    "leases.ledger stores and never acts": ("leases/ledger/undo.py", "import leases.alerts.state"),
    "acceptance is run once": ("tui/cli/accept.py", "import leases.accept.probe"),
    "the application layer is the top": ("leases/fleet/data.py", "import leases.app.leases"),
    "the fleet read model is read by": ("leases/alerts/watch.py", "import leases.fleet.live"),
}


def _contracts() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [c["name"] for c in config["tool"]["importlinter"]["contracts"]]


def test_every_contract_has_a_break() -> None:
    names = _contracts()
    assert sorted(n for n in names if not any(n.startswith(k) for k in BREAKS)) == []
    assert len(names) == len(BREAKS)


@pytest.mark.slow
@pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed")
@pytest.mark.parametrize("contract", sorted(BREAKS))
def test_a_contract_broken_on_purpose_fails(contract: str, tmp_path: Path) -> None:
    for part in ("leases", "tui"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path, line = BREAKS[contract]
    target = tmp_path / path
    text = target.read_text(encoding="utf-8")
    # After the module docstring and `from __future__`, where an import may stand.
    marker = "from __future__ import annotations\n"
    assert marker in text, path
    target.write_text(text.replace(marker, f"{marker}{line}  # noqa\n", 1), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [str(LINT), "--no-cache"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    out = re.sub(r"\s+", " ", done.stdout)
    assert done.returncode == 1, done.stdout + done.stderr
    said = re.search(re.escape(contract) + r".*? (KEPT|BROKEN)", out)
    assert said is not None and said.group(1) == "BROKEN", done.stdout
