"""One variant's world (graph, model with its data, requests, links) and the protocol built for a run."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gossipsim.world.world import World, build_protocol, build_world, node_labels, world_for_run

#: the public names of the module this package's name belonged to before issue 31, handed on
#: lazily (a reader of one of its siblings imports nothing more)
__all__ = ["World", "build_protocol", "build_world", "node_labels", "world_for_run"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("gossipsim.world.world"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
