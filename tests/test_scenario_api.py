"""The scenario from Python (issue 11, section 4): graph objects, replace / overrides / --set,
frozen settings, ``[topology] seed`` and ``draw = "per-run"``."""

from __future__ import annotations

import copy
import json
import pickle

import networkx as nx
import numpy as np
import pytest

import gossipsim as gs
from gossipsim.cli.parser import main
from gossipsim.cli.run import parse_set
from gossipsim.core.frozen import FrozenDict, FrozenList, freeze, thaw
from gossipsim.core.streams import run_seed
from gossipsim.errors import ConfigError
from gossipsim.study.scenario import parse_study
from gossipsim.world.world import build_world, world_for_run
from tests.helpers import base_scenario, to_toml


def _small(**sections):
    raw = base_scenario(**sections)
    raw["scenario"].update(runs=4, iterations=80)
    return raw


def _labelled_graph() -> nx.Graph:
    g = nx.Graph(name="office")
    g.add_node("ana", site="north")
    g.add_node("bo", site="south")
    g.add_node("cy", site="south")
    g.add_node("di", site="east")
    g.add_edge("ana", "bo", rate_bps=1e6)
    g.add_edge("bo", "cy", rate_bps=2e6)
    g.add_edge("cy", "di", rate_bps=3e6)
    g.add_edge("di", "ana", rate_bps=4e6)
    return g


# --- graph objects ----------------------------------------------------------------------------------


def test_a_graph_object_keeps_its_labels_and_attributes_on_the_world():
    g = _labelled_graph()
    study = parse_study(_small(topology=g))
    world = build_world(study.variants[0].scenario)
    assert list(world.graph.nodes) == ["ana", "bo", "cy", "di"]
    assert world.graph.nodes["di"]["site"] == "east"
    assert world.graph.edges["cy", "di"]["rate_bps"] == 3e6
    assert world.graph.graph["name"] == "office"
    assert world.indexed.indices.size == 8  # 4 undirected edges
    # a later edit of the caller's graph does not reach the study, and the study's cannot change
    g.add_edge("ana", "cy")
    g.nodes["ana"]["site"] = "moved"
    assert study.graph.number_of_edges() == 4 and study.graph.nodes["ana"]["site"] == "north"
    with pytest.raises(nx.NetworkXError):
        study.graph.add_edge("ana", "cy")


def test_a_graph_object_runs_with_requests_and_start_named_by_label():
    raw = _small(
        topology={"graph": _labelled_graph()},
        scheduler={"start": "cy"},
        unlearning=[{"node": "bo", "at_iteration": 10}],
    )
    res = gs.run(raw)
    assert len(res.runs) == 4 and not res.runs["cover_iteration"].isna().all()
    assert set(res.visits["node"]) == {"ana", "bo", "cy", "di"}
    assert list(res.requests["node"].unique()) == ["bo"]
    summary = res.summary()
    json.dumps(summary)  # JSON-able
    described = summary["scenario"]["topology"]["graph"]
    assert described.startswith("networkx graph: 4 nodes, 4 edges, sha256 ")
    # the walk really runs on the ring ana-bo-cy-di: the exact cover time of the 4-cycle under MH
    # (simple walk: degree 2 everywhere) from a fixed start is 6 moves
    assert res.theory["t"]["exact_cover_moves"] == pytest.approx(6.0)


@pytest.mark.parametrize(
    ("graph", "words"),
    [
        (nx.DiGraph([(0, 1), (1, 2)]), "DiGraph"),
        (nx.MultiGraph([(0, 1), (1, 2)]), "MultiGraph"),
        (nx.Graph([(0, 1), (2, 3)]), "disconnected"),
        (nx.empty_graph(1), "at least 2"),
        (nx.grid_2d_graph(2, 2), "integers or strings"),
    ],
)
def test_bad_graph_objects_are_one_line_errors_naming_topology(graph, words):
    with pytest.raises(ConfigError) as err:
        parse_study(_small(topology=graph))
    assert err.value.key == "topology" and words in str(err.value)
    assert "\n" not in str(err.value)


def test_graph_objects_elsewhere_and_kind_networkx_in_a_file_are_refused(tmp_path):
    raw = _small()
    raw["sweep"] = {"scheduler.start": [nx.path_graph(3)]}  # sweep.topology takes graphs: not here
    with pytest.raises(ConfigError, match=r"^sweep.scheduler.start\[0\]: a NetworkX graph"):
        parse_study(raw)
    raw["sweep"] = {"cases": [{"topology": nx.path_graph(3)}]}
    with pytest.raises(ConfigError, match=r"^sweep.cases\[0\].topology: a NetworkX graph goes"):
        parse_study(raw)
    with pytest.raises(ConfigError, match="^topology.kind: is 'ring'"):
        parse_study(_small(topology={"kind": "ring", "graph": nx.path_graph(3)}))
    with pytest.raises(ConfigError, match="^topology.nodes: nodes = 5 but the graph object has 3"):
        parse_study(_small(topology={"nodes": 5, "graph": nx.path_graph(3)}))
    path = tmp_path / "s.toml"
    path.write_text(to_toml(_small(topology={"kind": "networkx"})))
    with pytest.raises(ConfigError, match="^topology.kind: kind 'networkx' takes a NetworkX graph"):
        gs.load_scenario(path)


def test_a_sweep_over_other_keys_shares_the_graph_object():
    raw = _small(topology=nx.cycle_graph(6))
    raw["sweep"] = {"scheduler.kind": ["metropolis-hastings", "uniform"]}
    study = parse_study(raw)
    graphs = [v.scenario.topology.graph for v in study.variants]
    assert graphs[0] is graphs[1] is study.graph
    res = gs.run(study)
    assert set(res.runs["variant"]) == {"metropolis-hastings", "uniform"}


def _interrupted(study, out, runs):
    """A results folder of ``study`` in which only ``runs`` were committed."""
    from gossipsim.execution.runner import simulate_run
    from gossipsim.results.store import RunStore

    world = build_world(study.variants[0].scenario)
    store = RunStore(out, study)
    for r in runs:
        store.save(0, simulate_run(world, r, run_seed(study.seed, r)))
    store.commit()


def test_resume_checks_the_graph_object(tmp_path):
    out = tmp_path / "o"
    whole = gs.run(_small(topology=nx.cycle_graph(6)))
    _interrupted(parse_study(_small(topology=nx.cycle_graph(6))), out, [0, 2])
    with pytest.raises(ConfigError, match="^--resume: .*another scenario"):
        gs.run(_small(topology=nx.path_graph(6)), out=out, resume=True, plots=False)
    again = gs.run(_small(topology=nx.cycle_graph(6)), out=out, resume=True, plots=False)
    assert again.runs.equals(whole.runs)


# --- replace, overrides, --set ---------------------------------------------------------------------


def test_replace_sets_keys_and_validates_them():
    study = parse_study(_small())
    bigger = study.replace("topology.nodes", 12)
    assert bigger.variants[0].scenario.topology.nodes == 12
    assert study.variants[0].scenario.topology.nodes == 10  # the original is unchanged
    both = study.replace({"topology.nodes": 12, "scenario.runs": 3, "model.prior.a": 5})
    sc = both.variants[0].scenario
    assert (sc.topology.nodes, sc.run.runs, sc.model.prior["a"]) == (12, 3, 5.0)
    # None removes the key: the model's default prior a = 1 applies
    assert both.replace("model.prior.a", None).variants[0].scenario.model.prior["a"] == 1.0
    for key, value, message in [
        ("scenario.runz", 3, "^scenario.runz: unknown key"),
        ("scenario.runs", 0, "^scenario.runs: must be an integer >= 1"),
        ("toplogy.nodes", 3, "^toplogy: unknown section"),
        ("sweep.cases", [], "^sweep.cases: set a sweep dimension"),
        ("", 3, "must be a dotted key"),
        # a kind's own parameters: their names, types and bounds when read, as a file's are
        ("topology.nodez", 3, "^topology.nodez: unknown parameter 'nodez' for topology 'complete'"),
        ("topology.p", 0.5, "^topology.p: unknown parameter 'p' for topology 'complete'"),
    ]:
        with pytest.raises(ConfigError, match=message):
            study.replace(key, value)
    er = study.replace("topology", {"kind": "erdos_renyi", "nodes": 10, "p": 0.5})
    for value, message in [(1.5, "must be 0 <= p <= 1"), ("x", "must be a number")]:
        with pytest.raises(ConfigError, match=f"^topology.p: {message}"):
            er.replace("topology.p", value)


def test_replace_of_a_swept_key_drops_the_dimension_and_sweeps_can_be_set():
    raw = _small()
    raw["sweep"] = {"topology.nodes": [6, 8], "scheduler.kind": ["metropolis-hastings", "uniform"]}
    study = parse_study(raw)
    assert len(study.variants) == 4
    fixed = study.replace("topology.nodes", 12)
    assert len(fixed.variants) == 2 and dict(fixed.sweep) == {
        "scheduler.kind": ["metropolis-hastings", "uniform"]
    }
    assert {v.scenario.topology.nodes for v in fixed.variants} == {12}
    wider = study.replace("sweep.topology.nodes", [4, 5, 6])
    assert len(wider.variants) == 6
    cases = _small()
    cases["sweep"] = {"cases": [{"topology.nodes": 6}, {"topology.nodes": 8}]}
    with pytest.raises(ConfigError, match=r"^topology.nodes: is set by \[\[sweep.cases\]\]"):
        parse_study(cases).replace("topology.nodes", 5)


def test_replace_swaps_a_graph_object_in_and_out():
    study = parse_study(_small())
    with_graph = study.replace("topology", nx.cycle_graph(7))
    assert with_graph.variants[0].scenario.topology.kind == "networkx"
    assert with_graph.replace("scenario.runs", 2).graph is with_graph.graph  # kept
    back = with_graph.replace("topology", {"kind": "ring", "nodes": 5})
    assert back.graph is None and back.variants[0].scenario.topology.kind == "ring"


def test_run_overrides_keyword():
    res = gs.run(_small(), overrides={"topology.nodes": 5, "scenario.runs": 2}, runs=3)
    assert len(res.runs) == 3 and len(res.visits) == 5
    with pytest.raises(ConfigError, match="^data.thetaa: unknown key"):
        gs.run(_small(), overrides={"data.thetaa": 0.5})
    with pytest.raises(ConfigError, match="^overrides: must be a mapping"):
        gs.run(_small(), overrides=[("topology.nodes", 5)])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("topology.nodes=50", ("topology.nodes", 50)),
        ("scheduler.kind=uniform", ("scheduler.kind", "uniform")),
        ('scheduler.kind="uniform"', ("scheduler.kind", "uniform")),
        ("data.draw = per-run", ("data.draw", "per-run")),
        ("links.rate_bps=inf", ("links.rate_bps", float("inf"))),
        ("model.prior={ a = 1, b = 2 }", ("model.prior", {"a": 1, "b": 2})),
        ("metrics.excess=true", ("metrics.excess", True)),
        ("sweep.topology.nodes=[4, 6]", ("sweep.topology.nodes", [4, 6])),
    ],
)
def test_set_values_are_toml_values_or_bare_words(text, expected):
    assert parse_set(text) == expected


def test_cli_set(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text(to_toml(_small()))
    out = tmp_path / "o"
    args = ["run", str(path), "--out", str(out), "--no-plots", "--progress", "off"]
    assert main([*args, "--set", "topology.nodes=6", "--set", "scheduler.kind=uniform"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"]["topology"]["nodes"] == 6
    assert summary["scenario"]["scheduler"]["kind"] == "uniform"
    for bad in (
        "topology.nodes",
        "topology.nodes=[1",
        "topology.nodez=3",
        "scheduler.kind=teleport",
    ):
        capsys.readouterr()
        assert main([*args, "--set", bad]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err
        key = bad.split("=")[0] if "=" in bad and "[" not in bad else "--set"
        assert err.startswith(f"gossipsim: error: {key}:"), err


# --- frozen in fact ---------------------------------------------------------------------------------


def test_studies_and_settings_are_frozen_all_the_way_down():
    raw = _small(data={"points_per_node": 100, "theta": 0.75})
    raw["sweep"] = {"scheduler.kind": ["metropolis-hastings", "uniform"]}
    study = parse_study(raw)
    sc = study.variants[0].scenario
    for mutate in (
        lambda: study.raw["topology"].__setitem__("nodes", 3),
        lambda: study.raw["topology"].update(nodes=3),
        lambda: study.sweep["scheduler.kind"].append("x"),
        lambda: study.variants[0].values.pop("scheduler.kind"),
        lambda: sc.model.prior.__setitem__("a", 9),
        lambda: sc.data.params.clear(),
        lambda: sc.topology.params.setdefault("x", 1),
    ):
        with pytest.raises(TypeError, match="immutable"):
            mutate()
    assert pickle.loads(pickle.dumps(study)).raw == study.raw
    copied = copy.deepcopy(study)
    assert copied.raw == study.raw and copied.variants[0].scenario == sc
    assert isinstance(study.raw["scenario"], dict) and study.raw["scenario"] == raw["scenario"]
    assert json.loads(json.dumps(study.raw)) == thaw(study.raw)
    assert hash(sc.model.prior) == hash(FrozenDict({"a": 2.0, "b": 2.0}))


def test_freeze_and_thaw():
    value = {"a": [1, {"b": [2, 3]}], "c": (4, [5])}
    frozen = freeze(value)
    assert isinstance(frozen, FrozenDict) and isinstance(frozen["a"], FrozenList)
    assert isinstance(frozen["c"], tuple) and isinstance(frozen["c"][1], FrozenList)
    assert frozen == {"a": [1, {"b": [2, 3]}], "c": (4, [5])}
    back = thaw(frozen)
    back["a"][1]["b"].append(4)  # plain and mutable again
    assert frozen["a"][1]["b"] == [2, 3]
    assert pickle.loads(pickle.dumps(frozen)) == frozen and copy.deepcopy(frozen) is frozen
    # lists and tuples of plain values (a long prior vector) are frozen whole, others item by item
    atoms = [1, 2.5, "x", True, None] * 1000
    assert isinstance(freeze(atoms), FrozenList) and freeze(atoms) == atoms
    assert freeze(tuple(atoms)) == tuple(atoms)
    mixed = freeze([1.0, {"a": [2]}, (3, [4])])
    assert isinstance(mixed[1], FrozenDict) and isinstance(mixed[1]["a"], FrozenList)
    assert isinstance(mixed[2][1], FrozenList)
    with pytest.raises(TypeError, match="immutable"):
        freeze(atoms).append(1)


# --- seeds ------------------------------------------------------------------------------------------


def _edges(raw):
    world = build_world(parse_study(raw).variants[0].scenario)
    return sorted(map(tuple, np.sort(np.asarray(world.graph.edges()), axis=1).tolist()))


@pytest.mark.parametrize(
    "topology",
    [
        {"kind": "erdos_renyi", "nodes": 30, "p": 0.3},  # drawn into arrays
        {"kind": "random_regular", "nodes": 30, "degree": 4},  # through NetworkX
    ],
)
def test_topology_seed_is_the_graph_of_that_scenario_seed_and_holds_it(topology):
    by_scenario_seed = _edges(_small(scenario={"seed": 11}, topology=topology))
    held = [_edges(_small(scenario={"seed": s}, topology={**topology, "seed": 11})) for s in (1, 2)]
    assert held[0] == held[1] == by_scenario_seed
    assert _edges(_small(scenario={"seed": 12}, topology=topology)) != by_scenario_seed


def test_topology_seed_and_draw_only_for_random_kinds():
    with pytest.raises(ConfigError, match="^topology.seed: is only for random kinds"):
        parse_study(_small(topology={"kind": "ring", "nodes": 5, "seed": 3}))
    with pytest.raises(ConfigError, match="^topology.draw: is only for random kinds; a graph obj"):
        parse_study(_small(topology={"graph": nx.cycle_graph(5), "draw": "per-run"}))
    with pytest.raises(ConfigError, match="^topology.seed: holds one graph fixed"):
        parse_study(
            _small(
                topology={
                    "kind": "random_regular",
                    "nodes": 8,
                    "degree": 3,
                    "seed": 1,
                    "draw": "per-run",
                }
            )  # fmt: skip
        )
    with pytest.raises(ConfigError, match="^topology.draw: unknown value 'each'"):
        parse_study(_small(topology={"kind": "random_regular", "nodes": 8, "degree": 3,
                                     "draw": "each"}))  # fmt: skip


PER_RUN = {"kind": "random_regular", "nodes": 12, "degree": 3, "draw": "per-run"}


def test_per_run_graphs_differ_by_run_and_come_from_the_run_seed():
    study = parse_study(_small(topology=PER_RUN))
    world = build_world(study.variants[0].scenario)
    graphs = [world_for_run(world, run_seed(7, r)).graph for r in range(3)]
    edges = [sorted(map(sorted, g.edges())) for g in graphs]
    assert edges[0] != edges[1] != edges[2]
    assert all(nx.is_regular(g) and g.number_of_nodes() == 12 for g in graphs)
    again = world_for_run(world, run_seed(7, 1)).graph
    assert sorted(map(sorted, again.edges())) == edges[1]
    # drawing once keeps one graph: every run walks the world's own
    once = build_world(
        parse_study(_small(topology={**PER_RUN, "draw": "once"})).variants[0].scenario
    )
    assert world_for_run(once, run_seed(7, 1)) is once


def test_per_run_graphs_same_with_two_workers_and_resume(tmp_path):
    raw = _small(topology=PER_RUN, unlearning=[{"node": 3, "at_iteration": 20}])
    raw["scenario"]["runs"] = 6
    one = gs.run(raw, engine="auto")
    assert "drawn per run" in one.engines["t"]
    assert "graph_note" in one.theory["t"] and "exact_cover_moves" not in one.theory["t"]
    two = gs.run(raw, workers=2)
    assert one.runs.equals(two.runs) and one.visits.equals(two.visits)
    held = gs.run(_small(topology={**PER_RUN, "draw": "once"}, unlearning=raw["unlearning"]),
                  runs=6, engine="event")  # fmt: skip
    assert not one.runs["cover_iteration"].equals(held.runs["cover_iteration"])
    _interrupted(parse_study(raw), tmp_path / "o", [1, 4])
    resumed = gs.run(raw, out=tmp_path / "o", resume=True, plots=False)
    assert resumed.runs.equals(one.runs) and resumed.visits.equals(one.visits)
    with pytest.raises(ConfigError, match="^--engine: the vectorized engine cannot run"):
        gs.run(raw, engine="vectorized")
