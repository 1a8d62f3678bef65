"""particles.csv (``[metrics] particles``, ``particle_runs``; issue 22, item 10): the particle sets
of the kept runs exactly as their traces hold them (against runs driven by hand through
make_protocol and run_token), the same tables with workers, resumed, read back; summary.json's
exact density on its grid; the one-line refusals; and the ``particles`` figure's content (its
points are the table's, its contours the recorded density's)."""

from __future__ import annotations

import json
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection
from matplotlib.contour import QuadContourSet
from matplotlib.figure import Figure

import gossipsim as gs
from gossipsim.core.streams import PROTOCOL, START, WALK, run_seed, run_stream
from gossipsim.engine.token import run_token
from gossipsim.errors import ConfigError
from gossipsim.figures.particles import plot_particles
from gossipsim.logdensity.densitygrid import highest_density_levels
from gossipsim.scheduling import Walker
from gossipsim.study.sections import parse_scenario
from gossipsim.world.world import build_world, make_protocol, start_node
from tests.folders import interrupted
from tests.helpers import base_scenario, validate_error

REQUEST_SLOT = 25
ITERATIONS = 50


def _raw(which: str = "recorded", *, runs: int = 3, keep: int = 2, **extra: Any) -> dict:
    raw: dict[str, Any] = {
        "scenario": {"name": "pt", "seed": 4, "runs": runs, "iterations": ITERATIONS},
        "topology": {"kind": "ring", "nodes": 4},
        "model": {"kind": "gaussian-mixture"},
        "protocol": {"kind": "dsvgd", "particles": 6, "step_size": 0.2},
        "metrics": {"record_every": 10, "particles": which, "particle_runs": keep},
        "unlearning": [{"node": 2, "at_iteration": REQUEST_SLOT}],
    }
    raw.update(extra)
    return raw


def _by_hand(raw: dict[str, Any], run: int) -> dict[str, Any]:
    """Run ``run`` of ``raw`` driven by hand, as the event engine runs it: its traces by world."""
    world = build_world(parse_scenario(raw))
    seed = run_seed(raw["scenario"]["seed"], run)
    data = world.model.fixed_data
    walker = Walker(world.indexed, "metropolis-hastings",
                    np.random.default_rng(run_stream(seed, WALK)))  # fmt: skip
    start = start_node(world, np.random.default_rng(run_stream(seed, START)))
    protocol = make_protocol(world, data, run_stream(seed, PROTOCOL))
    record = run_token(walker=walker, protocol=protocol, start=start, iterations=ITERATIONS,
                       requests=world.requests)  # fmt: skip
    return record.traces


def _rows(table: pd.DataFrame, run: int, world: str) -> pd.DataFrame:
    return table.loc[(table["run"] == run) & (table["world"] == world)]


@pytest.fixture(scope="module")
def recorded() -> gs.Results:
    return gs.run(_raw())


def test_the_table_holds_every_recorded_set_of_the_kept_runs(recorded):
    table = recorded.particles
    assert list(table.columns) == ["variant", "run", "iteration", "world", "particle",
                                   "theta_0", "theta_1"]  # fmt: skip
    assert sorted(table["run"].unique().tolist()) == [0, 1]  # particle_runs = 2 of 3 runs
    for run in (0, 1):
        traces = _by_hand(_raw(), run)
        for world in ("main", "retrain"):
            trace = traces[world]
            mine = _rows(table, run, world)
            slots = np.unique(trace.slots)
            assert np.array_equal(np.unique(mine["iteration"]), slots)
            states = trace.states[trace.at(slots)]  # the set in force after each slot
            assert len(mine) == states.shape[0] * states.shape[1]
            np.testing.assert_array_equal(
                mine[["theta_0", "theta_1"]].to_numpy(), states.reshape(-1, 2)
            )
            np.testing.assert_array_equal(mine["particle"], np.tile(np.arange(6), slots.size))
        # the main world's records: slot 0 (the prior's draws), the slots metrics.csv writes and
        # the removal slot; the retrain baseline's from the request on
        main = set(_rows(table, run, "main")["iteration"].tolist())
        assert {0, 1, 10, 20, 30, 40, 50} <= main
        assert min(_rows(table, run, "retrain")["iteration"]) == REQUEST_SLOT


def test_final_keeps_each_world_s_last_set_and_none_keeps_no_table(recorded, tmp_path):
    final = gs.run(_raw("final"))
    last = recorded.particles.loc[recorded.particles["iteration"] == ITERATIONS]
    pd.testing.assert_frame_equal(final.particles, last.reset_index(drop=True))
    assert set(final.particles["iteration"]) == {ITERATIONS}
    # without the key: no table, no file, and the other tables as they were
    none = gs.run(_raw("none"), out=tmp_path / "n", plots=False)
    assert none.particles.empty and not (tmp_path / "n" / "particles.csv").exists()
    for name in ("metrics", "runs", "requests", "visits"):
        pd.testing.assert_frame_equal(getattr(none, name), getattr(recorded, name))
    assert "target_density" not in none.theory["pt"]


def test_the_same_table_with_workers(recorded):
    pd.testing.assert_frame_equal(gs.run(_raw(), workers=2).particles, recorded.particles)


def test_a_resumed_sweep_writes_the_same_table(recorded, tmp_path):
    study = gs.parse_study(_raw())
    out = tmp_path / "r"
    interrupted(study, out, [(0, [1])])  # run 1 committed, runs 0 and 2 still to run
    resumed = gs.run(study, out=out, resume=True, plots=False)
    pd.testing.assert_frame_equal(resumed.particles, recorded.particles)
    pd.testing.assert_frame_equal(gs.load_results(out).particles, recorded.particles)


@pytest.mark.parametrize("tables", ["csv", "parquet"])
def test_a_folder_reads_back_the_same_table(recorded, tmp_path, tables):
    recorded.write(tmp_path / tables, tables=tables)
    back = gs.load_results(tmp_path / tables)
    pd.testing.assert_frame_equal(back.particles, recorded.particles)
    summary = json.loads((tmp_path / tables / "summary.json").read_text())
    assert summary["files"][f"particles.{tables}"]["rows"] == len(recorded.particles)


def test_a_folder_without_particles_csv_still_loads(tmp_path):
    gs.run(base_scenario(scenario={"name": "o", "seed": 1, "runs": 2, "iterations": 20}),
           out=tmp_path / "o", plots=False)  # fmt: skip
    assert not (tmp_path / "o" / "particles.csv").exists()
    back = gs.load_results(tmp_path / "o")
    assert back.particles.empty and "particles" not in back.tables()


def test_a_recorded_particles_file_that_is_gone_is_refused(recorded, tmp_path):
    recorded.write(tmp_path / "g", tables="csv")
    (tmp_path / "g" / "particles.csv").unlink()
    with pytest.raises(ConfigError, match="particles.csv' is missing"):
        gs.load_results(tmp_path / "g")


def test_a_part_carries_the_particles_and_refuses_others():
    from dataclasses import replace

    from gossipsim.execution.runner import build_world, simulate_run
    from gossipsim.measurement.outputs import BatchOutput
    from gossipsim.results.partformat import decode_part, encode_part

    study = gs.parse_study(_raw())
    world = build_world(study.variants[0].scenario)
    runs = [simulate_run(world, r, run_seed(4, r)) for r in range(3)]
    batch = BatchOutput.from_runs(runs)
    assert sorted(set(batch.particles["run"].tolist())) == [0, 1]  # run 2 keeps none
    (back,) = decode_part(bytearray(encode_part(batch, variant=0)))
    for name, column in batch.particles.items():
        np.testing.assert_array_equal(back.particles[name], column)
    foreign = {**batch.particles, "run": batch.particles["run"] + 5}
    with pytest.raises(ValueError, match="particles of runs it does not hold"):
        decode_part(bytearray(encode_part(replace(batch, particles=foreign), variant=0)))
    flat = {**batch.particles, "theta": batch.particles["theta"][:, 0]}
    with pytest.raises(ValueError, match="not a matrix of numbers"):
        decode_part(bytearray(encode_part(replace(batch, particles=flat), variant=0)))


@pytest.mark.slow
def test_the_same_table_on_dask(recorded):
    pytest.importorskip("dask.distributed")
    on_dask = gs.run(_raw(), cluster="local:2")
    pd.testing.assert_frame_equal(on_dask.particles, recorded.particles)


# ------------------------------------------------------------------------------ the exact density


def test_summary_records_the_exact_density_of_every_stage(recorded):
    grid = recorded.theory["pt"]["target_density"]
    x, y = np.asarray(grid["x"]), np.asarray(grid["y"])
    assert [stage["forgotten"] for stage in grid["stages"]] == [[], ["2"]]
    world = build_world(parse_scenario(_raw()))
    model, data = world.model, world.model.fixed_data
    points = np.stack(np.meshgrid(x, y, indexing="xy"), axis=-1)
    for stage, forgotten in zip(grid["stages"], (frozenset(), frozenset({2})), strict=True):
        exact = model.posterior(data, forgotten).log_density(points)
        expected = np.maximum(exact - exact.max(), -50.0)
        # written to 2 decimals (0.005), at coordinates written to 6 (the log-density moves by
        # far less than 1e-4 over 1e-6 here)
        np.testing.assert_allclose(stage["log_density"], expected, atol=0.005 + 1e-4)
        # the box holds the regions drawn: the 99% region closes inside the grid
        values = np.asarray(stage["log_density"])
        edges = np.concatenate([values[0], values[-1], values[:, 0], values[:, -1]])
        assert edges.max() < highest_density_levels(values, (0.99,))[0] - 2.0


def test_highest_density_levels_hold_their_mass():
    """On a standard normal grid, the super-level set of the 50% level holds half the mass."""
    axis = np.linspace(-6, 6, 601)
    xx, yy = np.meshgrid(axis, axis)
    log_density = -0.5 * (xx**2 + yy**2)
    (level,) = highest_density_levels(log_density, (0.5,))
    # the 50% region of a 2-D standard normal is the disc of radius sqrt(2 log 2)
    assert -level == pytest.approx(np.log(2.0), abs=0.02)


# ------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("metrics", "needle"),
    [
        ({"particles": "all"}, "metrics.particles"),
        ({"particles": "final", "particle_runs": 0}, "metrics.particle_runs"),
    ],
)
def test_bad_particle_keys_are_one_line(tmp_path, capsys, metrics, needle):
    line = validate_error(_raw(metrics=metrics), tmp_path, capsys)
    assert needle in line


def test_a_particle_table_that_cannot_fit_in_memory_is_one_line(tmp_path, capsys):
    raw = _raw(runs=1000, keep=1000)
    raw["scenario"]["iterations"] = 20_000
    raw["metrics"]["record_every"] = 1
    raw["protocol"]["particles"] = 100
    line = validate_error(raw, tmp_path, capsys)
    assert "metrics.particle_runs:" in line and "the particle sets of 1000 runs" in line
    raw["metrics"]["particle_runs"] = 1  # the same runs keeping one run's sets fit
    from gossipsim.cli.parser import main
    from tests.helpers import to_toml

    (tmp_path / "s.toml").write_text(to_toml(raw))
    assert main(["validate", str(tmp_path / "s.toml")]) == 0


def test_particles_without_a_particle_protocol_are_one_line(tmp_path, capsys):
    raw = base_scenario(metrics={"particles": "final"})
    line = validate_error(raw, tmp_path, capsys)
    assert line.startswith("gossipsim: error: metrics.particles:")
    assert "'gfvl' records natural parameters" in line


def test_a_sweep_beside_g_fvl_keeps_the_particle_variants_sets():
    raw = _raw(runs=1, keep=1, model={"kind": "logistic-regression"},
               data={"dataset": "synthetic", "points_per_node": 10, "features": 1})  # fmt: skip
    raw["sweep"] = {"cases": [
        {"label": "svgd", "protocol": {"kind": "svgd", "particles": 4}},
        {"label": "gfvl", "protocol": {"kind": "gfvl", "estimator": "exact"}},
    ]}  # fmt: skip
    raw["scenario"]["iterations"] = 12
    raw["protocol"] = {}
    del raw["unlearning"]
    res = gs.run(raw)
    assert set(res.particles["variant"].astype(str)) == {"svgd"}
    assert res.particles.filter(like="theta_").shape[1] == 2  # w (1 feature) and log ξ


# ----------------------------------------------------------------------------------- the figure


def test_the_figure_draws_the_table_s_sets_over_the_recorded_density(recorded, drawn, tmp_path):
    written = recorded.plot(tmp_path, which="particles")
    assert list(written) == ["particles"]
    (fig,) = drawn
    panels = [ax for ax in fig.axes if ax.collections]
    titles = [ax.get_title() for ax in panels]
    assert titles[0].startswith("after learning (slot 20)")  # the last record before slot 25
    assert titles[1].startswith("after forgetting node 2 (slot 50)")
    assert titles[2].startswith("retrained without 2 (slot 50)")
    table = recorded.particles.loc[recorded.particles["run"] == 0]
    grid = recorded.theory["pt"]["target_density"]
    stages = {tuple(s["forgotten"]): np.asarray(s["log_density"]) for s in grid["stages"]}
    for ax, (world, slot, stage) in zip(
        panels, [("main", 20, ()), ("main", 50, ("2",)), ("retrain", 50, ("2",))], strict=True
    ):
        (points,) = [c for c in ax.collections if isinstance(c, PathCollection)]
        expected = table.loc[(table["world"] == world) & (table["iteration"] == slot)]
        np.testing.assert_array_equal(points.get_offsets(), expected[["theta_0", "theta_1"]])
        assert points.get_gid() == world
        filled = [c for c in ax.collections if isinstance(c, QuadContourSet) and c.filled]
        assert len(filled) == 1  # the highest-density regions of the target in force
        levels = highest_density_levels(stages[stage], (0.99, 0.9, 0.5))
        np.testing.assert_allclose(filled[0].levels[:3], levels)
    # the metrics of the set drawn, from metrics.csv
    row = recorded.metrics.loc[(recorded.metrics["run"] == 0)
                               & (recorded.metrics["iteration"] == 50)]  # fmt: skip
    texts = " ".join(t.get_text() for t in panels[2].texts)
    assert f"KSD {row['retrain_ksd'].iloc[0]:.3g}" in texts
    assert f"MMD² {row['retrain_mmd_unlearned'].iloc[0]:.3g}" in texts


def test_without_a_recorded_density_the_particles_are_drawn_alone(recorded, drawn):
    summary = recorded.summary()
    del summary["variants"]["pt"]["theory"]["target_density"]
    fig = plot_particles(recorded.particles, recorded.requests, ["pt"], summary=summary)
    assert isinstance(fig, Figure)
    panels = [ax for ax in fig.axes if ax.collections]
    assert len(panels) == 3
    assert not any(isinstance(c, QuadContourSet) for ax in panels for c in ax.collections)
    assert "no exact density recorded" in fig._suptitle.get_text()
    plt.close(fig)


def test_of_more_than_two_coordinates_the_first_two_are_drawn(recorded):
    wide = recorded.particles.assign(theta_2=1.0)
    fig = plot_particles(wide, recorded.requests, ["pt"], summary=recorded.summary())
    assert "θ₀, θ₁ of d = 3, no density drawn" in fig._suptitle.get_text()
    panels = [ax for ax in fig.axes if ax.collections]
    assert not any(isinstance(c, QuadContourSet) for ax in panels for c in ax.collections)
    plt.close(fig)
    one = recorded.particles.drop(columns=["theta_1"])
    assert plot_particles(one, recorded.requests, ["pt"]) is None


def test_gossipsim_run_and_plot_draw_the_particle_figure(tmp_path, capsys):
    from gossipsim.cli.parser import main
    from tests.helpers import to_toml

    (tmp_path / "s.toml").write_text(to_toml(_raw(runs=1, keep=1)))
    assert main(["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"),
                 "--progress", "off"]) == 0  # fmt: skip
    assert (tmp_path / "o" / "plots" / "particles.png").is_file()
    (tmp_path / "o" / "plots" / "particles.png").unlink()
    capsys.readouterr()
    assert main(["plot", str(tmp_path / "o"), "--figure", "particles"]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "o" / "plots" / "particles.png")]
