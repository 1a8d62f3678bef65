"""Graphs read from files: edge lists and GraphML (the ``edgelist`` and ``graphml`` kinds).

A file path in a scenario is resolved against the scenario file's folder (:func:`resolve`); text is
UTF-8 with an optional byte-order mark (another encoding is an error saying where,
:func:`gossipsim.core.textfiles.read_text`). Node labels that look like 64-bit integers become ints
(:func:`~gossipsim.topology.checks.parse_label`), and two spellings of one label (``3`` and ``03``)
are an error. The readers return the graph as read; :func:`gossipsim.topology.build_topology` then
checks it like any other (self-loops, connectivity).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

import networkx as nx

from gossipsim.core.textfiles import read_text, shown_path
from gossipsim.errors import ConfigError
from gossipsim.topology.checks import parse_label

__all__ = ["read_edgelist", "read_graphml", "resolve", "shown_path"]


def read_edgelist(path: Path) -> nx.Graph:
    """An edge list: ``u v [weight ...]`` per line, whitespace or comma separated, ``#`` comments.

    Parameters
    ----------
    path : pathlib.Path
        An existing file (see :func:`resolve`).

    Returns
    -------
    networkx.Graph
        Edges with a ``weight`` attribute where the third field is a finite number (other extra
        fields are ignored).

    Raises
    ------
    ConfigError
        Naming ``topology.path``: a line without two labels, no edge, text that is not UTF-8, two
        spellings of one integer label.
    """

    # UTF-8 with an optional byte-order mark; another encoding is an error saying where
    text = read_text(path, "topology.path")
    g = nx.Graph()
    labels: dict[str, int | str] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = [f.strip() for f in line.split(",")] if "," in line else line.split()
        if len(fields) < 2 or not fields[0] or not fields[1]:
            raise ConfigError(
                "topology.path",
                f"{path}:{lineno}: expected 'u v' (two node labels separated by whitespace or a "
                f"comma, optionally followed by a weight), got {raw.strip()!r}",
            )
        u = labels.setdefault(fields[0], parse_label(fields[0]))
        v = labels.setdefault(fields[1], parse_label(fields[1]))
        weight = _number(fields[2]) if len(fields) > 2 else None
        if weight is None:
            g.add_edge(u, v)
        else:
            g.add_edge(u, v, weight=weight)
    if g.number_of_edges() == 0:
        raise ConfigError("topology.path", f"edge list {str(path)!r} has no edges")
    _relabel_checked(labels, str(path))
    return g


def read_graphml(path: Path) -> nx.Graph:
    """A GraphML file of an undirected simple graph, node and edge attributes kept.

    A directed graph or one with parallel edges is refused, as a ``networkx.DiGraph`` or
    ``MultiGraph`` given from Python is (:func:`~gossipsim.topology.checks.check_graph_object`):
    the token walk moves both ways along an edge, and turning a directed network into an
    undirected one changes the study, so it is the user's step, not a silent one.

    Parameters
    ----------
    path : pathlib.Path
        An existing file (see :func:`resolve`).

    Returns
    -------
    networkx.Graph
        The graph as written.

    Raises
    ------
    ConfigError
        Naming ``topology.path``: a file NetworkX cannot parse, a directed graph, parallel edges,
        two spellings of one integer label.
    """
    try:
        g = nx.read_graphml(path, node_type=str)
    except Exception as exc:  # any parse failure of a user file is a user error
        reason = str(exc) or type(exc).__name__
        raise ConfigError("topology.path", f"cannot read GraphML {str(path)!r}: {reason}") from exc
    convert = (
        "convert it in Python with networkx.write_graphml(networkx.Graph(networkx.read_graphml("
        "old)), new)"
    )
    if g.is_directed():
        raise ConfigError(
            "topology.path",
            f"{str(path)!r} holds a directed graph; the token walk needs an undirected one (as "
            'for a networkx.DiGraph): write edgedefault="undirected" with each edge once, or '
            f"{convert}, where each directed edge becomes an undirected one",
        )
    if g.is_multigraph():
        simple = nx.Graph(g)
        parallel = g.number_of_edges() - simple.number_of_edges()
        u, v = next((u, v) for u, v in simple.edges() if g.number_of_edges(u, v) > 1)
        raise ConfigError(
            "topology.path",
            f"{str(path)!r} has {parallel} parallel edge{'s' if parallel != 1 else ''} (e.g. "
            f"{u}–{v} more than once); the token walk needs a simple graph (as for a networkx."
            f"MultiGraph): write each edge once, or {convert}",
        )
    mapping = {text: parse_label(text) for text in g.nodes}
    _relabel_checked(mapping, str(path))
    return nx.relabel_nodes(g, mapping, copy=True)


def resolve(path: str | os.PathLike[str], base_dir: str | os.PathLike[str] | None) -> Path:
    """``path`` (``~`` expanded; relative to ``base_dir`` when given, else to the current folder),
    checked to be an existing file; errors name ``topology.path``."""
    try:
        p = Path(path).expanduser()
        if not p.is_absolute() and base_dir is not None:
            p = Path(base_dir).expanduser() / p
        exists, is_file = p.exists(), p.is_file()
    except (OSError, ValueError) as exc:  # a name too long for the file system, a NUL byte, ...
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(
            "topology.path", f"cannot use the path {shown_path(path)}: {reason}"
        ) from None
    if not exists:
        where = f" (resolved against {shown_path(base_dir)})" if base_dir is not None else ""
        raise ConfigError(
            "topology.path", f"file {shown_path(path)} does not exist{where}; give an existing file"
        )
    if not is_file:
        raise ConfigError("topology.path", f"{shown_path(p)} is not a file; give a graph file")
    return p


def _relabel_checked(labels: Mapping[str, int | str], where: str) -> None:
    seen: dict[int | str, str] = {}
    for text, label in labels.items():
        other = seen.setdefault(label, text)
        if other != text:
            raise ConfigError(
                "topology.path",
                f"{where}: node ids {other!r} and {text!r} both read as node {label!r}; "
                "ids that look like integers become integers, so write each node one way",
            )


def _number(text: str) -> float | None:
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None
