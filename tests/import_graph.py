"""The import graph of a package, read from its source with ``ast`` (nothing is imported).

An edge ``a -> b`` means module ``a`` imports ``b`` anywhere in its code (module level or inside a
function), except under ``if TYPE_CHECKING:``. Importing ``p.q.r`` also imports the packages ``p``
and ``p.q`` (their ``__init__`` files run), so those are edges too: a rule is checked on everything
a module reaches, transitively, including what sub-package ``__init__`` files drag in.
"""

from __future__ import annotations

import ast
from pathlib import Path


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                skip.update(id(n) for n in ast.walk(inner))
    return skip


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports directly (parents of each target included)."""
    paths = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_nodes(tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets.add(mod)
                targets.update(f"{mod}.{a.name}" for a in node.names)
        deps: set[str] = set()
        for target in targets:
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if prefix in paths and prefix != name:
                    deps.add(prefix)
        graph[name] = deps
    return graph


def reach(graph: dict[str, set[str]], start: str) -> dict[str, str]:
    """Every module ``start`` reaches -> the module that imports it on one shortest chain."""
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for dep in sorted(graph[module]):
                if dep not in parent and dep != start:
                    parent[dep] = module
                    following.append(dep)
        frontier = following
    return parent


def chain(parent: dict[str, str], start: str, end: str) -> str:
    """The import chain ``start -> ... -> end`` (for messages)."""
    out = [end]
    while out[-1] != start:
        out.append(parent[out[-1]])
    return " -> ".join(reversed(out))


def matches(module: str, pattern: str) -> bool:
    """``pattern`` names a module or a whole package (``gossipsim.models`` covers its modules)."""
    return module == pattern or module.startswith(pattern + ".")


def violations(
    graph: dict[str, set[str]],
    start: str,
    *,
    forbidden: tuple[str, ...] = (),
    allowed: tuple[str, ...] | None = None,
) -> list[str]:
    """Import chains from ``start`` to a forbidden module, or to one outside ``allowed``. The root
    package is exempt (every import runs its ``__init__``; a separate check keeps that empty)."""
    parent = reach(graph, start)
    bad = []
    for module in sorted(parent):
        if "." not in module:
            continue
        if any(matches(module, f) for f in forbidden) or (
            allowed is not None and not any(matches(module, a) for a in allowed)
        ):
            bad.append(chain(parent, start, module))
    return bad
