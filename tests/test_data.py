"""Node data: CSV files, per-node generator parameters, integer labels, draws once or per run."""

from __future__ import annotations

import numpy as np
import pytest

import gossipsim as gs
from gossipsim.errors import ConfigError
from tests.helpers import base_scenario


def test_csv_observations_give_the_exact_posterior(tmp_path):
    (tmp_path / "g.edgelist").write_text("1 2\n2 3\n3 1\n3 10\n")
    rows = ["node,x"] + [
        f"{n},{x}" for n, xs in {1: [1, 1, 0], 2: [0], 10: [1, 1, 1, 1]}.items() for x in xs
    ]
    (tmp_path / "obs.csv").write_text("\n".join(rows) + "\n")
    raw = base_scenario(
        scenario={"name": "csv", "seed": 1, "runs": 5, "iterations": 200},
        topology={"kind": "edgelist", "path": "g.edgelist"},
        data={"path": "obs.csv"},
        unlearning=[{"node": 10, "at_iteration": 150}],
    )
    path = tmp_path / "s.toml"
    from tests.helpers import to_toml

    path.write_text(to_toml(raw))
    study = gs.load_scenario(path)
    world = gs.build_world(study.variants[0].scenario)
    assert world.indexed.labels == (1, 2, 3, 10)  # "10" in both files is the integer node 10
    assert world.points == [3, 1, 0, 4]
    # Beta(2, 2) prior + 6 ones and 2 zeros
    np.testing.assert_array_equal(
        world.model.prior + world.model.fixed_data.sum(axis=0), [1 + 6, 1 + 2]
    )
    res = gs.run(study)
    assert (res.metrics.groupby("run")["kl"].last() <= 1e-10).all()
    assert res.requests["node"].tolist() == [10] * 5


def test_per_node_parameters_and_sizes():
    raw = base_scenario(
        data={"points_per_node": [5, 0, 50, 1, 2, 3, 4, 5, 6, 7], "theta": [0.0] * 5 + [1.0] * 5}
    )
    world = gs.build_world(gs.parse_study(raw).variants[0].scenario)
    assert world.points[:3] == [5, 0, 50]
    # nodes 0-4 draw only zeros, nodes 5-9 only ones: factors (Σx, Σ(1-x))
    np.testing.assert_array_equal(world.model.fixed_data[:5, 0], 0)
    np.testing.assert_array_equal(world.model.fixed_data[5:, 1], 0)
    np.testing.assert_array_equal(world.model.fixed_data.sum(axis=1), world.points)


def test_wrong_length_per_node_list_is_an_error():
    raw = base_scenario(data={"points_per_node": 10, "theta": [0.5, 0.5]})
    with pytest.raises(ConfigError, match=r"data\.theta.*one value per node \(10\)"):
        gs.build_world(gs.parse_study(raw).variants[0].scenario)


def test_data_drawn_once_is_shared_and_per_run_differs():
    once = gs.run(base_scenario(scenario={"name": "t", "seed": 2, "runs": 3, "iterations": 5}))
    per_run = gs.run(
        base_scenario(
            scenario={"name": "t", "seed": 2, "runs": 3, "iterations": 5},
            data={"points_per_node": 100, "theta": 0.5, "draw": "per-run"},
        )
    )
    # the KL at slot 1 depends on the whole data set through the target
    first_once = once.metrics[once.metrics.iteration == 1].sort_values("run")["kl"].to_numpy()
    first_per_run = (
        per_run.metrics[per_run.metrics.iteration == 1].sort_values("run")["kl"].to_numpy()
    )
    assert len(set(np.round(first_per_run, 12))) == 3
    # with shared data, runs starting at the same node have the same KL after slot 1
    holders = once.metrics[once.metrics.iteration == 1].sort_values("run")["holder"].to_numpy()
    for h in set(holders):
        assert len(set(np.round(first_once[holders == h], 12))) == 1


def test_sweep_labels_and_common_random_numbers():
    raw = base_scenario(scenario={"name": "t", "seed": 3, "runs": 4, "iterations": 50})
    raw["sweep"] = {
        "model": {"prior": [{"a": 1, "b": 1}, {"a": 5, "b": 5}]},
        "data.theta": [0.2, 0.8],
    }
    study = gs.parse_study(raw)
    labels = [v.label for v in study.variants]
    assert labels == [
        "prior={a=1, b=1}, theta=0.2",
        "prior={a=1, b=1}, theta=0.8",
        "prior={a=5, b=5}, theta=0.2",
        "prior={a=5, b=5}, theta=0.8",
    ]
    res = gs.run(study)
    # the walk depends only on the run seed, so every variant sees the same holders in run r
    holders = res.metrics.pivot_table(
        index=["run", "iteration"], columns="variant", values="holder", aggfunc="first"
    )
    assert (holders.nunique(axis=1) == 1).all()
