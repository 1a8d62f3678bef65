"""The layers of docs/architecture.md, enforced on the import graph (transitively, with every
sub-package ``__init__`` that an import runs): the engine is model-agnostic in fact, the fast path is
a peer of the event engine, reading a scenario builds no model, and so on."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.import_graph import import_graph, reach, violations

ROOT = Path(__file__).resolve().parents[1] / "gossipsim"
G = "gossipsim."

#: modules every layer may use: they import nothing of gossipsim's but each other
FOUNDATION = tuple(
    G + m
    for m in (
        "errors", "schema", "streams", "capabilities", "messages", "channels", "links",
        "protocol_api", "representations", "registry", "contracts", "textfiles", "censoring",
        "frozen",
    )
)  # fmt: skip
#: the layers above the simulation core: nothing below may reach them
OUTPUTS = tuple(
    G + m
    for m in (
        "results",
        "plots",
        "cli",
        "api",
        "store",
        "executors",
        "theory",
        "fastcsv",
        "reference",
        "plotting",
    )
)
IMPLEMENTATIONS = tuple(G + m for m in ("models", "families", "protocols", "glm", "optimum"))

RULES: dict[str, dict[str, tuple[str, ...]]] = {
    # the event engine: tokens, messages, channels and walks; no model, family, protocol
    # implementation, scenario, results, plotting, CLI or fast path
    "engine": {"allowed": (*FOUNDATION, G + "engine", G + "scheduling")},
    "scheduling": {"allowed": (*FOUNDATION, G + "scheduling")},
    # the schema and settings objects: what a scenario can hold, stated once
    "settings": {"allowed": (*FOUNDATION, G + "settings", G + "scheduling")},
    "sweeps": {"allowed": (*FOUNDATION, G + "sweeps", G + "settings", G + "scheduling")},
    "cover": {"allowed": (*FOUNDATION, G + "scheduling", G + "cover")},
    "topology": {"allowed": (*FOUNDATION, G + "scheduling", G + "topology", G + "budget")},
    "metrics": {"allowed": (*FOUNDATION, G + "metrics")},
    "data": {"allowed": (*FOUNDATION, G + "data", G + "scheduling", G + "topology", G + "budget")},
    # reading and validating a scenario: kinds are looked up by name in the registries
    "scenario": {
        "forbidden": (
            *IMPLEMENTATIONS,
            *OUTPUTS,
            G + "engine",
            G + "fastpath",
            G + "runner",
            G + "world",
            G + "measure",
            G + "data",
        ),
    },  # fmt: skip
    "budget": {"forbidden": (*IMPLEMENTATIONS, *OUTPUTS, G + "scenario", G + "engine")},
    # a model describes prior, likelihood, data and targets from its own settings (ModelSpec): it
    # builds no protocol and reads no scenario
    "models": {
        "forbidden": (
            *OUTPUTS,
            G + "protocols",
            G + "scenario",
            G + "engine",
            G + "fastpath",
            G + "runner",
            G + "world",
            G + "measure",
        ),
    },  # fmt: skip
    "families": {"allowed": (*FOUNDATION, G + "families")},
    # particle methods and the log-densities they move towards: pure math on arrays
    "particles": {"allowed": (*FOUNDATION, G + "particles")},
    "logdensity": {"allowed": (*FOUNDATION, G + "logdensity")},
    "idx": {"allowed": (*FOUNDATION, G + "idx")},
    "imagetask": {"allowed": (*FOUNDATION, G + "imagetask", G + "idx", G + "datasets")},
    "protocols": {
        "forbidden": (
            *OUTPUTS,
            G + "models",
            G + "scenario",
            G + "engine",
            G + "fastpath",
            G + "runner",
            G + "world",
            G + "measure",
        ),
    },  # fmt: skip
    # the vectorised engine is a peer of the event engine's runner, not a layer above it
    "fastpath": {"forbidden": (*OUTPUTS, G + "runner")},
    "runner": {"forbidden": (*OUTPUTS, G + "fastpath")},
    "world": {"forbidden": (*OUTPUTS, G + "fastpath", G + "runner", G + "measure")},
    "measure": {"forbidden": (*OUTPUTS, G + "fastpath", G + "runner")},
}


@pytest.fixture(scope="module")
def graph():
    return import_graph(ROOT)


def _modules(graph, layer: str) -> list[str]:
    return sorted(m for m in graph if m == G + layer or m.startswith(G + layer + "."))


@pytest.mark.parametrize("layer", sorted(RULES))
def test_layer_reaches_only_what_it_may(graph, layer):
    rule = RULES[layer]
    modules = _modules(graph, layer)
    assert modules, f"no module {layer}"
    bad = []
    for module in modules:
        bad += violations(
            graph, module, forbidden=rule.get("forbidden", ()), allowed=rule.get("allowed")
        )
    assert not bad, "\n".join(bad)


def test_foundation_reaches_only_the_foundation(graph):
    bad = []
    for module in FOUNDATION:
        bad += violations(graph, module, allowed=FOUNDATION)
    assert not bad, "\n".join(bad)


def test_the_package_namespace_imports_nothing_eagerly(graph):
    """``import gossipsim`` runs only its own ``__init__`` (the names load lazily): otherwise every
    module would reach every other through its parent package."""
    assert reach(graph, "gossipsim") == {}


def test_the_rule_checker_sees_chains_through_package_inits(tmp_path):
    """The checker itself: a violation hidden behind a sub-package ``__init__`` and a function-level
    import is found; one under ``TYPE_CHECKING`` is not an import."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "engine.py": "from .sub.tool import helper\n",
        "sub/__init__.py": "from .heavy import X\n",
        "sub/tool.py": "def helper():\n    from ..model import M\n",
        "sub/heavy.py": "X = 1\n",
        "model.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .plots import P\n",
        "plots.py": "P = 1\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(textwrap.dedent(text))
    g = import_graph(pkg)
    assert violations(g, "pkg.engine", forbidden=("pkg.sub.heavy",)) == [
        "pkg.engine -> pkg.sub -> pkg.sub.heavy"
    ]
    assert violations(g, "pkg.engine", forbidden=("pkg.model",)) == [
        "pkg.engine -> pkg.sub.tool -> pkg.model"
    ]
    assert violations(g, "pkg.engine", forbidden=("pkg.plots",)) == []
    assert violations(g, "pkg.engine", allowed=("pkg.sub",)) == [
        "pkg.engine -> pkg.sub.tool -> pkg.model"
    ]
