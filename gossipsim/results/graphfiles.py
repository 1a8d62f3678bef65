"""The graphs of a study in its results folder (``graphs/*.graphml``), with the layout the figures
draw them in.

Each distinct graph is written once, as ``graphs/<n>.graphml`` where ``n`` is the position (from 1)
of the first variant in the sweep that uses it; summary.json names each variant's file
(``variants.<label>.graph``). Graphs of more than :data:`MAX_SAVED_NODES` nodes are not written
(they are built straight into arrays, and a file of them would dwarf the tables).

GraphML holds text, integer, float and boolean attributes: node, edge and graph attributes of those
types are kept, missing values (None) left out, and any other value (a tuple of coordinates, a
list) stored as its text. Node labels are written as text; the graph attribute ``gossipsim_node_labels``
(``int``, ``str`` or ``mixed``, with the node attribute ``gossipsim_int_label`` then) restores integer labels
on reading; labels of other types come back as their text. Graphs of at most
:data:`LAYOUT_NODES` nodes (those the visit map draws) carry their layout as the node attributes
``layout_x`` and ``layout_y`` (:func:`gossipsim.figures.graph_layout.layout`), computed
once when the figures are drawn (a folder written without figures has the graphs without their
layout), so a figure redrawn from the folder places every node where it was.

Large generated graphs carry no attributes at all; :func:`write_graphml` writes their node and edge
lines itself and :func:`read_graph` reads them back by a regular expression (the same bytes, and the
same graph NetworkX's reader gives, several times faster: a 20,000-node folder loads in about 1.5 s
instead of 2.5-3 s).
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from gossipsim.figures.graph_layout import LAYOUT_KEYS, layout

MAX_SAVED_NODES = 20_000
LAYOUT_NODES = 500  # the visit map draws graphs up to this size (plots.MAX_NODES_DRAWN)
FOLDER = "graphs"
_SCALARS = (str, bool, int, float)
_ESCAPED = re.compile('[&<>"\r\n\t]')  # characters ElementTree escapes in an attribute value
_ENTITIES = {
    "amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'",
    "#9": "\t", "#09": "\t", "#10": "\n", "#13": "\r",
}  # fmt: skip
_ENTITY = re.compile("&(" + "|".join(_ENTITIES) + ");")
_ID = '"((?:[^"<&\t\n\r]|' + _ENTITY.pattern + ')*)"'
#: where NetworkX's document opens the graph (the node and edge lines follow)
_GRAPH_OPENING = '<graph edgedefault="undirected">\n'
#: the node and edge lines of :func:`write_graphml`'s attribute-free graphs, and all of them in a row
_BARE_NODE = re.compile(f"    <node id={_ID} />\n")
_BARE_EDGE = re.compile(f"    <edge source={_ID} target={_ID} />\n")
_BARE_BODY = re.compile(f"(?P<nodes>(?:{_BARE_NODE.pattern})*)(?P<edges>(?:{_BARE_EDGE.pattern})*)")


def graph_files(labels: Sequence[str], graphs: Mapping[str, nx.Graph]) -> dict[str, str]:
    """Variant label -> file (relative to the results folder) of its graph; variants with equal
    graphs share the file of the first of them; a variant without a graph is left out."""
    files: dict[str, str] = {}
    written: list[tuple[nx.Graph, str]] = []
    for i, label in enumerate(labels):
        graph = graphs.get(label)
        if graph is None:
            continue
        same = next((name for g, name in written if g is graph or _equal(g, graph)), None)
        if same is None:
            same = f"{FOLDER}/{i + 1}.graphml"
            written.append((graph, same))
        files[label] = same
    return files


def _equal(a: nx.Graph, b: nx.Graph) -> bool:
    """Same nodes in the same order, edges and attributes (a layout already computed aside)."""
    if a.number_of_nodes() != b.number_of_nodes() or a.number_of_edges() != b.number_of_edges():
        return False
    if list(a.nodes) != list(b.nodes) or a.graph != b.graph or a.adj != b.adj:
        return False
    return all(_without_layout(a.nodes[n]) == _without_layout(b.nodes[n]) for n in a)


def _without_layout(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if k not in LAYOUT_KEYS}


def write_graphs(
    folder: Path,
    labels: Sequence[str],
    graphs: Mapping[str, nx.Graph],
    *,
    layouts: bool = True,
    laid_out_only: bool = False,
) -> list[str]:
    """Write each distinct graph to ``folder/graphs/``, with its layout when small enough and
    ``layouts`` is true (else only a layout already computed: the tables are written without
    figures, and a layout costs SciPy's start-up); returns the files written, relative to
    ``folder``. With ``laid_out_only`` only the graphs small enough to carry a layout are written
    (the figures' second pass: a larger graph's file is the one written with the tables)."""
    files = graph_files(labels, graphs)
    names: dict[str, nx.Graph] = {}
    for label, name in files.items():
        graph = graphs[label]
        if laid_out_only and graph.number_of_nodes() > LAYOUT_NODES:
            continue
        if name in names:  # an equal graph: the same layout, not computed again
            first = names[name]
            if graph is not first and layouts and graph.number_of_nodes() <= LAYOUT_NODES:
                for n in graph:
                    graph.nodes[n].update({k: first.nodes[n][k] for k in LAYOUT_KEYS})
            continue
        names[name] = graph
        if layouts and graph.number_of_nodes() <= LAYOUT_NODES:
            layout(graph)
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_graphml(graph, path)
    return list(names)


def write_graphml(graph: nx.Graph, path: str | os.PathLike[str]) -> None:
    """Write ``graph`` as GraphML, as :func:`read_graph` reads it back (labels as text, their types
    in a graph attribute, only attributes GraphML can hold).

    The bytes are ``nx.write_graphml``'s. A graph whose nodes and edges carry no attributes (every
    generated topology of more than :data:`LAYOUT_NODES` nodes) is written by joining its node and
    edge lines into the document NetworkX writes for its graph attributes alone: NetworkX builds an
    XML element per node and edge, about 0.2-0.4 s for a graph of 10,000 nodes."""
    ints = _integer_labels(graph)
    kind = _label_kind(ints)
    if kind == "mixed" or not _bare(graph):  # attributes: NetworkX writes them
        nx.write_graphml(_graphml_ready(graph, ints), path)
        return
    head = nx.Graph()
    head.graph.update(_graph_attributes(graph.graph))
    head.graph["gossipsim_node_labels"] = kind
    buffer = io.BytesIO()
    nx.write_graphml(head, buffer)
    document = buffer.getvalue().decode("utf-8")
    cut = document.index(_GRAPH_OPENING) + len(_GRAPH_OPENING)
    ids = {n: _xml_attribute(str(n)) for n in graph}
    lines = [f'    <node id="{ids[n]}" />\n' for n in graph]
    lines.extend(f'    <edge source="{ids[u]}" target="{ids[v]}" />\n' for u, v in graph.edges())
    with open(path, "wb") as out:
        out.write((document[:cut] + "".join(lines) + document[cut:]).encode("utf-8"))


def _bare(graph: nx.Graph) -> bool:
    """An undirected simple graph whose nodes and edges carry no attributes."""
    if graph.is_directed() or graph.is_multigraph():
        return False
    return not any(graph.nodes[n] for n in graph) and not any(
        d for _, _, d in graph.edges(data=True)
    )


def _xml_attribute(text: str) -> str:
    """``text`` escaped as ElementTree escapes an attribute value."""
    if _ESCAPED.search(text):
        text = (
            text.replace("&", "&amp;")
            .replace("<", "&lt;")
            .replace(">", "&gt;")
            .replace('"', "&quot;")
            .replace("\r", "&#13;")
            .replace("\n", "&#10;")
            .replace("\t", "&#09;")
        )
    return text


def _integer_labels(graph: nx.Graph) -> list[bool]:
    """For each node (in order), whether its label is an integer (``bool`` is not)."""
    return [isinstance(n, int | np.integer) and not isinstance(n, bool) for n in graph]


def _label_kind(ints: Sequence[bool]) -> str:
    """How :func:`read_graph` restores the labels: all integers, none, or some (``mixed``)."""
    return "int" if all(ints) else "str" if not any(ints) else "mixed"


def read_graph(path: str | os.PathLike[str]) -> nx.Graph:
    """A graph written by :func:`write_graphs`, with its node labels' types restored."""
    graph = _read_bare(Path(path))
    if graph is None:
        graph = nx.read_graphml(path, node_type=str)
    kind = graph.graph.pop("gossipsim_node_labels", "str")
    for key in ("node_default", "edge_default"):  # added by the reader, not written by us
        if graph.graph.get(key) == {}:
            del graph.graph[key]
    if kind == "int":
        mapping = {n: int(n) for n in graph}
    elif kind == "mixed":
        mapping = {n: int(n) if graph.nodes[n].get("gossipsim_int_label") else n for n in graph}
    else:
        mapping = {}
    for n in graph:
        graph.nodes[n].pop("gossipsim_int_label", None)
    return nx.relabel_nodes(graph, mapping, copy=True) if mapping else nx.Graph(graph)


def _read_bare(path: Path) -> nx.Graph | None:
    """The graph of a file whose nodes and edges carry no attributes (as :func:`write_graphml`
    writes large generated graphs), as ``nx.read_graphml(path, node_type=str)`` returns it, several
    times faster: its node and edge lines are read by a regular expression and only the rest of
    the document (keys and graph attributes) by NetworkX. ``None`` for any other file, which NetworkX
    then reads whole: lines of another shape, an entity other than those ElementTree writes, a
    parallel edge (NetworkX returns a multigraph)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    start = text.find(_GRAPH_OPENING)
    if start < 0 or text.count(_GRAPH_OPENING) != 1:
        return None
    cut = start + len(_GRAPH_OPENING)
    body = _BARE_BODY.match(text, cut)
    if body is None or body.end() == cut:
        return None
    rest = text[body.end() :]
    if "<node" in rest or "<edge" in rest:
        return None
    nodes = [_xml_text(m) for m in _BARE_NODE.findall(body["nodes"])]
    edges = [(_xml_text(u), _xml_text(v)) for u, _, v, _ in _BARE_EDGE.findall(body["edges"])]
    head = nx.read_graphml(io.BytesIO((text[:cut] + rest).encode("utf-8")), node_type=str)
    graph = nx.Graph()
    graph.graph.update(head.graph)
    graph.add_nodes_from(nodes)
    graph.add_edges_from(edges)
    if graph.number_of_edges() != len(edges):  # a parallel edge: NetworkX's multigraph
        return None
    return graph


def _xml_text(value: str | tuple[str, str]) -> str:
    """An attribute value as the XML parser gives it (the entities ElementTree writes decoded)."""
    text = value if isinstance(value, str) else value[0]
    if "&" in text:
        text = _ENTITY.sub(lambda m: _ENTITIES[m.group(1)], text)
    return text


def _graphml_ready(graph: nx.Graph, ints: Sequence[bool] | None = None) -> nx.Graph:
    """A copy of ``graph`` with labels as text and only attributes GraphML can hold (``ints``:
    :func:`_integer_labels` of it, when the caller has them)."""
    ints = _integer_labels(graph) if ints is None else ints
    kind = _label_kind(ints)
    out = nx.Graph()
    out.graph.update(_graph_attributes(graph.graph))
    out.graph["gossipsim_node_labels"] = kind
    for n, is_int in zip(graph, ints, strict=True):
        attrs = _attributes(graph.nodes[n])
        if kind == "mixed":
            attrs["gossipsim_int_label"] = bool(is_int)
        out.add_node(str(n), **attrs)
    out.add_edges_from((str(u), str(v), _attributes(d)) for u, v, d in graph.edges(data=True))
    return out


#: graph attributes that NetworkX's GraphML reader sets and its writer reads as mappings: the default
#: value of each node or edge attribute (written as the ``<default>`` of that attribute's key)
_DEFAULTS = ("node_default", "edge_default")


def _graph_attributes(attrs: Mapping[Any, Any]) -> dict[str, Any]:
    """The graph's attributes as :func:`_attributes` keeps them, except ``node_default`` and
    ``edge_default``, which stay mappings (of the attributes GraphML can hold): NetworkX's writer
    calls ``.get`` on them, and its reader sets them (empty) on every graph it reads."""
    out = _attributes({k: v for k, v in attrs.items() if k not in _DEFAULTS})
    for key in _DEFAULTS:
        value = attrs.get(key)
        if isinstance(value, Mapping):
            out[key] = _attributes(value)
    return out


def _attributes(attrs: Mapping[Any, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        if value is None:
            continue
        if isinstance(value, np.generic):
            value = value.item()
        out[str(key)] = value if isinstance(value, _SCALARS) else str(value)
    return out
