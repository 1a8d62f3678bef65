"""The command line: end-to-end runs, determinism across workers, and one-line errors with exit 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from gossipsim.cli.parser import main
from tests.helpers import base_scenario, to_toml

SMALL = """
[scenario]
name = "small"
seed = 11
runs = 6
iterations = 120

[topology]
kind = "ring"
nodes = 6

[model]
kind = "beta-bernoulli"
prior = {{ a = 2, b = 2 }}

[data]
points_per_node = 20
theta = 0.3

[compute]
seconds_per_iteration = 0.01

[links]
rate_bps = 12800
latency_s = 0.002

[[unlearning]]
node = 2
at_iteration = 60

[metrics]
tolerance = 1e-10
record_every = {record_every}

[sweep]
"topology.kind" = ["ring", "complete"]
"""


def _write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _run(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_run_writes_the_results_folder(tmp_path, capsys):
    scenario = _write(tmp_path, SMALL.format(record_every=1))
    out = tmp_path / "res"
    code, stdout, _ = _run(["run", str(scenario), "--out", str(out)], capsys)
    assert code == 0, stdout
    for name in ("metrics.csv", "runs.csv", "requests.csv", "summary.json", "visits.csv"):
        assert (out / name).is_file(), name
    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics.columns)[:8] == [
        "variant",
        "topology.kind",  # the swept key, beside the variant label
        "run",
        "iteration",
        "time",
        "holder",
        "kl",
        "bits",
    ]
    runs = pd.read_csv(out / "runs.csv")
    assert list(runs.columns)[:11] == [
        "variant",
        "topology.kind",
        "run",
        "seed",
        "cover_iteration",
        "cover_moves",
        "convergence_iteration",
        "convergence_time",
        "convergence_threshold",
        "iterations",
        "time",
    ]
    assert len(runs) == 12 and set(runs["variant"]) == {"ring", "complete"}
    requests = pd.read_csv(out / "requests.csv")
    assert list(requests.columns)[:4] == ["variant", "topology.kind", "run", "request"]
    assert (runs["cover_moves"] == runs["cover_iteration"] - 1).all()
    assert {
        "node",
        "request_iteration",
        "latency",
        "latency_time",
        "retrain_latency",
        "retrain_latency_time",
    } <= set(requests.columns)
    summary = json.loads((out / "summary.json").read_text())
    stats = summary["variants"]["ring"]["runs"]["cover_iteration"]
    assert set(stats) >= {"mean", "median", "p12_5", "p87_5"}
    assert summary["variants"]["complete"]["requests"]["latency"]["mean"] >= 1
    plots = {p.name for p in (out / "plots").iterdir()}
    assert {
        "kl_vs_iteration.png",
        "kl_vs_time.png",
        "latency.png",
        "unlearning_kl.png",
        "cover_time.png",
        "visits.png",
    } <= plots
    # every slot is recorded; time and bits grow
    one = metrics[(metrics.variant == "ring") & (metrics.run == 0)]
    assert one["iteration"].tolist() == list(range(1, 121))
    assert one["time"].is_monotonic_increasing and one["bits"].is_monotonic_increasing


def test_record_every_keeps_last_and_event_slots(tmp_path, capsys):
    scenario = _write(tmp_path, SMALL.format(record_every=50))
    out = tmp_path / "res"
    assert _run(["run", str(scenario), "--out", str(out), "--no-plots"], capsys)[0] == 0
    metrics = pd.read_csv(out / "metrics.csv")
    runs = pd.read_csv(out / "runs.csv")
    requests = pd.read_csv(out / "requests.csv")
    for (variant, run), part in metrics.groupby(["variant", "run"]):
        its = set(part["iteration"])
        assert {1, 50, 100, 120} <= its
        row = runs[(runs.variant == variant) & (runs.run == run)].iloc[0]
        if pd.notna(row.convergence_iteration):
            assert int(row.convergence_iteration) in its
        for _, req in requests[(requests.variant == variant) & (requests.run == run)].iterrows():
            if pd.notna(req.latency):
                assert int(req.request_iteration + req.latency - 1) in its


def test_results_identical_for_any_number_of_workers(tmp_path, capsys):
    scenario = _write(tmp_path, SMALL.format(record_every=1))
    a, b = tmp_path / "a", tmp_path / "b"
    assert (
        _run(["run", str(scenario), "--out", str(a), "--no-plots", "--workers", "1"], capsys)[0]
        == 0
    )
    assert (
        _run(["run", str(scenario), "--out", str(b), "--no-plots", "--workers", "2"], capsys)[0]
        == 0
    )
    for name in ("metrics.csv", "runs.csv", "requests.csv", "visits.csv", "summary.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_missing_values_are_empty_cells(tmp_path, capsys):
    text = (
        SMALL.format(record_every=1)
        .replace("iterations = 120", "iterations = 3")
        .replace("at_iteration = 60", "at_iteration = 2")
    )
    scenario = _write(tmp_path, text)
    out = tmp_path / "res"
    assert _run(["run", str(scenario), "--out", str(out), "--no-plots"], capsys)[0] == 0
    lines = (out / "runs.csv").read_text().splitlines()
    assert any(",," in line for line in lines[1:])  # never-converged runs leave empty cells
    runs = pd.read_csv(out / "runs.csv")
    assert runs["convergence_iteration"].isna().any()


# That `validate` imports no pandas (a quarter of a second of its start-up) is checked in a fresh
# interpreter by tests/test_startup.py::test_validate_status_and_plot_import_no_engine[validate].


def test_a_run_whose_stderr_is_not_a_terminal_imports_no_progress_bar(
    tmp_path, capsys, monkeypatch
):
    """--progress auto with stderr captured (not a terminal): no bar, so tqdm is never imported
    (an import of it fails here)."""
    for name in [m for m in sys.modules if m == "tqdm" or m.startswith("tqdm.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "tqdm", None)  # `import tqdm...` raises ImportError
    scenario = _write(tmp_path, SMALL.format(record_every=1))
    code, _, err = _run(
        ["run", str(scenario), "--out", str(tmp_path / "out"), "--no-plots"], capsys
    )
    assert code == 0, err
    assert (tmp_path / "out" / "metrics.csv").exists()
    with pytest.raises(ImportError):  # the check can fail: a bar asked for imports tqdm
        main(
            ["run", str(scenario), "--out", str(tmp_path / "o2"), "--no-plots", "--progress", "on"]
        )


def test_validate_list_covertime_hitting_plot(tmp_path, capsys):
    scenario = _write(tmp_path, SMALL.format(record_every=1))
    code, out, _ = _run(["validate", str(scenario)], capsys)
    assert code == 0 and "valid" in out
    code, out, _ = _run(["list"], capsys)
    assert (
        code == 0
        and "barabasi_albert" in out
        and "dirichlet-categorical" in out
        and "metropolis-hastings" in out
        and 'kind = "module:Class"' in out
    )
    code, out, _ = _run(
        [
            "covertime",
            "--topology",
            "complete",
            "--nodes",
            "10",
            "--runs",
            "2000",
            "--exact",
            "--json",
        ],
        capsys,
    )
    data = json.loads(out)
    assert code == 0 and set(data) >= {"mean_moves", "ci95_moves", "exact_moves", "runs"}
    assert data["exact_moves"] == pytest.approx(25.4607, abs=1e-4)
    assert data["ci95_moves"][0] < data["mean_moves"] < data["ci95_moves"][1]
    code, out, _ = _run(
        ["hitting", "--topology", "karate", "--node", "0", "--runs", "2000", "--exact", "--json"],
        capsys,
    )
    data = json.loads(out)
    assert code == 0 and set(data) >= {"mean_latency", "ci95_latency", "exact_latency", "runs"}
    res = tmp_path / "res"
    assert _run(["run", str(scenario), "--out", str(res), "--no-plots"], capsys)[0] == 0
    code, out, _ = _run(["plot", str(res), "--format", "svg"], capsys)
    assert code == 0 and (res / "plots" / "kl_vs_iteration.svg").is_file()


@pytest.mark.parametrize("seed", [0, 5])
def test_covertime_seed_builds_the_scenarios_graph(tmp_path, capsys, seed):
    """`covertime --seed S` walks the graph a scenario with seed S simulates: its exact cover time
    (subset chain on this very graph) is the one in the scenario's summary."""
    import gossipsim as gs

    raw = base_scenario(
        scenario={"runs": 1, "iterations": 5, "seed": seed},
        topology={"kind": "barabasi_albert", "nodes": 9, "m": 2},
    )
    res = gs.run(raw)
    world = gs.build_world(res.study.variants[0].scenario)
    args = ["covertime", "--topology", "barabasi_albert", "--nodes", "9", "--param", "m=2"]
    code, out, _ = _run([*args, "--seed", str(seed), "--runs", "10", "--exact", "--json"], capsys)
    assert code == 0
    exact = res.theory[res.variants[0]]["exact_cover_moves"]
    assert json.loads(out)["exact_moves"] == pytest.approx(exact, rel=1e-12)
    assert json.loads(out)["exact_moves"] == pytest.approx(
        gs.exact_cover_moves(world.graph, start="uniform", method="subset-chain"), rel=1e-12
    )
    code, out, _ = _run(
        [*args, "--seed", str(seed + 1), "--runs", "10", "--exact", "--json"], capsys
    )
    assert json.loads(out)["exact_moves"] != pytest.approx(exact, rel=1e-6)  # another graph


def _base() -> dict:
    return {
        "scenario": {"runs": 2, "iterations": 20},
        "topology": {"kind": "ring", "nodes": 5},
        "model": {"kind": "beta-bernoulli"},
        "data": {"points_per_node": 5},
    }


BAD_INPUTS = [
    ({"topology": {"kind": "hypercube", "nodes": 5}}, "topology.kind"),
    ({"scenario": {"runz": 3}}, "scenario.runz"),
    ({"scenario": {"runs": "many"}}, "scenario.runs"),
    ({"scenario": {"runs": 0}}, "scenario.runs"),
    ({"topology": {"kind": "erdos_renyi", "nodes": 5, "p": 1.5}}, "topology.p"),
    ({"topology": {"kind": "ring", "nodes": 1}}, "topology.nodes"),
    ({"links": {"rate_bps": -5}}, "links.rate_bps"),
    ({"links": {"latency_s": -1}}, "links.latency_s"),
    ({"compute": {"seconds_per_iteration": -1}}, "compute.seconds_per_iteration"),
    ({"metrics": {"tolerance": 0}}, "metrics.tolerance"),
    ({"metrics": {"record_every": 0}}, "metrics.record_every"),
    ({"data": {"theta": 1.5}}, "data.theta"),
    ({"data": {"theta": [0.1, 0.2]}}, "data.theta"),
    ({"data": {"points_per_node": [1, 2]}}, "data.points_per_node"),
    ({"data": {"rate": 2.0}}, "data.rate"),
    ({"model": {"kind": "beta-bernoulli", "prior": {"a": 0, "b": 2}}}, "model.prior.a"),
    ({"model": {"kind": "gamma-poisson", "prior": {"shape": -1}}}, "model.prior.shape"),
    ({"model": {"kind": "beta-bernoulli", "temperature": 0}}, "model.temperature"),
    ({"model": {"kind": "beta-poisson"}}, "model.kind"),
    ({"unlearning": [{"node": 99, "at_iteration": 5}]}, "unlearning[0].node"),
    ({"unlearning": [{"node": 1}]}, "unlearning[0]"),
    ({"unlearning": [{"node": 1, "at_time": -2.0}]}, "unlearning[0].at_time"),
    ({"topology": {"kind": "edgelist", "path": "nope.edgelist"}}, "topology.path"),
    ({"topology": {"kind": "edgelist", "path": "two.edgelist"}}, "disconnected"),
    ({"topology": {"kind": "graphml", "path": "garbage.graphml"}}, "topology.path"),
    ({"scheduler": {"kind": "teleport"}}, "scheduler.kind"),
    ({"scheduler": {"start": 42}}, "scheduler.start"),
    ({"sweep": {"topology.nodes": 5}}, "sweep.topology.nodes"),
    ({"extra": {"x": 1}}, "extra"),
    ({"data": {"path": "missing.csv"}}, "data.path"),
    ({"data": {"path": "bad.csv"}}, "data.path"),
]


@pytest.mark.parametrize(("override", "key"), BAD_INPUTS, ids=[k for _, k in BAD_INPUTS])
def test_bad_input_is_one_line_exit_2_and_no_results(tmp_path, capsys, override, key):
    (tmp_path / "two.edgelist").write_text("0 1\n2 3\n")
    (tmp_path / "garbage.graphml").write_text("<graphml><oops")
    (tmp_path / "bad.csv").write_text("node,x\n0,1\n1,7\n")  # 7 is not a Bernoulli observation
    raw = _base()
    for section, table in override.items():
        if isinstance(table, dict) and isinstance(raw.get(section), dict) and section != "topology":
            raw[section] = {**raw[section], **table}
        else:
            raw[section] = table
    if "path" in raw["data"]:
        raw["data"] = {"path": raw["data"]["path"]}
    scenario = _write(tmp_path, to_toml(raw))
    out = tmp_path / "res"
    code, stdout, stderr = _run(["run", str(scenario), "--out", str(out)], capsys)
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert key in lines[0] and "Traceback" not in stderr
    assert not out.exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".res")] == []
    code, _, stderr = _run(["validate", str(scenario)], capsys)
    assert code == 2 and len(stderr.strip().splitlines()) == 1


def test_invalid_toml_is_one_line(tmp_path, capsys):
    scenario = _write(tmp_path, "[scenario\n")
    code, _, stderr = _run(["run", str(scenario)], capsys)
    assert code == 2 and "not valid TOML" in stderr and len(stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["run", "missing.toml"],
        ["run", "x.toml", "--workers", "0"],
        ["covertime", "--topology", "ring", "--nodes", "1"],
        ["covertime", "--topology", "erdos_renyi", "--nodes", "10", "--param", "p=2"],
        ["covertime", "--topology", "ring", "--nodes", "8", "--scheduler", "teleport"],
        ["hitting", "--topology", "ring", "--nodes", "8", "--node", "99"],
        ["plot", "/nonexistent/folder"],
        ["frobnicate"],
    ],
)
def test_cli_argument_errors(capsys, args):
    code = main(args)
    _, err = capsys.readouterr()
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("option", "args", "limit"),
    [
        (  # (no closed form: the subset chain)
            "--exact",
            ["--topology", "barabasi_albert", "--nodes", "23", "--param", "m=2"],
            "limited to 22 nodes (got 23)",
        ),
        ("--bounds", ["--topology", "ring", "--nodes", "5001"], "limited to 5000 nodes (got 5001)"),
    ],
)
def test_covertime_refuses_what_it_cannot_compute_before_the_monte_carlo(
    monkeypatch, capsys, option, args, limit
):
    """A graph too large for ``--exact`` (the subset chain) or ``--bounds`` (dense all-pairs
    hitting times) is refused at once, as that option's error, not after the Monte Carlo runs
    (minutes on a large graph)."""
    import gossipsim.cover as ct

    def no_runs(*_args, **_kwargs):
        raise AssertionError("the Monte Carlo ran before the refusal")

    monkeypatch.setattr(ct, "monte_carlo_cover_moves", no_runs)
    code = main(["covertime", *args, option])
    _, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{option}: " in err and limit in err and f"drop {option}" in err


def test_only_the_command_itself_freezes_its_start_up_objects(monkeypatch, capsys):
    """``gossipsim`` (main() reading sys.argv) moves what it imported out of the garbage
    collector's reach; main(argv) called from Python leaves the caller's objects alone."""
    import gc

    frozen = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    assert main(["list"]) == 0 and frozen == []
    monkeypatch.setattr("sys.argv", ["gossipsim", "list"])
    assert main() == 0 and frozen == [True]
    capsys.readouterr()


def test_progress_on_draws_a_bar_on_stderr(tmp_path, capsys):
    """tqdm.auto: text in a terminal (a widget in notebooks); the tables are unaffected."""
    path = tmp_path / "s.toml"
    raw = base_scenario()
    raw["scenario"]["runs"] = 3
    path.write_text(to_toml(raw))
    assert (
        main(["run", str(path), "--out", str(tmp_path / "o"), "--no-plots", "--progress", "on"])
        == 0
    )
    err = capsys.readouterr().err
    assert "3/3" in err and "run" in err


def test_gs_run_shows_progress_where_a_user_watches(capsys, monkeypatch):
    """Issue 20, item 11: by default gs.run draws a bar in an IPython shell or a Jupyter kernel
    (get_ipython() set), even though their stderr is no terminal, and none in a plain script."""
    import types

    import gossipsim as gs

    raw = base_scenario()
    raw["scenario"]["runs"] = 3
    gs.run(raw)
    assert "3/3" not in capsys.readouterr().err  # a script with its stderr captured: no bar
    shell = types.ModuleType("IPython")
    shell.get_ipython = lambda: object()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", shell)
    gs.run(raw)
    assert "3/3" in capsys.readouterr().err
    gs.run(raw, progress=False)
    assert "3/3" not in capsys.readouterr().err


def test_every_argument_of_every_command_says_what_it_is(capsys):
    """Issue 20, item 16: `gossipsim CMD --help` explains each argument, none left bare."""
    import argparse

    from gossipsim.cli.parser import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    bare = [
        f"{name} {action.dest}"
        for name, sub in commands.choices.items()
        for action in sub._actions
        if not isinstance(action, argparse._HelpAction) and not action.help
    ]
    assert bare == []
    for name in commands.choices:
        with pytest.raises(SystemExit):
            parser.parse_args([name, "--help"])
        assert "%" not in capsys.readouterr().out.replace("95%", "")  # printf escapes rendered
