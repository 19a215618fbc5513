"""No deployable's modules import each other in a circle, type-only imports included.

docs/architecture.md says dependencies run one way (``app`` -> ``session`` -> ... -> ``engines``);
a cycle, even through an ``if TYPE_CHECKING:`` import or one inside a function, means two modules
can only be understood together. The graph is read from the source (ast), so a lazy import that
hides a cycle from Python's import system does not hide it here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("voicestream/src/voicestream", "containers/kokoro/kokoro_server", "containers/kokoro/kokoro_tools",
            "agent/voice_agent")


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package at ``root``."""
    found = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's own modules that ``name`` imports anywhere in its source (not its own parents)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            targets += [base] + [f"{base}.{alias.name}" for alias in node.names]
    out = set()
    for target in targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name and not name.startswith(target + "."):
            out.add(target)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_no_modules_import_each_other_in_a_circle(package: str) -> None:
    known = modules(REPO / package)
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert cycles(graph) == []


def test_a_circle_through_a_type_only_import_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import B\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import C\nB = 1\n")
    (package / "c.py").write_text("def f():\n    from pkg.a import A\n")
    (package / "d.py").write_text("from . import a\n")
    known = modules(package)
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
