"""The event engine: the token process in SimPy, the interface between the engine and protocols,
and a batch's walks as a table of slots. It reaches no model, family or data module."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gossipsim.engine.token import Arrival, Request, RunRecord, run_token

#: the public names of the module this package's name belonged to before issue 31, handed on
#: lazily (a reader of one of its siblings imports nothing more)
__all__ = ["Arrival", "Request", "RunRecord", "run_token"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("gossipsim.engine.token"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
