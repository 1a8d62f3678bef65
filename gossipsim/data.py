"""Node data: synthetic generators and observations read from a CSV file.

Synthetic data are drawn node by node, in the graph's node order, from one generator, so the same seed
gives the same data whatever else changes. A CSV file has one row per observation with columns
``node`` and ``x`` (a categorical observation is its category index); node labels that look like
integers are integers, as in graph files, so ``3`` names the same node in both.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ConfigError
from .families import ConjugateModel
from .scheduling import IndexedGraph
from .topology import parse_label


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
    """Draw each node's observations in node order from ``rng``."""
    return [model.generate(n, params, rng) for n, params in zip(points, node_params, strict=True)]


def read_observations(
    path: str | Path, graph: IndexedGraph, model: ConjugateModel, key: str = "data.path"
) -> list[np.ndarray]:
    """Read a ``node,x`` CSV file into one array of observations per node (in graph order).

    Nodes without rows have no data; a row naming a node that is not in the graph is an error.
    """
    p = Path(path)
    try:
        with p.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            fields = [f.strip() for f in (reader.fieldnames or [])]
            if "node" not in fields or "x" not in fields:
                raise ConfigError(
                    key,
                    f"{p.name} needs a header with columns node,x (found {', '.join(fields) or 'none'})",
                )
            per_node: list[list[float]] = [[] for _ in range(graph.size)]
            for line, row in enumerate(reader, start=2):
                row = {(k or "").strip(): (v or "").strip() for k, v in row.items()}
                label = parse_label(row["node"])
                if label not in graph.index_of:
                    raise ConfigError(
                        key, f"{p.name} line {line}: node {label!r} is not in the graph"
                    )
                try:
                    value = float(row["x"])
                except ValueError:
                    raise ConfigError(
                        key, f"{p.name} line {line}: x = {row['x']!r} is not a number"
                    ) from None
                per_node[graph.index_of[label]].append(value)
    except OSError as exc:
        raise ConfigError(key, f"cannot read {str(p)!r}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(key, f"{p.name} is not a readable CSV file: {exc}") from None
    return [model.check_observations(np.asarray(v, dtype=float), key) for v in per_node]
