"""The accuracy-against-ECE figure (paper 000's Fig. 4): its points are the medians over the runs
at the last slot every run reached, and it draws from a results folder's tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gossipsim.figures.tradeoff import applies, final_points, plot_accuracy_vs_ece


def _metrics() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for v, runs, last in (("a", 3, 10), ("b", 2, 8)):
        for r in range(runs):
            end = last - (1 if (v, r) == ("a", 2) else 0)  # one run of a ends a slot early
            for slot in range(1, end + 1):
                rows.append({"variant": v, "run": r, "iteration": slot,
                             "accuracy": rng.random(), "ece": rng.random()})  # fmt: skip
    return pd.DataFrame(rows)


def test_points_are_the_runs_medians_at_the_last_slot_all_runs_reached():
    m = _metrics()
    points = final_points(m, ["a", "b"]).set_index("variant")
    assert points.loc["a", "slot"] == 9 and points.loc["b", "slot"] == 8
    for v in ("a", "b"):
        slot = points.loc[v, "slot"]
        at = m[(m.variant == v) & (m.iteration == slot)]
        for name in ("accuracy", "ece"):
            values = sorted(at[name])
            middle = len(values) // 2
            median = (
                values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2
            )
            assert points.loc[v, name] == median
            assert points.loc[v, f"{name}_lo"] <= median <= points.loc[v, f"{name}_hi"]


def test_it_applies_to_two_variants_with_accuracy_and_ece_and_draws(tmp_path):
    m = _metrics()
    assert applies(m, ["a", "b"]) and not applies(m, ["a"])
    assert not applies(m.drop(columns="ece"), ["a", "b"])
    path = plot_accuracy_vs_ece(m, ["a", "b"], tmp_path / "accuracy_vs_ece.png")
    assert path.is_file() and path.stat().st_size > 10_000
