"""The event engine: the token process in SimPy (``token``), what a run records (``records``), the
interface between the engine and protocols (``protocol_api``), and a batch's walks as a table of
slots with what a slot costs (``slottables``). It reaches no model, family or data module."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gossipsim.engine.records import Arrival, Request, RunRecord
    from gossipsim.engine.token import run_token

#: the public names of the module this package's name belonged to before issue 31, handed on
#: lazily (a reader of one of its siblings imports nothing more)
__all__ = ["Arrival", "Request", "RunRecord", "run_token"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        home = "token" if name == "run_token" else "records"
        return getattr(importlib.import_module(f"gossipsim.engine.{home}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
