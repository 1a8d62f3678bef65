"""Every module path and file the docs name exists (issue 31, item 4): a dotted
``gossipsim.package.module.name`` of the README or docs/ imports, without the deprecation warning
of a path moved by issue 31 (the docs use the new paths), and every ``gossipsim/...py`` file is in
the tree (the CHANGELOG, which lists the old paths, is not a page here)."""

from __future__ import annotations

import importlib
import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DOTTED = re.compile(r"(?<![\w./-])gossipsim(?:\.[A-Za-z_]\w*)+")
FILES = re.compile(r"(?<![\w./-])gossipsim/[\w/]+(?:\.py|/)")


def _named(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    found = {}
    for page in PAGES:
        for match in pattern.finditer(page.read_text(encoding="utf-8")):
            found.setdefault(match.group(0).rstrip("."), page.relative_to(ROOT).as_posix())
    return sorted(found.items())


def _resolve(path: str) -> object:
    """The module or object ``path`` names: the longest importable module prefix, then its
    attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(path)


@pytest.mark.parametrize(("path", "page"), _named(DOTTED), ids=lambda v: v)
def test_every_dotted_path_the_docs_name_imports(path, page):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            _resolve(path)
        except (ImportError, AttributeError, DeprecationWarning) as exc:
            pytest.fail(f"{page}: {path}: {type(exc).__name__}: {exc}")


@pytest.mark.parametrize(("path", "page"), _named(FILES), ids=lambda v: v)
def test_every_file_the_docs_name_is_in_the_tree(path, page):
    assert (ROOT / path).exists(), f"{page}: {path} is not in the tree"


def _package_imports() -> dict[str, set[str]]:
    """Each top-level package (or module) of gossipsim -> the others its modules import (run-time
    imports, as import-linter reads them), besides ``core`` and ``errors``."""
    import grimp  # import-linter's graph builder (a development dependency)

    graph = grimp.build_graph("gossipsim", exclude_type_checking_imports=True)
    found: dict[str, set[str]] = {}
    for module in graph.modules - {"gossipsim"}:
        top = module.split(".")[1]
        found.setdefault(top, set())
        for target in graph.find_modules_directly_imported_by(module):
            other = "__init__" if target == "gossipsim" else target.split(".")[1]
            if other not in {top, "core", "errors"}:
                found[top].add(other)
    return found


def test_the_architecture_table_of_packages_says_what_each_imports():
    """docs/architecture.md's table of packages (the house's drawing) names, for every package,
    exactly the packages it imports: the document and the tree say the same thing."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)(?:/|\.py)` \| [^|]+ \| ([^|]+) \|$", text, flags=re.M)
    documented = {name: set(re.findall(r"`(\w+)`", cell)) for name, cell in rows}
    actual = _package_imports()
    actual.pop("__main__", None)
    assert set(documented) == set(actual), set(documented) ^ set(actual)
    wrong = {n: (documented[n], actual[n]) for n in actual if documented[n] != actual[n]}
    assert not wrong, wrong
