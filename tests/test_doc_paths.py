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
