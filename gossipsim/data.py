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
from typing import Any, Protocol

import numpy as np

from .errors import ConfigError
from .families import ConjugateModel
from .scheduling import IndexedGraph
from .topology import parse_label, shown_path


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


_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def read_text(path: str | Path, key: str) -> str:
    """The text of a user file that must be UTF-8 (scenario, data), or a one-line
    :class:`ConfigError` naming ``key`` (:func:`decode_text`)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except (OSError, ValueError) as exc:  # missing, unreadable, a name too long, a NUL byte
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(key, f"cannot read {shown_path(p)}: {reason}") from None
    return decode_text(raw, key, p.name)


def decode_text(raw: bytes, key: str, name: str) -> str:
    """``raw`` decoded as UTF-8, without a leading byte-order mark (Excel writes one); an error
    naming ``key``, the file and where the first byte that is not UTF-8 text is (line and column,
    1-based) for any other encoding or a binary file."""
    if raw.startswith(_UTF8_BOM):
        raw = raw[len(_UTF8_BOM) :]
    if raw.startswith(_UTF16_BOMS):
        raise ConfigError(key, f"{name} is UTF-16 (or UTF-32) text; save it as UTF-8")
    nul = raw.find(b"\0")
    if nul >= 0:
        line, column = _position(raw, nul)
        raise ConfigError(
            key,
            f"{name} is not a text file: a NUL byte at line {line}, column {column} (binary, or "
            "UTF-16 without a byte-order mark); save it as UTF-8 text",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _position(raw, exc.start)
        raise ConfigError(
            key,
            f"{name} is not UTF-8 text: byte 0x{raw[exc.start]:02x} at line {line}, column "
            f"{column}; save the file as UTF-8",
        ) from None
    return text


def _position(raw: bytes, offset: int) -> tuple[int, int]:
    """Line and column (1-based; the column counts bytes) of byte ``offset``."""
    line_start = raw.rfind(b"\n", 0, offset) + 1
    return raw.count(b"\n", 0, offset) + 1, offset - line_start + 1
