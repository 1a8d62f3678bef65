"""What a scenario's values may be, before any of its sections is read: a value given from Python
as the TOML value it stands for (NumPy scalars and arrays as plain numbers and lists, a one-pass
iterator refused: :func:`plain_value`), and the shape every scenario keeps (tables and arrays
nested at most :data:`MAX_DEPTH` deep, integers in TOML's 64-bit range, graph objects only in
``topology`` or ``sweep.topology``: :func:`check_structure`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import networkx as nx
import numpy as np

from gossipsim.errors import ConfigError
from gossipsim.study.sweeps import GRAPH_SWEEP_KEY

#: deepest nesting of tables and arrays a scenario may have (real ones use at most about 6)
MAX_DEPTH = 32
#: TOML integers are 64-bit; larger ones (which Python's parser accepts) are refused
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def plain_value(value: Any, key: str) -> Any:
    """A scenario value given from Python as the TOML value it stands for: NumPy scalars as the
    Python ``bool``, ``int`` or ``float`` they hold (``np.int64(3)`` is the integer 3), NumPy
    arrays as lists, tables and arrays converted all the way down (a copy; graph objects kept). A
    generator or other one-pass iterator is refused naming ``key``: a scenario is read more than
    once (each variant, the results folder's record), so it needs a list."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, Mapping) and not isinstance(value, nx.Graph):
        return {k: plain_value(v, f"{key}.{k}" if key else str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(plain_value(v, f"{key}[{i}]") for i, v in enumerate(value))
    if isinstance(value, Iterator):
        raise ConfigError(
            key or "scenario",
            f"is a {type(value).__name__}, which can be read only once; give a list (e.g. "
            "list(...) of it)",
        )
    return value


def check_structure(raw: Mapping[str, Any]) -> None:
    """Refuse values nested deeper than :data:`MAX_DEPTH` and integers outside TOML's 64-bit range,
    naming the key, before anything recurses into the tables or converts an integer to a float."""
    # (value, its dotted key, its depth, whether a graph object may be there)
    stack: list[tuple[Any, str, int, bool]] = [(raw, "", 0, False)]
    while stack:
        value, key, depth, graph_ok = stack.pop()
        if depth > MAX_DEPTH:
            raise ConfigError(
                key, f"nests tables or arrays too deeply (at most {MAX_DEPTH} levels)"
            )
        if isinstance(value, nx.Graph):
            if graph_ok or key in ("topology", "topology.graph"):
                continue
            raise ConfigError(
                key,
                "a NetworkX graph goes only in topology ({'topology': G} or {'topology': "
                "{'graph': G, ...}}) or in sweep.topology (a list of graphs, or a mapping "
                "label -> graph)",
            )
        graphs_below = key == f"sweep.{GRAPH_SWEEP_KEY}"  # a sweep over graphs: its entries
        if isinstance(value, Mapping):
            stack += [
                (v, f"{key}.{k}" if key else str(k), depth + 1, graphs_below)
                for k, v in value.items()
            ]
        elif isinstance(value, list | tuple):
            stack += [(v, f"{key}[{i}]", depth + 1, graphs_below) for i, v in enumerate(value)]
        elif isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
            hint = (
                " (write a larger node id as a string)" if key.endswith(("node", "start")) else ""
            )
            raise ConfigError(
                key, f"integers must lie in TOML's 64-bit range, -2^63 to 2^63 - 1{hint}"
            )
