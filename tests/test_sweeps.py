"""Executors, resumable results, failures, status and compare (issue: scale)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.cli.parser import main
from gossipsim.execution import executors, runner
from tests.helpers import base_scenario, to_toml

TABLES = ("metrics.csv", "runs.csv", "requests.csv", "visits.csv", "failures.csv")


def _scenario(
    tmp_path: Path, runs: int = 8, iterations: int = 150, name: str = "s.toml", **over
) -> Path:
    raw = base_scenario(
        scenario={"name": "sweep", "seed": 3, "runs": runs, "iterations": iterations},
        unlearning=[{"node": 2, "at_iteration": 60}],
        **over,
    )
    raw["sweep"] = {"topology.kind": ["ring", "complete"]}
    path = tmp_path / name
    path.write_text(to_toml(raw))
    return path


def _same_tables(a: Path, b: Path) -> None:
    for name in (*TABLES, "summary.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@contextmanager
def _dashboard_port_held() -> Iterator[None]:
    """Port 8787 (where Dask serves its HTTP routes unless told otherwise) held, as by another
    local cluster on the same machine; if something else holds it already, that is the case too."""
    import socket

    holder = socket.socket()
    try:
        holder.bind(("", 8787))
        holder.listen()
    except OSError:
        pass  # held by something else already: the case under test
    try:
        yield
    finally:
        holder.close()


def test_identical_tables_for_serial_pool_and_dask_local_cluster(tmp_path, capsys):
    """The same tables in series, in a pool and on a local Dask cluster; and a local cluster
    beside another one prints nothing: a second sweep on the same machine used to print a
    three-line warning about port 8787 (Dask's HTTP routes), held here during the runs (this was
    test_a_local_cluster_beside_another_one_prints_nothing, which started a cluster of its own)."""
    pytest.importorskip("dask.distributed")
    # event-engine runs with a request, and (40 runs, learning only) vectorised batches
    event = _scenario(tmp_path)
    batches = tmp_path / "b.toml"
    batches.write_text(
        to_toml(base_scenario(scenario={"name": "b", "seed": 4, "runs": 40, "iterations": 150}))
    )
    printed = []
    with _dashboard_port_held():
        for path in (event, batches):
            for out, extra in (
                ("serial", []),
                ("pool", ["--workers", "2"]),
                ("dask", ["--cluster", "local:2"]),
            ):
                folder = tmp_path / f"{path.stem}-{out}"
                assert main(["run", str(path), "--out", str(folder), "--no-plots", *extra]) == 0
                captured = capsys.readouterr()
                printed.append(captured.out)
                if out == "dask" and path == event:  # (the batches' one says it uses 1 worker)
                    assert captured.err == "", captured.err
            _same_tables(tmp_path / f"{path.stem}-serial", tmp_path / f"{path.stem}-pool")
            _same_tables(tmp_path / f"{path.stem}-serial", tmp_path / f"{path.stem}-dask")
            assert not (tmp_path / f"{path.stem}-dask" / ".gossipsim" / "parts").exists()  # merged
    assert "vectorized" in "".join(printed)


# ``gossipsim run`` with small commits (store.COMMIT_RUNS runs of the event engine, batches of
# fastpath.BATCH runs on the vectorized engine) and each unit of work slowed down, so that a kill
# lands between commits, with finished runs held back or a batch half done
KILLABLE = """
import sys, time
from gossipsim.execution import executors
from gossipsim.execution.vectorized import driver as fastpath
from gossipsim.results import store
store.COMMIT_RUNS = int(sys.argv[1])
fastpath.BATCH = int(sys.argv[2])
run_unit = executors.run_unit
def slow_unit(study, unit):
    time.sleep(0.05)
    return run_unit(study, unit)
executors.run_unit = slow_unit
from gossipsim.cli.parser import main
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.parametrize("engine", ["event", "vectorized"])
def test_resume_after_sigkill_gives_the_uninterrupted_tables(tmp_path, capsys, engine):
    """Kill the process (SIGKILL) mid-sweep, between commits of several runs, resume, and the
    tables equal an uninterrupted sweep's (committed in one part per variant or batch). Only the
    killed run is a process of its own; the others run here, as ``main`` of the CLI."""
    from gossipsim.results.status import status

    path = _scenario(tmp_path, runs=30, iterations=3000)
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    args = ["run", str(path), "--no-plots", "--progress", "off", "--engine", engine]
    assert main([*args, "--out", str(tmp_path / "full")]) == 0
    cut = tmp_path / "cut"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLABLE, "4", "4", *args, "--out", str(cut)],
        env=env, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if (cut / ".gossipsim" / "study.json").exists() and status(cut)["done"] >= 12:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    parts = list((cut / ".gossipsim" / "parts").glob("v*.part"))
    finished = status(cut)["done"]
    assert 0 < finished < 60 and len(parts) < finished, (finished, len(parts))  # several a part
    assert not (cut / "runs.csv").exists()
    capsys.readouterr()
    assert main(["status", str(cut), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["complete"] is False and info["done"] == finished
    assert info["remaining"] == 60 - finished
    assert main([*args, "--out", str(cut), "--resume"]) == 0
    _same_tables(tmp_path / "full", cut)
    runs = pd.read_csv(cut / "runs.csv")
    assert len(runs) == 60 and not runs.duplicated(["variant", "run"]).any()


def test_resume_refuses_another_scenario(tmp_path, capsys):
    path = _scenario(tmp_path, runs=2)
    out = tmp_path / "res"
    assert main(["run", str(path), "--out", str(out), "--no-plots"]) == 0
    other = _scenario(tmp_path, runs=2, name="other.toml", metrics={"tolerance": 1e-6})
    capsys.readouterr()
    assert main(["run", str(other), "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--resume" in err and "another scenario" in err
    # the same scenario with another --runs is another sweep too
    assert main(["run", str(path), "--out", str(out), "--resume", "--runs", "3"]) == 2
    # resuming a finished sweep runs nothing and rewrites the same tables
    before = (out / "runs.csv").read_bytes()
    assert main(["run", str(path), "--out", str(out), "--resume", "--no-plots"]) == 0
    assert (out / "runs.csv").read_bytes() == before


def test_a_failing_run_is_recorded_and_the_sweep_continues(tmp_path, monkeypatch, capsys):
    real = runner.simulate_run

    def flaky(world, run, seed):
        if run == 1:
            raise RuntimeError("disk on fire")
        return real(world, run, seed)

    monkeypatch.setattr(runner, "simulate_run", flaky)
    path = _scenario(tmp_path, runs=3)
    out = tmp_path / "res"
    assert main(["run", str(path), "--out", str(out), "--no-plots", "--engine", "event"]) == 1
    failures = pd.read_csv(out / "failures.csv")
    assert list(failures["run"]) == [1, 1] and failures["error"].str.contains("disk on fire").all()
    assert failures["seed"].notna().all()
    runs = pd.read_csv(out / "runs.csv")
    assert sorted(runs["run"].unique()) == [0, 2]
    assert "failed" in capsys.readouterr().err
    assert main(["status", str(out)]) == 0
    assert "4 done, 2 failed, 0 remaining of 6 runs" in capsys.readouterr().out


def test_compare_overlays_folders(tmp_path, capsys):
    path = _scenario(tmp_path, runs=2)
    for out in ("a", "b"):
        assert main(["run", str(path), "--out", str(tmp_path / out), "--no-plots"]) == 0
    figure = tmp_path / "cmp.png"
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(figure)]) == 0
    assert figure.stat().st_size > 10_000


def test_out_must_not_clobber_a_foreign_folder(tmp_path, capsys):
    path = _scenario(tmp_path, runs=1)
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    assert main(["run", str(path), "--out", str(foreign)]) == 2
    assert (foreign / "notes.txt").read_text() == "keep me"
    assert "--out" in capsys.readouterr().err


def test_cluster_errors_are_one_line(tmp_path, monkeypatch, capsys):
    pytest.importorskip("dask.distributed")
    path = _scenario(tmp_path, runs=1)
    monkeypatch.setattr(executors, "CLUSTER_TIMEOUT_S", 1.0)
    for cluster, expect in (
        ("tcp://127.0.0.1:9", "cannot reach"),
        ("local:0", "local:N"),
        ("nowhere", "scheduler address"),
    ):
        start = time.monotonic()
        assert main(["run", str(path), "--out", str(tmp_path / "res"), "--cluster", cluster]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "--cluster" in err and expect in err, err
        assert time.monotonic() - start < 30


def test_cluster_without_dask_says_how_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import fails as if not installed
    path = _scenario(tmp_path, runs=1)
    assert main(["run", str(path), "--out", str(tmp_path / "res"), "--cluster", "local:2"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'gossipsim[cluster]'" in err and len(err.strip().splitlines()) == 1


def test_python_api_streams_to_a_folder_and_resumes(tmp_path):
    path = _scenario(tmp_path, runs=3)
    study = gs.load_scenario(path)
    res = gs.run(study, out=tmp_path / "api", plots=False)
    again = gs.run(study, out=tmp_path / "api", resume=True, plots=False)
    pd.testing.assert_frame_equal(res.runs, again.runs)
    assert (
        json.loads((tmp_path / "api" / ".gossipsim" / "study.json").read_text())["complete"] is True
    )


def test_pool_workers_are_forked_frozen_and_the_caller_is_left_as_it_was(monkeypatch):
    """A forked pool starts its workers with every object out of the garbage collector's reach
    (so that collections in a worker do not copy the worlds it inherited), and a Python caller
    that had frozen nothing has nothing frozen afterwards."""
    import gc
    import multiprocessing

    if multiprocessing.get_start_method() != "fork":
        pytest.skip("workers are not forked here")
    gc.unfreeze()
    frozen_at_fork = []
    real_freeze = gc.freeze
    monkeypatch.setattr(gc, "freeze", lambda: (real_freeze(), frozen_at_fork.append(True)))
    raw = base_scenario(scenario={"name": "f", "seed": 2, "runs": 6, "iterations": 60})
    res = gs.run(raw, workers=2, engine="event", progress=False)
    assert len(res.runs) == 6 and frozen_at_fork == [True]
    assert gc.get_freeze_count() == 0


def test_a_dotted_key_swept_into_a_table_a_case_sets():
    """``protocol.compression.budget`` swept beside cases that each set the whole protocol (a
    frozen table): each variant gets its own value, no case's table is shared or refused."""
    raw = {
        "scenario": {"name": "s", "seed": 1, "runs": 1, "iterations": 5},
        "topology": {"kind": "complete", "nodes": 4},
        "model": {"kind": "logistic-regression"},
        "data": {"dataset": "breast_cancer"},
        "protocol": {"kind": "dsvgd"},
        "sweep": {
            "protocol.compression.budget": ["4d", "8d"],
            "cases": [
                {"label": f"N = {n}", "protocol": {
                    "kind": "dsvgd", "architecture": "server", "particles": n,
                    "compression": {"a_max": "max"},
                }}
                for n in (2, 4)
            ],
        },
    }  # fmt: skip
    study = gs.parse_study(raw)
    budgets = [
        (v.scenario.protocol.options.particles, v.scenario.protocol.options.compression.budget(32))
        for v in study.variants
    ]
    assert sorted(budgets) == [(2, 128.0), (2, 256.0), (4, 128.0), (4, 256.0)]
