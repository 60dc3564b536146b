"""The layout's two rules (issue 19): no import circle among zuka's own modules, and no
module over 600 lines (frozen migrations aside). Both held when issue 19 closed; a change
that breaks one fails here.

Imports are read from the source with ast, all of them: at module level, inside functions
and under TYPE_CHECKING, since each is a dependency a reader must follow.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("leases", "tui")
MAX_LINES = 600
# Migrations are frozen history, never edited: their length is not a design.
FROZEN = {"leases/ledger/schema.py"}


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def _imports(path: Path, module: str, known: set[str]) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")
                parent = parent[: len(parent) - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        for name in names:
            # The module itself, or the package a name was taken from.
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                yield name


def _circles() -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    modules = _modules()
    known = set(modules)
    graph = {m: set(_imports(p, m, known)) for m, p in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(frozenset(group))

    import sys

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_new_module_is_over_600_lines() -> None:
    long = {
        str(p.relative_to(ROOT))
        for p in _modules().values()
        if len(p.read_text(encoding="utf-8").splitlines()) > MAX_LINES
    } - FROZEN
    assert long == set(), f"modules over {MAX_LINES} lines: split them along their seams"


def test_no_two_modules_import_each_other() -> None:
    """Not even through others, nor by a function-level or TYPE_CHECKING import."""
    assert [sorted(c) for c in _circles()] == [], "an import circle: break it"
