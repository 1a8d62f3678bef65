"""Where the modules of gossipsim 0.1's flat layout went (issue 31): the import-path resolver's map.

Scenario files that name a built-in by import path (``kind = "gossipsim.fastpath:..."``) and folders
written before still resolve (:func:`resolve_moved`, used by
:func:`gossipsim.core.registry.import_object`; a name that a later split took out of the module it
moved to is found in its new module of the same package: :func:`moved_attribute`), and a Python import of a moved module keeps working
through an alias (:class:`MovedModuleFinder`, installed by ``import gossipsim``) with a
``DeprecationWarning`` naming the new place. No file stays at the old place.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Final

#: old module -> its new home (a package renamed maps its modules too). Five old modules gave
#: their names to the packages that hold them now (``cli``, ``data``, ``engine``, ``results``,
#: ``world``): those packages hand on the old module's public names instead. ``plots`` was split
#: into a module per family of figures: ``gossipsim.figures`` hands on its public names.
MOVED: Final[dict[str, str]] = {
    "gossipsim.budget": "gossipsim.study.budget",
    "gossipsim.capabilities": "gossipsim.core.capabilities",
    "gossipsim.censoring": "gossipsim.measurement.censoring",
    "gossipsim.channels": "gossipsim.network.channels",
    "gossipsim.classification": "gossipsim.models.classification",
    "gossipsim.columns": "gossipsim.core.columns",
    "gossipsim.contracts": "gossipsim.core.contracts",
    "gossipsim.covertime": "gossipsim.cover",
    "gossipsim.datasets": "gossipsim.data.datasets",
    "gossipsim.densitygrid": "gossipsim.logdensity.densitygrid",
    "gossipsim.divergences": "gossipsim.states.divergences",
    "gossipsim.executors": "gossipsim.execution.executors",
    "gossipsim.fastcsv": "gossipsim.results.fastcsv",
    "gossipsim.fastpath": "gossipsim.execution.vectorized.driver",
    "gossipsim.fastpath_stays": "gossipsim.execution.vectorized.stays",
    "gossipsim.fastpath_steps": "gossipsim.execution.vectorized.steps",
    "gossipsim.fastpath_trace": "gossipsim.execution.vectorized.trace",
    "gossipsim.folderfiles": "gossipsim.results.folderfiles",
    "gossipsim.folderlock": "gossipsim.results.folderlock",
    "gossipsim.frozen": "gossipsim.core.frozen",
    "gossipsim.glm": "gossipsim.models.glm",
    "gossipsim.graphfiles": "gossipsim.results.graphfiles",
    "gossipsim.idx": "gossipsim.data.idx",
    "gossipsim.imagetask": "gossipsim.data.imagetask",
    "gossipsim.libwarnings": "gossipsim.core.libwarnings",
    "gossipsim.links": "gossipsim.network.links",
    "gossipsim.manifest": "gossipsim.results.manifest",
    "gossipsim.measure": "gossipsim.measurement.measure",
    "gossipsim.messages": "gossipsim.network.messages",
    "gossipsim.metrics": "gossipsim.measurement.metrics",
    "gossipsim.nonfinite": "gossipsim.results.nonfinite",
    "gossipsim.optimum": "gossipsim.families.optimum",
    "gossipsim.partformat": "gossipsim.results.partformat",
    "gossipsim.particlestate": "gossipsim.states.particlestate",
    "gossipsim.plots": "gossipsim.figures",
    "gossipsim.plotting": "gossipsim.figures",
    "gossipsim.plotting.axes": "gossipsim.figures.axes",
    "gossipsim.plotting.canvas": "gossipsim.figures.canvas",
    "gossipsim.plotting.layout": "gossipsim.figures.layout",
    "gossipsim.plotting.particles": "gossipsim.figures.particles",
    "gossipsim.plotting.requests": "gossipsim.figures.requests",
    "gossipsim.plotting.stats": "gossipsim.figures.stats",
    "gossipsim.plotting.style": "gossipsim.figures.style",
    "gossipsim.protocol_api": "gossipsim.engine.protocol_api",
    "gossipsim.provenance": "gossipsim.results.provenance",
    "gossipsim.reference": "gossipsim.study.reference",
    "gossipsim.registry": "gossipsim.core.registry",
    "gossipsim.representations": "gossipsim.states.representations",
    "gossipsim.runner": "gossipsim.execution.runner",
    "gossipsim.scenario": "gossipsim.study.scenario",
    "gossipsim.schema": "gossipsim.core.schema",
    "gossipsim.settings": "gossipsim.study.settings",
    "gossipsim.slottables": "gossipsim.engine.slottables",
    "gossipsim.store": "gossipsim.results.store",
    "gossipsim.streams": "gossipsim.core.streams",
    "gossipsim.sweeps": "gossipsim.study.sweeps",
    "gossipsim.textfiles": "gossipsim.core.textfiles",
    "gossipsim.theory": "gossipsim.measurement.theory",
    "gossipsim.tidy": "gossipsim.results.tidy",
}


def resolve_moved(module_name: str) -> str:
    """The module's current name: ``module_name`` itself unless it (or a package above it) moved."""
    parts = module_name.split(".")
    for n in range(len(parts), 1, -1):
        head = ".".join(parts[:n])
        if head in MOVED:
            return ".".join([MOVED[head], *parts[n:]])
    return module_name


#: old modules whose names the packages that hold them now took (``gossipsim/results.py`` is the
#: package ``gossipsim/results/``): the package hands on some of the old module's names itself
BECAME_PACKAGES: Final[frozenset[str]] = frozenset(
    {"gossipsim.cli", "gossipsim.data", "gossipsim.engine", "gossipsim.results", "gossipsim.world"}
)


#: old modules some of whose names went to another package (the memory units every stage uses to
#: the foundation; the graph layout, which only figures use, to the figures)
ALSO_IN: Final[dict[str, tuple[str, ...]]] = {
    "gossipsim.budget": ("gossipsim.core.memory",),
    "gossipsim.graphfiles": ("gossipsim.figures.graph_layout",),
}


#: what ``getattr`` gives where a module lacks a name
MISSING: Final = object()


def holds(module: ModuleType, attribute: str) -> bool:
    """Whether ``module`` defines ``attribute`` as something other than a submodule of that name
    (``gossipsim.results.collect`` is not the old function ``collect``)."""
    found = getattr(module, attribute, MISSING)
    return found is not MISSING and not isinstance(found, ModuleType)


def moved_attribute(old_module: str, attribute: str) -> tuple[str, object] | None:
    """Where ``old_module:attribute`` of before issue 31 is now, as (module name, object): the
    module :func:`resolve_moved` gives, or, when a split took the name out of it, the module of
    the same package that holds it (each imported to look, in name order: only an old path pays),
    or one of :data:`ALSO_IN`.
    A submodule that took the old name (``gossipsim.results.collect`` beside the old function
    ``collect``) is not it. None when no such module holds it."""
    import pkgutil

    new = resolve_moved(old_module)
    if new == old_module and old_module not in BECAME_PACKAGES:
        return None

    module = importlib.import_module(new)
    if holds(module, attribute):
        return new, getattr(module, attribute)
    for other in ALSO_IN.get(old_module, ()):
        if holds(elsewhere := importlib.import_module(other), attribute):
            return other, getattr(elsewhere, attribute)
    package = new if hasattr(module, "__path__") else new.rpartition(".")[0]
    for info in sorted(
        pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."),
        key=lambda info: info.name,
    ):
        try:
            sibling = importlib.import_module(info.name)
        except ImportError:  # a module needing an optional library the user lacks
            continue
        if holds(sibling, attribute):
            return info.name, getattr(sibling, attribute)
    return None


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module at its new place: the same module object, whose own
    ``__spec__`` and ``__name__`` stay those of its new place."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # a placeholder, replaced in sys.modules by exec_module

    def exec_module(self, module: ModuleType) -> None:
        # the import system takes what sys.modules holds under the name once this returns
        sys.modules[module.__name__] = importlib.import_module(self.new)


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """``import gossipsim.<old>`` gives the module at its new place, with a DeprecationWarning."""

    def find_spec(
        self, fullname: str, path: object, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("gossipsim."):
            return None
        new = resolve_moved(fullname)
        if new == fullname:
            return None
        warnings.warn(
            f"{fullname} moved to {new} (issue 31); import it from there",
            DeprecationWarning,
            stacklevel=3,
        )
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once), so that a moved package's modules are
    never loaded a second time under their old names; it answers only the names of :data:`MOVED`."""
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
