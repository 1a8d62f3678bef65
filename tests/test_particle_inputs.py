"""Bad input and resources on the particle keys (issue 30, item 9): what a mutated particle scenario
broke, each now one line naming the key (exit 2, nothing written) or a run that works, and the
memory and time budgets of particle protocols checked against measured peaks and rates."""

from __future__ import annotations

import tracemalloc
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.cli.parser import main
from gossipsim.core import memory
from gossipsim.core.schema import Key, format_number
from gossipsim.logdensity import mixture as mixture_density
from gossipsim.logdensity.mixture import GaussianMixture
from gossipsim.particles.svgd import svgd_direction
from gossipsim.results.nonfinite import nonfinite_counts, nonfinite_lines
from gossipsim.states.particlestate import ParticleTarget, stein_discrepancy
from gossipsim.study import budget
from tests.helpers import to_toml

GIB = 2**30


def _mixture(**sections: Any) -> dict[str, Any]:
    """A small DSVGD study of a 2-D mixture (dsvgd_mixture_2d's shape) with a request."""
    raw: dict[str, Any] = {
        "scenario": {"name": "mix", "seed": 1, "runs": 2, "iterations": 40},
        "topology": {"kind": "ring", "nodes": 5},
        "model": {"kind": "gaussian-mixture", "prior": {"mean": 0.0, "variance": 4.0}},
        "data": {"components": 2},
        "protocol": {"kind": "dsvgd", "particles": 20, "step_size": 0.2},
        "metrics": {"record_every": 10, "tolerance": 0.01, "particles": "recorded"},
        "unlearning": [{"node": 4, "at_iteration": 21}],
    }
    for name, table in sections.items():
        raw[name] = {**raw.get(name, {}), **table} if isinstance(table, dict) else table
    return raw


def _logistic(**data: Any) -> dict[str, Any]:
    return {
        "scenario": {"name": "lr", "seed": 6, "runs": 2, "iterations": 40},
        "topology": {"kind": "complete", "nodes": 4},
        "model": {"kind": "logistic-regression"},
        "data": {"dataset": "breast_cancer", **data},
        "protocol": {"kind": "dsvgd", "particles": 10},
        "metrics": {"record_every": 10},
    }


def _cli(args: list[str], capsys: Any) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def _refused(raw: dict[str, Any], tmp_path: Path, capsys: Any) -> str:
    """``validate`` and ``run`` of ``raw`` both refuse it: exit 2, the same one line, no folder."""
    path = tmp_path / "s.toml"
    path.write_text(to_toml(raw))
    code, _, err = _cli(["validate", str(path)], capsys)
    assert code == 2 and err.count("\n") == 1, err
    out = tmp_path / "out"
    code, _, run_err = _cli(["run", str(path), "--out", str(out)], capsys)
    assert code == 2 and run_err == err, run_err
    assert not out.exists()
    return err.strip()


@pytest.mark.parametrize("model", ["logistic-regression", "bnn"])
def test_node_classes_as_a_number_is_one_line(tmp_path, capsys, model):
    """``node_classes = 2`` was a TypeError traceback in validate and run; the docs said a number
    was allowed."""
    raw = _logistic(partition="classes", node_classes=2)
    raw["model"]["kind"] = model
    line = _refused(raw, tmp_path, capsys)
    assert line == (
        "gossipsim: error: data.node_classes: must be a list (of lists) of numbers (got 2)"
    )
    assert Key("k", "numbers", None, "", list_only=True).allowed() == (
        "a list (of lists) of numbers"
    )


def test_integers_are_echoed_as_integers(tmp_path, capsys):
    line = _refused(_mixture(protocol={"particles": 1_000_000}), tmp_path, capsys)
    assert line.endswith("protocol.particles: must be an integer >= 2 and <= 100000 (got 1000000)")
    assert [format_number(x) for x in (10**6, 1e6, 2.5, 1e300, 4.0, 1e-100, 10**20)] == [
        "1000000", "1000000", "2.5", "1e+300", "4", "1e-100", "100000000000000000000",
    ]  # fmt: skip


@pytest.mark.parametrize("model", ["gaussian-mixture", "logistic-regression"])
def test_data_drawn_per_run_with_a_request_has_its_theory(tmp_path, capsys, model):
    """``data.draw = "per-run"`` with a DSVGD request: every run finished, then the theory step
    failed (IndexError: it read the world's points for the request's node), exit 1. Every run's
    node holds data, so the removal latency's law is that of the data drawn once."""
    if model == "gaussian-mixture":
        once = _mixture()
    else:
        once = _logistic(partition="dirichlet", concentration=1.0)
        once["unlearning"] = [{"node": 2, "at_iteration": 21}]
    per_run = {**once, "data": {**once["data"], "draw": "per-run"}}
    folder = tmp_path / "per-run"
    path = tmp_path / "s.toml"
    path.write_text(to_toml(per_run))
    code, out, err = _cli(["run", str(path), "--out", str(folder), "--no-plots"], capsys)
    assert code == 0, err
    code, out, _ = _cli(["validate", str(path)], capsys)
    assert code == 0 and "observations drawn per run" in out
    theory = gs.load_results(folder).theory
    entry = next(iter(theory.values()))["removal_latency"][0]
    expected = gs.run(once, runs=1).theory
    assert entry == next(iter(expected.values()))["removal_latency"][0]
    assert entry["expected"] > 0


# ------------------------------------------------------------------------- memory: N × N terms


def _peak_values(function: Any) -> float:
    """tracemalloc's peak of ``function()``, in float64 numbers."""
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1] / 8.0
    finally:
        tracemalloc.stop()


def test_the_kernel_budget_holds_the_measured_peak():
    """One run: the KSD of a set peaks at 6 N × N matrices, the SVGD step at 3, and the median's
    cached pair indices hold one more (7.0 also in the resident set size of ``gossipsim run`` at
    N = 2,000-6,000); the budget counts 8, and sets judged together within 2^22 numbers."""
    rng = np.random.default_rng(0)
    count = 1500
    x = rng.standard_normal((count, 2))
    target = ParticleTarget(lambda p: -p)
    # a fresh count: the median's pair indices are made (and cached) inside the measurement
    step = _peak_values(lambda: svgd_direction(x, -x))
    ksd = _peak_values(lambda: stein_discrepancy(target, np.stack([x, x, x])))
    square = float(count) ** 2
    assert step / square == pytest.approx(4.0, abs=0.1)  # 3 and the cached indices
    assert ksd / square == pytest.approx(6.0, abs=0.1)  # one set at a time: 2 × 2.25e6 > 2^22
    assert budget.kernel_values(count) == pytest.approx(8 * square)  # on the high side
    assert max(step, ksd + square) <= budget.kernel_values(count) <= 1.2 * (ksd + square)
    # small sets: up to 64 judged together, their matrices within 2^22 numbers
    assert memory.ksd_sets_at_once(50) == 64 and memory.ksd_sets_at_once(300) == 46
    small = rng.standard_normal((46, 300, 2))  # one call's worth
    measured = _peak_values(lambda: stein_discrepancy(target, small))
    assert measured <= budget.kernel_values(300) <= 1.5 * measured


def test_particles_that_cannot_fit_are_refused_in_one_line(tmp_path, capsys, monkeypatch):
    """``particles = 100000`` (the documented maximum) validated, then every run failed allocating
    74.5 GiB; N = 12,000 at d = 2 peaked at 14.8 GB (several sets' KSD at once; 8.3 GB now)."""
    monkeypatch.setattr(memory, "machine_bytes", lambda: 24 * GIB)
    line = _refused(_mixture(protocol={"particles": 100_000}), tmp_path, capsys)
    assert line == (
        "gossipsim: error: protocol.particles: 100000 particles: their 100000 × 100000 kernel "
        "matrices need about 596 GiB (this machine has 24 GiB)"
    )
    path = tmp_path / "fits.toml"
    path.write_text(to_toml(_mixture(protocol={"particles": 12_000})))
    assert _cli(["validate", str(path)], capsys)[0] == 0  # 8.6 GiB of kernels: fits


def test_a_vectorized_batch_keeps_its_kernels_within_its_bytes(monkeypatch):
    """The vectorized engine stepped up to 256 runs' sets at once whatever N (16 runs at N = 1,000
    peaked at 2.4 GB against 0.3 GB for one); its batches now count the step's N × N matrices."""
    from gossipsim.execution.runner import build_world
    from gossipsim.execution.vectorized.steps import batch_size

    for count in (50, 1000, 4000):
        world = build_world(
            gs.parse_study(_mixture(protocol={"particles": count})).variants[0].scenario
        )
        runs = batch_size(world)
        kernel = memory.VALUE_BYTES * budget.step_kernel_values(count)
        assert runs == 1 or runs * kernel <= budget.VECTORIZED_BATCH_BYTES, (count, runs)
    assert runs == 1  # N = 4,000: 384 MiB of matrices a set
    scenario = (
        gs.parse_study(_mixture(scenario={"runs": 100}, protocol={"particles": 1000}))
        .variants[0]
        .scenario
    )
    shape = budget.run_shape(scenario)
    (term,) = budget.particle_terms(shape, budget.ModelSizes(2, 2, particle_entries=2), 5)
    assert term.key == "protocol.particles" and "runs stepped together" in term.what
    assert term.bytes <= budget.VECTORIZED_BATCH_BYTES + 8 * 1000**2


# ------------------------------------------------------------------------------ mixture density


def test_a_large_mixture_s_density_is_computed_in_pieces(monkeypatch):
    """A 19-node, 2-component mixture kept for the figure failed after its runs allocating 51.3 GiB
    for its 81 × 81 density grid (every point × 2^19 components at once); the points are now
    taken a few at a time, with the same numbers."""
    rng = np.random.default_rng(3)
    components = 512
    posterior = GaussianMixture(
        rng.normal(size=components),
        rng.normal(size=(components, 2)),
        np.tile(np.eye(2) * 0.3, (components, 1, 1)),
    )
    points = rng.normal(size=(40, 50, 2))
    whole = posterior.log_density_and_score(points)
    monkeypatch.setattr(mixture_density, "CHUNK_VALUES", 3 * components * 9)
    pieces = posterior.log_density_and_score(points)
    for a, b in zip(whole, pieces, strict=True):
        np.testing.assert_array_equal(a, b)
    monkeypatch.undo()
    many = GaussianMixture(
        np.zeros(2**12), rng.normal(size=(2**12, 2)), np.tile(np.eye(2), (2**12, 1, 1))
    )
    grid = rng.normal(size=(41, 41, 2))  # at once: 1681 × 4096 × 9 numbers, 0.5 GB
    peak = _peak_values(lambda: many.log_density(grid))
    assert peak < 4 * mixture_density.CHUNK_VALUES


def test_a_density_narrower_than_the_grid_s_cells_is_drawn(tmp_path, capsys):
    """A prior mean of 1e10 failed at plotting ("Contour levels must be increasing"): the
    posteriors with and without the forgotten node lie 1.2e9 apart, each narrower than a cell of
    the one grid over both, so every region's level is the peak's."""
    path = tmp_path / "s.toml"
    raw = _mixture(model={"prior": {"mean": 1e10, "variance": 4.0}}, data={"means": [[0.0, 0.0]]})
    del raw["data"]["components"]
    path.write_text(to_toml(raw))
    out = tmp_path / "out"
    code, _, err = _cli(["run", str(path), "--out", str(out), "--no-plots"], capsys)
    assert code == 0, err
    code, _, err = _cli(["plot", str(out), "--figure", "particles"], capsys)
    assert code == 0 and (out / "plots" / "particles.png").is_file(), err
    stages = next(iter(gs.load_results(out).theory.values()))["target_density"]["stages"]
    assert [np.sum(np.asarray(s["log_density"]) > -50) for s in stages] == [1, 1]


# ------------------------------------------------------------------------------------ time


def test_a_study_of_hours_is_warned_of_with_its_projected_time(tmp_path, capsys, monkeypatch):
    """``bnn`` with ``hidden = 100000`` was accepted and took minutes a slot; validate and run now
    warn by the budget's time estimate, naming the key and the projected time."""
    monkeypatch.setattr(memory, "machine_bytes", lambda: 64 * GIB)  # its 20 GiB fit
    raw = _logistic()
    raw["model"] = {"kind": "bnn", "hidden": 100_000}
    raw["protocol"] = {"kind": "dsvgd", "particles": 20}
    raw["scenario"].update(iterations=100)
    path = tmp_path / "s.toml"
    path.write_text(to_toml(raw))
    code, out, err = _cli(["validate", str(path)], capsys)
    assert code == 0 and "valid" in out
    (line,) = err.strip().splitlines()
    assert line.startswith("gossipsim: warning: model.hidden: the runs would compute for about ")
    assert " h on one worker (2 runs of 100 slots, about " in line and "20 particles" in line
    raw["model"]["hidden"] = 50
    path.write_text(to_toml(raw))
    code, out, err = _cli(["validate", str(path)], capsys)
    assert code == 0 and err == ""
    # run warns the same way, its workers dividing the time
    monkeypatch.setattr(budget, "LONG_STUDY_SECONDS", 1e-6)
    out = tmp_path / "out"
    code, _, err = _cli(
        ["run", str(path), "--out", str(out), "--no-plots", "--workers", "2"], capsys
    )
    assert code == 0 and "gossipsim: warning: model.hidden: the runs would compute for" in err
    assert "on 2 workers (2 runs of 100 slots" in err


def test_the_time_estimate_follows_the_measured_slots():
    """The estimate against ``gossipsim run`` of one run of 42 slots on the 2-core machine it was
    calibrated on (bnn, breast cancer, 10 nodes, N = 20, DSVGD): H = 2,000 took 33 s and
    H = 10,000 about 160-400 s (the latter under a load of 4); H = 50 about 2 s."""
    measured = {50: 2.4, 2000: 33.3, 10000: 160.0}
    for hidden, seconds in measured.items():
        raw = _logistic(partition="dirichlet", concentration=0.5)
        raw["topology"]["nodes"] = 10
        raw["model"] = {"kind": "bnn", "hidden": hidden}
        raw["protocol"] = {"kind": "dsvgd", "particles": 20}
        raw["scenario"].update(runs=1, iterations=42)
        raw["metrics"] = {"record_every": 20}
        study = gs.parse_study(raw)
        world = gs.check(study)[0]
        scenario = study.variants[0].scenario
        sizes = type(world.model).sizes(scenario.model_spec, world.nodes)
        estimate = budget.run_seconds(scenario, sizes, world.nodes)
        assert estimate is not None and estimate.key == "model.hidden"
        assert seconds / 3 <= estimate.seconds <= 3 * seconds, (hidden, estimate)
    assert budget.format_seconds(5400) == "1.5 h" and budget.format_seconds(0.0021) == "2.1 ms"


# ----------------------------------------------------------------------- infinite or NaN values


def test_nonfinite_values_are_counted_where_numbers_were_computed():
    metrics = pd.DataFrame(
        {
            "variant": pd.Categorical(["a"] * 4 + ["b"] * 2),
            "run": [0, 0, 0, 0, 0, 0],
            "iteration": [1, 2, 3, 4, 1, 2],
            "ksd": [1.0, 2.0, 3.0, 4.0, np.nan, np.nan],
            "kl": [np.nan] * 4 + [0.1, 0.2],
            "mmd": [0.1, np.nan, np.inf, 0.2, np.nan, np.nan],  # b has no mmd: not its column
            "retrain_ksd": [np.nan, np.nan, 1.0, 1.0, np.nan, np.nan],
            "retrain_mmd": [np.nan, np.nan, np.nan, 0.3, np.nan, np.nan],  # before: not counted
        }
    )
    runs = pd.DataFrame({"variant": ["a"], "run": [0], "cover_iteration": [np.nan],
                         "time": [np.inf]})  # fmt: skip
    particles = pd.DataFrame({"variant": ["a", "a", "b"], "theta_0": [0.0, np.nan, 1.0],
                              "theta_1": [0.0, 1.0, np.nan]})  # fmt: skip
    counts = nonfinite_counts({"metrics": metrics, "runs": runs, "particles": particles})
    assert counts == {
        "metrics": {"mmd": 2, "retrain_mmd": 1},
        "runs": {"time": 1},
        "particles": {"theta_0": 1},  # b's theta_1: it has one coordinate
    }
    assert nonfinite_lines({"runs": runs}) == ["runs.csv holds 1 infinite or NaN numbers (time: 1)"]


def test_no_warning_of_infinite_values_while_every_table_is_finite(tmp_path, capsys):
    """tolerance = 1e300 made plotting print "a computation exceeded the largest float … values are
    infinite or NaN" (a log axis's margin in matplotlib), kde_bandwidth = 1e300 three times during
    the runs (its square), while every table was finite."""
    short = {
        "scenario": {"runs": 1, "iterations": 12},
        "unlearning": [{"node": 4, "at_iteration": 7}],
    }
    kde = {"variant": "paper", "kde_bandwidth": 1e300, "local_iterations": 2, "fit_iterations": 2}
    path = tmp_path / "s.toml"
    path.write_text(to_toml(_mixture(metrics={"tolerance": 1e300}, **short)))
    out = tmp_path / "tolerance"
    code, _, err = _cli(["run", str(path), "--out", str(out), "--progress", "off"], capsys)
    assert code == 0 and "warning" not in err, err
    code, _, err = _cli(["plot", str(out)], capsys)
    assert code == 0 and "warning" not in err, err
    path.write_text(to_toml(_mixture(protocol=kde, **short)))
    out = tmp_path / "kde"
    code, _, err = _cli(["run", str(path), "--out", str(out), "--no-plots", "--progress", "off"],
                        capsys)  # fmt: skip
    assert code == 0 and "warning" not in err, err
    assert gs.load_results(out).nonfinite_values() == []


def test_infinite_values_of_a_table_are_named(tmp_path, capsys, monkeypatch):
    from gossipsim.models.mixture import GaussianMixtureModel

    real = GaussianMixtureModel.evaluate_particles

    def overflowing(self: Any, data: Any, particles: Any, requested: Any) -> dict[str, Any]:
        out = dict(real(self, data, particles, requested))
        with np.errstate(over="warn"):
            out["mmd"] = out["mmd"] * np.float64(1e308) * 1e10  # NumPy warns of the overflow
        return out

    monkeypatch.setattr(GaussianMixtureModel, "evaluate_particles", overflowing)
    path = tmp_path / "s.toml"
    path.write_text(to_toml(_mixture()))
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        code, _, err = _cli(["run", str(path), "--out", str(tmp_path / "out"), "--no-plots",
                             "--progress", "off", "--engine", "event"], capsys)  # fmt: skip
    assert code == 0
    (line,) = [x for x in err.splitlines() if "warning" in x]
    assert line.startswith("gossipsim: warning: metrics.csv holds ")
    assert "infinite or NaN numbers (mmd: " in line and "overflow encountered in multiply" in line
