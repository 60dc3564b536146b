"""README.zh-CN.md sits beside README.md with the same two commands (install and open the
demo; install and run the tests), and points back to the full English reference."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLOCK_RE = re.compile(r"```sh\n(.*?)```", re.S)


def _first_two(path: Path) -> list[str]:
    return [b.strip() for b in BLOCK_RE.findall(path.read_text(encoding="utf-8"))[:2]]


def test_the_chinese_readme_has_the_same_two_commands() -> None:
    english = _first_two(ROOT / "README.md")
    chinese = _first_two(ROOT / "README.zh-CN.md")
    assert english == chinese
    assert "zuka demo" in chinese[0] and "pytest -q" in chinese[1]


def test_each_readme_links_the_other() -> None:
    assert "README.zh-CN.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(README.md)" in (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
