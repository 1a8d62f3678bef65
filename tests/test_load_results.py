"""Tidy tables of a sweep (categorical variant in sweep order, typed swept columns), the results
folder read back by ``gs.load_results``, its graphs (GraphML with the figures' layout) and
``Results.plot``."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

import gossipsim as gs
from gossipsim import api
from gossipsim.cli.parser import main
from gossipsim.figures import graph_layout
from gossipsim.results import graphfiles, reading
from gossipsim.results.tidy import sweep_columns
from tests.helpers import base_scenario, to_toml

SWEEP = {"topology.nodes": [8, 6], "scheduler.kind": ["simple-random-walk", "metropolis-hastings"]}


def _sweep(**extra) -> dict:
    return base_scenario(
        scenario={"name": "s", "seed": 3, "runs": 4, "iterations": 80},
        topology={"kind": "ring", "nodes": 6},
        unlearning=[{"node": 2, "at_iteration": 30}],
        sweep=SWEEP,
        **extra,
    )


@pytest.fixture(scope="module")
def swept():
    return gs.run(_sweep())


def test_variant_is_an_ordered_categorical_in_the_sweep_order(swept):
    labels = [v.label for v in swept.study.variants]
    assert labels == [
        "nodes=8, kind=simple-random-walk", "nodes=8, kind=metropolis-hastings",
        "nodes=6, kind=simple-random-walk", "nodes=6, kind=metropolis-hastings",
    ]  # fmt: skip
    for name, table in swept.tables().items():
        dtype = table["variant"].dtype
        assert isinstance(dtype, pd.CategoricalDtype) and dtype.ordered, name
        assert list(dtype.categories) == labels, name  # not alphabetical
    # a groupby lists the variants in the sweep's order
    means = swept.runs.groupby("variant", observed=True)["cover_iteration"].mean()
    assert list(means.index) == labels


def test_one_typed_column_per_swept_key_beside_the_variant(swept):
    values = {v.label: v.values for v in swept.study.variants}
    for name, table in swept.tables().items():
        if name == "failures":
            assert len(table) == 0
        assert list(table.columns[:3]) == ["variant", "topology.nodes", "scheduler.kind"], name
        assert str(table["topology.nodes"].dtype) == "Int64"
        assert table["scheduler.kind"].dtype == pd.Series(["x"]).dtype  # pandas' string type
        labels = table["variant"].astype(str)
        # each row's values, looked up independently from the study's variants
        assert table["topology.nodes"].tolist() == [values[v]["topology.nodes"] for v in labels]
        assert table["scheduler.kind"].tolist() == [values[v]["scheduler.kind"] for v in labels]
    # the ring's visits table has as many rows per variant as that variant has nodes
    counts = swept.visits.groupby("variant", observed=True).size()
    assert counts.tolist() == [8, 8, 6, 6]


def test_cover_moves_is_the_cover_iteration_minus_one(swept):
    runs = swept.runs
    assert str(runs["cover_moves"].dtype) == "Int64"
    assert (
        list(runs.columns).index("cover_moves") == list(runs.columns).index("cover_iteration") + 1
    )
    covered = runs["cover_iteration"].notna()
    assert covered.any()
    assert (runs.loc[covered, "cover_moves"] == runs.loc[covered, "cover_iteration"] - 1).all()
    assert (runs["cover_moves"].isna() == ~covered).all()
    cover = swept.summary()["variants"][swept.variants[0]]["cover"]
    assert "cover_iteration" in cover["unit"]


def test_whole_section_sweeps_and_cases_give_a_column_per_key():
    raw = base_scenario(scenario={"name": "w", "seed": 1, "runs": 2, "iterations": 40})
    raw["sweep"] = {
        "topology": [{"kind": "ring", "nodes": 6}, {"kind": "random_regular", "degree": 3, "nodes": 8}],
        "cases": [{"label": "a", "protocol.retrain_baseline": True}, {"label": "b", "data.theta": 0.5}],
    }  # fmt: skip
    res = gs.run(raw)
    runs = res.runs
    assert list(runs.columns[:6]) == [  # keys in the order the variants first set them
        "variant", "protocol.retrain_baseline", "topology.kind", "topology.nodes",
        "topology.degree", "data.theta",
    ]  # fmt: skip
    assert str(runs["topology.degree"].dtype) == "Int64"
    assert str(runs["protocol.retrain_baseline"].dtype) == "boolean"
    assert runs["data.theta"].dtype == np.float64
    first = runs.drop_duplicates("variant")
    assert first["topology.degree"].isna().tolist() == [True, False, True, False]
    assert first["data.theta"].isna().tolist() == [True, True, False, False]
    assert first["topology.kind"].tolist() == ["ring", "random_regular"] * 2


def test_values_of_other_types_are_json_text_and_missing_values_stay_missing():
    columns = sweep_columns([{"a.x": [1, 2], "a.y": 1}, {"a.x": "s", "a.y": 2.5}, {"a.z": True}])
    assert list(columns["a.x"])[:2] == ["[1, 2]", "s"] and pd.isna(columns["a.x"][2])
    assert pd.Series(columns["a.y"]).dtype == np.float64 and np.isnan(columns["a.y"][2])
    assert str(columns["a.z"].dtype) == "boolean" and columns["a.z"][0] is pd.NA


# ------------------------------------------------------------------------------- load_results


def _assert_same(res: gs.Results, back: gs.Results) -> None:
    assert back.variants == res.variants
    for name, table in res.tables().items():
        pd.testing.assert_frame_equal(back.tables()[name], table, obj=name)
    assert back.engines == res.engines
    assert set(back.theory) == set(res.theory)


@pytest.mark.parametrize("copies", ["parquet", "csv"])
@pytest.mark.parametrize("case", ["sweep", "florentine"])
def test_load_results_gives_the_tables_gs_run_gave(tmp_path, copies, case):
    if case == "sweep":
        raw = _sweep()
    else:  # node labels are names
        raw = base_scenario(
            scenario={"name": "f", "seed": 2, "runs": 3, "iterations": 60},
            topology={"kind": "florentine"},
            unlearning=[{"node": "Pazzi", "at_iteration": 20}],
            sweep={"scheduler.start": ["Medici", "uniform"]},
        )
    if copies == "parquet":
        pytest.importorskip("pyarrow")
    res = gs.run(raw, out=tmp_path, plots=False)
    if copies == "csv":
        for path in tmp_path.glob("*.parquet"):
            path.unlink()
    else:
        assert (tmp_path / "metrics.parquet").is_file()
    back = gs.load_results(tmp_path)
    assert isinstance(back, gs.Results)
    _assert_same(res, back)
    assert set(back.graphs) == set(res.graphs) == set(res.variants)
    for label, graph in res.graphs.items():
        loaded = back.graphs[label]
        assert list(loaded.nodes) == list(graph.nodes)
        assert {frozenset(e) for e in loaded.edges} == {frozenset(e) for e in graph.edges}
        assert graph_layout.layout(loaded) == graph_layout.layout(graph)


def test_load_results_without_the_scenario_inputs(tmp_path):
    """The scenario's data file and the scenario file itself are gone: the folder still loads."""
    data = tmp_path / "obs.csv"
    data.write_text(
        "node,x\n" + "".join(f"{n},{(n + k) % 2}\n" for n in range(10) for k in range(4))
    )
    raw = base_scenario(scenario={"name": "d", "seed": 5, "runs": 3, "iterations": 40})
    raw["data"] = {"path": "obs.csv"}
    path = tmp_path / "d.toml"
    path.write_text(to_toml(raw))
    res = gs.run(path, out=tmp_path / "R", plots=False)
    data.unlink()
    path.unlink()
    back = gs.load_results(tmp_path / "R")
    _assert_same(res, back)
    assert back.study.variants[0].scenario.data.path == res.study.variants[0].scenario.data.path


def test_load_results_bad_folders_are_one_line_errors(tmp_path):
    with pytest.raises(gs.ConfigError, match="DIR"):
        gs.load_results(tmp_path / "nowhere")
    with pytest.raises(gs.ConfigError, match="no summary.json"):
        gs.load_results(tmp_path)
    gs.run(_sweep(), out=tmp_path, runs=2, plots=False)
    summary = json.loads((tmp_path / "summary.json").read_text())
    summary["scenario"]["no_such_section"] = {}  # a scenario of another version
    for key in ("files", "summary_sha256"):  # (whose summaries had no checksums)
        summary.pop(key, None)
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(gs.ConfigError, match="DIR.*not valid for this gossipsim"):
        gs.load_results(tmp_path)


# ------------------------------------------------------------------------------- graphs


def test_graphs_are_saved_once_per_distinct_graph_with_their_layout(tmp_path, monkeypatch):
    def make_plots(r, folder):
        r.plot(folder, which=["visits"])

    res = gs.run(_sweep(), out=tmp_path, runs=2, plots=False)
    summary = json.loads((tmp_path / "summary.json").read_text())
    files = [summary["variants"][label]["graph"] for label in res.variants]
    assert files == ["graphs/1.graphml", "graphs/1.graphml", "graphs/3.graphml", "graphs/3.graphml"]
    assert sorted(p.name for p in (tmp_path / "graphs").iterdir()) == ["1.graphml", "3.graphml"]
    # without figures no layout is computed (it would cost SciPy's start-up); drawing adds it
    unplotted = gs.load_results(tmp_path).graphs[res.variants[0]]
    assert "layout_x" not in unplotted.nodes[0]
    res.write_plots(tmp_path, make_plots)
    back = gs.load_results(tmp_path)
    ring = back.graphs[res.variants[0]]
    assert nx.is_isomorphic(ring, nx.cycle_graph(8)) and list(ring) == list(range(8))
    # the saved layout is used, never computed again
    monkeypatch.setattr(nx, "kamada_kawai_layout", lambda *a, **k: pytest.fail("recomputed"))
    pos = graph_layout.layout(ring)
    assert pos[0] == (ring.nodes[0]["layout_x"], ring.nodes[0]["layout_y"])
    assert back.plot(which=["visits"])["visits"] is not None


def test_the_figures_rewrite_only_graphs_that_carry_a_layout(tmp_path, monkeypatch):
    """A graph too large for a layout is written once, with the tables (GraphML of a 10,000-node
    graph costs about half a second); the figures' pass leaves its file as it was."""
    res = gs.run(_sweep(), out=tmp_path, runs=2, plots=False)
    files = sorted((tmp_path / "graphs").iterdir())
    before = {p.name: (p.stat().st_ino, p.read_bytes()) for p in files}
    monkeypatch.setattr(graphfiles, "LAYOUT_NODES", 7)  # the 6-node ring gets one, not the 8
    res.write_plots(tmp_path, lambda r, folder: r.plot(folder, which=["visits"]))
    after = {p.name: (p.stat().st_ino, p.read_bytes()) for p in sorted(files)}
    assert after["1.graphml"] == before["1.graphml"]  # 8 nodes: not rewritten
    assert after["3.graphml"][0] != before["3.graphml"][0]  # rewritten, with its layout
    back = gs.load_results(tmp_path).graphs
    assert "layout_x" not in back[res.variants[0]].nodes[0]
    assert "layout_x" in back[res.variants[2]].nodes[0]


def test_graphml_keeps_scalar_attributes_and_label_types(tmp_path):
    graph = nx.karate_club_graph()  # "club" text, "weight" integers, a graph name
    graph.add_node("x", pos=(0.5, 1.0), note=None)
    graph.add_edge("x", 0, flag=True)
    graphfiles.write_graphs(tmp_path, ["k"], {"k": graph})
    back = graphfiles.read_graph(tmp_path / "graphs" / "1.graphml")
    assert list(back) == list(graph)  # 0..33 as integers, "x" as text
    assert back.graph == {"name": "Zachary's Karate Club"}
    assert back.nodes[5]["club"] == graph.nodes[5]["club"]
    assert back.edges[0, 1]["weight"] == graph.edges[0, 1]["weight"] == 4
    assert back.nodes["x"]["pos"] == "(0.5, 1.0)" and "note" not in back.nodes["x"]
    assert back.edges["x", 0]["flag"] is True
    assert back.nodes[3]["layout_x"] == graph.nodes[3]["layout_x"]  # the exact float


def _bare_graphs() -> dict[str, nx.Graph]:
    """Graphs without node or edge attributes, which write_graphml writes without NetworkX's
    element tree: integer labels in any order, text labels that need escaping, graph attributes,
    a self-loop, no edges, no nodes."""
    shuffled = nx.Graph()
    edges = list(nx.gnp_random_graph(60, 0.1, seed=5).edges())
    np.random.default_rng(0).shuffle(edges)
    shuffled.add_edges_from((int(u) * 7 + 3, int(v) * 7 + 3) for u, v in edges)
    text = nx.relabel_nodes(nx.path_graph(5), {0: 'a&<b>"\n\t\r', 1: "b", 2: "3", 3: "é", 4: " "})
    text.add_edge("b", "b")
    return {
        "regular": nx.random_regular_graph(3, 200, seed=1),
        "shuffled": shuffled,
        "text": text,
        "attributes": nx.Graph(nx.path_graph(3), name="p", k=3, ratio=0.5, pair=(1, 2)),
        "no edges": nx.empty_graph(4),
        "no nodes": nx.Graph(),
    }


@pytest.mark.parametrize("name", list(_bare_graphs()))
def test_graphml_of_a_bare_graph_is_networkx_s_bytes(tmp_path, name):
    graph = _bare_graphs()[name]
    ours, theirs = tmp_path / "ours.graphml", tmp_path / "theirs.graphml"
    graphfiles.write_graphml(graph, ours)
    nx.write_graphml(graphfiles._graphml_ready(graph), theirs)  # NetworkX's element tree
    assert ours.read_bytes() == theirs.read_bytes()
    back = graphfiles.read_graph(ours)
    assert list(back) == list(graph) and set(map(frozenset, back.edges)) == set(
        map(frozenset, graph.edges)
    )


def _same_graph(a: nx.Graph, b: nx.Graph) -> bool:
    """The same class, nodes (labels and their types, in order), adjacency in order, attributes."""
    return (
        type(a) is type(b)
        and [(type(n), n, d) for n, d in a.nodes(data=True)]
        == [(type(n), n, d) for n, d in b.nodes(data=True)]
        and [list(a.adj[n].items()) for n in a] == [list(b.adj[n].items()) for n in b]
        and a.graph == b.graph
    )


def _read_by_networkx(path: Path, monkeypatch) -> nx.Graph:
    with monkeypatch.context() as m:
        m.setattr(graphfiles, "_read_bare", lambda path: None)
        return graphfiles.read_graph(path)


@pytest.mark.parametrize("name", list(_bare_graphs()))
def test_a_bare_graph_is_read_as_networkx_reads_it(tmp_path, monkeypatch, name):
    """The node and edge lines read by a regular expression: the graph NetworkX's reader gives,
    adjacency order included (the reader is used: not None), for every graph of the writer's test."""
    graph = _bare_graphs()[name]
    path = tmp_path / "g.graphml"
    graphfiles.write_graphml(graph, path)
    assert (graphfiles._read_bare(path) is not None) == (graph.number_of_nodes() > 0)
    assert graphfiles._read_bare(path) is None or _same_graph(
        graphfiles._read_bare(path), nx.read_graphml(path, node_type=str)
    )
    assert _same_graph(graphfiles.read_graph(path), _read_by_networkx(path, monkeypatch))


def test_other_graphml_is_left_to_networkx(tmp_path, monkeypatch):
    """Files the fast reader does not take whole: attributes, a parallel edge (NetworkX gives a
    multigraph), an entity ElementTree does not write, a directed graph, a node after the edges."""
    path = tmp_path / "g.graphml"
    graphfiles.write_graphml(nx.path_graph(4), path)
    bare = path.read_text()
    edge = '    <edge source="0" target="1" />\n'
    variants = {
        "parallel edge": bare.replace(edge, edge + '    <edge source="1" target="0" />\n'),
        "character reference": bare.replace('<node id="3" />', '<node id="&#51;" />'),
        "directed": bare.replace('edgedefault="undirected"', 'edgedefault="directed"'),
        "node after the edges": bare.replace('    <node id="3" />\n', "").replace(
            "    <data", '    <node id="3" />\n    <data'
        ),
    }
    for name, text in variants.items():
        path.write_text(text)
        assert graphfiles._read_bare(path) is None, name
        assert _same_graph(graphfiles.read_graph(path), _read_by_networkx(path, monkeypatch))
    graphfiles.write_graphml(nx.Graph([(0, 1, {"weight": 2.5})]), path)
    assert graphfiles._read_bare(path) is None
    assert isinstance(graphfiles.read_graph(tmp_path / "g.graphml"), nx.Graph)


def test_graphml_of_mixed_labels_or_attributes_goes_through_networkx(tmp_path):
    mixed = nx.relabel_nodes(nx.path_graph(3), {0: "a"})  # "a", 1, 2: a node attribute each
    weighted = nx.Graph([(0, 1, {"weight": 2.5})])
    for graph in (mixed, weighted):
        theirs = tmp_path / "theirs.graphml"
        nx.write_graphml(graphfiles._graphml_ready(graph), theirs)
        graphfiles.write_graphml(graph, tmp_path / "g.graphml")
        assert (tmp_path / "g.graphml").read_bytes() == theirs.read_bytes()
        back = graphfiles.read_graph(tmp_path / "g.graphml")
        assert list(back) == list(graph)
    assert back.edges[0, 1]["weight"] == 2.5


@pytest.mark.parametrize("parquet", [True, False])
def test_mixed_node_labels_come_back_as_the_graph_s_labels(tmp_path, parquet):
    """A graph labelled 0..5 with two nodes renamed "a" and "hub": the node columns hold 2 and "a"
    side by side, text in the files; load_results gives back the labels themselves, from the CSV
    files and from the Parquet copies, and the tables equal those gs.run returned."""
    graph = nx.relabel_nodes(nx.cycle_graph(6), {0: "a", 3: "hub"})
    raw = base_scenario(scenario={"name": "m", "seed": 4, "runs": 3, "iterations": 60})
    raw["topology"] = graph
    raw["unlearning"] = [{"node": "a", "at_iteration": 20}, {"node": 2, "at_iteration": 30}]
    res = gs.run(raw)
    res.write(tmp_path, parquet=parquet)
    assert (tmp_path / "metrics.parquet").exists() == parquet
    back = gs.load_results(tmp_path)
    assert set(map(type, back.visits["node"])) == {int, str}
    assert list(back.requests["node"][:2]) == ["a", 2]
    _assert_same(res, back)


def test_node_labels_that_share_a_text_stay_text(tmp_path):
    """3 and "3" in one graph: which one a cell "3" means is not known, so the cells stay text."""
    res = gs.run(base_scenario(scenario={"name": "t", "seed": 1, "runs": 2, "iterations": 30}))
    res.write(tmp_path)
    graphs = [nx.Graph([(3, "3")])]
    tables = {name: table.copy() for name, table in res.tables().items()}
    tables["visits"]["node"] = tables["visits"]["node"].astype(str).astype(object)
    reading.restore_node_labels(tables, graphs)
    assert set(map(type, tables["visits"]["node"])) == {str}
    reading.restore_node_labels(tables, [nx.Graph([(3, "a")]), nx.path_graph(50)])
    assert set(map(type, tables["visits"]["node"])) == {int}


def test_a_graph_given_from_python_comes_back_with_the_folder(tmp_path):
    """A study whose topology is a NetworkX graph object: summary.json describes it, graphs/ keeps
    it, and load_results rebuilds the study from that copy (labels and attributes)."""
    graph = nx.florentine_families_graph()
    nx.set_edge_attributes(graph, 1e6, "rate_bps")
    raw = base_scenario(scenario={"name": "g", "seed": 4, "runs": 3, "iterations": 60})
    raw["topology"] = graph
    raw["unlearning"] = [{"node": "Medici", "at_iteration": 20}]
    res = gs.run(raw, out=tmp_path, plots=False)
    back = gs.load_results(tmp_path)
    _assert_same(res, back)
    rebuilt = back.study.graph
    assert list(rebuilt.nodes) == list(graph.nodes)
    assert rebuilt.edges["Medici", "Salviati"]["rate_bps"] == 1e6
    assert back.study.variants[0].scenario.unlearning[0].node == "Medici"


def test_graphs_drawn_per_run_are_not_saved(tmp_path):
    raw = base_scenario(
        scenario={"name": "p", "seed": 4, "runs": 3, "iterations": 40},
        topology={"kind": "barabasi_albert", "nodes": 12, "m": 2, "draw": "per-run"},
    )
    res = gs.run(raw, out=tmp_path, plots=False)
    assert res.graphs == {} and not (tmp_path / "graphs").exists()
    entry = json.loads((tmp_path / "summary.json").read_text())["variants"][res.variants[0]]
    assert entry["graph"] is None and "per-run" in entry["graph_note"]
    _assert_same(res, gs.load_results(tmp_path))


def test_graphs_beyond_the_size_limit_are_not_saved(tmp_path, monkeypatch):
    monkeypatch.setattr(api, "MAX_SAVED_NODES", 7)
    res = gs.run(_sweep(), out=tmp_path, runs=2, plots=False)
    assert set(res.graphs) == set(res.variants[2:])  # the rings of 6 nodes
    entry = json.loads((tmp_path / "summary.json").read_text())["variants"][res.variants[0]]
    assert entry["graph"] is None and "not saved" in entry["graph_note"]
    assert set(gs.load_results(tmp_path).graphs) == set(res.variants[2:])


# ------------------------------------------------------------------------------- plot


def test_plot_returns_figures_or_writes_files(tmp_path, swept):
    figures = swept.plot()
    assert {"kl_vs_iteration", "latency", "cover_time", "visits"} <= set(figures)
    assert all(isinstance(f, Figure) for f in figures.values())
    assert not list(tmp_path.iterdir())
    written = swept.plot(tmp_path / "p", which=["cover_time", "visits"], fmt="svg")
    assert sorted(written) == ["cover_time", "visits"]
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ["cover_time.svg", "visits.svg"]
    assert list(swept.plot(which="visits")) == ["visits"]  # one figure by its name
    with pytest.raises(gs.ConfigError, match=r"^which: unknown figure \['nope'\]"):
        swept.plot(which=["nope"])
    with pytest.raises(gs.ConfigError, match="^fmt"):
        swept.plot(tmp_path, fmt="gif")


def test_the_plot_command_reads_the_folder_with_load_results(tmp_path, monkeypatch, capsys):
    gs.run(_sweep(), out=tmp_path, runs=2, plots=False)
    monkeypatch.setattr(reading, "parquet_available", lambda: False)  # the CSV files only
    from gossipsim.cli import folders

    monkeypatch.setattr(folders, "_graphs", lambda study: pytest.fail("graphs built again"))
    assert main(["plot", str(tmp_path), "--figure", "visits", "--figure", "cover_time"]) == 0
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "cover_time.png", "visits.png",
    ]  # fmt: skip
    assert main(["plot", str(tmp_path), "--figure", "latency"]) == 0  # one more, the others kept
    assert len(list((tmp_path / "plots").iterdir())) == 3
    capsys.readouterr()
    assert main(["plot", str(tmp_path), "--figure", "visit"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gossipsim: error: --figure: unknown figure 'visit'; allowed: ")
    assert "\n" not in err
