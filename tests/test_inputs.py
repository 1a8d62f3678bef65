"""Bad or extreme input is one line, not a traceback, a fork storm or a hang (issue 21, items 8 to 15):
each test fails on the code before that issue."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import gossipsim as gs
import gossipsim.cover as ct
from gossipsim.cli.parser import main
from gossipsim.execution import executors
from tests.helpers import base_scenario, to_toml


def _scenario(tmp_path: Path, name: str = "s.toml", runs: int = 4, **sections) -> Path:
    raw = base_scenario(
        scenario={"name": "inputs", "seed": 3, "runs": runs, "iterations": 60}, **sections
    )
    path = tmp_path / name
    path.write_text(to_toml(raw))
    return path


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _cli(args: list[str], timeout: float, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command in a fresh interpreter, killed after ``timeout`` s (a hang fails the test)."""
    return subprocess.run(
        [sys.executable, "-m", "gossipsim", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


# ------------------------------------------------------------------------- 8. tracebacks


def test_random_geometric_radius_beyond_the_square_links_every_pair(tmp_path, capsys):
    """radius = 1e308 squared overflowed in the size estimate (validate and run); a radius of 1 or
    more links every pair of the unit square's points: the complete graph."""
    topology = {"kind": "random_geometric", "nodes": 12, "radius": 1e308}
    path = _scenario(tmp_path, topology=topology)
    assert main(["validate", str(path)]) == 0
    assert "12 nodes, 66 edges" in capsys.readouterr().out
    assert main(["run", str(path), "--out", str(tmp_path / "R"), "--no-plots"]) == 0


def test_an_out_name_too_long_for_the_file_system_is_one_line(tmp_path, capsys):
    path = _scenario(tmp_path)
    assert main(["run", str(path), "--out", str(tmp_path / ("x" * 300))]) == 2
    assert "--out" in _one_line(capsys.readouterr().err)
    with pytest.raises(gs.ConfigError, match="--out"):
        gs.run(path, out=tmp_path / ("y" * 300), plots=False)


def test_covertime_refuses_runs_that_cannot_fit_in_memory(capsys):
    assert main(["covertime", "--topology", "ring", "--nodes", "8", "--runs", str(10**12)]) == 2
    assert "--runs" in _one_line(capsys.readouterr().err)


@pytest.mark.parametrize("address", ["inproc://x", "tls://127.0.0.1:1"])
def test_a_cluster_address_no_client_can_use_is_one_line_at_once(tmp_path, address):
    pytest.importorskip("dask.distributed")
    path = _scenario(tmp_path)
    start = time.monotonic()
    done = _cli(["run", str(path), "--cluster", address, "--out", "R"], 60, tmp_path)
    assert done.returncode == 2
    assert "--cluster" in _one_line(done.stderr)
    assert time.monotonic() - start < 15  # Dask's timeouts were 20 s, then a 62-line traceback
    assert not (tmp_path / "R").exists()


# --------------------------------------------------------------------- 9. fork storms and hangs


def _executor_arguments(monkeypatch) -> list[tuple[int, str | None]]:
    """The (workers, cluster) that gs.run starts its executor with (an in-process one is used)."""
    seen: list[tuple[int, str | None]] = []
    real = executors.make_executor

    def record(workers: int = 1, cluster: str | None = None):
        seen.append((workers, cluster))
        return real(1, None)

    monkeypatch.setattr(executors, "make_executor", record)
    return seen


@pytest.mark.parametrize("workers", [5000, 1_000_000])
def test_workers_are_capped_by_the_runs_and_the_cores(tmp_path, monkeypatch, workers):
    seen = _executor_arguments(monkeypatch)
    path = _scenario(tmp_path, runs=8)
    with pytest.warns(UserWarning, match=f"--workers {workers}: .* used"):
        res = gs.run(path, workers=workers, engine="event")
    assert len(res.runs) == 8
    ((used, cluster),) = seen
    assert cluster is None and 1 <= used <= min(8, executors.usable_cores())


def test_a_local_cluster_is_capped_likewise(tmp_path, monkeypatch):
    seen = _executor_arguments(monkeypatch)
    path = _scenario(tmp_path, runs=3)
    with pytest.warns(UserWarning, match="--cluster local:99999: "):
        gs.run(path, cluster="local:99999", engine="event")
    ((_, cluster),) = seen
    assert cluster is not None and cluster.startswith("local:")
    assert 1 <= int(cluster.split(":")[1]) <= min(3, executors.usable_cores())


def test_usable_workers():
    assert executors.usable_workers(5000, units=8, cores=2) == 2
    assert executors.usable_workers(5000, units=1, cores=16) == 1
    assert executors.usable_workers(3, units=100, cores=16) == 3


@pytest.mark.parametrize(("topology", "nodes"), [("ring", 20000), ("path", 6000)])
def test_hitting_on_a_long_ring_or_path_takes_seconds(tmp_path, topology, nodes):
    """About 6.7·10^7 (ring) and 2.4·10^7 (path, from its end) moves from a stationary holder: a
    NumPy pass per slot took minutes (a ring of 2,000 took 8.8 s, a path of 1,500 38 s), the ±1
    walk drawn in blocks takes about a second."""
    args = ["hitting", "--topology", topology, "--nodes", str(nodes), "--node", "0", "--runs", "1"]
    done = _cli([*args, "--json"], 60, tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["runs"] == 1 and out["mean_latency"] >= 1


@pytest.mark.parametrize("scheduler", ["metropolis-hastings", "simple-random-walk", "uniform"])
@pytest.mark.parametrize(
    "nodes", [pytest.param(3, marks=pytest.mark.slow), 8, pytest.param(41, marks=pytest.mark.slow)]
)
@pytest.mark.parametrize("shape", ["ring", "path"])
def test_hitting_on_a_ring_or_a_path_matches_the_exact_expectation(scheduler, nodes, shape):
    """The shortcuts (a ±1 walk around the cycle, or on the path folded into a cycle of 2(K − 1)
    with Metropolis-Hastings' holding at its ends; Geometric(1/K) for the uniform scheduler) have
    the exact law: mean within 4 standard errors of the exact value (1 + (K² − 1)/6 on a ring,
    K for uniform), from a stationary holder and for a request at a slot."""
    if shape == "ring":
        g = nx.cycle_graph(nodes)
    else:  # labels out of order along the path: the order is read from the graph
        g = nx.relabel_nodes(nx.path_graph(nodes), {i: (5 * i) % nodes for i in range(nodes)})
    x = ct.monte_carlo_unlearning_latency(g, 1, scheduler, runs=20_000, rng=41)
    stats = ct.summarize(x)
    exact = ct.next_visit_latency(g, 1, scheduler)
    assert abs(stats["mean"] - exact) <= 4 * stats["se"], (stats["mean"], exact)
    if scheduler != "uniform" and shape == "ring":
        assert exact == pytest.approx(1 + (nodes**2 - 1) / 6)
    y = ct.monte_carlo_removal_latency(g, 1, 7, scheduler, runs=20_000, rng=42)
    stats = ct.summarize(y)
    exact = ct.expected_removal_latency(g, 1, 7, scheduler)
    assert abs(stats["mean"] - exact) <= 4 * stats["se"], (stats["mean"], exact)


def test_hitting_walks_too_long_to_simulate_are_refused_at_once(tmp_path):
    """A ring of 3,000,000 nodes: (K² − 1)/6 = 1.5·10^12 moves a walk; refused before the exact
    value is computed and before any walk, in one line naming --runs (the Monte Carlo ran for
    hours)."""
    code = """
import networkx as nx, gossipsim as gs, gossipsim.cover as ct
try:
    ct.monte_carlo_unlearning_latency(nx.cycle_graph(200_000), 0, runs=1, rng=1)
except gs.ConfigError as exc:
    print(exc.key)
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, cwd=tmp_path
    )
    assert done.stdout.strip() == "runs", done.stderr
    args = ["hitting", "--topology", "ring", "--nodes", "200000", "--node", "0", "--runs", "1"]
    done = _cli([*args, "--exact"], 60, tmp_path)
    assert done.returncode == 2 and "--runs" in _one_line(done.stderr)


# ------------------------------------------------------------- 10. validate says what run says


@pytest.mark.parametrize("runs", [2**62, 1_000_000_000])
def test_validate_refuses_the_runs_that_run_refuses_for_memory(tmp_path, capsys, runs):
    path = _scenario(tmp_path, runs=runs)
    assert main(["validate", str(path)]) == 2
    said = _one_line(capsys.readouterr().err)
    assert "scenario.runs" in said and "memory" in said
    assert main(["run", str(path), "--out", str(tmp_path / "R")]) == 2
    assert _one_line(capsys.readouterr().err) == said


@pytest.mark.parametrize(
    ("key", "base", "values"),
    [
        ("topology.nodes", "banana", [5, 6]),
        ("scheduler.kind", 12345, ["metropolis-hastings", "uniform"]),
        ("data.theta", "x", [0.2, 0.4]),  # checked by the model, when the world is built
    ],
)
def test_a_swept_key_s_base_value_is_checked(tmp_path, capsys, key, base, values):
    section, name = key.split(".")
    raw = base_scenario(sweep={key: values})
    raw.setdefault(section, {})[name] = base
    with pytest.raises(gs.ConfigError) as err:
        gs.check(gs.parse_study(raw))
    assert err.value.key == key and "sweep" in err.value.message
    path = tmp_path / "s.toml"
    path.write_text(to_toml(raw))
    assert main(["validate", str(path)]) == 2
    assert key in _one_line(capsys.readouterr().err)


# --------------------------------------------------------------------- 11. one run's interval


@pytest.mark.parametrize("command", ["covertime", "hitting"])
def test_one_run_has_no_confidence_interval(capsys, command):
    args = [command, "--topology", "ring", "--nodes", "8", "--runs", "1"]
    args += ["--node", "0"] if command == "hitting" else []
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    key = "ci95_moves" if command == "covertime" else "ci95_latency"
    assert out[key] is None and "undefined" in out["ci95_note"]
    assert main(args) == 0
    assert "95% CI undefined for one run" in capsys.readouterr().out
    stats = ct.summarize(np.array([5.0]))
    assert stats["ci95"] is None and np.isnan(stats["se"])


# ------------------------------------------------------------------------- 12. and 13. graphs


def test_labels_written_alike_are_refused():
    g = nx.Graph([(3, "3"), ("3", "a"), ("a", 3)])
    with pytest.raises(gs.ConfigError, match="written alike") as err:
        gs.parse_study(base_scenario(topology=g))
    assert err.value.key == "topology"


@pytest.mark.parametrize("kind", ["directed", "multi"])
def test_directed_or_multi_edge_graphml_is_refused_as_a_graph_object_is(tmp_path, kind):
    """One rule for files and objects: a DiGraph or MultiGraph from Python is refused, so is a
    directed or multi-edge GraphML file (it was made undirected and simple without a word)."""
    graph = nx.DiGraph([(0, 1), (1, 2), (2, 0)]) if kind == "directed" else nx.MultiGraph()
    if kind == "multi":
        graph.add_edges_from([(0, 1), (0, 1), (1, 2), (2, 0)])
    path = tmp_path / "g.graphml"
    nx.write_graphml(graph, path)
    with pytest.raises(gs.ConfigError) as from_object:
        gs.parse_study(base_scenario(topology=graph))
    with pytest.raises(gs.ConfigError, match="directed" if kind == "directed" else "parallel"):
        gs.check(gs.parse_study(base_scenario(topology={"kind": "graphml", "path": str(path)})))
    assert from_object.value.key == "topology"


# ----------------------------------------------------------------------- 14. the right key


def test_an_empty_points_per_node_list_names_its_key():
    raw = base_scenario(model={"kind": "linear-regression"}, data={"points_per_node": []})
    with pytest.raises(gs.ConfigError) as err:
        gs.check(gs.parse_study(raw))
    assert err.value.key == "data.points_per_node"


# --------------------------------------------------------------------------- 15. the Python API


@pytest.mark.parametrize("scenario", [None, 42, b"scenarios/fig3_beta_bernoulli.toml", 1.5])
def test_a_scenario_of_another_type_is_a_config_error(scenario):
    with pytest.raises(gs.ConfigError) as err:
        gs.run(scenario)
    assert err.value.key == "scenario"


def test_arguments_of_another_type_are_config_errors_naming_them(tmp_path):
    path = _scenario(tmp_path)
    with pytest.raises(gs.ConfigError, match="--out"):
        gs.run(path, out=123, plots=False)
    with pytest.raises(gs.ConfigError, match="DIR"):
        gs.load_results(None)
    with pytest.raises(gs.ConfigError, match="scenario file"):
        gs.load_scenario(None)
    raw = base_scenario()
    raw["unlearning"] = ({"node": n, "at_iteration": 10} for n in (1, 2))
    with pytest.raises(gs.ConfigError, match="unlearning: is a generator"):
        gs.run(raw)
    with pytest.raises(gs.ConfigError, match="replace"):
        gs.load_scenario(path).replace(iter([("scenario.runs", 2)]))


def test_numpy_integers_are_integers(tmp_path):
    path = _scenario(tmp_path)
    res = gs.run(path, runs=np.int64(3), seed=np.uint16(4), workers=np.int32(1))
    assert len(res.runs) == 3
    raw = base_scenario(
        scenario={"name": "np", "seed": np.int64(3), "runs": np.int8(2), "iterations": 60},
        data={"points_per_node": np.int64(20), "theta": np.float32(0.5)},
        unlearning=[{"node": np.int64(1), "at_iteration": np.int16(10)}],
        metrics={"tolerance": 1e-9, "record_every": np.uint8(1)},
    )
    res = gs.run(raw, overrides={"topology.nodes": np.int64(6)})
    assert len(res.runs) == 2 and res.requests["node"].tolist() == [1, 1]
    ring = nx.relabel_nodes(nx.cycle_graph(5), {i: np.int64(i) for i in range(5)})
    study = gs.parse_study({**raw, "topology": ring})
    assert all(type(v) is int for v in study.graph.nodes)


def test_library_warnings_are_said_as_what_they_mean_for_the_study(capsys):
    """NumPy's "overflow encountered in dot", SciPy's "Extremely bad integrand behavior" and
    matplotlib's "non-positive ylim" reached the user as they were; each is now one line saying
    what it means for the study, the library's words kept in parentheses."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy.integrate import IntegrationWarning

    from gossipsim.cli import parser

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.dot(np.full(3, 1e200), np.full(3, 1e200))
        warnings.warn("Extremely bad integrand behavior occurs", IntegrationWarning, stacklevel=1)
        fig, ax = plt.subplots()
        ax.set_yscale("log")
        ax.set_ylim(0, 1)
        plt.close(fig)
    for w in caught:
        parser._one_line_warning(w.message, w.category, w.filename, w.lineno)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3, lines
    overflow, integral, axis = lines
    assert "exceeded the largest float" in overflow and "overflow encountered in dot" in overflow
    assert "numerical integral" in integral and "SciPy" in integral
    assert "logarithmic axis" in axis and "non-positive ylim" in axis


@pytest.mark.parametrize("kind", ["ring", "path"])
def test_cli_rings_and_paths_are_built_as_arrays_equal_to_networkx(kind, monkeypatch):
    """covertime/hitting build a ring or a path straight into CSR (no NetworkX graph: a ring of
    5,000,000 nodes took 25 s through NetworkX before hitting could refuse its walks), the CSR of
    NetworkX's builder for every size."""
    import argparse

    import networkx as nx

    from gossipsim.cli import walks
    from gossipsim.topology import build_indexed

    expected = {n: build_indexed(kind, n, {})[0] for n in (2, 3, 4, 10, 57)}
    monkeypatch.setattr(nx, "cycle_graph", None)  # any use of NetworkX's builders fails
    monkeypatch.setattr(nx, "path_graph", None)
    for n, want in expected.items():
        args = argparse.Namespace(topology=kind, nodes=n, param=[], path=None, seed=0)
        got = walks._graph_from_args(args)
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_array_equal(got.indices, want.indices)
        assert list(got.labels) == list(want.labels)
    with pytest.raises(gs.ConfigError, match="topology.nodes: must be an integer >= 2"):
        walks._graph_from_args(
            argparse.Namespace(topology=kind, nodes=1, param=[], path=None, seed=0)
        )
