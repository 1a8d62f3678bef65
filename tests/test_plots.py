"""The figures: what each draws (no pixels). Helpers against closed forms; the figures on small
synthetic tables, their artists inspected before the figure is closed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import networkx as nx
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from gossipsim import plots
from gossipsim.plotting import style
from gossipsim.plotting.axes import LogPanel, request_marks
from gossipsim.plotting.layout import facets, grid
from gossipsim.plotting.stats import across_runs, ecdf, mean_and_half_width, mean_ci


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """The figures the plot functions draw, kept open for inspection instead of saved."""
    figures: list[Figure] = []

    def keep(fig: Figure, path: Path) -> Path:
        figures.append(fig)
        return path

    monkeypatch.setattr(plots, "_save", keep)
    yield figures
    for fig in figures:
        plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# statistics


def test_mean_ci_is_the_student_t_interval():
    values = np.array([[1.0, 2.0], [2.0, np.nan], [3.0, 5.0], [4.0, np.nan]])
    mean, lo, hi = mean_ci(values)
    # column 0: mean 2.5, s = sqrt(5/3), t(0.975, 3) = 3.182446305284263
    half = 3.182446305284263 * np.sqrt(5 / 3) / 2
    assert mean[0] == pytest.approx(2.5)
    assert (lo[0], hi[0]) == pytest.approx((2.5 - half, 2.5 + half))
    # column 1: two values 2 and 5, s = 3/sqrt(2), t(0.975, 1) = 12.706204736174698
    half = 12.706204736174698 * (3 / np.sqrt(2)) / np.sqrt(2)
    assert mean[1] == pytest.approx(3.5)
    assert hi[1] - mean[1] == pytest.approx(half)
    m, h = mean_and_half_width(np.array([7.0]))
    assert m == 7.0 and np.isnan(h)  # one sample: no interval


def test_a_mean_comes_with_its_confidence_interval_a_median_with_percentiles():
    rng = np.random.default_rng(0)
    values = rng.exponential(size=(400, 3))
    median = across_runs(values, "median")
    assert np.allclose(median.lo, np.percentile(values, 12.5, axis=0))
    assert np.allclose(median.hi, np.percentile(values, 87.5, axis=0))
    assert "percentile" in median.description
    mean = across_runs(values, "mean")
    assert np.allclose(mean.center, values.mean(axis=0))
    # the interval of the mean is far narrower than the spread of the runs
    assert np.all(mean.hi - mean.lo < 0.5 * (median.hi - median.lo))
    assert "confidence interval" in mean.description
    with pytest.raises(ValueError):
        across_runs(values, "mode")


def test_ecdf_counts_censored_trials_in_the_denominator():
    e = ecdf(np.array([3.0, np.nan, 1.0, 2.0, np.nan]))
    assert e.x.tolist() == [1.0, 2.0, 3.0]
    assert e.y.tolist() == pytest.approx([0.2, 0.4, 0.6])
    assert (e.served, e.total, e.end) == (3, 5, pytest.approx(0.6))


# ---------------------------------------------------------------------------------------------------
# layout


def _sweep_summary() -> dict[str, Any]:
    variants = {}
    for kind in ("metropolis-hastings", "simple-random-walk"):
        for n in (10, 20, 30):
            label = f"nodes={n}, kind={kind}"
            variants[label] = {"values": {"topology.nodes": n, "scheduler.kind": kind}}
    return {
        "name": "s",
        "sweep": {
            "topology.nodes": [10, 20, 30],
            "scheduler.kind": ["metropolis-hastings", "simple-random-walk"],
        },
        "variants": variants,
    }


def test_a_two_dimensional_sweep_is_faceted_by_its_second_dimension():
    summary = _sweep_summary()
    fac = facets(summary, list(summary["variants"]))
    assert [p.title for p in fac.panels] == [
        "scheduler.kind = metropolis-hastings",
        "scheduler.kind = simple-random-walk",
    ]
    assert all(len(p.variants) == 3 for p in fac.panels)
    assert fac.line_title == "topology.nodes"
    first, second = fac.panels
    # the same first-dimension value: the same label and colour in every panel
    for a, b in zip(first.variants, second.variants, strict=True):
        assert fac.label[a] == fac.label[b]
        assert fac.colour[a] == fac.colour[b]
    assert len({fac.colour[v] for v in first.variants}) == 3


def test_one_dimension_is_one_panel_and_cases_are_a_dimension():
    one = {"sweep": {"topology.kind": ["star", "ring"]}, "variants": {
        "star": {"values": {"topology.kind": "star"}}, "ring": {"values": {"topology.kind": "ring"}}}}  # fmt: skip
    fac = facets(one, ["star", "ring"])
    assert len(fac.panels) == 1 and fac.line_title == "topology.kind"
    cases = {
        "scenario": {"sweep": {"cases": [{"label": "L = 1", "protocol.local_iterations": 1},
                                         {"label": "L = 10", "protocol.local_iterations": 10}],
                               "topology.nodes": [5, 6]}},
        "sweep": {"topology.nodes": [5, 6]},
        "variants": {f"L = {L}, {n}": {"values": {"protocol.local_iterations": L, "topology.nodes": n}}
                     for L in (1, 10) for n in (5, 6)},
    }  # fmt: skip
    fac = facets(cases, list(cases["variants"]))
    assert [p.title for p in fac.panels] == ["topology.nodes = 5", "topology.nodes = 6"]
    assert fac.label["L = 10, 6"] == "L = 10"
    assert grid(1)[1] == 1 and grid(2)[:2] == (2, 1) and grid(6)[:2] == (3, 2)


# ---------------------------------------------------------------------------------------------------
# axes pieces


def test_exact_zeros_go_past_a_break_labelled_zero():
    fig = plt.figure()
    try:
        lp = LogPanel()
        lp.line([1, 2, 3], [1.0, 0.1, 0.0])
        lp.render(fig, fig.add_gridspec(1, 1)[0])
        assert lp.zero is not None and lp.main is not None
        assert [t.get_text() for t in lp.zero.get_yticklabels()] == ["0"]
        # the zero is drawn inside the strip, below the log axis's range
        (line,) = lp.zero.get_lines()[:1]
        y0 = line.get_ydata()[-1]
        assert lp.zero.get_ylim()[0] < y0 < lp.zero.get_ylim()[1] < lp.main.get_ylim()[0]
        assert any(a.get_gid() == "axis-break" for a in lp.main.get_lines())
        fig2 = plt.figure()
        positive = LogPanel()
        positive.line([1, 2], [1.0, 0.5])
        positive.render(fig2, fig2.add_gridspec(1, 1)[0])
        assert positive.zero is None and len(fig2.axes) == 1
        plt.close(fig2)
    finally:
        plt.close(fig)


def test_a_diverged_kl_near_the_float_limit_still_draws(tmp_path):
    """A KL of 1e285 (a REINFORCE step with baseline 1e300, found by the fuzz profile) put the log
    ticks past the float range and matplotlib's formatter failed: the axis now stops at LOG_TOP."""
    from gossipsim.plotting.axes import LOG_TOP

    fig = plt.figure()
    try:
        lp = LogPanel()
        lp.line([1, 2, 3], [0.02, 9.5e285, 9.5e285])
        lp.hline(0.026)
        lp.render(fig, fig.add_gridspec(1, 1)[0])
        fig.savefig(tmp_path / "kl.png")
        assert lp.main is not None and lp.main.get_ylim()[1] == LOG_TOP
    finally:
        plt.close(fig)


def _requests(
    variants: list[str], runs: int = 5, slot: int = 10, **latencies: list[float]
) -> pd.DataFrame:
    rows = []
    for v in variants:
        for r in range(runs):
            row = {"variant": v, "run": r, "request": 0, "node": 3, "request_iteration": slot,
                   "request_time": 0.0}  # fmt: skip
            for column, values in latencies.items():
                row[column] = values[r]
            rows.append(row)
    return pd.DataFrame(rows)


def test_request_marks_are_slots_or_ranges_given_once():
    req = _requests(["a", "b"], slot=10)
    assert [(m.node, m.lo, m.hi) for m in request_marks(req, ["a", "b"])] == [("3", 10.0, 10.0)]
    req.loc[req["variant"] == "b", "request_time"] = [1.0, 2.0, np.nan, 3.0, 1.5]
    (mark,) = request_marks(req, ["b"], "request_time")
    assert (mark.lo, mark.hi, mark.fixed) == (1.0, 3.0, False)
    assert request_marks(req, ["a", "b"], "request_iteration", {"b": 2.0})[1].lo == 20.0


# ---------------------------------------------------------------------------------------------------
# figures


def _metrics(variants: list[str], runs: int = 6, slots: int = 30, *, retrain: bool = False,
             best: float | None = None) -> pd.DataFrame:  # fmt: skip
    rows = []
    for k, v in enumerate(variants):
        for r in range(runs):
            for i in range(1, slots + 1):
                row = {"variant": v, "run": r, "iteration": i, "time": 0.0,
                       "kl": 0.0 if i > 10 + r + k else 5.0 / i}  # fmt: skip
                if retrain:
                    row["retrain_kl"] = np.nan if i < 10 else (0.0 if i > 20 + r else 1.0 / i)
                if best is not None:
                    row["best_family_kl"] = best
                rows.append(row)
    return pd.DataFrame(rows)


def _legend_texts(fig: Figure) -> set[str]:
    texts = set()
    for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]:
        texts |= {t.get_text() for t in legend.get_texts()}
    return texts


def _labelled(fig: Figure) -> set[str]:
    """Labels of every line and band drawn (the artists a legend must explain)."""
    out = set()
    for ax in fig.axes:
        for artist in [*ax.get_lines(), *ax.collections]:
            label = artist.get_label()
            if label and not label.startswith("_"):
                out.add(label)
    return out


def test_kl_figure_facets_a_sweep_marks_requests_and_explains_every_line(drawn, tmp_path):
    summary = _sweep_summary()
    variants = list(summary["variants"])
    metrics = _metrics(variants)
    requests = _requests(variants, slot=20)
    plots.plot_kl_vs_iteration(metrics, variants, tmp_path / "kl.png", tolerance=1e-9,
                               summary=summary, requests=requests)  # fmt: skip
    (fig,) = drawn
    titled = [ax for ax in fig.axes if ax.get_title()]
    assert sorted(ax.get_title() for ax in titled) == [
        "scheduler.kind = metropolis-hastings",
        "scheduler.kind = simple-random-walk",
    ]
    legend = _legend_texts(fig)
    assert _labelled(fig) <= legend
    assert {"10", "20", "30", "tolerance 1e-09"} <= legend
    assert any("percentile band" in (lg.get_title().get_text()) for lg in fig.legends)
    # every panel (log axis and zero strip) marks the request slot
    requests_drawn = [a for ax in fig.axes for a in ax.get_lines() if a.get_gid() == "request"]
    assert requests_drawn and all(a.get_xdata()[0] == 20 for a in requests_drawn)
    strips = [ax for ax in fig.axes if [t.get_text() for t in ax.get_yticklabels()] == ["0"]]
    assert len(strips) == 2  # the KL reaches exactly zero in both panels


def test_a_best_in_family_shared_by_the_variants_is_one_black_line(drawn, tmp_path):
    metrics = _metrics(["L = 1", "L = 10"], best=0.02)
    metrics["kl"] += 0.03
    plots.plot_kl_vs_iteration(metrics, ["L = 1", "L = 10"], tmp_path / "kl.png", tolerance=0.1,
                               excess=True)  # fmt: skip
    (fig,) = drawn
    best = [
        ln
        for ax in fig.axes
        for ln in ax.get_lines()
        if ln.get_label().startswith("best in family")
    ]
    assert {ln.get_label() for ln in best} == {
        "best in family (0.02)",
        "best in family + tolerance 0.1",
    }
    assert all(to_hex(ln.get_color()) == "#000000" for ln in best)


def test_unlearning_and_retrain_differ_in_colour_and_style(drawn, tmp_path):
    metrics = _metrics(["v"], retrain=True)
    requests = _requests(["v"], slot=10)
    plots.plot_unlearning_kl(metrics, requests, ["v"], tmp_path / "u.png", tolerance=1e-9)
    (fig,) = drawn
    lines = {ln.get_label(): ln for ax in fig.axes for ln in ax.get_lines()}
    unlearning, retrain = lines["unlearning"], lines["retrain from scratch"]
    assert to_hex(unlearning.get_color()) != to_hex(retrain.get_color())
    assert unlearning.get_linestyle() != retrain.get_linestyle()
    bands = {
        c.get_label(): c for ax in fig.axes for c in ax.collections if isinstance(c, PolyCollection)
    }
    assert to_hex(bands["unlearning"].get_facecolor()[0]) != to_hex(
        bands["retrain from scratch"].get_facecolor()[0]
    )
    assert _labelled(fig) <= _legend_texts(fig)


def test_a_missing_retrain_curve_is_said(drawn, tmp_path):
    metrics = _metrics(["v"], retrain=True)
    metrics["retrain_kl"] = np.nan
    plots.plot_unlearning_kl(metrics, _requests(["v"], slot=10), ["v"], tmp_path / "u.png")
    (fig,) = drawn
    notes = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == "note"]
    assert notes == ["retrain baseline: no KL recorded after the request"]


def test_latency_ecdfs_end_below_one_when_requests_are_unserved(drawn, tmp_path):
    removal = [1.0, 2.0, 4.0, np.nan, 8.0]
    requests = _requests(["v"], removal_latency=removal, latency=removal,
                         retrain_latency=[np.nan] * 5)  # fmt: skip
    summary = {"variants": {"v": {"theory": {"expected_unlearning_latency": {"3": 3.5}}}}}
    plots.plot_latency(requests, ["v"], tmp_path / "lat.png", summary)
    (fig,) = drawn
    (ax,) = fig.axes
    steps = {ln.get_label(): ln for ln in ax.get_lines()}
    removal_line = next(ln for label, ln in steps.items() if label.startswith("removal"))
    assert removal_line.get_ydata()[-1] == pytest.approx(4 / 5)
    texts = _legend_texts(fig)
    assert "retrain (KL): none of 5 served" in texts
    assert any(t.startswith("removal: mean 3.75 ± ") and t.endswith("4/5 served") for t in texts)
    exact = [ln for ln in ax.get_lines() if ln.get_label().startswith("exact E[removal]")]
    assert exact and exact[0].get_xdata()[0] == 3.5
    assert "node 3, request at slot 10 (5 requests)" in ax.get_title()


def test_latency_has_a_panel_per_request(drawn, tmp_path):
    first = _requests(["v"], removal_latency=[1.0] * 5)
    second = _requests(["v"], slot=40, removal_latency=[2.0] * 5).assign(request=1, node=7)
    plots.plot_latency(pd.concat([first, second]), ["v"], tmp_path / "lat.png")
    (fig,) = drawn
    assert sorted(ax.get_title() for ax in fig.axes) == [
        "node 3, request at slot 10 (5 requests)",
        "node 7, request at slot 40 (5 requests)",
    ]


def _cover_summary() -> dict[str, Any]:
    variants = {}
    for n, theory in (
        (15, {"nodes": 15, "exact_cover_moves": 160.0}),
        (40, {"nodes": 40, "matthews_cover_moves": [500.0, 1800.0]}),
    ):
        variants[f"{n}"] = {"values": {"topology.nodes": n}, "theory": theory,
                            "resolved": {"topology": {"kind": "barabasi_albert"}}}  # fmt: skip
    return {"sweep": {"topology.nodes": [15, 40]}, "variants": variants}


def test_cover_time_draws_a_single_exact_point_and_matthews_bounds(drawn, tmp_path):
    runs = pd.DataFrame({"variant": ["15"] * 4 + ["40"] * 4,
                         "cover_iteration": [150, 160, 170, 180, 700, 800, np.nan, 900]})  # fmt: skip
    plots.plot_cover_time(runs, _cover_summary(), tmp_path / "c.png")
    (fig,) = drawn
    (ax,) = fig.axes
    exact = [ln for ln in ax.get_lines() if ln.get_label() == plots.EXACT_COVER]
    assert len(exact) == 1 and exact[0].get_marker() == "D"  # one point, visible as a marker
    assert exact[0].get_ydata().tolist() == [160.0]
    bounds = [
        c
        for c in ax.collections
        if isinstance(c, LineCollection) and c.get_label() == plots.MATTHEWS
    ]
    assert len(bounds) == 1
    (segment,) = bounds[0].get_segments()
    assert segment[:, 1].tolist() == [500.0, 1800.0]
    assert {plots.MATTHEWS, plots.EXACT_COVER, plots.SIMULATED, plots.CENSORED} <= _legend_texts(
        fig
    )


def test_visits_show_the_deviation_from_the_stationary_share(drawn, tmp_path):
    graph = nx.star_graph(4)  # centre 0 (degree 4), leaves 1..4
    pi_srw = np.array([4, 1, 1, 1, 1]) / 8
    share = pi_srw * np.array([1.0, 1.1, 0.9, 1.0, 1.0])
    visits = pd.DataFrame({"variant": "v", "node": range(5), "visits": 0, "share": share})
    pi, dev = plots.visit_deviation(visits, graph, "v", "simple-random-walk")
    assert pi == pytest.approx(pi_srw)
    assert dev == pytest.approx([0.0, 0.1, -0.1, 0.0, 0.0])
    summary = {"variants": {"v": {"resolved": {"scheduler": {"kind": "simple-random-walk"}}}}}
    plots.plot_visits(visits, {"v": graph}, tmp_path / "v.png", summary, _requests(["v"]))
    (fig,) = drawn
    nodes = [c for ax in fig.axes for c in ax.collections if c.get_array() is not None]
    vmin, vmax = nodes[0].get_clim()
    assert vmin == -vmax == pytest.approx(-10.0)  # percent, centred on zero
    assert "requested node (ringed, labelled)" in _legend_texts(fig)
    assert {"degree 1", "degree 4"} <= _legend_texts(fig)
    assert [t.get_text() for ax in fig.axes for t in ax.texts] == ["3"]


def test_evaluation_reference_steps_to_the_target_without_the_forgotten_node(drawn, tmp_path):
    metrics = _metrics(["v"])
    metrics["accuracy"] = 0.9
    summary = {"variants": {"v": {"theory": {"target": {"all": {"accuracy": 0.95},
                                                        "without 3": {"accuracy": 0.93}}}}}}  # fmt: skip
    plots.plot_evaluation(metrics, ["v"], ["accuracy"], tmp_path / "e.png", summary=summary,
                          requests=_requests(["v"], slot=12))  # fmt: skip
    (fig,) = drawn
    steps = [c for ax in fig.axes for c in ax.patches if c.get_label() == plots.REFERENCE_LABEL]
    (step,) = steps
    values, edges, _ = step.get_data()
    assert values.tolist() == [0.95, 0.93] and edges.tolist() == [1.0, 12.0, 30.0]
    assert any(ln.get_gid() == "request" for ax in fig.axes for ln in ax.get_lines())
    assert _labelled(fig) <= _legend_texts(fig)


def test_palette_roles_differ():
    assert style.UNLEARNING["color"] != style.RETRAIN["color"]
    assert style.UNLEARNING["linestyle"] != style.RETRAIN["linestyle"]
    assert isinstance(plots.plot_results, object) and Line2D  # the module's public names import


def test_per_variant_panels_of_a_sweep_put_its_facets_in_columns():
    summary = _sweep_summary()
    variants = list(summary["variants"])
    cells, rows, cols, width = plots._variant_grid(facets(summary, variants), variants)
    assert (rows, cols, width) == (3, 2, style.DOUBLE_WIDTH_IN)
    where = {v: (r, c) for v, r, c in cells}
    assert where["nodes=30, kind=metropolis-hastings"] == (2, 0)
    assert where["nodes=10, kind=simple-random-walk"] == (0, 1)
    visit = plots._visit_cells(facets(summary, variants), variants)
    assert visit["nodes=30, kind=metropolis-hastings"] == (0, 2)  # graphs: one row per facet


def test_step_values_on_grid_equal_a_per_run_searchsorted():
    """The KL-vs-time curves of all runs at once equal the per-run loop they replaced, bit for bit:
    times equal to grid points, repeated times, a run starting after the grid does, runs listed out
    of order, -0.0 beside 0.0."""
    from gossipsim.plotting.stats import step_values_on_grid

    rng = np.random.default_rng(4)
    grid = np.linspace(0.0, 10.0, 41)
    runs, times, values = [], [], []
    for run in rng.permutation(30):
        t = np.sort(rng.choice(np.concatenate([grid, rng.uniform(0, 10, 50)]), size=25))
        if run == 3:
            t = t + 2.0  # starts late: NaN before its first row
        if run == 4:
            t[0] = -0.0
        runs += [run] * t.size
        times += t.tolist()
        values += rng.normal(size=t.size).tolist()
    runs, times, values = np.array(runs), np.array(times), np.array(values)
    expected = []
    for run in np.unique(runs):
        t, v = times[runs == run], values[runs == run]
        idx = np.searchsorted(t, grid, side="right") - 1
        expected.append(np.where(idx >= 0, v[np.clip(idx, 0, None)], np.nan))
    got = step_values_on_grid(runs, times, values, grid)
    assert got.shape == (30, grid.size)
    np.testing.assert_array_equal(got, np.array(expected))
    assert np.isnan(got[3, 0]) and not np.isnan(got[3, -1])
