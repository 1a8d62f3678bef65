"""Heterogeneous nodes: ``[compute] seconds_per_iteration`` as one time per node (graph order) or
``[compute] node_attribute`` (a numeric node attribute of the graph). The slot's computation at
holder k takes node k's time, on the walk and with the server, on both engines."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.network.links import LinkModel, check_horizon
from tests.helpers import base_scenario, validate_error

ROOT = Path(__file__).resolve().parent.parent
#: labels out of sorted order: graph order is the order the graph lists its nodes
LABELS = ["e", "b", "d", "a", "f", "c"]
#: dyadic times, so that every difference of two slot times is exact
TIMES = [0.5, 0.25, 1.0, 2.0, 0.125, 4.0]
TABLES = ("metrics", "runs", "requests", "visits")


def _ring() -> nx.Graph:
    graph = nx.Graph()
    graph.add_nodes_from(LABELS)
    graph.add_edges_from(zip(LABELS, LABELS[1:] + LABELS[:1], strict=True))
    return graph


def _raw(compute, architecture="walk", runs=20, **sections):
    return base_scenario(
        scenario={"name": "t", "seed": 3, "runs": runs, "iterations": 80},
        topology={"kind": "ring", "nodes": 6},
        compute=compute,
        protocol={"architecture": architecture},
        **sections,
    )


def _same(a: gs.Results, b: gs.Results) -> None:
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table), check_exact=True)


@pytest.mark.parametrize("engine", ["event", "vectorized"])
@pytest.mark.parametrize("architecture", ["walk", "server"])
def test_each_slot_takes_its_holders_compute_time(architecture, engine):
    raw = _raw({"seconds_per_iteration": TIMES}, architecture)
    raw["topology"] = {"kind": "networkx", "graph": _ring()}
    res = gs.run(raw, engine=engine, plots=False)
    assert res.engines == {"t": engine}
    own = dict(zip(LABELS, TIMES, strict=True))
    for _, run in res.metrics.groupby("run"):
        times = run["time"].to_numpy()
        spent = np.diff(times, prepend=0.0)  # instantaneous links: the slot is its computation
        np.testing.assert_array_equal(spent, [own[h] for h in run["holder"]])


def test_a_list_of_equal_times_gives_the_scalars_tables():
    requests = [{"node": 2, "at_iteration": 30}]
    links = {"rate_bps": 1e4, "latency_s": 0.01}
    for engine in ("event", "vectorized"):
        scalar = gs.run(
            _raw({"seconds_per_iteration": 0.3}, links=links, unlearning=requests),
            engine=engine, plots=False,
        )  # fmt: skip
        listed = gs.run(
            _raw({"seconds_per_iteration": [0.3] * 6}, links=links, unlearning=requests),
            engine=engine, plots=False,
        )  # fmt: skip
        _same(scalar, listed)


@pytest.mark.parametrize("architecture", ["walk", "server"])
def test_both_engines_and_two_workers_give_the_same_tables(architecture):
    raw = _raw(
        {"seconds_per_iteration": [0.1, 0.2, 0.3, 0.05, 0.7, 0.01]},
        architecture,
        links={"rate_bps": 1e4, "latency_s": 0.003},
        unlearning=[{"node": 4, "at_iteration": 25}],
    )
    event = gs.run(raw, engine="event", plots=False)
    _same(event, gs.run(raw, engine="vectorized", plots=False))
    _same(event, gs.run(raw, engine="event", workers=2, plots=False))
    assert event.metrics["time"].iloc[-1] > 0


def test_a_node_attribute_of_a_graphml_file():
    """lanl_routes.graphml's ``rtt_ms`` (not a compute time, but a numeric attribute every node
    has) gives the tables of the same numbers as a list in graph order."""
    path = str(ROOT / "topologies" / "lanl_routes.graphml")
    graph = nx.read_graphml(path)
    times = [float(graph.nodes[n]["rtt_ms"]) for n in graph.nodes]
    raw = base_scenario(
        scenario={"name": "t", "seed": 1, "runs": 2, "iterations": 40},
        topology={"kind": "graphml", "path": path},
    )
    attribute = gs.run({**raw, "compute": {"node_attribute": "rtt_ms"}}, plots=False)
    listed = gs.run({**raw, "compute": {"seconds_per_iteration": times}}, plots=False)
    _same(attribute, listed)
    run = attribute.metrics[attribute.metrics["run"] == 0]
    position = {int(label): i for i, label in enumerate(graph.nodes)}  # graph order
    assert run["time"].iloc[0] == times[position[int(run["holder"].iloc[0])]]
    assert run["time"].iloc[-1] > 0


def test_a_node_attribute_of_a_networkx_graph():
    graph = _ring()
    nx.set_node_attributes(graph, dict(zip(LABELS, TIMES, strict=True)), "speed")
    raw = _raw({"node_attribute": "speed"}, runs=3)
    raw["topology"] = {"kind": "networkx", "graph": graph}
    listed = _raw({"seconds_per_iteration": TIMES}, runs=3)
    listed["topology"] = {"kind": "networkx", "graph": graph}
    _same(gs.run(raw, plots=False), gs.run(listed, plots=False))


def test_the_horizon_is_the_slowest_nodes():
    links = LinkModel(1e3, 0.0)
    assert check_horizon(10, [0.0, 1.0, 0.5], links, 128.0) == pytest.approx(10 * 1.128)
    with pytest.raises(gs.ConfigError, match="compute.node_attribute.*slowest node's 1e"):
        check_horizon(10, [0.0, 1e300], links, 1.0, "compute.node_attribute")


def _graphml(folder: Path, values: dict[str, object]) -> str:
    graph = nx.cycle_graph(4)
    for node, value in values.items():
        graph.nodes[int(node)]["speed"] = value
    path = folder / "g.graphml"
    nx.write_graphml(graph, path)
    return str(path)


@pytest.mark.parametrize(
    ("compute", "expected"),
    [
        ({"seconds_per_iteration": [0.1, 0.2]},
         "compute.seconds_per_iteration: a per-node list needs one value per node (6, in graph "
         "order), got 2"),
        ({"seconds_per_iteration": [0.1, -0.2, 0, 0, 0, 0]},
         "compute.seconds_per_iteration[1]: must be a number >= 0 (got -0.2)"),
        ({"seconds_per_iteration": [0.1, 0, float("inf"), 0, 0, 0]},
         "compute.seconds_per_iteration[2]: must be a number >= 0, a finite number (got inf)"),
        ({"seconds_per_iteration": [0.1, [0.2], 0, 0, 0, 0]},
         "compute.seconds_per_iteration[1]: must be a number >= 0 (got [0.2])"),
        ({"seconds_per_iteration": [1e308] * 6},
         "compute.seconds_per_iteration: the slowest node's 1e+308 s of compute per slot"),
        ({"seconds_per_iteration": 0.1, "node_attribute": "speed"},
         "compute.node_attribute: give one of seconds_per_iteration"),
        ({"node_attribute": "speed"},
         "compute.node_attribute: node 0 has no attribute 'speed' (every node needs it, a number)"),
    ],
)  # fmt: skip
def test_bad_compute_times_are_one_line(tmp_path, capsys, compute, expected):
    err = validate_error(_raw(compute), tmp_path, capsys)
    assert expected in err, err


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"0": 0.1, "1": 0.2, "2": 0.3},
         "compute.node_attribute: node 3 has no attribute 'speed'"),
        ({"0": 0.1, "1": "fast", "2": 0.3, "3": 0.1},
         "compute.node_attribute: node 1's 'speed' is 'fast', not a number (seconds >= 0)"),
        ({"0": 0.1, "1": 0.2, "2": -1.0, "3": 0.1},
         "compute.node_attribute: node 2's 'speed' is -1: must be a finite number >= 0"),
        ({"0": 0.1, "1": float("inf"), "2": 0.3, "3": 0.1},
         "compute.node_attribute: node 1's 'speed' is inf: must be a finite number >= 0"),
        ({"0": 1e308, "1": 0.2, "2": 0.3, "3": 0.1},
         "compute.node_attribute: the slowest node's 1e+308 s of compute per slot"),
    ],
)  # fmt: skip
def test_bad_node_attributes_are_one_line(tmp_path, capsys, values, expected):
    raw = _raw({"node_attribute": "speed"})
    raw["topology"] = {"kind": "graphml", "path": _graphml(tmp_path, values)}
    err = validate_error(raw, tmp_path, capsys)
    assert expected in err, err


def test_what_per_node_times_cannot_run(tmp_path, capsys):
    raw = _raw({"seconds_per_iteration": TIMES})
    raw["protocol"] = {"kind": "svgd", "particles": 4}
    raw["model"] = {"kind": "logistic-regression"}
    raw["data"] = {"dataset": "synthetic", "points_per_node": 5, "features": 2}
    err = validate_error(raw, tmp_path, capsys)
    assert "compute.seconds_per_iteration: protocol 'svgd' computes at the centre" in err, err
    raw = _raw({"seconds_per_iteration": TIMES}, scheduler={"stays": "drawn"})
    err = validate_error(raw, tmp_path, capsys)
    assert "scheduler.stays" in err and "compute at their own speeds" in err, err


def test_a_timed_request_after_the_slowest_horizon_is_refused(tmp_path, capsys):
    raw = _raw({"seconds_per_iteration": TIMES}, unlearning=[{"node": 1, "at_time": 321.0}])
    err = validate_error(raw, tmp_path, capsys)
    assert "unlearning[0].at_time: is 321 s, after the longest a run can last (320 s" in err, err
    assert "the slowest node's compute.seconds_per_iteration" in err, err
    raw["unlearning"] = [{"node": 1, "at_time": 3.0}]
    res = gs.run(raw, runs=2, plots=False)
    assert res.requests["served"].all()
    # the slot a time falls in depends on the walk: no exact expectation from the request's slot
    (entry,) = res.theory["t"]["removal_latency"]
    assert entry["at_slot"] is None and "compute at their own speeds" in entry["method"]
