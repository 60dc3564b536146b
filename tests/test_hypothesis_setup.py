"""Hypothesis cannot make the suite flaky: no example database, nothing written to the
checkout, and the same examples on every CI run (the profile in conftest.py)."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from hypothesis import settings

TESTS = Path(__file__).parent

_PROBE = textwrap.dedent(
    """
    from hypothesis import given, strategies as st

    @given(st.text())
    def test_text_passes(s: str) -> None:
        assert isinstance(s, str)

    @given(st.text(), st.floats(0, 1))
    def test_fails_on_purpose(s: str, x: float) -> None:
        assert len(s) < 3 or x < 0.5
    """
)


def _hypothesis_tests() -> dict[str, settings]:
    """Every @given test in tests/, by name, with the settings it really runs with."""
    found: dict[str, settings] = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        parts = path.relative_to(TESTS.parent).with_suffix("").parts
        module = importlib.import_module(".".join(parts))
        for name, obj in vars(module).items():
            # Methods of test classes too: the settings sit on each function.
            members = vars(obj).items() if inspect.isclass(obj) else ()
            for full, fn in [(name, obj), *((f"{name}.{m}", f) for m, f in members)]:
                if callable(fn) and hasattr(fn, "hypothesis"):
                    found[f"{path.stem}::{full}"] = fn._hypothesis_internal_use_settings
    return found


def test_every_hypothesis_test_runs_with_the_steady_profile() -> None:
    tests = _hypothesis_tests()
    assert "test_history::test_minute_packing_round_trips" in tests
    assert "test_nvsmi" in " ".join(tests)  # one with its own @settings(...)
    ci = bool(os.environ.get("CI"))
    wrong = {
        name: (s.database, s.derandomize)
        for name, s in tests.items()
        if s.database is not None or s.derandomize != ci
    }
    assert wrong == {}, "a @settings(...) must not bring back a database or randomness in CI"


def test_a_run_writes_no_hypothesis_directory_where_it_runs(tmp_path: Path) -> None:
    """Before: `.hypothesis/` appeared in the checkout (the unicode table cache, patches of
    failing examples), and with a database a failing example replayed on every run."""
    (tmp_path / "test_probe.py").write_text(_PROBE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYPOTHESIS")}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS.parent), env.get("PYTHONPATH", "")])
    # Only hypothesis's plugin (the others cost seconds of start-up) and, by `-p tests.conftest`,
    # this suite's own conftest.py: its profile and the place it gives hypothesis's files.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "-p", "_hypothesis_pytestplugin", "-p", "tests.conftest"]  # fmt: skip
    done = subprocess.run(
        [*args, "test_probe.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert "1 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    assert {p.name for p in tmp_path.iterdir()} - {"__pycache__"} == {"test_probe.py"}
