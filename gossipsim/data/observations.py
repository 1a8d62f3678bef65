"""Node data: synthetic generators and observations read from a CSV file.

Synthetic data are drawn node by node, in the graph's node order, from one generator, so the same seed
gives the same data whatever else changes. A CSV file has one row per observation with columns
``node`` and ``x`` (a categorical observation is its category index); node labels that look like
integers are integers, as in graph files, so ``3`` names the same node in both.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from gossipsim.core.textfiles import decode_text, read_text
from gossipsim.errors import ConfigError
from gossipsim.scheduling import IndexedGraph
from gossipsim.topology import parse_label

if TYPE_CHECKING:
    from gossipsim.families import ConjugateModel

__all__ = [
    "decode_text",
    "points_per_node",
    "read_observations",
    "read_text",
    "synthetic_observations",
]


def points_per_node(
    points: int | Sequence[int], nodes: int, key: str = "data.points_per_node"
) -> list[int]:
    """Observations per node: one integer for all nodes, or a list with one per node."""
    if isinstance(points, int):
        return [points] * nodes
    if len(points) != nodes:
        raise ConfigError(
            key, f"a per-node list needs one value per node ({nodes}), got {len(points)}"
        )
    return list(points)


def synthetic_observations(
    model: ConjugateModel,
    points: Sequence[int],
    node_params: Sequence[Mapping[str, Any]],
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """Draw each node's observations in node order from ``rng`` (its drawn generator parameters
    first, :meth:`~gossipsim.families.conjugate.ConjugateModel.draw_node`)."""
    return [model.draw_node(n, params, rng) for n, params in zip(points, node_params, strict=True)]


class ObservationModel(Protocol):
    """What :func:`read_observations` needs of a model: whether one value is an observation, and
    the observations of one node in the dtype the model uses (every conjugate model has both)."""

    def observation_error(self, x: float) -> str | None:
        """Why the finite number ``x`` is not one observation (None if it is)."""

    def check_observations(self, x: np.ndarray, key: str) -> np.ndarray:
        """The observations of one node, checked and converted."""


def read_observations(
    path: str | Path, graph: IndexedGraph, model: ObservationModel, key: str = "data.path"
) -> list[np.ndarray]:
    """Read a ``node,x`` CSV file into one array of observations per node (in graph order).

    Nodes without rows have no data. The file is UTF-8 (a byte-order mark is allowed); its header
    names each column once and every row has as many fields as the header (further columns are
    ignored). A row naming a node that is not in the graph, or an ``x`` that is not a finite number
    in the model's support, is an error naming the file, the row (its line number) and the column.
    """
    p = Path(path)
    text = read_text(p, key)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        columns = _header(next(reader, []), p.name, key)
        per_node: list[list[float]] = [[] for _ in range(graph.size)]
        for fields in reader:
            if fields:  # blank lines are skipped
                node, value = _row(fields, columns, reader.line_num, p.name, key, graph, model)
                per_node[node].append(value)
    except csv.Error as exc:
        raise ConfigError(key, f"{p.name} row {reader.line_num}: not valid CSV ({exc})") from None
    return [model.check_observations(np.asarray(v, dtype=float), key) for v in per_node]


def _header(fields: list[str], name: str, key: str) -> list[str]:
    """The header's column names: ``node`` and ``x`` present, no name given twice (a second ``x``
    would otherwise silently replace the first)."""
    columns = [f.strip() for f in fields]
    seen: dict[str, int] = {}
    for i, column in enumerate(columns, start=1):
        if column and column in seen:
            raise ConfigError(
                key,
                f"{name} row 1: the header names column {column!r} twice (columns {seen[column]} "
                f"and {i}); give each column its own name",
            )
        seen[column] = i
    if "node" not in seen or "x" not in seen:
        found = ", ".join(repr(c) for c in columns) or "none"
        raise ConfigError(key, f"{name} needs a header with columns node,x (found {found})")
    return columns


def _row(
    fields: list[str],
    columns: list[str],
    line: int,
    name: str,
    key: str,
    graph: IndexedGraph,
    model: ObservationModel,
) -> tuple[int, float]:
    """The node index and the observation of one data row, checked field by field."""
    if len(fields) != len(columns):
        raise ConfigError(
            key,
            f"{name} row {line}: {len(fields)} field{'s' if len(fields) != 1 else ''}, but the header has {len(columns)} "
            f"({','.join(columns)}); every row needs one field per column",
        )
    node_col, x_col = columns.index("node"), columns.index("x")
    where = f"{name} row {line}"
    label = parse_label(fields[node_col])
    if label not in graph.index_of:
        raise ConfigError(
            key, f"{where}, column {node_col + 1} (node): node {label!r} is not in the graph"
        )
    text = fields[x_col].strip()
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(
            key, f"{where}, column {x_col + 1} (x): x = {text!r} is not a number"
        ) from None
    problem = (
        "is not a finite number" if not math.isfinite(value) else model.observation_error(value)
    )
    if problem is not None:
        raise ConfigError(key, f"{where}, column {x_col + 1} (x): x = {text} {problem}")
    return graph.index_of[label], value
