"""Node data: synthetic observations and CSV files (:mod:`.observations`), the bundled supervised
data sets and their partitions over the nodes (:mod:`.datasets`), Fashion-MNIST's IDX files
(:mod:`.idx`) and feature map (:mod:`.imagetask`)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gossipsim.data.observations import (
        decode_text,
        points_per_node,
        read_observations,
        read_text,
        synthetic_observations,
    )

#: the public names of the module this package's name belonged to before issue 31, handed on
#: lazily (a reader of one of its siblings imports nothing more)
__all__ = [
    "decode_text",
    "points_per_node",
    "read_observations",
    "read_text",
    "synthetic_observations",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("gossipsim.data.observations"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
