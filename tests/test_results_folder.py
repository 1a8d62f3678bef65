"""One results folder however it is written (issue 20, items 12, 13 and 15): ``Results.write``
writes the folder ``gossipsim run`` writes (status, --resume and plot know it), a sweep over
NetworkX graphs given from Python, and the tables as CSV, Parquet or both."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.cli.parser import main
from gossipsim.errors import ConfigError
from gossipsim.execution import executors, runner
from gossipsim.results import reading, repair, writing
from gossipsim.study.scenario import parse_study
from tests.helpers import base_scenario, to_toml

TABLES = ("metrics", "runs", "requests", "visits", "failures")


def _raw(**over) -> dict:
    raw = base_scenario(
        scenario={"name": "w", "seed": 5, "runs": 4, "iterations": 120},
        topology={"kind": "ring", "nodes": 6},
        unlearning=[{"node": 2, "at_iteration": 40}],
        **over,
    )
    raw["sweep"] = {"scheduler.kind": ["metropolis-hastings", "uniform"]}
    return raw


def _file(tmp_path: Path, raw: dict | None = None) -> Path:
    path = tmp_path / "w.toml"
    path.write_text(to_toml(raw or _raw()))
    return path


def _status(folder: Path, capsys) -> dict:
    capsys.readouterr()
    assert main(["status", str(folder), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _nothing_runs(monkeypatch) -> None:
    """Any run from now on fails the test (in this process: the serial executor)."""

    def refuse(*args, **kwargs):
        raise AssertionError("a run was run again")

    monkeypatch.setattr(executors, "run_unit", refuse)


def _files(folder: Path) -> dict[str, bytes]:
    """The tables, summary.json and the record of the runs, by name."""
    names = [p for p in folder.iterdir() if p.is_file()] + [folder / ".gossipsim" / "study.json"]
    return {p.name: p.read_bytes() for p in names}


def _same_tables(a: gs.Results, b: gs.Results) -> None:
    assert a.variants == b.variants
    for name, table in a.tables().items():
        pd.testing.assert_frame_equal(b.tables()[name], table, obj=name)


# ------------------------------------------------------------------ item 12: Results.write


def test_a_folder_written_by_results_write_is_a_finished_sweep(tmp_path, monkeypatch, capsys):
    """res.write(DIR) after a run in memory: status counts its runs, --resume runs nothing and
    leaves the same tables, plot draws from it; and the folder is the one `gossipsim run` writes."""
    path = _file(tmp_path)
    res = gs.run(path)
    out = tmp_path / "written"
    res.write(out)
    assert _status(out, capsys) == {
        "name": "w", "complete": True, "runs": 8, "done": 8, "failed": 0, "remaining": 0,
        "running": None, "damaged": [], "repairable": False, "duplicate_parts": 0,
    }  # fmt: skip
    before = _files(out)
    _nothing_runs(monkeypatch)
    assert main(["run", str(path), "--out", str(out), "--resume", "--no-plots"]) == 0
    assert _files(out) == before
    again = gs.run(path, out=out, resume=True, plots=False)
    _same_tables(res, again)
    assert main(["plot", str(out), "--figure", "cover_time"]) == 0
    assert (out / "plots" / "cover_time.png").is_file()
    monkeypatch.undo()
    ran = tmp_path / "ran"
    assert main(["run", str(path), "--out", str(ran), "--no-plots"]) == 0
    assert _files(ran) == _files(out)  # tables, summary.json and the record, byte for byte


def test_results_write_counts_failed_runs_and_carries_the_record(tmp_path, monkeypatch, capsys):
    real = runner.simulate_run

    def flaky(world, run, seed):
        if run == 1:
            raise RuntimeError("disk on fire")
        return real(world, run, seed)

    monkeypatch.setattr(runner, "simulate_run", flaky)
    path = _file(tmp_path)
    res = gs.run(path, engine="event")
    monkeypatch.undo()
    res.write(tmp_path / "a")
    info = _status(tmp_path / "a", capsys)
    assert (info["done"], info["failed"], info["remaining"]) == (6, 2, 0)
    # a folder read back and written elsewhere is still the same sweep: --resume runs nothing
    gs.load_results(tmp_path / "a").write(tmp_path / "b")
    assert _status(tmp_path / "b", capsys) == info
    _nothing_runs(monkeypatch)
    assert main(["run", str(path), "--out", str(tmp_path / "b"), "--resume", "--no-plots"]) == 1
    assert "2 run(s) failed" in capsys.readouterr().err
    # another scenario is refused as for any folder
    other = _file(tmp_path, _raw(metrics={"tolerance": 1e-6}))
    assert main(["run", str(other), "--out", str(tmp_path / "b"), "--resume"]) == 2
    assert "another scenario" in capsys.readouterr().err


def test_resuming_a_finished_sweep_runs_nothing_and_redraws_the_figures(
    tmp_path, monkeypatch, capsys
):
    path = _file(tmp_path)
    out = tmp_path / "r"
    assert main(["run", str(path), "--out", str(out), "--no-plots"]) == 0
    before = _files(out)
    _nothing_runs(monkeypatch)
    assert main(["run", str(path), "--out", str(out), "--resume", "--no-plots"]) == 0
    assert _files(out) == before

    def draw(res, folder):  # what the figures are drawn from: the tables read back
        (folder / "runs.txt").write_text(str(len(res.runs)))

    gs.run(path, out=out, resume=True, make_plots=draw)
    assert (out / "plots" / "runs.txt").read_text() == "8"
    assert _files(out) == before


def test_folders_of_results_write_without_a_record(tmp_path, capsys):
    """Folders written by an older Results.write (no .gossipsim/): status reads summary.json,
    --resume says in one line what the folder is."""
    path = _file(tmp_path)
    out = tmp_path / "old"
    gs.run(path).write(out)
    (out / ".gossipsim" / "study.json").unlink()
    (out / ".gossipsim").rmdir()
    info = _status(out, capsys)
    assert (info["complete"], info["runs"], info["done"], info["remaining"]) == (True, 8, 8, 0)
    assert main(["run", str(path), "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--resume" in err and "Results.write" in err


# ------------------------------------------------------------------ item 13: graphs in a sweep


def _graphs() -> dict[str, nx.Graph]:
    lollipop = nx.lollipop_graph(5, 3)
    nx.set_edge_attributes(lollipop, 1e6, "rate_bps")
    return {"ring7": nx.cycle_graph(7), "lollipop": lollipop}


def _graph_sweep(graphs) -> dict:
    raw = base_scenario(scenario={"name": "g", "seed": 2, "runs": 6, "iterations": 150})
    raw["topology"] = nx.path_graph(3)  # replaced by each graph of the sweep
    raw["unlearning"] = [{"node": 0, "at_iteration": 60}]
    raw["sweep"] = {"topology": graphs, "scheduler.kind": ["metropolis-hastings", "uniform"]}
    return raw


def test_a_sweep_over_graphs_runs_one_variant_per_graph(tmp_path):
    graphs = _graphs()
    res = gs.run(_graph_sweep(graphs))
    assert res.variants == [
        "ring7, kind=metropolis-hastings", "ring7, kind=uniform",
        "lollipop, kind=metropolis-hastings", "lollipop, kind=uniform",
    ]  # fmt: skip
    # a typed column, like any swept key, beside the variant
    assert list(res.runs.columns[:3]) == ["variant", "topology", "scheduler.kind"]
    assert pd.api.types.is_string_dtype(res.runs["topology"])
    assert res.runs.groupby("topology", sort=False).size().to_dict() == {
        "ring7": 12,
        "lollipop": 12,
    }
    for label in res.variants:
        name = label.split(",")[0]
        graph = res.graphs[label]
        assert sorted(graph.edges) == sorted(graphs[name].edges)
        # the runs walked that graph: the exact cover time of each (independent of the sweep)
        scheduler = label.split("=")[1]
        exact = gs.exact_cover_moves(graphs[name], scheduler)
        assert res.theory[label]["exact_cover_moves"] == pytest.approx(exact, rel=1e-9)
    assert res.graphs["lollipop, kind=uniform"].edges[0, 1]["rate_bps"] == 1e6
    raw = res.study.raw["sweep"]["topology"]
    assert set(raw) == {"ring7", "lollipop"} and "topology" not in res.study.raw
    assert raw["ring7"].startswith("networkx graph: 7 nodes, 7 edges, sha256 ")
    json.dumps(res.summary())


def test_a_list_of_graphs_is_labelled_by_name_or_position():
    karate = nx.karate_club_graph()
    study = parse_study(_graph_sweep([nx.cycle_graph(5), karate]))
    assert [v.values["topology"] for v in study.variants[::2]] == [
        "graph 1", "Zachary's Karate Club",
    ]  # fmt: skip
    assert study.swept_graphs["graph 1"].number_of_nodes() == 5


def test_a_graph_sweep_is_saved_reloaded_and_resumed_like_a_single_graph(
    tmp_path, monkeypatch, capsys
):
    out = tmp_path / "g"
    res = gs.run(_graph_sweep(_graphs()), out=out, plots=False)
    assert sorted(p.name for p in (out / "graphs").iterdir()) == ["1.graphml", "3.graphml"]
    back = gs.load_results(out)
    _same_tables(res, back)
    assert back.study.swept_graphs["lollipop"].edges[0, 1]["rate_bps"] == 1e6
    assert list(back.study.swept_graphs["lollipop"].nodes) == list(_graphs()["lollipop"].nodes)
    assert _status(out, capsys)["done"] == 24
    assert main(["plot", str(out), "--figure", "visits"]) == 0
    _nothing_runs(monkeypatch)
    _same_tables(res, gs.run(_graph_sweep(_graphs()), out=out, resume=True, plots=False))
    monkeypatch.undo()
    # other graphs under the same labels are another sweep
    other = _graphs()
    other["ring7"] = nx.cycle_graph(8)
    with pytest.raises(ConfigError, match="^--resume: .*another scenario"):
        gs.run(_graph_sweep(other), out=out, resume=True, plots=False)
    # an interrupted sweep over graphs resumes to the same tables
    from gossipsim.core.streams import run_seed
    from gossipsim.execution.runner import simulate_run
    from gossipsim.results.store import RunStore
    from gossipsim.world.world import build_world

    study = parse_study(_graph_sweep(_graphs()))
    cut = tmp_path / "cut"
    store = RunStore(cut, study)
    world = build_world(study.variants[2].scenario)
    for r in (0, 3):
        store.save(2, simulate_run(world, r, run_seed(study.seed, r)))
    store.commit()
    assert _status(cut, capsys)["done"] == 2
    _same_tables(res, gs.run(_graph_sweep(_graphs()), out=cut, resume=True, plots=False))


def test_a_graph_sweep_gives_the_same_tables_on_workers_and_dask(tmp_path):
    pytest.importorskip("dask.distributed")
    folders = {}
    for name, kwargs in (
        ("serial", {}),
        ("pool", {"workers": 2}),
        ("dask", {"cluster": "local:2"}),
    ):
        folders[name] = tmp_path / name
        gs.run(_graph_sweep(_graphs()), out=folders[name], **kwargs, plots=False)
    for name in (*(f"{t}.csv" for t in TABLES), "summary.json"):
        serial = (folders["serial"] / name).read_bytes()
        assert (folders["pool"] / name).read_bytes() == serial, name
        assert (folders["dask"] / name).read_bytes() == serial, name


def test_replace_keeps_the_swept_graphs():
    study = parse_study(_graph_sweep(_graphs()))
    fewer = study.replace("scenario.runs", 2)
    assert [v.label for v in fewer.variants] == [v.label for v in study.variants]
    assert fewer.variants[2].scenario.topology.graph is study.swept_graphs["lollipop"]
    assert fewer.variants[0].scenario.run.runs == 2
    other = study.replace("sweep.topology", {"star": nx.star_graph(4)})
    assert [v.values["topology"] for v in other.variants] == ["star", "star"]
    fixed = study.replace("topology", nx.cycle_graph(4))  # fixing the topology drops the dimension
    assert [v.label for v in fixed.variants] == ["metropolis-hastings", "uniform"]


@pytest.mark.parametrize(
    ("graphs", "key", "words"),
    [
        ({"ring": nx.cycle_graph(5), "bad": 3}, "sweep.topology.bad", "must be a NetworkX graph"),
        ([nx.cycle_graph(5), "ring"], "sweep.topology[1]", "must be a NetworkX graph"),
        ({}, "sweep.topology", "is empty"),
        ([], "sweep.topology", "non-empty list"),
        ([nx.Graph(name="a"), nx.Graph(name="a")], "sweep.topology[1]", "has the label 'a'"),
        ({"d": nx.DiGraph([(0, 1), (1, 2)])}, "sweep.topology.d", "DiGraph"),
        ({"m": nx.MultiGraph([(0, 1), (1, 2)])}, "sweep.topology.m", "MultiGraph"),
        ({"split": nx.Graph([(0, 1), (2, 3)])}, "sweep.topology.split", "disconnected"),
        ({3: nx.cycle_graph(5)}, "sweep.topology", "labels of graphs must be non-empty strings"),
        ({"": nx.cycle_graph(5)}, "sweep.topology", "labels of graphs must be non-empty strings"),
    ],
)
def test_bad_graph_sweeps_are_one_line_errors(graphs, key, words):
    raw = _graph_sweep(graphs)
    raw["unlearning"] = []
    with pytest.raises(ConfigError) as err:
        parse_study(raw)
    assert err.value.key == key and words in err.value.message
    assert "\n" not in str(err.value)


def test_a_graph_sweep_cannot_be_mixed_with_other_topology_keys():
    raw = _graph_sweep(_graphs())
    raw["sweep"]["topology.nodes"] = [7]
    with pytest.raises(ConfigError, match="^sweep.topology: a sweep over graphs sets the whole"):
        parse_study(raw)
    raw = _graph_sweep(_graphs())
    raw["sweep"]["cases"] = [{"topology.nodes": 7}]
    with pytest.raises(ConfigError, match="topology.nodes cannot be set beside it"):
        parse_study(raw)


def test_a_request_missing_from_one_graph_names_the_variant():
    raw = _graph_sweep({"ring7": nx.cycle_graph(7), "path3": nx.path_graph(3)})
    raw["unlearning"] = [{"node": 5, "at_iteration": 60}]
    with pytest.raises(ConfigError, match=r"^unlearning\[0\].node: .*variant 'path3, kind="):
        gs.run(raw)


# The graph sweep example of docs/python-api.md runs, as written (4 runs per variant), in
# tests/test_docs_blocks.py's session of that page, whose later blocks draw its figures; what was
# asserted of it here is asserted above on a smaller sweep: the labels' order and the typed
# `topology` column (test_a_sweep_over_graphs_runs_one_variant_per_graph), and the same variants
# read back (test_a_graph_sweep_is_saved_reloaded_and_resumed_like_a_single_graph).


# ------------------------------------------------------------------ item 15: --tables


def test_parquet_only_tables_are_read_by_every_command(tmp_path, monkeypatch, capsys):
    pytest.importorskip("pyarrow")
    path = _file(tmp_path)
    out = tmp_path / "pq"
    assert main(["run", str(path), "--out", str(out), "--tables", "parquet", "--no-plots"]) == 0
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == sorted(
        [f"{t}.parquet" for t in TABLES] + ["summary.json"]
    )
    assert json.loads((out / "summary.json").read_text())["table_formats"] == ["parquet"]
    res = gs.run(path)
    _same_tables(res, gs.load_results(out))
    assert _status(out, capsys)["done"] == 8
    assert main(["plot", str(out), "--figure", "latency"]) == 0
    assert main(["compare", str(out), str(out), "--out", str(tmp_path / "c.png")]) == 0
    _nothing_runs(monkeypatch)
    args = ["run", str(path), "--out", str(out), "--resume", "--no-plots"]
    assert main([*args, "--tables", "parquet"]) == 0
    assert not list(out.glob("*.csv"))
    monkeypatch.undo()
    # an interrupted sweep resumed with --tables parquet
    cut = tmp_path / "cut"
    from gossipsim.results.store import RunStore

    store = RunStore(cut, gs.load_scenario(path))
    store.open()
    assert main(["run", str(path), "--out", str(cut), "--resume", "--tables", "parquet"]) == 0
    _same_tables(res, gs.load_results(cut))
    assert not list(cut.glob("*.csv"))
    (cut / "metrics.parquet").unlink()  # a damaged Parquet-only folder
    with pytest.raises(ConfigError, match=r"^DIR: .*metrics.parquet' is missing"):
        gs.load_results(cut)


def test_tables_formats_from_python_and_stale_files(tmp_path):
    pytest.importorskip("pyarrow")
    res = gs.run(_raw())
    out = tmp_path / "t"
    res.write(out)  # auto: CSV and Parquet copies where pyarrow is installed
    assert (out / "runs.csv").is_file() and (out / "runs.parquet").is_file()
    assert json.loads((out / "summary.json").read_text())["table_formats"] == ["csv", "parquet"]
    res.write(out, tables="parquet")  # the CSV files of the earlier write are removed
    assert not list(out.glob("*.csv")) and (out / "metrics.parquet").is_file()
    _same_tables(res, gs.load_results(out))
    res.write(out, tables="csv")
    assert not list(out.glob("*.parquet")) and (out / "metrics.csv").is_file()
    assert json.loads((out / "summary.json").read_text())["table_formats"] == ["csv"]
    gs.run(_raw(), out=out, tables="both", plots=False)
    assert len(list(out.glob("*.csv"))) == len(list(out.glob("*.parquet"))) == 5
    with pytest.raises(ConfigError, match="^tables: must be one of auto, csv, parquet, both"):
        gs.run(_raw(), tables="feather")
    with pytest.raises(ConfigError, match="^tables: give tables or parquet"):
        res.write(out, tables="csv", parquet=True)


def test_parquet_without_pyarrow_is_one_line(tmp_path, monkeypatch, capsys):
    pytest.importorskip("pyarrow")
    path = _file(tmp_path)
    out = tmp_path / "pq"
    assert main(["run", str(path), "--out", str(out), "--tables", "parquet", "--no-plots"]) == 0
    for module in (writing, reading, repair):  # where the tables are written, read, rewritten
        monkeypatch.setattr(module, "parquet_available", lambda: False)
    capsys.readouterr()
    for args in (
        ["run", str(path), "--out", str(tmp_path / "new"), "--tables", "parquet"],
        ["run", str(path), "--out", str(tmp_path / "new"), "--tables", "both"],
        ["plot", str(out)],
        ["compare", str(out), "--out", str(tmp_path / "c.png")],
        ["run", str(path), "--out", str(out), "--resume", "--tables", "csv"],
    ):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "pip install 'gossipsim[parquet]'" in err, (args, err)
    assert not (tmp_path / "new").exists()
    with pytest.raises(ConfigError, match="^DIR: .*Parquet files only, which needs pyarrow"):
        gs.load_results(out)
    assert _status(out, capsys)["done"] == 8  # status reads no table
    assert (
        main(["run", str(path), "--out", str(tmp_path / "c"), "--tables", "csv", "--no-plots"]) == 0
    )
