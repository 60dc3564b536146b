"""The domain (leases) never loads Textual or the UI package, checked in a fresh interpreter."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import leases


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(leases.__path__, "leases."))


def test_every_leases_module_imports_without_textual() -> None:
    mods = _modules()
    assert "leases.ledger.store" in mods and "leases.core.models" in mods
    code = (
        "import importlib, sys\n"
        f"for m in {mods!r}:\n"
        "    importlib.import_module(m)\n"
        "bad = sorted(k for k in sys.modules if k.split('.')[0] in ('textual', 'tui'))\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", f"leases pulled in: {done.stdout}"


def test_no_leases_source_imports_textual_or_tui() -> None:
    import pathlib

    root = pathlib.Path(leases.__file__).parent
    offenders = [
        str(p)
        for p in root.rglob("*.py")
        for line in p.read_text().splitlines()
        if line.strip().startswith(("import textual", "from textual", "import tui", "from tui"))
    ]
    assert offenders == []


def test_ledger_commands_do_not_load_textual() -> None:
    """`zuka node list` stays fast: the CLI loads Textual only for the dashboard."""
    code = (
        "import sys\n"
        "from tui.cli.main import build_parser\n"
        "build_parser()\n"
        "print('textual' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
