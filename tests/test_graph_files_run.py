"""Runs on graphs read from files go to the end (issue 20, item 1): every shipped topology file
from a scenario through the CLI, and graphs read by NetworkX's own readers given from Python, are
run, their tables written and read back, and the saved graph is the graph that was run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import networkx as nx
import pytest

import gossipsim as gs
from gossipsim.cli.parser import main
from tests.helpers import to_toml

TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"
SHIPPED = sorted(p for p in TOPOLOGIES.iterdir() if p.suffix in (".graphml", ".edgelist"))
KIND = {".graphml": "graphml", ".edgelist": "edgelist"}


def _scenario(name: str, topology: object) -> dict:
    return {
        "scenario": {"name": name, "seed": 3, "runs": 2, "iterations": 120},
        "topology": topology,
        "model": {"kind": "beta-bernoulli", "prior": {"a": 2, "b": 2}},
        "data": {"points_per_node": 5, "theta": 0.7},
        "unlearning": [{"node": "__first__", "at_iteration": 60}],
    }


def test_every_shipped_topology_file_is_there():
    assert {p.suffix for p in SHIPPED} == {".graphml", ".edgelist"}


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_a_scenario_on_each_shipped_graph_file_writes_its_tables(tmp_path, capsys, path):
    graph = gs.build_topology(KIND[path.suffix], path=path)
    raw = _scenario(path.stem, {"kind": KIND[path.suffix], "path": str(path)})
    raw["unlearning"][0]["node"] = next(iter(graph))
    scenario = tmp_path / "s.toml"
    scenario.write_text(to_toml(raw))
    out = tmp_path / "R"
    code = main(["run", str(scenario), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.err and f"wrote {out}/" in captured.out
    back = gs.load_results(out)
    assert len(back.runs) == 2 and back.runs["iterations"].eq(120).all()
    assert back.requests["node"].tolist() == [raw["unlearning"][0]["node"]] * 2
    saved = back.graphs[path.stem]
    assert set(saved.nodes) == set(graph.nodes) and set(map(frozenset, saved.edges)) == set(
        map(frozenset, graph.edges)
    )
    assert json.loads((out / "summary.json").read_text())["variants"][path.stem]["graph"]
    assert (out / "plots" / "kl_vs_iteration.png").is_file()


def _karate_with_attributes() -> nx.Graph:
    graph = nx.karate_club_graph()
    for node in graph:
        graph.nodes[node]["degree_text"] = str(graph.degree(node))
        graph.nodes[node]["share"] = float(node) / 34
    return graph


WRITERS: dict[str, tuple[Callable, Callable]] = {
    "graphml": (nx.write_graphml, nx.read_graphml),
    "gexf": (nx.write_gexf, nx.read_gexf),
    "gml": (nx.write_gml, nx.read_gml),
    "adjlist": (nx.write_adjlist, nx.read_adjlist),
    "edgelist": (nx.write_edgelist, nx.read_edgelist),
    "graph6": (nx.write_graph6, nx.read_graph6),
    "pajek": (nx.write_pajek, lambda p: nx.Graph(nx.read_pajek(p))),
}


@pytest.mark.parametrize("fmt", WRITERS)
def test_a_graph_read_by_networkx_runs_and_reloads(tmp_path, fmt):
    """NetworkX's readers add graph attributes of their own (GraphML and GEXF: the mappings
    ``node_default`` and ``edge_default``): the results folder keeps what GraphML can hold and the
    tables and the graph read back are the run's."""
    write, read = WRITERS[fmt]
    source = tmp_path / f"g.{fmt}"
    write(
        _karate_with_attributes() if fmt in ("graphml", "gexf", "gml") else nx.karate_club_graph(),
        source,
    )
    graph = read(source)
    res = gs.run(
        _scenario(fmt, graph) | {"unlearning": [{"node": next(iter(graph)), "at_iteration": 60}]},
        out=tmp_path / "R",
    )
    back = gs.load_results(tmp_path / "R")
    assert back.runs.equals(res.runs) and back.metrics.equals(res.metrics)
    assert back.requests.equals(res.requests)
    saved = back.graphs[fmt]
    assert list(saved.nodes) == list(graph.nodes)
    assert set(map(frozenset, saved.edges)) == set(map(frozenset, graph.edges))
