"""The house of docs/architecture.md (issue 31): its layers are import-linter's contracts in
setup.cfg, run by `make test` (`lint-imports`); these tests keep what the contracts cannot say.

- every package and module at the top of ``gossipsim`` is placed in the layers contract (a new one
  cannot slip past the layers);
- no import circle, anywhere (an import inside a function counts, and one under
  ``TYPE_CHECKING`` too: a type that needs a circle to be named is a design knot);
- no module over 800 lines;
- ``import gossipsim`` runs nothing but its own face and the map of moved modules.
"""

from __future__ import annotations

import ast
import configparser
import textwrap
from pathlib import Path

import networkx as nx
import pytest

from tests.import_graph import import_graph, module_name, reach

ROOT = Path(__file__).resolve().parents[1] / "gossipsim"
SETUP = ROOT.parent / "setup.cfg"
MAX_LINES = 800
#: what stays at the top of the package, outside the layers: the face and its command
FACE = {"__init__", "__main__", "py"}


def _contracts() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(SETUP, encoding="utf-8")
    return config


def _layers() -> list[set[str]]:
    text = _contracts()["importlinter:contract:layers"]["layers"]
    return [{name.strip() for name in line.split("|")} for line in text.split("\n") if line.strip()]


def test_every_top_level_package_and_module_has_a_layer():
    placed = set().union(*_layers())
    top = {p.stem if p.is_file() else p.name for p in ROOT.iterdir() if p.name != "__pycache__"}
    missing = sorted(top - placed - FACE - {"api", "typed"})
    assert not missing, f"not in the layers contract of setup.cfg: {missing}"
    modules = [p.stem for p in ROOT.glob("*.py") if p.stem not in FACE]
    assert len(modules) <= 12, modules  # the face, errors and the like: a dozen at most


def _direct_imports(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules (or package faces) its import statements name: what a
    circle is made of (a module's parents, which every import runs, are not edges here)."""
    paths = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in paths)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                for alias in node.names:
                    full = f"{mod}.{alias.name}"
                    deps.add(full if full in paths else mod)
        graph[name] = {d for d in deps if d in paths and d != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    digraph = nx.DiGraph([(a, b) for a, targets in graph.items() for b in targets])
    return [sorted(c) for c in nx.strongly_connected_components(digraph) if len(c) > 1]


def test_no_import_circle():
    assert _circles(_direct_imports(ROOT)) == []


def test_the_circle_check_sees_circles_through_function_level_and_type_only_imports(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    files = {
        "__init__.py": "",
        "a.py": "from pkg.b import x\n",
        "b.py": "def x():\n    from pkg import a\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.d import y\n",
        "d.py": "from pkg.c import z\n",
        "e.py": "from pkg.a import x\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(textwrap.dedent(text))
    assert sorted(_circles(_direct_imports(pkg))) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]


@pytest.mark.parametrize("path", sorted(ROOT.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_over_800_lines(path: Path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT.parent)}: {lines} lines"


def test_the_package_namespace_imports_nothing_eagerly():
    """``import gossipsim`` runs only its own ``__init__``, the map of moved modules and the version
    (the names
    load lazily): otherwise every module would reach every other through its parent package."""
    assert set(reach(import_graph(ROOT), "gossipsim")) <= {
        "gossipsim.core",
        "gossipsim.core.moved",
        "gossipsim.core.version",
    }
