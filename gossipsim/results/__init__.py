"""The results folder: tidy tables and the summary, atomic and resumable writes, parts and their
format, locks, checksums, provenance, GraphML graphs."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gossipsim.results.results import PostProcessingError, Results, load_results

#: the public names of the module this package's name belonged to before issue 31, handed on
#: lazily (a reader of one of its siblings imports nothing more)
__all__ = ["PostProcessingError", "Results", "load_results"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("gossipsim.results.results"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
