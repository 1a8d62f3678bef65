"""Finished work is never lost: bad arguments, failures after the runs, output folders, resume,
interrupts and the format of results parts (issue: safety, items 1, 2, 6 and 7)."""

from __future__ import annotations

import errno
import json
import math
import multiprocessing
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim import api
from gossipsim.cli.parser import main
from gossipsim.execution import executors, runner
from gossipsim.execution.executors import RunFailure
from gossipsim.execution.runner import BatchOutput, RunOutput
from gossipsim.results import store, studyrecord
from tests.helpers import base_scenario, to_toml

TABLES = ("metrics.csv", "runs.csv", "requests.csv", "visits.csv", "failures.csv", "summary.json")


def _scenario(tmp_path: Path, name: str = "s.toml", runs: int = 4, **sections) -> Path:
    raw = base_scenario(
        scenario={"name": "safe", "seed": 5, "runs": runs, "iterations": 60}, **sections
    )
    path = tmp_path / name
    path.write_text(to_toml(raw))
    return path


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _status(folder: Path, capsys) -> dict:
    assert main(["status", str(folder), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# ------------------------------------------------------------ 1. the executor starts before the folder


@pytest.mark.parametrize(
    "cluster", ["lcoal:2", "local:0", "tcp://127.0.0.1:9"], ids=["typo", "zero", "unreachable"]
)
def test_a_bad_cluster_leaves_finished_results_as_they_were(tmp_path, monkeypatch, capsys, cluster):
    if cluster.startswith("tcp"):
        pytest.importorskip("dask.distributed")
    monkeypatch.setattr(executors, "CLUSTER_TIMEOUT_S", 1.0)
    path = _scenario(tmp_path)
    out = tmp_path / "R"
    assert main(["run", str(path), "--out", str(out), "--no-plots"]) == 0
    before = _snapshot(out)
    capsys.readouterr()
    assert main(["run", str(path), "--out", str(out), "--cluster", cluster]) == 2
    assert "--cluster" in _one_line(capsys.readouterr().err)
    assert _snapshot(out) == before
    info = _status(out, capsys)
    assert info["complete"] and info["done"] == 4


def test_cluster_with_workers_is_an_error_not_an_override(tmp_path, capsys):
    path = _scenario(tmp_path)
    out = tmp_path / "R"
    assert (
        main(["run", str(path), "--out", str(out), "--workers", "2", "--cluster", "local:2"]) == 2
    )
    line = _one_line(capsys.readouterr().err)
    assert "--cluster" in line and "--workers" in line
    assert not out.exists()


# ------------------------------------------------------------------- 2. failures after the runs


def test_a_request_that_never_arrives_keeps_the_tables(tmp_path, capsys):
    """A request at 59.5 s, within the longest a run can last (60 slots of 1 s latency), but no
    slot starts after 59 s: no request is ever served."""
    path = _scenario(tmp_path, links={"latency_s": 1.0}, unlearning=[{"node": 1, "at_time": 59.5}])
    out = tmp_path / "R"
    code = main(["run", str(path), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err  # the figures skip what has no data, without warnings
    assert "warning" not in err
    for name in TABLES:
        assert (out / name).is_file(), name
    requests = pd.read_csv(out / "requests.csv")
    assert len(requests) == 4 and requests["request_iteration"].isna().all()
    assert _status(out, capsys)["complete"]


def test_a_figure_that_cannot_be_saved_keeps_the_tables_and_says_how_to_redraw(
    tmp_path, monkeypatch, capsys
):
    from matplotlib.figure import Figure

    def disk_full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    path = _scenario(tmp_path)
    out = tmp_path / "R"
    with monkeypatch.context() as patch:
        patch.setattr(Figure, "savefig", disk_full)
        assert main(["run", str(path), "--out", str(out)]) == 1
    line = _one_line(capsys.readouterr().err)
    assert "plotting failed" in line and "No space left" in line
    assert f"gossipsim plot {out}" in line
    for name in TABLES:
        assert (out / name).is_file(), name
    assert not (out / "plots").exists()
    assert not list(out.glob(".staging-*"))  # nothing half drawn left behind
    assert _status(out, capsys)["complete"]
    # the line's advice works
    assert main(["plot", str(out)]) == 0
    assert (out / "plots" / "kl_vs_iteration.png").is_file()


def test_every_run_failing_writes_failures_csv_and_a_complete_folder(tmp_path, monkeypatch, capsys):
    def broken(world, run, seed):
        raise RuntimeError("model exploded")

    monkeypatch.setattr(runner, "simulate_run", broken)
    path = _scenario(tmp_path)
    out = tmp_path / "R"
    assert main(["run", str(path), "--out", str(out), "--engine", "event"]) == 1
    line = _one_line(capsys.readouterr().err)
    assert "all 4 runs failed" in line and "failures.csv" in line
    failures = pd.read_csv(out / "failures.csv")
    assert list(failures["run"]) == [0, 1, 2, 3]
    assert failures["error"].str.contains("model exploded").all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["variants"]["safe"]["failed_runs"] == 4
    info = _status(out, capsys)
    assert info["complete"] and (info["done"], info["failed"]) == (0, 4)


def test_a_theory_failure_keeps_the_runs_and_is_recorded(tmp_path, monkeypatch, capsys):
    import gossipsim.measurement.theory
    from gossipsim.results.results import PostProcessingError

    def overflow(world, arrival_slots=None):
        raise ValueError("array is too big")

    monkeypatch.setattr(gossipsim.measurement.theory, "theory_for", overflow)
    path = _scenario(tmp_path)
    out = tmp_path / "R"
    assert main(["run", str(path), "--out", str(out), "--no-plots"]) == 1
    captured = capsys.readouterr()
    line = _one_line(captured.err)
    assert "theory" in line and "array is too big" in line and "safe" in line
    assert "mean cover iteration" in captured.out  # the summary of the runs is still printed
    for name in TABLES:
        assert (out / name).is_file(), name
    entry = json.loads((out / "summary.json").read_text())["variants"]["safe"]
    assert "theory" not in entry and "array is too big" in entry["theory_error"]
    assert len(pd.read_csv(out / "runs.csv")) == 4
    # from Python, the error carries the tables
    with pytest.raises(PostProcessingError) as info:
        gs.run(gs.load_scenario(path))
    assert len(info.value.results.runs) == 4


LOGISTIC_IRIS = {
    "scenario": {"name": "ece", "seed": 1, "runs": 2, "iterations": 30},
    "topology": {"kind": "complete", "nodes": 4},
    "model": {
        "kind": "logistic-regression",
        "family": "gaussian-diagonal",
        "prior": {"mean": 0.0, "variance": 1.0},
    },
    "data": {"dataset": "iris"},
    "protocol": {"estimator": "exact", "learning_rate": 0.2},
}


def test_ece_bins_too_large_cannot_lose_the_runs(tmp_path, capsys):
    """The issue's reproducer: refused up front (once validated) or, after the runs, one line with
    the tables and summary.json written; never a traceback."""
    raw = {**LOGISTIC_IRIS, "metrics": {"ece_bins": 2**62}}
    path = tmp_path / "ece.toml"
    path.write_text(to_toml(raw))
    out = tmp_path / "R"
    code = main(["run", str(path), "--out", str(out), "--no-plots"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code == 2:  # validated before anything runs
        assert "ece_bins" in _one_line(err) and not out.exists()
        return
    assert code == 1, err
    for name in TABLES:
        assert (out / name).is_file(), name
    assert _status(out, capsys)["complete"]


def test_a_disk_full_while_writing_the_tables_keeps_the_runs_for_resume(
    tmp_path, monkeypatch, capsys
):
    path = _scenario(tmp_path)
    full, out = tmp_path / "full", tmp_path / "R"
    assert main(["run", str(path), "--out", str(full), "--no-plots"]) == 0
    capsys.readouterr()
    from gossipsim.results import writing

    real = writing.write_csv

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(writing, "write_csv", disk_full)
        assert main(["run", str(path), "--out", str(out), "--no-plots"]) == 1
    captured = capsys.readouterr()
    line = _one_line(captured.err)
    assert "writing the tables failed" in line and "--resume" in line
    # "wrote" is said only once it is true: a log or a pipe must not read the failure as a success
    assert "wrote" not in captured.out
    assert f"the tables were NOT written to {out}/" in captured.out
    assert writing.write_csv is real
    info = _status(out, capsys)
    assert not info["complete"] and info["done"] == 4  # every run kept
    assert not list(out.glob(".staging-*"))
    assert main(["run", str(path), "--out", str(out), "--no-plots", "--resume"]) == 0
    for name in TABLES:
        assert (out / name).read_bytes() == (full / name).read_bytes(), name


def test_a_disk_full_while_committing_a_run_is_one_line_and_resumable(
    tmp_path, monkeypatch, capsys
):
    path = _scenario(tmp_path)
    out = tmp_path / "R"
    real = store.atomic_write_bytes
    calls = []

    def fills_up(target, data):
        calls.append(target)
        if len(calls) > 3:  # study.json and two runs fit
            raise OSError(errno.ENOSPC, "No space left on device", str(target))
        real(target, data)

    with monkeypatch.context() as patch:
        patch.setattr(store, "atomic_write_bytes", fills_up)  # the parts
        patch.setattr(studyrecord, "atomic_write_bytes", fills_up)  # study.json
        patch.setattr(store, "COMMIT_RUNS", 1)  # each run committed as it finishes
        assert main(["run", str(path), "--out", str(out), "--no-plots", "--engine", "event"]) == 1
    line = _one_line(capsys.readouterr().err)
    assert "No space left" in line and "--resume" in line
    assert _status(out, capsys)["done"] == 2
    assert main(["run", str(path), "--out", str(out), "--no-plots", "--resume"]) == 0
    assert len(pd.read_csv(out / "runs.csv")) == 4


# -------------------------------------------------------------------------- 6. output folders


def test_out_below_a_file_is_one_line(tmp_path, capsys):
    path = _scenario(tmp_path)
    (tmp_path / "file.txt").write_text("not a folder")
    assert main(["run", str(path), "--out", str(tmp_path / "file.txt" / "R")]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "--out" in line and "file.txt" in line
    assert (tmp_path / "file.txt").read_text() == "not a folder"


def test_out_without_write_permission_is_one_line(tmp_path, monkeypatch, capsys):
    path = _scenario(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    # as root every folder is writable: make this one read-only for the check itself
    monkeypatch.setattr(
        os, "access", lambda p, mode, **kw: False if Path(p) == locked else real(p, mode, **kw)
    )
    assert main(["run", str(path), "--out", str(locked / "R")]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "--out" in line and "permission" in line
    assert list(locked.iterdir()) == []


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root may write anywhere")
def test_out_in_a_read_only_folder_is_one_line(tmp_path, capsys):
    path = _scenario(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert main(["run", str(path), "--out", str(locked / "R")]) == 2
        assert "permission" in _one_line(capsys.readouterr().err)
    finally:
        locked.chmod(0o700)


def test_empty_out_is_an_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = _scenario(tmp_path)
    assert main(["run", str(path), "--out", ""]) == 2
    assert "--out" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "results").exists()
    with pytest.raises(gs.ConfigError, match="--out"):
        gs.run(gs.load_scenario(path), out="", plots=False)


@pytest.mark.parametrize("damage", ["corrupt", "not an object", "missing", "no metrics"])
@pytest.mark.parametrize("command", ["plot", "compare"])
def test_plot_and_compare_on_a_damaged_folder_are_one_line(tmp_path, capsys, damage, command):
    path = _scenario(tmp_path)
    out = tmp_path / "R"
    assert main(["run", str(path), "--out", str(out), "--no-plots"]) == 0
    if damage == "corrupt":
        (out / "summary.json").write_text('{"name": "safe", "varia')
    elif damage == "not an object":
        (out / "summary.json").write_text("[1, 2]")
    elif damage == "missing":
        (out / "summary.json").unlink()
    else:
        (out / "metrics.csv").unlink()
    capsys.readouterr()
    args = [command, str(out)] + (
        ["--out", str(tmp_path / "c.png")] if command == "compare" else []
    )
    assert main(args) == 2
    assert "DIR" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "c.png").exists()


@pytest.mark.parametrize("figure", ["x.txt", "x", "file.txt/x.png"])
def test_compare_out_must_be_a_figure_file_that_can_be_written(tmp_path, capsys, figure):
    path = _scenario(tmp_path)
    out = tmp_path / "R"
    assert main(["run", str(path), "--out", str(out), "--no-plots"]) == 0
    (tmp_path / "file.txt").write_text("keep")
    capsys.readouterr()
    assert main(["compare", str(out), "--out", str(tmp_path / figure)]) == 2
    assert "--out" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "x.txt").exists() and (tmp_path / "file.txt").read_text() == "keep"


# --------------------------------------------------------------------------- 7. resume and inputs


def _data_scenario(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "obs.csv"
    data.write_text(
        "node,x\n" + "".join(f"{n},{(n * 7 + k) % 3 == 0:d}\n" for n in range(10) for k in range(5))
    )
    raw = base_scenario(scenario={"name": "d", "seed": 5, "runs": 3, "iterations": 60})
    raw["data"] = {"path": "obs.csv"}  # relative to the scenario's folder
    path = tmp_path / "d.toml"
    path.write_text(to_toml(raw))
    return path, data


def _graph_scenario(tmp_path: Path) -> tuple[Path, Path]:
    graph = tmp_path / "g.edgelist"
    graph.write_text("".join(f"{i} {(i + 1) % 6}\n" for i in range(6)))
    raw = base_scenario(
        scenario={"name": "g", "seed": 5, "runs": 3, "iterations": 60},
        topology={"kind": "edgelist", "path": "g.edgelist"},
    )
    path = tmp_path / "g.toml"
    path.write_text(to_toml(raw))
    return path, graph


@pytest.mark.parametrize(
    ("make", "key", "change"),
    [
        (_data_scenario, "data.path", "0,1\n"),  # one more observation of node 0
        (_graph_scenario, "topology.path", "0 3\n"),  # one more edge
    ],
    ids=["data", "graph"],
)
def test_resume_refuses_changed_input_files(tmp_path, capsys, make, key, change):
    path, file = make(tmp_path)
    out = tmp_path / "R"
    assert main(["run", str(path), "--out", str(out), "--no-plots"]) == 0
    assert main(["run", str(path), "--out", str(out), "--no-plots", "--resume"]) == 0  # unchanged
    before = _snapshot(out)
    with open(file, "a") as fh:
        fh.write(change)
    capsys.readouterr()
    assert main(["run", str(path), "--out", str(out), "--no-plots", "--resume"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "--resume" in line and key in line and file.name in line and "changed" in line
    assert _snapshot(out) == before
    assert main(["run", str(path), "--out", str(out), "--no-plots"]) == 0  # a new sweep is fine


def test_the_bundled_data_set_is_an_input_of_the_fingerprint(monkeypatch):
    import gossipsim.data.datasets as datasets

    study = gs.parse_study(LOGISTIC_IRIS)
    before = studyrecord.input_hashes(study)
    assert list(before) == ["data.dataset=iris"]
    X, target, names = datasets._raw("iris")
    monkeypatch.setattr(datasets, "_raw", lambda name: (X + 1.0, target, names))
    assert studyrecord.input_hashes(study) != before  # e.g. scikit-learn ships other values


def test_pickled_parts_are_never_loaded(tmp_path, capsys):
    path = _scenario(tmp_path)
    study = gs.load_scenario(path)
    out = tmp_path / "R"
    store.RunStore(out, study)  # an interrupted sweep with no runs done yet
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    blob = pickle.dumps({"runs": [0], "failed": False}) + pickle.dumps(Payload())
    (out / ".gossipsim" / "parts" / "v0000-r000000.pkl").write_bytes(blob)
    (out / ".gossipsim" / "parts" / "v0000-r000000.part").write_bytes(pickle.dumps(Payload()))
    assert main(["status", str(out)]) == 2
    assert "pickle" in _one_line(capsys.readouterr().err)
    assert main(["run", str(path), "--out", str(out), "--resume", "--no-plots"]) == 2
    assert "pickle" in _one_line(capsys.readouterr().err)
    assert not marker.exists()
    # a pickle under the new name is not a part either: reported as damaged without being
    # unpickled, set aside, and its runs run again
    (out / ".gossipsim" / "parts" / "v0000-r000000.pkl").unlink()
    assert main(["run", str(path), "--out", str(out), "--resume", "--no-plots"]) == 0
    line = _one_line(capsys.readouterr().err)
    assert "damaged" in line and "v0000-r000000.part" in line
    assert not marker.exists()
    assert len(pd.read_csv(out / "runs.csv")) == 4


def _same(a, b) -> None:
    """Equal values, types and dtypes (NaN equal to NaN; a NumPy scalar equal to the Python value
    it holds, which is what the tables are built from)."""
    if isinstance(a, np.generic):
        a = a.item()
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
        assert [type(x) for x in a.ravel().tolist()] == [type(x) for x in b.ravel().tolist()]
        assert pd.Series(a.ravel()).equals(pd.Series(b.ravel()))
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b)
    else:
        assert a == b and type(a) is type(b), (a, b)


@pytest.mark.parametrize(
    "labels",
    [
        np.arange(3, dtype=np.int64),
        np.array(["a", "bb", "ccc"], dtype=object),
        np.array([1, "x", 2], dtype=object),
    ],
    ids=["int", "str", "mixed"],
)
def test_parts_round_trip_every_outcome_without_pickle(monkeypatch, labels):
    from gossipsim.results.store import decode_part, encode_part

    run = RunOutput(
        run=7,
        seed=2**62 + 5,
        run_row={
            "seed": 2**62 + 5,
            "cover_iteration": 3,
            "convergence_time": np.nan,
            "time": np.float64(0.25),
        },
        request_rows=[
            {
                "request": 0,
                "node": labels.tolist()[1],
                "settled_at_request": np.bool_(True),
                "latency": np.nan,
            },
            {
                "request": 1,
                "node": labels.tolist()[2],
                "settled_at_request": None,
                "latency": 4.0,
            },
        ],
        metrics={
            "iteration": np.arange(1, 4),
            "holder": labels,
            "kl": np.array([1.5, np.inf, 0.0]),
        },
        visits=np.array([1, 0, 2]),
    )
    batch = BatchOutput(
        runs=(3, 5),
        run_columns={"seed": np.array([11, 12], dtype=np.int64), "time": np.array([0.5, np.nan])},
        metric_runs=np.array([3, 3, 5]),
        metrics={"iteration": np.array([1, 2, 1]), "holder": labels, "kl": np.zeros(3)},
        visits=np.array([2, 2, 2]),
    )
    failure = RunFailure(run=4, seed=99, error='ValueError: bad "x"\u00e9')
    other = RunOutput(
        run=2,
        seed=3,
        run_row={**run.run_row, "seed": 3},
        request_rows=run.request_rows[:1],
        metrics={k: v[:2] for k, v in run.metrics.items()},
        visits=np.array([0, 1, 1]),
    )
    rows = BatchOutput.from_runs([run, other])  # runs of the event engine committed together
    assert rows.runs == (2, 7) and list(rows.metric_runs) == [2, 2, 7, 7, 7]
    assert [row["run"] for row in rows.request_rows] == [2, 7, 7]
    assert rows.visits.tolist() == [1, 1, 3]
    columns = BatchOutput(  # a batch of the vectorised engine with requests
        runs=(3, 5),
        run_columns=batch.run_columns,
        metric_runs=batch.metric_runs,
        metrics=batch.metrics,
        visits=batch.visits,
        request_columns={
            "run": np.array([3, 5]),
            "node": labels[:2],
            "settled_at_request": np.array([True, None], dtype=object),
            "latency": np.array([1.0, np.nan]),
        },
    )
    failures = [failure, RunFailure(run=9, seed=1, error="x")]
    for name in ("load", "loads", "Unpickler"):  # reading a part must never unpickle
        monkeypatch.setattr(pickle, name, lambda *a, **k: pytest.fail("unpickled"))
    for outcomes in ([run], [batch], [failure], [rows], [columns], failures):
        data = encode_part(outcomes)
        assert data.startswith(store.PART_MAGIC)
        back = decode_part(bytearray(data))
        assert [type(b) for b in back] == [type(o) for o in outcomes]
        for outcome, decoded in zip(outcomes, back, strict=True):
            _same(vars(outcome), vars(decoded))
        with pytest.raises(ValueError):  # a truncated part is refused, not half read
            decode_part(bytearray(data[:-3]))
    with pytest.raises(ValueError):  # one part, one kind
        encode_part([run, failure])
    (back,) = decode_part(bytearray(encode_part(run)))
    assert isinstance(back, RunOutput)
    back.metrics["kl"][0] = 2.0  # arrays are writable, as a run's own are


def test_stale_staging_folders_and_temporary_files_are_cleaned(tmp_path, capsys):
    path = _scenario(tmp_path)
    out = tmp_path / "R"
    assert main(["run", str(path), "--out", str(out), "--no-plots"]) == 0
    # what a kill during the final write or a commit leaves behind
    (out / ".staging-abc123").mkdir()
    (out / ".staging-abc123" / "metrics.csv").write_bytes(b"x" * 100_000)
    (out / ".gossipsim" / ".study.json.tmp-999").write_text("{")
    for resume in (["--resume"], []):
        (out / ".staging-def456").mkdir(exist_ok=True)
        assert main(["run", str(path), "--out", str(out), "--no-plots", *resume]) == 0
        assert not list(out.glob(".staging-*")), resume
        assert not list(out.rglob("*.tmp-*")), resume


def test_an_impossible_number_of_runs_is_refused_before_anything(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(api, "physical_memory", lambda: 8 * 2**30)
    path = _scenario(tmp_path)
    out = tmp_path / "R"
    start = time.monotonic()
    assert main(["run", str(path), "--out", str(out), "--runs", "100000000"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("gossipsim: error: --runs:") and "GiB" in line
    assert time.monotonic() - start < 10 and not out.exists()
    raw = base_scenario(scenario={"name": "big", "seed": 1, "runs": 100_000_000, "iterations": 60})
    with pytest.raises(gs.ConfigError, match="scenario.runs"):
        gs.run(raw)


def test_tasks_are_handed_out_lazily():
    """A sweep of 10^8 runs must not build a list of 10^8 tasks before the first run."""
    study = gs.parse_study(base_scenario(scenario={"name": "t", "seed": 1, "runs": 10**8}))
    todo = api._todo(study, {(0, 0)})
    work = executors.units(todo, ["event"])
    assert next(work) == (0, (1,), "event") and next(work) == (0, (2,), "event")
    batches = executors.units(api._todo(study, set()), ["vectorized"], batch=4)
    assert next(batches) == (0, (0, 1, 2, 3), "vectorized")


# --------------------------------------------------------------------------- 7. interrupts


def _long_scenario(tmp_path: Path) -> Path:
    """Many short runs (as unlearning_complete.toml): workers often wait for work, which is when
    a Ctrl-C used to make each of them print a traceback."""
    raw = base_scenario(
        scenario={
            "name": "long",
            "seed": 1,
            "runs": 3000,
            "iterations": 400,
            "stop_when_done": True,
        },
        unlearning=[{"node": 9, "at_iteration": 100}],
    )
    path = tmp_path / "long.toml"
    path.write_text(to_toml(raw))
    return path


# ``gossipsim run`` committing every quarter of a second (not every second: the tests wait for a
# first part), optionally on a slow disk: each commit then takes 20 ms, so the workers keep waiting
# for work
QUICK_COMMITS = """
import sys, time
from gossipsim.results import store
store.COMMIT_SECONDS = 0.25
if sys.argv[1] == "slow-disk":
    save = store.RunStore.save
    def slow_save(self, variant, outcome):
        time.sleep(0.02)
        save(self, variant, outcome)
    store.RunStore.save = slow_save
from gossipsim.cli.parser import main
sys.exit(main(sys.argv[2:]))
"""


def _start(tmp_path: Path, out: Path, *extra: str, slow_disk: bool = False) -> subprocess.Popen:
    """``gossipsim run`` of a long sweep in its own session (as from a terminal), once it has
    committed its first runs."""
    program = ["-c", QUICK_COMMITS, "slow-disk" if slow_disk else "normal-disk"]
    cmd = [sys.executable, *program, "run", str(_long_scenario(tmp_path)), "--out", str(out),
           "--no-plots", "--progress", "off", "--engine", "event", *extra]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    parts = out / ".gossipsim" / "parts"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(parts.glob("v*.part")):
        assert proc.poll() is None, proc.communicate()[1]
        time.sleep(0.02)
    return proc


@pytest.mark.parametrize(
    "executor", [["--workers", "2"], ["--cluster", "local:2"]], ids=["pool", "dask"]
)
def test_ctrl_c_prints_one_clean_line(tmp_path, capsys, executor):
    if "--cluster" in executor:
        pytest.importorskip("dask.distributed")
    out = tmp_path / "R"
    proc = _start(tmp_path, out, *executor, slow_disk=True)
    time.sleep(0.3)  # idle workers, waiting for the parent
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole group
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "interrupted" in _one_line(err) and "--resume" in err
    info = _status(out, capsys)
    assert not info["complete"] and info["done"] >= 1


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_pool_workers_exit_when_the_main_process_is_killed(tmp_path):
    proc = _start(tmp_path, tmp_path / "R", "--workers", "2")
    tasks = Path(f"/proc/{proc.pid}/task").iterdir()  # children of every thread of the process
    children = [int(x) for task in tasks for x in (task / "children").read_text().split()]
    assert len(children) == 2
    proc.kill()  # kill -9: no chance to stop the workers
    proc.wait()

    def running(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(running(pid) for pid in children):
        time.sleep(0.05)
    alive = [pid for pid in children if running(pid)]
    for pid in alive:  # do not leave them behind if the test fails
        os.kill(pid, signal.SIGKILL)
    assert alive == []


@pytest.mark.skipif(
    multiprocessing.get_start_method() != "fork", reason="the patched run reaches workers by fork"
)
def test_a_pool_worker_that_dies_is_a_recorded_failure(tmp_path, monkeypatch, capsys):
    real = runner.simulate_run

    def fatal(world, run, seed):
        if run == 2:
            os._exit(3)  # e.g. killed by the out-of-memory killer
        return real(world, run, seed)

    monkeypatch.setattr(runner, "simulate_run", fatal)
    path = _scenario(tmp_path, runs=6)
    out = tmp_path / "R"
    assert (
        main(
            [
                "run",
                str(path),
                "--out",
                str(out),
                "--no-plots",
                "--workers",
                "2",
                "--engine",
                "event",
            ]
        )
        == 1
    )
    failures = pd.read_csv(out / "failures.csv")
    assert list(failures["run"]) == [2] and "died" in failures["error"][0]
    assert sorted(pd.read_csv(out / "runs.csv")["run"]) == [0, 1, 3, 4, 5]
    assert "1 run(s) failed" in _one_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("requests", "window"),
    [([], 1), ([{"node": 3, "at_iteration": 60}], 1), ([{"node": 3, "at_iteration": 60}], 3)],
)
def test_a_run_whose_kl_is_not_finite_fails_with_its_cause(
    tmp_path, capsys, monkeypatch, requests, window
):
    """A divergence a run cannot compute (here: a target whose KL is NaN for the state holding node
    0's factor alone, which only runs starting at node 0 reach) fails that run: it is listed in
    failures.csv with the slot and the cause, its rows are in no table, the other runs' tables are
    written, and the command exits 1 with one line; NumPy's own RuntimeWarnings do not reach the
    user. Both engines give the same tables and failures (issue 21, item 7: this was a warning and
    exit 0, with the NaN in the tables). With a request, the retrain baseline's state holding node
    0's factor alone (its first visit after restarting) fails a run too; with a settling window
    the vectorised engine steps each run's protocol (its other path)."""
    from gossipsim.models.base import FamilyTarget

    original = FamilyTarget.kl
    holder: dict[str, np.ndarray] = {}

    def kl(self, states):
        value = np.asarray(original(self, states), dtype=float)
        alone = np.all(np.asarray(states) == holder["state"], axis=-1)
        with np.errstate(invalid="ignore"):
            return np.where(alone, np.log(-1.0 + 0 * value), value)

    path = tmp_path / "s.toml"
    raw = base_scenario(scenario={"name": "nf", "seed": 1, "runs": 24, "iterations": 200})
    if requests:
        raw["unlearning"] = requests
    raw["metrics"]["latency_window"] = window
    path.write_text(to_toml(raw))
    world = gs.build_world(gs.load_scenario(path).variants[0].scenario)
    holder["state"] = world.model.prior + world.model.fixed_data[0]
    monkeypatch.setattr(FamilyTarget, "kl", kl)
    for engine in ("event", "vectorized"):
        out = tmp_path / engine
        code = main(["run", str(path), "--out", str(out), "--no-plots", "--engine", engine])
        err = capsys.readouterr().err
        assert code == 1
        failures = pd.read_csv(out / "failures.csv")
        assert [line for line in err.splitlines() if line.strip()] == [
            f"gossipsim: {len(failures)} run(s) failed; their errors and seeds are in "
            f"{out}/failures.csv"
        ]
        assert "invalid value" not in err and "warning" not in err
        runs = pd.read_csv(out / "runs.csv")
        metrics = pd.read_csv(out / "metrics.csv")
        assert 0 < len(failures) < 24 and len(failures) + len(runs) == 24
        assert not set(failures["run"]) & set(runs["run"])
        assert set(metrics["run"]) == set(runs["run"])
        assert (metrics.loc[metrics["iteration"] == 1, "holder"] != 0).all()  # started elsewhere
        for error in failures["error"]:
            main_state = "the KL of the protocol's state to its target is NaN from slot 1 (state ("
            retrain = re.match(
                r"the KL of the retrain baseline's state to its target is NaN from slot (\d+) ",
                error.removeprefix("gossipsim.measurement.outputs.NonFiniteKL: "),
            )
            assert error.startswith(f"gossipsim.measurement.outputs.NonFiniteKL: {main_state}") or (
                requests and retrain and int(retrain.group(1)) >= 60
            ), error
            assert error.endswith("terms of the KL are beyond float64's range (an ∞ − ∞ or 0·∞)")
        assert (runs["nonfinite_kl_slots"] == 0).all()
        summary = json.loads((out / "summary.json").read_text())
        assert summary["variants"]["nf"]["failed_runs"] == len(failures)
    for name in ("runs", "metrics", "failures", "visits"):  # the same from either engine
        event, vectorized = (tmp_path / e / f"{name}.csv" for e in ("event", "vectorized"))
        assert event.read_bytes() == vectorized.read_bytes(), name
