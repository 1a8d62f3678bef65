"""Tests for gossipsim.topology: every kind, the shipped graph files, label parsing and each error."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import gossipsim as gs
from gossipsim.cli.parser import main
from gossipsim.errors import ConfigError
from gossipsim.topology import (
    ARRAY_KINDS,
    TOPOLOGY_KINDS,
    OutOfRange,
    ParamSpec,
    TopologyKind,
    TopologySpec,
    build_indexed,
    build_topology,
    check_graph,
    parse_label,
    planned_size,
    reference_table,
    register,
    unregister,
)
from gossipsim.topology.arrays import erdos_renyi_edges
from tests.helpers import base_scenario

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGIES = ROOT / "topologies"
HARTFORD = TOPOLOGIES / "hartford_drug.edgelist"
LANL = TOPOLOGIES / "lanl_routes.graphml"

RANDOM_PARAMS: dict[str, dict[str, object]] = {
    "erdos_renyi": {"p": 0.3},
    "random_regular": {"degree": 3},
    "barabasi_albert": {"m": 2},
    "watts_strogatz": {"k": 4, "p": 0.2},
    "random_geometric": {"radius": 0.6},
}


def edges(graph: nx.Graph) -> list[tuple[object, object]]:
    return sorted(tuple(sorted(e)) for e in graph.edges())


def raises_for(key: str, *args: object, **kwargs: object) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        build_topology(*args, **kwargs)  # type: ignore[arg-type]
    assert info.value.key == key
    assert str(info.value).startswith(f"{key}: ")
    return info.value


# --- specs -----------------------------------------------------------------------------------------


def test_kinds_registry() -> None:
    assert list(TOPOLOGY_KINDS) == [
        "complete",
        "ring",
        "star",
        "path",
        "grid",
        "erdos_renyi",
        "random_regular",
        "barabasi_albert",
        "watts_strogatz",
        "random_geometric",
        "karate",
        "florentine",
        "les_miserables",
        "davis",
        "edgelist",
        "graphml",
    ]
    for name, spec in TOPOLOGY_KINDS.items():
        assert isinstance(spec, TopologySpec) and spec.name == name and spec.description
        for pname, ps in spec.params.items():
            assert isinstance(ps, ParamSpec) and ps.name == pname
            assert ps.type in (int, float, str) and ps.check
    assert {k for k, s in TOPOLOGY_KINDS.items() if s.random} == set(RANDOM_PARAMS)
    assert {k for k, s in TOPOLOGY_KINDS.items() if s.from_file} == {"edgelist", "graphml"}


# --- deterministic kinds -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "n_edges"), [("complete", 45), ("ring", 10), ("star", 9), ("path", 9)]
)
def test_simple_kinds(kind: str, n_edges: int) -> None:
    g = build_topology(kind, 10)
    assert type(g) is nx.Graph
    assert sorted(g.nodes) == list(range(10))
    assert g.number_of_edges() == n_edges
    assert nx.is_connected(g)


def test_star_hides_networkx_offset() -> None:
    g = build_topology("star", 10)
    assert g.number_of_nodes() == 10
    assert g.degree[0] == 9
    assert all(g.degree[i] == 1 for i in range(1, 10))


def test_two_node_graphs() -> None:
    for kind in ("complete", "ring", "star", "path"):
        assert edges(build_topology(kind, 2)) == [(0, 1)]


@pytest.mark.parametrize(
    ("nodes", "params", "shape"),
    [
        (12, {}, (3, 4)),
        (16, {}, (4, 4)),
        (7, {}, (1, 7)),  # prime: a 1 x 7 grid
        (None, {"rows": 2, "cols": 5}, (2, 5)),
        (12, {"rows": 2}, (2, 6)),
        (12, {"cols": 2}, (6, 2)),
        (12, {"rows": 3, "cols": 4}, (3, 4)),
    ],
)
def test_grid_shape(nodes: int | None, params: dict[str, int], shape: tuple[int, int]) -> None:
    rows, cols = shape
    g = build_topology("grid", nodes, params)
    assert sorted(g.nodes) == list(range(rows * cols))
    assert g.number_of_edges() == rows * (cols - 1) + (rows - 1) * cols
    # row-major numbering: node i*cols + j is (i, j) of networkx's grid
    expected = nx.relabel_nodes(nx.grid_2d_graph(rows, cols), lambda ij: ij[0] * cols + ij[1])
    assert edges(g) == edges(expected)


def test_grid_errors() -> None:
    raises_for("topology.nodes", "grid", 12, {"rows": 3, "cols": 5})
    raises_for("topology.rows", "grid", 12, {"rows": 5})
    raises_for("topology.cols", "grid", None, {"rows": 3})
    raises_for("topology.nodes", "grid", None, {})
    raises_for("topology.rows", "grid", None, {"rows": 0, "cols": 4})
    raises_for("topology.rows", "grid", None, {"rows": 1, "cols": 1})


# --- random kinds --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(RANDOM_PARAMS))
def test_random_kinds_deterministic(kind: str) -> None:
    params = RANDOM_PARAMS[kind]
    a = build_topology(kind, 40, params, seed=7)
    b = build_topology(kind, 40, params, seed=7)
    assert sorted(a.nodes) == list(range(40))
    assert nx.is_connected(a)
    assert edges(a) == edges(b)
    # an int seed and SeedSequence(int) agree; Generators with the same state agree
    assert edges(build_topology(kind, 40, params, seed=np.random.SeedSequence(7))) == edges(a)
    g1 = build_topology(kind, 40, params, seed=np.random.default_rng(3))
    g2 = build_topology(kind, 40, params, seed=np.random.default_rng(3))
    assert edges(g1) == edges(g2)
    others = [edges(build_topology(kind, 40, params, seed=s)) for s in range(1, 4)]
    assert any(e != edges(a) for e in others)


def test_random_regular_degrees() -> None:
    g = build_topology("random_regular", 1000, {"degree": 3}, seed=1)
    assert g.number_of_nodes() == 1000
    assert {d for _, d in g.degree} == {3}


@pytest.mark.parametrize("seed", [1, 12])
def test_documented_equalities_with_networkx(seed) -> None:
    """docs/scenarios.md: erdos_renyi is NetworkX's fast_gnp_random_graph for nx_seed(seed);
    random_geometric's points are default_rng(nx_seed(seed)).random((n, 2))."""
    from gossipsim.topology.build import nx_seed

    g = build_topology("erdos_renyi", 60, {"p": 0.1}, seed=seed)
    ref = nx.fast_gnp_random_graph(60, 0.1, seed=nx_seed(seed))
    assert sorted(g.edges()) == sorted(ref.edges())
    geo = build_topology("random_geometric", 40, {"radius": 0.5}, seed=seed)
    points = np.random.default_rng(nx_seed(seed)).random((40, 2))
    np.testing.assert_array_equal([geo.nodes[i]["pos"] for i in range(40)], points)


def test_random_geometric_positions() -> None:
    g = build_topology("random_geometric", 200, {"radius": 0.2}, seed=2)
    for u, v in g.edges():
        (x1, y1), (x2, y2) = g.nodes[u]["pos"], g.nodes[v]["pos"]
        assert math.hypot(x1 - x2, y1 - y2) <= 0.2
    pos = np.array([g.nodes[i]["pos"] for i in range(200)])
    assert pos.min() >= 0 and pos.max() < 1


def test_float_params_accept_ints() -> None:
    g = build_topology("erdos_renyi", 5, {"p": 1}, seed=1)
    assert g.number_of_edges() == 10


# --- bundled graphs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "count", "label"),
    [
        ("karate", 34, 0),
        ("florentine", 15, "Medici"),
        ("les_miserables", 77, "Valjean"),
        ("davis", 32, "E1"),
    ],
)
def test_bundled_graphs(kind: str, count: int, label: object) -> None:
    g = build_topology(kind)
    assert g.number_of_nodes() == count
    assert label in g
    assert nx.is_connected(g)
    assert build_topology(kind, count).number_of_nodes() == count


def test_bundled_nodes_mismatch() -> None:
    err = raises_for("topology.nodes", "karate", 30)
    assert "34" in str(err)


# --- files ---------------------------------------------------------------------------------------


def test_shipped_hartford() -> None:
    g = build_topology("edgelist", path=HARTFORD)
    assert (g.number_of_nodes(), g.number_of_edges()) == (193, 273)
    assert nx.is_connected(g)
    assert all(isinstance(n, int) for n in g.nodes)
    assert build_topology("edgelist", 193, {"path": str(HARTFORD)}).number_of_nodes() == 193


def test_shipped_lanl() -> None:
    g = build_topology("graphml", path=LANL)
    assert (g.number_of_nodes(), g.number_of_edges()) == (1281, 1296)
    assert nx.is_connected(g)
    assert all(isinstance(n, int) for n in g.nodes)
    assert g.nodes[0]["rtt_ms"] == 0.0
    assert all(isinstance(d["rtt_ms"], float) for _, d in g.nodes(data=True))


def test_relative_path_resolves_against_base_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = build_topology("edgelist", path="hartford_drug.edgelist", base_dir=TOPOLOGIES)
    assert g.number_of_nodes() == 193
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (tmp_path / "topologies").mkdir()
    (tmp_path / "topologies" / "h.edgelist").write_text(HARTFORD.read_text())
    g = build_topology("edgelist", path="../topologies/h.edgelist", base_dir=scenarios)
    assert g.number_of_nodes() == 193
    # without base_dir: the current directory
    (tmp_path / "g.edgelist").write_text("0 1\n1 2\n")
    monkeypatch.chdir(tmp_path)
    assert build_topology("edgelist", path="g.edgelist").number_of_nodes() == 3
    raises_for("topology.path", "edgelist", path="g.edgelist", base_dir=scenarios)


def test_edgelist_format(tmp_path: Path) -> None:
    f = tmp_path / "g.csv"
    f.write_text("# header\n3 4\n4,a3, 2.5\n\n a3\t3 x  # trailing comment\n3.0 3 7\n")
    g = build_topology("edgelist", path=f)
    assert 3 in g and "3" not in g  # integer-looking labels become ints
    assert set(g.nodes) == {3, 4, "a3", "3.0"}
    assert g.edges[4, "a3"]["weight"] == 2.5
    assert "weight" not in g.edges["a3", 3]  # non-numeric extra column ignored
    assert g.edges["3.0", 3]["weight"] == 7.0


def test_integer_label_agreement(tmp_path: Path) -> None:
    f = tmp_path / "g.edgelist"
    f.write_text("3 4\n")
    g = build_topology("edgelist", path=f)
    assert 3 in g and isinstance(next(iter(g.nodes)), int)
    gml = tmp_path / "g.graphml"
    nx.write_graphml(nx.Graph([("3", "b"), ("b", "-4")]), gml)
    assert set(build_topology("graphml", path=gml).nodes) == {3, "b", -4}


def test_label_collision(tmp_path: Path) -> None:
    f = tmp_path / "g.edgelist"
    f.write_text("3 03\n03 4\n")
    raises_for("topology.path", "edgelist", path=f)


def test_directed_multigraph_graphml(tmp_path: Path) -> None:
    """Refused, as a DiGraph or MultiGraph given from Python is (issue 21, item 13)."""
    gml = tmp_path / "d.graphml"
    nx.write_graphml(nx.MultiDiGraph([(1, 2), (2, 1), (1, 2), (2, 3)]), gml)
    assert "directed" in str(raises_for("topology.path", "graphml", path=gml))
    nx.write_graphml(nx.MultiGraph([(1, 2), (1, 2), (2, 3)]), gml)
    assert "1 parallel edge" in str(raises_for("topology.path", "graphml", path=gml))
    nx.write_graphml(nx.Graph([(1, 2), (2, 3)]), gml)
    g = build_topology("graphml", path=gml)
    assert type(g) is nx.Graph and edges(g) == [(1, 2), (2, 3)]


def test_file_errors(tmp_path: Path) -> None:
    err = raises_for("topology.path", "edgelist", path=tmp_path / "missing.edgelist")
    assert "does not exist" in str(err)
    bad = tmp_path / "bad.graphml"
    bad.write_text("<graphml><graph><node id='1'>this is not graphml")
    err = raises_for("topology.path", "graphml", path=bad)
    assert "cannot read GraphML" in str(err)
    one = tmp_path / "one.edgelist"
    one.write_text("1 2\n3\n")
    assert ":2:" in str(raises_for("topology.path", "edgelist", path=one))
    binary = tmp_path / "bin.edgelist"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    raises_for("topology.path", "edgelist", path=binary)
    empty = tmp_path / "empty.edgelist"
    empty.write_text("# nothing\n")
    raises_for("topology.path", "edgelist", path=empty)
    raises_for("topology.path", "edgelist", path=tmp_path)
    raises_for("topology.path", "edgelist")  # missing
    raises_for("topology.path", "ring", 5, path=HARTFORD)
    raises_for("topology.nodes", "edgelist", 100, path=HARTFORD)
    raises_for("topology.nodes", "graphml", 100, path=LANL)


# --- parse_label ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("3", 3),
        (" 12 ", 12),
        ("-4", -4),
        ("+5", 5),
        ("0", 0),
        ("a3", "a3"),
        ("3.0", "3.0"),
        ("1e3", "1e3"),
        ("1_000", "1_000"),
        (" x y ", "x y"),
        ("", ""),
    ],
)
def test_parse_label(text: str, label: object) -> None:
    got = parse_label(text)
    assert got == label and type(got) is type(label)


# --- check_graph ---------------------------------------------------------------------------------


def test_self_loops_dropped_with_warning() -> None:
    g = nx.Graph([(0, 1), (1, 1), (2, 2), (1, 2)])
    with pytest.warns(UserWarning, match="dropped 2 self-loops"):
        h = check_graph(g)
    assert nx.number_of_selfloops(h) == 0
    assert nx.number_of_selfloops(g) == 2  # input untouched
    assert h is not g


def test_self_loop_in_file_warns(tmp_path: Path) -> None:
    f = tmp_path / "g.edgelist"
    f.write_text("1 1\n1 2\n")
    with pytest.warns(UserWarning, match="topology: dropped 1 self-loop"):
        g = build_topology("edgelist", path=f)
    assert edges(g) == [(1, 2)]


def test_check_graph_converts() -> None:
    d = nx.DiGraph([(0, 1), (1, 0), (1, 2)])
    d.nodes[0]["x"] = 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = check_graph(d)
    assert type(g) is nx.Graph and edges(g) == [(0, 1), (1, 2)]
    assert g.nodes[0]["x"] == 1
    m = nx.MultiGraph([(0, 1), (0, 1), (1, 2)])
    assert check_graph(m).number_of_edges() == 2


def test_check_graph_errors() -> None:
    g = nx.Graph([(0, 1), (2, 3), (3, 4)])
    g.add_node(5)
    with pytest.raises(ConfigError) as info:
        check_graph(g, key="graph")
    assert str(info.value) == (
        "graph: the graph is disconnected (3 components, sizes 3, 2, 1); "
        "the token cannot reach every node"
    )
    for bad in (nx.Graph(), nx.empty_graph(1)):
        with pytest.raises(ConfigError, match="^topology: .*at least 2"):
            check_graph(bad)
    with pytest.raises(ConfigError, match="^topology: expected a networkx graph"):
        check_graph([(0, 1)])


# --- errors --------------------------------------------------------------------------------------


def test_unknown_kind() -> None:
    err = raises_for("topology.kind", "hypercube", 8)
    assert "'hypercube'" in str(err) and "complete, ring, star, path, grid" in str(err)


def test_unknown_param() -> None:
    err = raises_for("topology.q", "erdos_renyi", 10, {"q": 0.5})
    assert "allowed: nodes, p" in str(err)
    raises_for("topology.p", "ring", 10, {"p": 0.5})


def test_param_ranges_and_types() -> None:
    err = raises_for("topology.p", "erdos_renyi", 10, {"p": 1.5}, seed=1)
    assert "0 <= p <= 1" in str(err)
    raises_for("topology.p", "erdos_renyi", 10, {"p": -0.1}, seed=1)
    raises_for("topology.p", "erdos_renyi", 10, {"p": "high"}, seed=1)
    raises_for("topology.p", "erdos_renyi", 10, {"p": float("nan")}, seed=1)
    raises_for("topology.p", "watts_strogatz", 10, {"k": 2, "p": 2.0}, seed=1)
    raises_for("topology.k", "watts_strogatz", 10, {"k": 3, "p": 0.1}, seed=1)
    raises_for("topology.k", "watts_strogatz", 10, {"k": 10, "p": 0.1}, seed=1)
    raises_for("topology.m", "barabasi_albert", 10, {"m": 10}, seed=1)
    raises_for("topology.m", "barabasi_albert", 10, {"m": 0}, seed=1)
    raises_for("topology.radius", "random_geometric", 10, {"radius": 0.0}, seed=1)
    raises_for("topology.degree", "random_regular", 10, {"degree": 2.0}, seed=1)
    raises_for("topology.degree", "random_regular", 10, {"degree": True}, seed=1)
    raises_for("topology.degree", "random_regular", 10, {"degree": 10}, seed=1)


def test_degree_times_nodes_odd() -> None:
    err = raises_for("topology.degree", "random_regular", 11, {"degree": 3}, seed=1)
    assert "odd" in str(err)


def test_missing_param() -> None:
    err = raises_for("topology.degree", "random_regular", 10)
    assert "needs degree" in str(err)


@pytest.mark.parametrize("nodes", [1, 0, -3, 2.5, True, "10"])
def test_bad_nodes(nodes: object) -> None:
    raises_for("topology.nodes", "ring", nodes)


def test_nodes_required() -> None:
    raises_for("topology.nodes", "complete")
    raises_for("topology.nodes", "erdos_renyi", None, {"p": 0.5})


def test_disconnected_random_graph() -> None:
    err = raises_for("topology", "erdos_renyi", 20, {"p": 0.0}, seed=1)
    assert "disconnected (20 components" in str(err)
    assert "cannot reach every node" in str(err)


def test_bad_seed() -> None:
    raises_for("seed", "erdos_renyi", 10, {"p": 0.5}, seed=-1)


@pytest.mark.parametrize(
    ("kind", "nodes", "params", "seed"),
    [
        ("erdos_renyi", 300, {"p": 0.05}, 1),
        ("erdos_renyi", 2000, {"p": 0.004}, 7),
        ("erdos_renyi", 50, {"p": 0.5}, np.random.SeedSequence([3, 4])),
        ("erdos_renyi", 30, {"p": 1.0}, 2),
        ("random_geometric", 500, {"radius": 0.12}, 5),
        ("random_geometric", 3000, {"radius": 0.04}, np.random.SeedSequence(9)),
    ],
)
def test_array_built_graphs_equal_the_networkx_ones(kind, nodes, params, seed):
    """Kinds drawn straight into CSR give exactly build_topology's graph for the same seed."""
    from gossipsim.scheduling import IndexedGraph

    indexed, graph = build_indexed(kind, nodes, params, seed=seed)
    assert graph is None
    reference = IndexedGraph.from_networkx(build_topology(kind, nodes, params, seed=seed))
    assert list(indexed.labels) == list(reference.labels)
    np.testing.assert_array_equal(indexed.indptr, reference.indptr)
    np.testing.assert_array_equal(indexed.indices, reference.indices)
    back = indexed.to_networkx()
    assert sorted(back.edges()) == sorted(build_topology(kind, nodes, params, seed=seed).edges())


@pytest.mark.parametrize(
    ("kind", "params"), [("erdos_renyi", {"p": 0.01}), ("random_geometric", {"radius": 0.02})]
)
def test_array_built_disconnected_graphs_give_the_same_one_line_error(kind, params):
    with pytest.raises(ConfigError) as nx_error:
        build_topology(kind, 200, params, seed=1)
    with pytest.raises(ConfigError) as csr_error:
        build_indexed(kind, 200, params, seed=1)
    assert str(csr_error.value) == str(nx_error.value)
    assert "disconnected" in str(csr_error.value)


def test_csr_from_edges_merges_parallel_edges_and_drops_loops():
    from gossipsim.scheduling import IndexedGraph

    g = IndexedGraph.from_edges(4, np.array([0, 1, 1, 2, 3]), np.array([1, 0, 1, 3, 2]))
    assert g.indptr.tolist() == [0, 1, 2, 3, 4]
    assert g.indices.tolist() == [1, 0, 3, 2]
    assert g.index(3) == 3
    with pytest.raises(ConfigError, match="does not exist"):
        g.index(4)
    with pytest.raises(ConfigError, match="does not exist"):
        g.index(True)


# --- registry ------------------------------------------------------------------------------------


def test_docs_topology_table_is_generated_from_the_registry() -> None:
    """docs/scenarios.md shows every kind and key as the registry states them, and nothing else."""
    doc = (ROOT / "docs" / "scenarios.md").read_text(encoding="utf-8")
    table = reference_table()
    assert table in doc, (
        "docs/scenarios.md: the [topology] table differs from the registry; run "
        f"`python -m gossipsim.study.reference docs/scenarios.md`:\n{table}"
    )
    section = doc.split("<!-- keys:topology-kinds -->", 1)[1].split("<!-- /keys -->", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(TOPOLOGY_KINDS)
    for spec in TOPOLOGY_KINDS.values():
        row = rows[list(TOPOLOGY_KINDS).index(spec.name)]
        assert spec.description in row
        for ps in spec.params.values():
            assert f"`{ps.name}` (" in row and ps.check in row and ps.description in row


def test_registry_records_are_consistent() -> None:
    for spec in TOPOLOGY_KINDS.values():
        assert isinstance(spec, TopologyKind) and callable(spec.build)
        assert spec.needs_nodes == (spec.nodes == "required")
        assert (spec.size is None) == (spec.nodes == "fixed")  # size known before building
    assert TopologySpec is TopologyKind
    assert set(ARRAY_KINDS) == {"erdos_renyi", "random_geometric"}
    assert "ring" not in ARRAY_KINDS and 3 not in ARRAY_KINDS


@pytest.mark.parametrize(
    ("kind", "nodes", "params"),
    [
        ("complete", 30, {}),
        ("ring", 30, {}),
        ("star", 30, {}),
        ("path", 30, {}),
        ("grid", 30, {}),
        ("grid", None, {"rows": 3, "cols": 7}),
        ("random_regular", 30, {"degree": 4}),
        ("barabasi_albert", 30, {"m": 2}),
        ("watts_strogatz", 30, {"k": 4, "p": 0.3}),
        ("erdos_renyi", 30, {"p": 1.0}),
        ("random_geometric", 30, {"radius": 2.0}),
    ],
)
def test_planned_size_matches_the_built_graph(kind, nodes, params) -> None:
    """The size the memory check plans is the built graph's (edges: exact or an upper bound)."""
    planned = planned_size(kind, nodes, params)
    assert planned is not None
    count, edges, networkx = planned
    g = build_topology(kind, nodes, params, seed=1)
    assert count == g.number_of_nodes()
    assert g.number_of_edges() <= edges <= 2 * g.number_of_edges()
    assert networkx == (kind not in ARRAY_KINDS)
    assert planned_size("karate") is None and planned_size("edgelist", path=HARTFORD) is None


def test_register_refuses_inconsistent_records() -> None:
    p = ParamSpec("q", float, "some probability", low=0.0, high=1.0)
    assert p.check == "0 <= q <= 1"
    with pytest.raises(ValueError, match="already registered"):
        register("ring", nx.cycle_graph, "again")
    with pytest.raises(ValueError, match="nodes must be one of"):
        register("new_kind", nx.cycle_graph, "x", nodes="sometimes")
    with pytest.raises(ValueError, match="unique"):
        register("new_kind", nx.cycle_graph, "x", p, p)
    with pytest.raises(ValueError, match="unique"):
        register("new_kind", nx.cycle_graph, "x", ParamSpec("nodes", int, "n", check="n >= 2"))
    with pytest.raises(ValueError, match="file kind"):
        register("new_kind", nx.cycle_graph, "x", from_file=True, nodes="fixed")
    with pytest.raises(ValueError, match="arrays"):
        register("new_kind", nx.cycle_graph, "x", arrays=erdos_renyi_edges)
    with pytest.raises(ValueError, match="allowed"):
        ParamSpec("x", int, "no range")
    with pytest.raises(ValueError, match="type"):
        ParamSpec("x", list, "a list", check="anything")
    assert "new_kind" not in TOPOLOGY_KINDS


def lollipop(n: int, clique: int) -> nx.Graph:
    """A clique of ``clique`` nodes with a path of the other ``n - clique`` attached (test kind)."""
    if not clique < n:
        raise OutOfRange("clique", f"nodes = {n}")
    return nx.lollipop_graph(clique, n - clique)


def test_a_kind_registered_in_one_line_is_usable_from_a_scenario_and_the_cli(capsys) -> None:
    clique = ParamSpec(
        "clique", int, "nodes of the clique", 3, "integer 3 <= clique < nodes", low=3
    )
    register(
        "lollipop",
        lollipop,
        "a clique with a path attached",
        clique,
        size=lambda n, clique: (n, clique**2 / 2 + n),
    )
    try:
        # a scenario: checked, built and run like any shipped kind
        raw = base_scenario(topology={"kind": "lollipop", "nodes": 8, "clique": 5})
        study = gs.parse_study(raw)
        (world,) = gs.check(study)
        assert world.nodes == 8 and world.indexed.indices.size == 2 * (10 + 3)
        res = gs.run(study, runs=2)
        assert len(res.runs) == 2
        assert gs.check(gs.parse_study(base_scenario(topology={"kind": "lollipop", "nodes": 6})))
        for table, key in (
            ({"clique": 8}, "topology.clique"),  # the builder's range, stated by the ParamSpec
            ({"clique": 2}, "topology.clique"),  # the ParamSpec's bound
            ({"clique": 2.5}, "topology.clique"),
            ({"radius": 1.0}, "topology.radius"),
        ):
            with pytest.raises(gs.ConfigError) as info:
                gs.check(
                    gs.parse_study(
                        base_scenario(topology={"kind": "lollipop", "nodes": 8, **table})
                    )
                )
            assert info.value.key == key
        assert str(info.value).endswith("allowed: nodes, clique")
        with pytest.raises(
            gs.ConfigError, match=r"must be integer 3 <= clique < nodes, got 8 \(nodes = 8\)"
        ):
            build_topology("lollipop", 8, {"clique": 8})
        # the CLI: listed, and a --topology with --param
        assert main(["list"]) == 0
        assert "lollipop" in capsys.readouterr().out
        args = ["covertime", "--topology", "lollipop", "--nodes", "8", "--param", "clique=4"]
        assert main([*args, "--runs", "50", "--json"]) == 0
        assert "mean_moves" in capsys.readouterr().out
        assert "`lollipop` | a clique with a path attached | required |" in reference_table()
    finally:
        assert unregister("lollipop").name == "lollipop"
    assert "lollipop" not in TOPOLOGY_KINDS
    raises_for("topology.kind", "lollipop", 8)
