"""Where the modules of gossipsim 0.1's flat layout went (issue 31): the import-path resolver's map.

Scenario files that name a built-in by import path (``kind = "gossipsim.fastpath:..."``) and folders
written before still resolve (:func:`resolve_moved`, used by
:func:`gossipsim.core.registry.import_object`), and a Python import of a moved module keeps working
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
