"""The figures: what each draws (no pixels, but for one PNG compared with savefig's own). Helpers
against closed forms; the figures on small synthetic tables, their artists inspected before the
figure is closed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import networkx as nx
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from gossipsim.figures import style
from gossipsim.figures.axes import REQUEST_LABEL, REQUEST_SPAN_LABEL, LogPanel, request_marks
from gossipsim.figures.canvas import _lay_out, _save
from gossipsim.figures.compare import plot_comparison
from gossipsim.figures.cover_time import CENSORED, EXACT_COVER, MATTHEWS, SIMULATED, plot_cover_time
from gossipsim.figures.divergence_curves import RUNS_END, plot_kl_vs_iteration, plot_kl_vs_time
from gossipsim.figures.evaluation import (
    REFERENCE_DOTTED,
    REFERENCE_LABEL,
    RETRAIN_BESIDE,
    plot_evaluation,
)
from gossipsim.figures.latency import MEDIAN_HEIGHT, UNOBSERVED, _num, plot_latency
from gossipsim.figures.layout import facets, grid
from gossipsim.figures.requests import STATIONARY_LABEL
from gossipsim.figures.standard import plot_results
from gossipsim.figures.stats import across_runs, mean_and_half_width, mean_ci
from gossipsim.figures.style import COLUMN_WIDTH_IN
from gossipsim.figures.unlearning_kl import plot_unlearning_kl
from gossipsim.figures.visits import _visit_cells, plot_visits, visit_deviation
from gossipsim.states.divergences import KL

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


def test_a_median_band_with_runs_missing_at_some_points_is_nanpercentile_s_bit_for_bit():
    """Points where some runs have no value (NaN: before a run's first row on the time grid) take
    the nan-aware percentiles, the others the plain ones: together exactly ``np.nanpercentile``
    of the whole matrix (ties and all), NaN where no run has a value."""
    rng = np.random.default_rng(4)
    values = np.round(rng.exponential(size=(301, 9)), 1)  # rounded: many ties
    values[:40, 1] = np.nan
    values[::3, 4] = np.nan
    values[:, 6] = np.nan  # no run there
    values[7, 8] = np.nan
    band = across_runs(values, "median")
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        lo, center, hi = np.nanpercentile(values, [12.5, 50, 87.5], axis=0)
    for got, expected in ((band.lo, lo), (band.center, center), (band.hi, hi)):
        np.testing.assert_array_equal(got, expected)
    assert np.isnan(band.center[6]) and not np.isnan(band.center[[0, 1, 4, 8]]).any()


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
    from gossipsim.figures.axes import LOG_TOP

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


def _timed(variant: str, ends: list[int], seconds: float) -> pd.DataFrame:
    """Runs of ``variant`` ending at slots ``ends``, slot i at i·``seconds`` s, KL 1/i."""
    return pd.DataFrame(
        [{"variant": variant, "run": r, "iteration": i, "time": i * seconds, "kl": 1.0 / i}
         for r, end in enumerate(ends) for i in range(1, end + 1)]
    )  # fmt: skip


def test_kl_against_time_ends_each_variant_where_its_runs_end(drawn, tmp_path):
    """A walk whose runs end at 10-13 s beside a server whose runs end at 40 s: the walk's line
    stops at 13 s (it was drawn flat to 40 s), at the median of its runs' last values; a request
    arriving at different times in different runs is a shaded span the legend names."""
    metrics = pd.concat([_timed("walk", [20, 22, 24, 26], 0.5), _timed("server", [40] * 3, 1.0)])
    requests = pd.concat([
        _requests(["walk"], runs=4).assign(request_time=[2.0, 2.5, 3.0, 3.5]),
        _requests(["server"], runs=3).assign(request_time=5.0),
    ])  # fmt: skip
    plot_kl_vs_time(metrics, ["walk", "server"], tmp_path / "t.png", requests=requests)
    (fig,) = drawn
    (ax,) = [a for a in fig.axes if a.get_ylabel()]
    (walk,) = [ln for ln in ax.get_lines() if ln.get_label() == "walk"]
    (server,) = [ln for ln in ax.get_lines() if ln.get_label() == "server"]
    assert walk.get_xdata()[0] == 0.0 and walk.get_xdata()[-1] == 13.0
    assert server.get_xdata()[-1] == 40.0
    assert walk.get_ydata()[-1] == pytest.approx(np.median([1 / 20, 1 / 22, 1 / 24, 1 / 26]))
    spans = [p for p in ax.patches if p.get_gid() == "request"]
    assert len(spans) == 1
    (x0, _), (x1, _) = spans[0].get_bbox().get_points()
    assert (x0, x1) == (2.0, 3.5)
    lines = [ln for ln in ax.get_lines() if ln.get_gid() == "request"]
    assert [ln.get_xdata()[0] for ln in lines] == [5.0]
    texts = {t.replace("\n", " ") for t in _legend_texts(fig)}  # the legend wraps its labels
    assert {REQUEST_LABEL, REQUEST_SPAN_LABEL, RUNS_END} <= texts
    # runs that all end together: the note is not said
    plot_kl_vs_time(_timed("walk", [20] * 3, 0.5), ["walk"], tmp_path / "u.png")
    assert RUNS_END not in {t.replace("\n", " ") for t in _legend_texts(drawn[1])}


def test_kl_against_time_gives_each_panel_its_own_time_axis_and_the_best_in_family(drawn, tmp_path):
    """A sweep whose panels' slots cost 0.01 s and 10 s (links of different rates): each panel's
    time axis and grid span its own lines, so the fast panel's lines are not pressed into a
    thousandth of a shared axis; the divergence axis stays shared. A best-in-family KL that every
    run of a variant shares is drawn once, with the tolerance above it (excess)."""
    summary = _sweep_summary()
    variants = list(summary["variants"])
    fast = [v for v in variants if "metropolis" in v]
    metrics = pd.concat(
        [_timed(v, [30] * 3, 0.01 if v in fast else 10.0) for v in variants]
    ).assign(best_family_kl=0.02)
    plot_kl_vs_time(metrics, variants, tmp_path / "t.png", summary=summary, tolerance=0.1,
                    excess=True)  # fmt: skip
    (fig,) = drawn
    panels = [a for a in fig.axes if a.get_title()]
    assert len(panels) == 2
    lims = {a.get_title(): a.get_xlim() for a in panels}
    assert lims["scheduler.kind = metropolis-hastings"][1] < 1.0 < 100.0
    assert lims["scheduler.kind = simple-random-walk"][1] > 100.0
    assert panels[0].get_ylim() == panels[1].get_ylim()
    for ax in panels:  # 400 grid points over each panel's own 0.3 s or 300 s, and the end
        (line,) = [ln for ln in ax.get_lines() if ln.get_label() == "10"]  # nodes = 10
        assert len(line.get_xdata()) == 400
    texts = {t.replace("\n", " ") for t in _legend_texts(fig)}
    assert {"best in family (0.02)", "best in family + tolerance 0.1"} <= texts


def test_kl_figure_facets_a_sweep_marks_requests_and_explains_every_line(drawn, tmp_path):
    summary = _sweep_summary()
    variants = list(summary["variants"])
    metrics = _metrics(variants)
    requests = _requests(variants, slot=20)
    plot_kl_vs_iteration(metrics, variants, tmp_path / "kl.png", tolerance=1e-9,
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
    plot_kl_vs_iteration(metrics, ["L = 1", "L = 10"], tmp_path / "kl.png", tolerance=0.1,
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
    plot_unlearning_kl(metrics, requests, ["v"], tmp_path / "u.png", tolerance=1e-9)
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
    plot_unlearning_kl(metrics, _requests(["v"], slot=10), ["v"], tmp_path / "u.png")
    (fig,) = drawn
    notes = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == "note"]
    assert notes == ["retrain baseline: no KL recorded after the request"]


def _latency_axes(fig: Figure) -> list[Any]:
    """The panels of a latency figure (those with a curve of more than two points), in drawing
    order."""
    return [ax for ax in fig.axes if any(len(ln.get_xdata()) > 2 for ln in ax.lines)]


def _grid_cells(axes: list[Any]) -> list[tuple[int, int]]:
    """(row, column) of each axes from where it is on the figure (rows from the top)."""
    fig = axes[0].get_figure(root=True)
    fig.draw_without_rendering()
    boxes = [ax.get_position() for ax in axes]
    ys = sorted({round(b.y1, 3) for b in boxes}, reverse=True)
    xs = sorted({round(b.x0, 3) for b in boxes})
    return [(ys.index(round(b.y1, 3)), xs.index(round(b.x0, 3))) for b in boxes]


def _dotted_verticals(ax: Any) -> list[Any]:
    return [ln for ln in ax.get_lines() if ln.get_linestyle() == ":" and len(ln.get_xdata()) == 2
            and ln.get_xdata()[0] == ln.get_xdata()[1]]  # fmt: skip


def _panel_legend_texts(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def test_latency_curves_are_kaplan_meier_and_end_at_the_served_fraction(drawn, tmp_path):
    removal = [1.0, 2.0, 4.0, np.nan, 8.0]
    requests = _requests(["v"], removal_latency=removal, latency=removal,
                         retrain_latency=[np.nan] * 5)  # fmt: skip
    summary = {"variants": {"v": {"theory": {"expected_unlearning_latency": {"3": 3.5}}}}}
    plot_latency(requests, ["v"], tmp_path / "lat.png", summary)
    (fig,) = drawn
    (ax,) = _latency_axes(fig)
    removal_line = next(ln for ln in ax.get_lines() if ln.get_gid() == "km-removal_latency")
    assert removal_line.get_ydata()[-1] == pytest.approx(4 / 5)
    texts = _panel_legend_texts(fig)
    assert any(t.startswith("retrain (KL): 0/5 served") for t in texts)
    assert any(t.startswith("removal: 4/5 served") for t in texts)
    exact = [ln for ln in ax.get_lines() if ln.get_gid() == "expected"]
    assert exact and exact[0].get_xdata()[0] == 3.5
    assert "node 3, request at slot 10" in ax.get_title()


def test_latency_legends_give_kaplan_meier_medians_and_restricted_means_with_intervals(
    drawn, tmp_path
):
    """Not "mean ± t-interval" (which went below zero for these heavy-tailed latencies): the
    Kaplan–Meier median and restricted mean, each with its interval, computed independently here
    by gossipsim.measurement.censoring on the same data with the censoring at n − r + 1."""
    from gossipsim.measurement.censoring import estimates

    rng = np.random.default_rng(2)
    latency = np.ceil(rng.lognormal(3.0, 1.4, size=60))
    latency[latency > 90] = np.nan  # not served within the run: censored at n − r + 1 = 91
    requests = _requests(["v"], runs=60, slot=10, removal_latency=latency)
    summary = {"variants": {"v": {"resolved": {"run": {"iterations": 100}}}}}  # runs' length
    plot_latency(requests, ["v"], tmp_path / "lat.png", summary)
    (fig,) = drawn
    (text,) = [t for t in _panel_legend_texts(fig) if t.startswith("removal")]
    assert "±" not in text
    est = estimates(latency, np.full(60, 91.0))
    served = int(np.isfinite(latency).sum())
    assert text.splitlines()[0] == f"removal: {served}/60 served"
    lo, hi = est.median_ci
    assert f"median {_num(est.median)} [{_num(lo, 2)}, {_num(hi, 2)}]" in text
    lo, hi = est.restricted_mean_ci
    assert f"mean ≥ {_num(est.restricted_mean)} [{_num(lo, 2)}, {_num(hi, 2)}]" in text
    # the median is marked at 1/2 with its interval
    (ax,) = _latency_axes(fig)
    (median,) = [ln for ln in ax.get_lines() if ln.get_gid() == "median"]  # noqa: RUF015
    assert median.get_xdata()[0] == est.median and median.get_ydata()[0] == 0.5
    # what the panel legends mean is said in the figure's legend
    assert any("Brookmeyer" in lg.get_title().get_text() for lg in fig.legends)


def test_a_median_interval_of_latencies_all_served_is_a_finite_bar(drawn, tmp_path):
    """Issue 30: every run served the request (latencies 40 and 60, as dsvgd_mixture_2d's; a
    removal latency 0 in every run, as a centralised protocol's): the interval lies within the
    observed latencies, drawn as a bar between them without an arrow to the panel's edge; a
    latency that some runs did not serve (its last follow-up a censoring) keeps its unbounded
    interval and arrow."""
    latency = [40.0] * 12 + [60.0] * 8
    retrain = [50.0] * 12 + [np.nan] * 8  # not served within the run: censored at 91
    requests = _requests(["v"], runs=20, removal_latency=[0.0] * 20, latency=latency,
                         retrain_latency=retrain)  # fmt: skip
    summary = {"variants": {"v": {"resolved": {"run": {"iterations": 100}}}}}
    plot_latency(requests, ["v"], tmp_path / "lat.png", summary)
    (fig,) = drawn
    texts = _panel_legend_texts(fig)
    assert any(t.startswith("removal: 20/20 served\nmedian 0 [0, 0];") for t in texts), texts
    assert any(t.startswith("unlearning (KL): 20/20 served\nmedian 40 [40, 60];") for t in texts)
    assert any(t.startswith("retrain (KL): 12/20 served\nmedian 50 [50, ∞);") for t in texts)
    (ax,) = _latency_axes(fig)
    bars = [ln for ln in ax.get_lines() if ln.get_gid() == "median-ci"]
    segments = {
        tuple(ln.get_ydata())[0]: tuple(ln.get_xdata()) for ln in bars if len(ln.get_xdata()) == 2
    }
    arrows = [ln for ln in bars if ln.get_marker() == ">"]
    assert segments[MEDIAN_HEIGHT["removal_latency"]] == (0.0, 0.0)
    assert segments[MEDIAN_HEIGHT["latency"]] == (40.0, 60.0)
    assert segments[MEDIAN_HEIGHT["retrain_latency"]][0] == 50.0
    (arrow,) = arrows  # the retrain latency's only
    assert arrow.get_ydata()[0] == MEDIAN_HEIGHT["retrain_latency"]
    assert arrow.get_xdata()[0] == segments[MEDIAN_HEIGHT["retrain_latency"]][1] > 60.0


def test_the_observation_window_of_a_late_request_is_shaded(drawn, tmp_path):
    """A request at slot 950 of runs of 1,000 slots: latencies beyond 51 cannot be seen; the
    curve stops there and the rest of the axis is shaded as not observed."""
    removal = [3.0, 10.0, np.nan, 40.0, np.nan, 20.0]
    requests = _requests(["v"], runs=6, slot=950, removal_latency=removal,
                         retrain_latency=[60.0, 70.0, 80.0, 90.0, 100.0, 110.0])  # fmt: skip
    summary = {"variants": {"v": {"resolved": {"run": {"iterations": 1000}}}}}
    plot_latency(requests, ["v"], tmp_path / "lat.png", summary)
    (fig,) = drawn
    (ax,) = _latency_axes(fig)
    (span,) = [p for p in ax.patches if p.get_gid() == "unobserved"]  # noqa: RUF015
    assert span.get_x() == pytest.approx(51.0)  # n − r + 1
    curve = next(ln for ln in ax.get_lines() if ln.get_gid() == "km-removal_latency")
    assert curve.get_xdata()[-1] == 51.0 and curve.get_ydata()[-1] == pytest.approx(4 / 6)
    assert UNOBSERVED in _legend_texts(fig)


def test_a_kl_latency_judged_over_a_window_is_censored_w_minus_1_slots_sooner(drawn, tmp_path):
    """latency_window W = 10: a KL latency needs 10 settled slots, so a run of 1,000 slots sees it
    only up to 1,000 − 10 + 1 − 950 + 1 = 42 (the removal latency up to 51): its estimate ends
    there and is the Kaplan–Meier estimate censored at 42."""
    from gossipsim.measurement.censoring import estimates

    removal = [3.0, 10.0, np.nan, 40.0, np.nan, 20.0]
    requests = _requests(["v"], runs=6, slot=950, removal_latency=removal, latency=removal)
    summary = {"variants": {"v": {"resolved": {"run": {"iterations": 1000},
                                               "metrics": {"latency_window": 10}}}}}  # fmt: skip
    plot_latency(requests, ["v"], tmp_path / "lat.png", summary)
    (fig,) = drawn
    (ax,) = _latency_axes(fig)
    curves = {ln.get_gid(): ln for ln in ax.get_lines() if ln.get_gid()}
    assert curves["km-removal_latency"].get_xdata()[-1] == 51.0
    assert curves["km-latency"].get_xdata()[-1] == 42.0
    kl = next(t for t in _panel_legend_texts(fig) if t.startswith("unlearning"))
    est = estimates(np.asarray(removal), np.full(6, 42.0))
    assert f"mean ≥ {_num(est.restricted_mean)}" in kl


def test_the_expectation_drawn_is_the_request_s_own_when_the_summary_has_it(drawn, tmp_path):
    requests = _requests(["v"], removal_latency=[1.0, 2.0, 3.0, 4.0, 5.0])
    stationary = {"variants": {"v": {"theory": {"next_visit_latency": {"3": 7.0}}}}}
    own = {"variants": {"v": {**stationary["variants"]["v"], "per_request": [
        {"request": 0, "node": 3,
         "expected_removal_latency": {"value": 2.9, "label": "E[removal] of this request"}}]}}}  # fmt: skip
    plot_latency(requests, ["v"], tmp_path / "a.png", own)
    plot_latency(requests, ["v"], tmp_path / "b.png", stationary)
    first, second = drawn
    for fig, value, words in (
        (first, 2.9, "E[removal] of this request"),
        (second, 7.0, STATIONARY_LABEL),
    ):
        (ax,) = _latency_axes(fig)
        (line,) = _dotted_verticals(ax)
        assert line.get_xdata()[0] == value and line.get_label() == words
        assert f"dotted: {words}" in {t.replace("\n", " ") for t in _legend_texts(fig)}
        assert not [p for p in ax.patches if p.get_gid() == "unobserved"]  # no run length known


def _many_requests(variants: list[str], slots=(1000, 1003, 2000, 3000, 3500), runs=8):
    rng = np.random.default_rng(0)
    frames = []
    for k, slot in enumerate(slots):
        latency = rng.geometric(0.02, size=runs).astype(float)
        frames.append(_requests(variants, runs=runs, slot=slot, removal_latency=np.tile(latency, 9),
                                latency=np.tile(latency + 3, 9), retrain_latency=np.tile(latency * 9, 9),
                                ).assign(request=k, node=[0, 17, 29, 16, 11][k]))  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_latency_rows_are_variants_and_columns_requests_on_shared_axes(drawn, tmp_path):
    """Two variants with five requests each: a 2 × 5 grid (not panels flowing three per row), one
    x range for all, no legend running into another legend or another panel, no title into its
    neighbour."""
    variants = ["prior={a=2, b=2}, kind=metropolis-hastings", "prior={a=20, b=5}, kind=uniform"]
    requests = _many_requests(variants)
    plot_latency(requests, variants, tmp_path / "lat.png")
    (fig,) = drawn
    panels = _latency_axes(fig)
    assert len(panels) == 10
    assert _grid_cells(panels) == [(r, c) for r in range(2) for c in range(5)]
    assert len({ax.get_xlim() for ax in panels}) == 1
    assert all(ax.get_shared_x_axes().joined(panels[0], ax) for ax in panels)
    fig.draw_without_rendering()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert len(legends) == 10
    boxes = [lg.get_window_extent() for lg in legends]
    for i, box in enumerate(boxes):
        assert not any(_overlaps(box, other) for other in boxes[i + 1 :])
        assert not any(_overlaps(box, ax.get_window_extent()) for ax in panels)
    titles = [ax.title.get_window_extent() for ax in panels if ax.get_title()]
    for i, box in enumerate(titles):
        assert not any(_overlaps(box, other) for other in titles[i + 1 :])
    assert fig.get_tightbbox().width <= fig.get_figwidth() + 0.05  # nothing sticks out


def test_latency_of_one_request_per_variant_is_laid_out_by_the_sweep_factors(drawn, tmp_path):
    summary = _sweep_summary()
    variants = list(summary["variants"])
    requests = _requests(variants, removal_latency=[1.0, 2.0, 3.0, 4.0, 5.0])
    plot_latency(requests, variants, tmp_path / "lat.png", summary)
    (fig,) = drawn
    panels = _latency_axes(fig)
    cells = dict(zip(variants, _grid_cells(panels), strict=True))
    assert cells["nodes=30, kind=metropolis-hastings"] == (2, 0)  # rows: sizes, columns: walks
    assert cells["nodes=10, kind=simple-random-walk"] == (0, 1)
    assert sorted(ax.get_title().replace("\n", " ") for ax in panels if ax.get_title()) == [
        "scheduler.kind = metropolis-hastings", "scheduler.kind = simple-random-walk"
    ]  # fmt: skip
    rows = sorted(t.get_text() for ax in panels for t in ax.texts if t.get_gid() == "row-label")
    assert rows == ["topology.nodes = 10", "topology.nodes = 20", "topology.nodes = 30"]


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
    plot_cover_time(runs, _cover_summary(), tmp_path / "c.png")
    (fig,) = drawn
    (ax,) = fig.axes
    exact = [ln for ln in ax.get_lines() if ln.get_label() == EXACT_COVER]
    assert len(exact) == 1 and exact[0].get_marker() == "D"  # one point, visible as a marker
    assert exact[0].get_ydata().tolist() == [160.0]
    bounds = [
        c for c in ax.collections if isinstance(c, LineCollection) and c.get_label() == MATTHEWS
    ]
    assert len(bounds) == 1
    (segment,) = bounds[0].get_segments()
    assert segment[:, 1].tolist() == [500.0, 1800.0]
    assert {MATTHEWS, EXACT_COVER, SIMULATED, CENSORED} <= _legend_texts(fig)


def test_visits_show_the_deviation_from_the_stationary_share(drawn, tmp_path):
    graph = nx.star_graph(4)  # centre 0 (degree 4), leaves 1..4
    pi_srw = np.array([4, 1, 1, 1, 1]) / 8
    share = pi_srw * np.array([1.0, 1.1, 0.9, 1.0, 1.0])
    visits = pd.DataFrame({"variant": "v", "node": range(5), "visits": 0, "share": share})
    pi, dev = visit_deviation(visits, graph, "v", "simple-random-walk")
    assert pi == pytest.approx(pi_srw)
    assert dev == pytest.approx([0.0, 0.1, -0.1, 0.0, 0.0])
    summary = {"variants": {"v": {"resolved": {"scheduler": {"kind": "simple-random-walk"}}}}}
    plot_visits(visits, {"v": graph}, tmp_path / "v.png", summary, _requests(["v"]))
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
    plot_evaluation(metrics, ["v"], ["accuracy"], tmp_path / "e.png", summary=summary,
                          requests=_requests(["v"], slot=12))  # fmt: skip
    (fig,) = drawn
    steps = [c for ax in fig.axes for c in ax.patches if c.get_label() == REFERENCE_LABEL]
    (step,) = steps
    values, edges, _ = step.get_data()
    assert values.tolist() == [0.95, 0.93] and edges.tolist() == [1.0, 12.0, 30.0]
    assert any(ln.get_gid() == "request" for ax in fig.axes for ln in ax.get_lines())
    assert _labelled(fig) <= _legend_texts(fig)


def test_evaluation_draws_the_retrain_kl_and_then_dots_the_target_s_own_value(drawn, tmp_path):
    """G-FVL with a request: the retrain baseline's KL dashed in the KL row (its median line), so
    the target's own accuracy is dotted (one meaning for dashed in a figure)."""
    metrics = _metrics(["v"], retrain=True)
    metrics["accuracy"] = 0.9
    summary = {"variants": {"v": {"theory": {"target": {"all": {"accuracy": 0.95}}}}}}
    plot_evaluation(metrics, ["v"], ["accuracy"], tmp_path / "e.png", summary=summary,
                          requests=_requests(["v"], slot=10))  # fmt: skip
    (fig,) = drawn
    kl_row = next(ax for ax in fig.axes if ax.get_ylabel() == KL.stacked)
    (retrain,) = [ln for ln in kl_row.get_lines() if ln.get_gid() == "retrain"]
    assert retrain.get_linestyle() == "--"
    rows = metrics.dropna(subset=["retrain_kl"])
    expected = rows.groupby("iteration")["retrain_kl"].median()
    np.testing.assert_array_equal(retrain.get_xdata(), expected.index.to_numpy(dtype=float))
    y, want = retrain.get_ydata(), expected.to_numpy()
    positive = want > 0
    assert positive.any() and not positive.all()
    np.testing.assert_allclose(y[positive], want[positive], rtol=1e-12)
    assert (y[~positive] < want[positive].min()).all()  # exact zeros: drawn past the axis break
    (step,) = [p for ax in fig.axes for p in ax.patches if p.get_label() == REFERENCE_DOTTED]
    assert step.get_linestyle() == ":"
    assert RETRAIN_BESIDE in _legend_texts(fig)


def test_palette_roles_differ():
    assert style.UNLEARNING["color"] != style.RETRAIN["color"]
    assert style.UNLEARNING["linestyle"] != style.RETRAIN["linestyle"]
    assert isinstance(plot_results, object) and Line2D  # the module's public names import


def test_per_variant_panels_of_a_sweep_put_its_facets_in_columns():
    from gossipsim.figures.layout import variant_cells

    summary = _sweep_summary()
    variants = list(summary["variants"])
    cells = variant_cells(facets(summary, variants), variants)
    assert (cells.rows, cells.cols) == (3, 2)
    assert cells.where["nodes=30, kind=metropolis-hastings"] == (2, 0)
    assert cells.where["nodes=10, kind=simple-random-walk"] == (0, 1)
    assert cells.col_labels == [
        "scheduler.kind = metropolis-hastings", "scheduler.kind = simple-random-walk"
    ]  # fmt: skip
    assert cells.row_labels == [f"topology.nodes = {n}" for n in (10, 20, 30)]
    visit = _visit_cells(facets(summary, variants), variants)
    assert visit["nodes=30, kind=metropolis-hastings"] == (0, 2)  # graphs: one row per facet


def test_step_values_on_grid_equal_a_per_run_searchsorted():
    """The KL-vs-time curves of all runs at once equal the per-run loop they replaced, bit for bit:
    times equal to grid points, repeated times, a run starting after the grid does, runs listed out
    of order, -0.0 beside 0.0."""
    from gossipsim.figures.stats import step_values_on_grid

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


def _pivot_band_matrix(
    table: pd.DataFrame, variant: str, column: str, x: str = "iteration"
) -> tuple[np.ndarray, np.ndarray]:
    """band_matrix as it was written in pandas (a pivot table, then forward filling)."""
    part = table.loc[table["variant"] == variant, ["run", x, column]]
    grid_ = np.unique(part[x].to_numpy())
    wide = part.pivot_table(index=x, columns="run", values=column, aggfunc="last", dropna=False)
    return grid_, wide.reindex(grid_).ffill().to_numpy(dtype=float).T


def test_band_matrix_equals_the_pandas_pivot_it_replaced():
    """The runs × slots matrix of every figure equals the pivot table it replaced, bit for bit:
    rows out of order, runs that stop early (carried forward), slots some runs did not record,
    NaN in the middle of a run (carried over) and at its start (kept), a run with no value at all,
    two rows of one run at one slot (the later non-NaN one wins), and a float x (time)."""
    from gossipsim.figures.stats import band_matrix

    rng = np.random.default_rng(7)
    rows = []
    for variant in ("a", "b"):
        for run in range(12):
            slots = np.sort(
                rng.choice(np.arange(1, 60), size=int(rng.integers(3, 40)), replace=False)
            )
            for s in slots:
                rows.append((variant, run, int(s), float(s) / 3.0, rng.normal()))
    table = pd.DataFrame(rows, columns=["variant", "run", "iteration", "time", "kl"])
    table.loc[rng.random(len(table)) < 0.15, "kl"] = np.nan
    table.loc[(table["variant"] == "a") & (table["run"] == 5), "kl"] = np.nan  # never a value
    twice = table.sample(20, random_state=1).assign(kl=lambda t: t["kl"] + 100.0)
    table = pd.concat([table, twice], ignore_index=True).sample(frac=1.0, random_state=2)
    table["variant"] = table["variant"].astype(pd.CategoricalDtype(["b", "a"]))
    for variant in ("a", "b"):
        for x in ("iteration", "time"):
            want_grid, want = _pivot_band_matrix(table, variant, "kl", x)
            got_grid, got = band_matrix(table, variant, "kl", x)
            np.testing.assert_array_equal(got_grid, want_grid)
            np.testing.assert_array_equal(got, want)
    _, got = band_matrix(table, "a", "kl")
    assert got.shape[0] == 12 and np.isnan(got[5]).all()
    assert np.isnan(got).any() and not np.isnan(got[:, -1]).all()


# ---------------------------------------------------------------------------------------------------
# what a reviewer sent back (issue 20, items 7, 9, 10): each checked on the drawn figure


def _request_name_boxes(fig: Figure) -> list[list[tuple[str, Any]]]:
    """Per panel: the request names above it and their boxes on the drawn figure."""
    fig.draw_without_rendering()
    out = []
    for ax in fig.axes:
        for child in ax.child_axes:
            if type(child).__name__ == "SecondaryAxis":
                labels = [t for t in child.xaxis.get_ticklabels() if t.get_text()]
                out.append([(t.get_text(), t.get_window_extent()) for t in labels])
    return out


def test_request_names_never_overlap_and_read_the_same_in_every_panel(drawn, tmp_path):
    """Requests at slots 1,000 and 1,003 of 3,600 wrote "node 0node 17" on top of each other: close
    requests are named together, and every panel with the same requests names them alike."""
    summary = _sweep_summary()
    variants = list(summary["variants"])
    metrics = _metrics(variants, slots=3600, runs=2)
    requests = _many_requests(variants, runs=2)
    plot_kl_vs_iteration(metrics, variants, tmp_path / "kl.png", summary=summary,
                               requests=requests)  # fmt: skip
    (fig,) = drawn
    panels = _request_name_boxes(fig)
    assert len(panels) == 2
    for names in panels:
        boxes = [box for _, box in names]
        assert not any(_overlaps(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
        assert " ".join(text for text, _ in names).count("17") == 1  # each node named once
    assert [t for t, _ in panels[0]] == [t for t, _ in panels[1]]
    assert [t for t, _ in panels[0]][0] == "nodes 0, 17"


def _passes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, each layout of a figure ("layout": constrained layout executed) and each draw
    ("draw"; a draw with a layout engine lays the figure out first, and both are listed)."""
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    calls: list[str] = []
    draw, execute = Figure.draw, ConstrainedLayoutEngine.execute

    def drawn(self: Figure, renderer: Any) -> None:
        calls.append("draw")
        draw(self, renderer)

    def laid_out(self: ConstrainedLayoutEngine, fig: Any) -> Any:
        calls.append("layout")
        return execute(self, fig)

    monkeypatch.setattr(Figure, "draw", drawn)
    monkeypatch.setattr(ConstrainedLayoutEngine, "execute", laid_out)
    return calls


def test_a_png_is_laid_out_once_and_is_the_image_savefig_makes(tmp_path, monkeypatch):
    """A figure written to a PNG is laid out once at the resolution it is written at and drawn
    once, to render it (savefig drew it twice, laying it out in the first draw; the request names
    drew it a third time): the same pixels as savefig's own, tight box included, and the figure
    keeps its layout engine."""
    from PIL import Image

    from gossipsim.figures.style import RC

    removal = [1.0, 2.0, 4.0, np.nan, 8.0]
    requests = _requests(["v"], removal_latency=removal, latency=removal,
                         retrain_latency=[np.nan] * 5)  # fmt: skip
    summary = {"variants": {"v": {"theory": {"expected_unlearning_latency": {"3": 3.5}}}}}
    before = plot_latency(requests, ["v"], None, summary)
    assert isinstance(before, Figure)
    with plt.rc_context(RC):
        before.savefig(tmp_path / "savefig.png")  # laid out and cropped by savefig itself
    passes = _passes(monkeypatch)
    plot_latency(requests, ["v"], tmp_path / "once.png", summary)
    assert passes == ["layout", "draw"]  # laid out once, drawn once (rendered)
    pixels = [np.asarray(Image.open(tmp_path / f"{n}.png")) for n in ("savefig", "once")]
    assert pixels[0].shape == pixels[1].shape
    np.testing.assert_array_equal(pixels[0], pixels[1])
    engine = before.get_layout_engine()
    fig = plot_latency(requests, ["v"], None, summary)
    assert isinstance(fig, Figure)
    _save(fig, tmp_path / "again.png", _lay_out(fig))
    assert type(fig.get_layout_engine()) is type(engine) and engine is not None


def test_request_names_are_laid_out_with_the_figure_and_again_only_when_merged(
    tmp_path, monkeypatch
):
    """Named requests cost no layout of their own: the figure's one layout places them, and only
    names merged ("nodes 0, 17") lay it out once more."""
    summary = _sweep_summary()
    variants = list(summary["variants"])
    passes = _passes(monkeypatch)
    plot_kl_vs_iteration(_metrics(variants, slots=3600, runs=2), variants,
                               tmp_path / "one.png", summary=summary,
                               requests=_requests(variants, runs=2, slot=1000))  # fmt: skip
    assert passes == ["layout", "draw"]
    passes.clear()
    plot_kl_vs_iteration(_metrics(variants, slots=3600, runs=2), variants,
                               tmp_path / "merged.png", summary=summary,
                               requests=_many_requests(variants, runs=2))  # fmt: skip
    assert passes == ["layout", "layout", "draw"]


def test_a_column_figure_stays_a_column_wide(drawn, tmp_path):
    """Long variant labels put a two-column legend past the 3.5 in of a one-panel figure (4.2 in):
    the legend takes fewer columns or wraps, so nothing sticks out of the figure."""
    variants = [f"a rather long variant label number {i} of the sweep" for i in range(3)]
    plot_kl_vs_iteration(_metrics(variants), variants, tmp_path / "kl.png", tolerance=1e-9)
    (fig,) = drawn
    assert fig.get_figwidth() == COLUMN_WIDTH_IN
    fig.draw_without_rendering()
    assert fig.get_tightbbox().width <= COLUMN_WIDTH_IN + 0.05


def test_panel_titles_of_a_sweep_do_not_run_into_each_other(drawn, tmp_path):
    variants, rows = [], []
    for kind in ("metropolis-hastings", "simple-random-walk", "uniform"):
        for prior in ("{a=2, b=2}", "{a=20, b=5}"):
            variants.append(f"prior={prior}, kind={kind}")
    summary = {
        "sweep": {"model.prior": ["{a=2, b=2}", "{a=20, b=5}"],
                  "scheduler.kind": ["metropolis-hastings", "simple-random-walk", "uniform"]},
        "variants": {v: {"values": {"model.prior": v.split(", kind=")[0][6:],
                                    "scheduler.kind": v.split("kind=")[1]}} for v in variants},
    }  # fmt: skip
    metrics = _metrics(variants, retrain=True)
    requests = _requests(variants, slot=10)
    plot_unlearning_kl(metrics, requests, variants, tmp_path / "u.png", summary=summary)
    (fig,) = drawn
    fig.draw_without_rendering()
    titled = [ax for ax in fig.axes if ax.get_title()]
    boxes = [ax.title.get_window_extent() for ax in titled]
    assert not any(_overlaps(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    assert len(titled) == 3  # one per column: the walks
    rows = [t for ax in fig.axes for t in ax.texts if t.get_gid() == "row-label"]
    assert sorted(t.get_text() for t in rows) == [
        "model.prior = {a=2, b=2}",
        "model.prior = {a=20, b=5}",
    ]
    assert fig.get_tightbbox().width <= fig.get_figwidth() + 0.05


def test_a_short_log_axis_labels_major_ticks_only():
    """A KL between 0.01 and 0.05 (Fig. 4's excess) printed crowded minor labels: majors at 1, 2
    and 5 times the powers of ten carry the labels, minor ticks none."""
    from matplotlib.ticker import NullFormatter

    fig = Figure()
    lp = LogPanel()
    lp.line([1, 2, 3], [0.012, 0.03, 0.05])
    ax = lp.render(fig, fig.add_gridspec(1, 1)[0])
    fig.draw_without_rendering()
    assert isinstance(ax.yaxis.get_minor_formatter(), NullFormatter)
    low, high = ax.get_ylim()
    shown = [t.get_text() for t in ax.get_yticklabels() if t.get_text()
             and low <= t.get_position()[1] <= high]  # fmt: skip
    assert len(shown) >= 2 and len(shown) <= 8


def test_cover_time_of_a_two_dimensional_sweep_splits_it(drawn, tmp_path):
    """Six variants of prior × walk: the axis shows the two priors, the walks a colour each (not
    six long labels on one axis)."""
    variants, values = [], {}
    for kind in ("metropolis-hastings", "simple-random-walk", "uniform"):
        for prior in ("{a=2, b=2}", "{a=20, b=5}"):
            label = f"prior={prior}, kind={kind}"
            variants.append(label)
            values[label] = {"values": {"model.prior": prior, "scheduler.kind": kind},
                             "theory": {"nodes": 34}}  # fmt: skip
    summary = {"sweep": {"model.prior": [], "scheduler.kind": []}, "variants": values}
    runs = pd.DataFrame([{"variant": v, "run": r, "cover_iteration": 100 + 10 * r + i}
                         for i, v in enumerate(variants) for r in range(5)])  # fmt: skip
    plot_cover_time(runs, summary, tmp_path / "c.png")
    (fig,) = drawn
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["{a=2, b=2}", "{a=20, b=5}"]
    assert ax.get_xlabel() == "model.prior"
    assert {"scheduler.kind = uniform", "scheduler.kind = metropolis-hastings"} <= _legend_texts(
        fig
    )
    colours = {to_hex(c.get_color()) for c in ax.get_lines() if c.get_marker() == "o"}
    assert len(colours) == 3


def test_the_cover_time_whisker_is_inside_the_axes(drawn, tmp_path):
    """Fig. 5's whisker (mean + CI above the exact value and bounds) was cut by the axis' top."""
    summary = {"variants": {"v": {"theory": {"nodes": 10, "exact_cover_moves": 20.0}}}}
    runs = pd.DataFrame({"variant": "v", "run": range(6),
                         "cover_iteration": [10, 20, 30, 40, 80, 90]})  # fmt: skip
    plot_cover_time(runs, summary, tmp_path / "c.png")
    (fig,) = drawn
    (ax,) = fig.axes
    mean, half = mean_and_half_width(np.array([9, 19, 29, 39, 79, 89.0]))
    assert ax.get_ylim()[1] >= mean + half


def test_pdf_figures_embed_truetype_fonts_not_type3(tmp_path):
    """Paper submission checkers reject Type 3 fonts: the figures embed TrueType (Type 42). The
    PDF is written without compression so that its font objects can be read."""
    import matplotlib as mpl

    metrics = _metrics(["v"])
    with mpl.rc_context({"pdf.compression": 0}):
        path = plot_kl_vs_iteration(metrics, ["v"], tmp_path / "kl.pdf", tolerance=1e-9)
    data = path.read_bytes()
    assert b"/Subtype /Type3" not in data and b"/Type3" not in data
    assert b"/CIDFontType2" in data or b"/Subtype /TrueType" in data


def test_every_figure_draws_into_a_given_axes_or_figure_without_a_path():
    """Each plot_* draws where the caller says (a subfigure in the place of ``ax``, or ``fig``) and
    returns the figure; nothing is written."""
    summary = _sweep_summary()
    variants = list(summary["variants"])[:2]
    metrics = _metrics(variants, retrain=True)
    metrics["time"] = metrics["iteration"] * 0.01
    metrics["accuracy"] = 0.9
    requests = _requests(variants, slot=10, removal_latency=[1.0, 2.0, 3.0, 4.0, 5.0])
    runs = pd.DataFrame({"variant": variants[0], "run": range(4), "cover_iteration": [5, 6, 7, 8],
                         "iterations": 30})  # fmt: skip
    cover = {"variants": {variants[0]: {"theory": {"nodes": 5}}}}
    visits = pd.DataFrame({"variant": variants[0], "node": range(5), "visits": 1, "share": 0.2})
    calls = {
        "kl_vs_iteration": lambda **kw: plot_kl_vs_iteration(metrics, variants, **kw),
        "kl_vs_time": lambda **kw: plot_kl_vs_time(metrics, variants, **kw),
        "unlearning_kl": lambda **kw: plot_unlearning_kl(metrics, requests, variants, **kw),
        "latency": lambda **kw: plot_latency(requests, variants, **kw),
        "cover_time": lambda **kw: plot_cover_time(runs, cover, **kw),
        "evaluation": lambda **kw: plot_evaluation(metrics, variants, ["accuracy"], **kw),
        "visits": lambda **kw: plot_visits(visits, {variants[0]: nx.path_graph(5)}, **kw),
        "comparison": lambda **kw: plot_comparison(
            [("a", metrics, requests, summary), ("b", metrics, None, summary)], **kw),
    }  # fmt: skip
    for name, call in calls.items():
        alone = call()
        assert isinstance(alone, Figure), name
        mine = Figure(figsize=(16, 9), layout="constrained")
        left, right = mine.subplots(1, 2)
        assert call(ax=right) is mine, name
        assert right not in mine.axes and left in mine.axes and mine.subfigs, name
        if name in ("latency", "cover_time"):  # into a figure of one's own (one of each kind)
            other = Figure(figsize=(8, 6), layout="constrained")
            assert call(fig=other) is other and other.axes, name


def test_long_variant_names_on_the_cover_axis_do_not_run_into_each_other():
    """A one-dimensional sweep of the walk: three long names under a column-wide axis are broken
    after their hyphens instead of printed over one another."""
    names = ["metropolis-hastings", "simple-random-walk", "uniform"]
    runs = pd.DataFrame({"variant": np.repeat(names, 2), "run": [0, 1] * 3,
                         "cover_iteration": [300, 320, 280, 300, 170, 180], "iterations": 1000})  # fmt: skip
    summary = {"variants": {n: {"values": {"scheduler.kind": n}} for n in names}}
    fig = plot_cover_time(runs, summary)
    fig.draw_without_rendering()
    (ax,) = [a for a in fig.axes if a.get_xticklabels()]
    boxes = [t.get_window_extent() for t in ax.get_xticklabels() if t.get_text()]
    assert len(boxes) == 3
    assert not any(_overlaps(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    assert [t.get_text() for t in ax.get_xticklabels()][0] == "metropolis-\nhastings"


def _cover_ticks(names: list[str], path: Path | None = None) -> list[Any]:
    """The x tick labels of the cover figure of variants ``names`` (their text and, laid out as
    a saved figure is, their boxes)."""
    runs = pd.DataFrame({"variant": np.repeat(names, 2), "run": [0, 1] * len(names),
                         "cover_iteration": 40, "iterations": 1000})  # fmt: skip
    summary = {
        "variants": {n: {"values": {"protocol.kind": n}, "theory": {"nodes": 10}} for n in names}
    }
    fig = plot_cover_time(runs, summary)
    assert isinstance(fig, Figure)
    with mpl.rc_context(style.RC):
        fig.dpi = mpl.rcParams["savefig.dpi"]
        fig.draw_without_rendering()
    (ax,) = [a for a in fig.axes if a.get_xticklabels()]
    return [t for t in ax.get_xticklabels() if t.get_text()]


def _apart(labels: list[Any]) -> bool:
    """No two labels' boxes (as drawn) overlap."""
    boxes = [t.get_window_extent() for t in labels]
    return not any(_overlaps(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_the_breast_cancer_variants_tick_labels_stay_apart():
    """Six names of dsvgd_breast_cancer under a column-wide axis: "(centralised)" is wider than a
    tick's room even at 6 points (they ran into each other: "(centralised)complete"), so every
    other label goes one row lower, where it has twice the room; nothing of a name is lost."""
    names = ["SVGD (centralised)", "DSVGD, complete", "DSVGD, ring", "DSVGD, star",
             "DSVGD, server (round-robin)", "G-FVL (Gaussian)"]  # fmt: skip
    labels = _cover_ticks(names)
    assert len(labels) == 6 and _apart(labels)
    assert [t.get_text().replace("-\n", "-").replace("\n", " ") for t in labels] == names
    assert all(t.get_rotation() == 0 for t in labels)
    tops = [t.get_window_extent().y1 for t in labels]
    assert tops[0] == tops[2] == tops[4] and tops[1] == tops[3] == tops[5] and tops[1] < tops[0]
    first = max(t.get_window_extent().y0 for t in labels[0::2])
    assert tops[1] < first  # the lower row starts under the lowest line of the upper one


def test_labels_that_fit_in_one_row_stay_in_one_row():
    labels = _cover_ticks(["ring", "star", "complete"])
    assert len({t.get_window_extent().y1 for t in labels}) == 1
    assert [t.get_fontsize() for t in labels] == [7.0] * 3 and _apart(labels)


def test_tick_labels_too_long_to_fit_beside_each_other_are_turned_upright():
    names = [f"averyveryverylongvariantname{i}" for i in range(10)]
    labels = _cover_ticks(names)
    assert [t.get_text() for t in labels] == names and _apart(labels)
    assert all(t.get_rotation() == 90 for t in labels)


def test_a_figure_drawn_into_the_axes_of_a_figure_without_layout_keeps_its_legend_clear():
    """plt.subplots() makes figures without a layout engine: the legend that goes below the panels
    must still clear the axis labels (the figure gets constrained layout)."""
    runs = pd.DataFrame({"variant": ["a", "a", "b", "b"], "run": [0, 1, 0, 1],
                         "cover_iteration": [5, 6, 7, 8], "iterations": 30})  # fmt: skip
    summary = {"variants": {"a": {"values": {"scheduler.kind": "x"}}, "b": {"values": {}}}}
    mine = Figure(figsize=(4, 3))
    (ax,) = [mine.add_subplot()]
    plot_cover_time(runs, summary, ax=ax)
    mine.draw_without_rendering()
    (drawn_ax,) = [a for a in mine.axes if a.get_xlabel() or a.get_ylabel()]
    labels = drawn_ax.get_tightbbox()
    for legend in mine.legends + [lg for sub in mine.subfigs for lg in sub.legends]:
        assert not _overlaps(legend.get_window_extent(), labels)


def test_figures_show_in_a_notebook_without_pyplot():
    """Results.plot() without a folder returns Figures that IPython shows (HTML with a PNG per
    figure), each a Figure with a PNG of its own; pyplot keeps none of them."""
    import base64
    import re

    from gossipsim.figures.canvas import Figures

    fig = plot_kl_vs_iteration(_metrics(["v"]), ["v"])
    assert fig._repr_png_().startswith(b"\x89PNG")
    shown = Figures({"kl_vs_iteration": fig})._repr_html_()
    (data,) = re.findall(r'src="data:image/png;base64,([^"]+)"', shown)
    assert base64.b64decode(data).startswith(b"\x89PNG") and "kl_vs_iteration" in shown
    assert fig not in [plt.figure(n) for n in plt.get_fignums()]


def test_the_figures_package_hands_on_every_figure_function_from_its_module():
    """``gossipsim.figures`` is the one place the figure functions are imported from: each of its
    names is the object its family's module defines, loaded on first use, so a helper imported on
    its own (what the results stage reads of the figures' statistics) imports no figure."""
    import importlib
    import subprocess
    import sys

    import gossipsim.figures as figures

    for name in figures.__all__:
        home = importlib.import_module(f"gossipsim.figures.{figures._LAZY[name]}")
        assert getattr(figures, name) is getattr(home, name), name
    assert set(figures.__all__) <= set(dir(figures))
    code = (
        "import sys, gossipsim.figures.stats\n"
        "drawn = {m for m in sys.modules if m.startswith('gossipsim.figures.')}\n"
        "assert drawn <= {'gossipsim.figures.stats'}, drawn\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_importing_and_drawing_leave_the_backend_alone(tmp_path):
    """Importing gossipsim's plotting switched the backend to Agg, so a notebook's inline backend
    (and the user's own plt.show()) showed nothing: run in a fresh interpreter with another
    backend selected."""
    import subprocess
    import sys

    code = (
        "import matplotlib; before = matplotlib.get_backend()\n"
        "from gossipsim.figures import plot_kl_vs_iteration; import pandas as pd\n"
        "m = pd.DataFrame({'variant': 'v', 'run': 0, 'iteration': [1, 2], 'time': 0.0,"
        " 'kl': [1.0, 0.5]})\n"
        "plot_kl_vs_iteration(m, ['v'], 'kl.png')\n"
        "after = matplotlib.get_backend()\n"
        "assert before == after == 'svg', (before, after)\n"
    )
    env = {**__import__("os").environ, "MPLBACKEND": "svg"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_latency_not_served_exceeds_the_slots_left_in_its_run():
    """n − r + 1 for a request at slot r in a run of n slots, the run's own length (runs of one
    variant may differ: stop_when_done), matched by variant and run."""
    from gossipsim.figures.requests import latency_bound

    requests = pd.DataFrame({"variant": ["a", "a", "b"], "run": [0, 1, 0],
                             "request_iteration": [950.0, 950.0, 10.0]})  # fmt: skip
    runs = pd.DataFrame({"variant": ["b", "a", "a"], "run": [0, 1, 0],
                         "iterations": [30, 1000, 960]})  # fmt: skip
    np.testing.assert_array_equal(latency_bound(requests, runs), [11.0, 51.0, 21.0])
    assert np.isnan(latency_bound(requests, None)).all()


@pytest.mark.slow
def test_a_notebook_shows_the_figures_and_the_user_s_own(tmp_path):
    """Executed in a Jupyter kernel (nbclient and ipykernel, not dependencies of gossipsim: skipped
    without them): res.plot() shows images, so does the user's plt.show() afterwards, and the
    backend is still the notebook's."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    from gossipsim.cli.parser import main

    scenario = tmp_path / "s.toml"
    scenario.write_text(
        '[scenario]\nname = "nb"\nruns = 3\niterations = 200\n[topology]\nkind = "ring"\n'
        'nodes = 6\n[model]\nkind = "beta-bernoulli"\n[[unlearning]]\nnode = 2\n'
        "at_iteration = 100\n"
    )
    assert main(["run", str(scenario), "--out", str(tmp_path / "r"), "--no-plots"]) == 0
    cells = [
        "import matplotlib; before = matplotlib.get_backend()",
        f"import gossipsim as gs\nres = gs.load_results({str(tmp_path / 'r')!r})\nres.plot()",
        "import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()",
        "assert matplotlib.get_backend() == before, (before, matplotlib.get_backend())",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    shown = [[sorted(o.get("data", {})) for o in c.outputs] for c in nb.cells]
    assert (
        "text/html" in shown[1][0]
        and 'src="data:image/png' in nb.cells[1].outputs[0].data["text/html"]
    )
    assert any("image/png" in kinds for kinds in shown[2])


def test_compare_outlines_each_band_and_draws_the_tolerance(drawn, tmp_path):
    """`gossipsim compare` of two folders of a two-variant sweep: faint bands outlined in their
    line's style (the same variant the same colour in both folders, each folder its style) and the
    folders' common tolerance drawn once."""
    from gossipsim.cli.parser import main
    from tests.helpers import base_scenario, to_toml

    raw = base_scenario(scenario={"name": "c", "seed": 3, "runs": 4, "iterations": 120},
                        unlearning=[{"node": 2, "at_iteration": 60}])  # fmt: skip
    raw["sweep"] = {"topology.kind": ["ring", "complete"]}
    (tmp_path / "s.toml").write_text(to_toml(raw))
    for out in ("a", "b"):
        assert main(["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / out),
                     "--no-plots", "--progress", "off"]) == 0  # fmt: skip
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"),
                 "--out", str(tmp_path / "c.png")]) == 0  # fmt: skip
    (fig,) = drawn
    lines = [ln for ax in fig.axes for ln in ax.get_lines()]
    tolerance = [ln for ln in lines if ln.get_label() == "tolerance 1e-10"]
    assert tolerance and len({ln.get_label() for ln in tolerance}) == 1
    curves = {ln.get_label(): ln for ln in lines if ln.get_label() in
              ("a: ring", "b: ring", "a: complete", "b: complete")}  # fmt: skip
    assert len(curves) == 4
    assert to_hex(curves["a: ring"].get_color()) == to_hex(curves["b: ring"].get_color())
    assert curves["a: ring"].get_linestyle() != curves["b: ring"].get_linestyle()
    bands = [c for ax in fig.axes for c in ax.collections if isinstance(c, PolyCollection)]
    assert bands and all(c.get_alpha() <= 0.1 for c in bands)
    edges = [ln for ln in lines if ln.get_label() == "_band edge"]
    assert len(edges) >= 2 * 4  # both edges of every band, on the log axis at least


def test_a_request_that_arrived_in_no_run_keeps_its_place_and_says_so(drawn, tmp_path):
    first = _requests(["a", "b"], removal_latency=[1.0, 2.0, 3.0, 4.0, 5.0])
    second = _requests(["a", "b"], slot=40, removal_latency=[2.0] * 5).assign(request=1, node=7)
    second.loc[second["variant"] == "a", ["request_iteration", "removal_latency"]] = np.nan
    plot_latency(pd.concat([first, second]), ["a", "b"], tmp_path / "lat.png")
    (fig,) = drawn
    notes = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == "note"]
    assert notes == ["arrived in none of the 5 runs\n(every run ended before it)"]
    titles = sorted(ax.get_title() for ax in fig.axes if ax.get_title())
    assert "node 7, request (arrived in no run)" in titles and len(titles) == 4


@pytest.fixture(scope="module")
def served_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """A small study with a request that every run serves (K = 10, the request at slot 30 of
    200), run in memory, and its results folder."""
    import gossipsim as gs
    from tests.helpers import base_scenario

    raw = base_scenario(
        scenario={"name": "served", "seed": 3, "runs": 12, "iterations": 200},
        unlearning=[{"node": 4, "at_iteration": 30}],
    )
    out = tmp_path_factory.mktemp("served") / "out"
    res = gs.run(raw, out=out, progress=False, make_plots=lambda *_: None)
    for column in ("removal_latency", "latency"):
        assert res.requests[column].notna().all()  # served in every run: nothing censored
    return res, out


def test_figures_of_a_folder_import_neither_scipy_statistics_nor_the_engines(served_folder):
    """``gossipsim plot`` (a folder read, its figures drawn) imports neither ``scipy.stats`` (the
    latency estimates of requests served in every run come from summary.json, the curves are
    their empirical distributions) nor the simulation engines."""
    import subprocess
    import sys

    _, out = served_folder
    code = (
        "import sys; from gossipsim.results.results import load_results; "
        "written = load_results(sys.argv[1]).plot(sys.argv[2]); "
        "assert 'latency' in written, written; "
        "print(sorted(m for m in ('scipy.stats', 'gossipsim.execution.runner', 'gossipsim.execution.executors', "
        "'gossipsim.engine.token', 'gossipsim.results.store') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(out), str(out / "figures")],
        capture_output=True, text=True, check=True, cwd=out,
    )  # fmt: skip
    assert done.stdout.strip() == "[]"


def test_latency_figure_from_summary_json_is_the_one_estimated_again(served_folder, tmp_path):
    """The latency figure of a folder (its estimates read from summary.json) is, pixel for pixel,
    the figure of the run's own Results (which has no summary.json: its estimates are computed
    again, with SciPy)."""
    from PIL import Image

    from gossipsim.results.results import load_results

    res, out = served_folder
    assert res.read_summary is None
    loaded = load_results(out)
    assert loaded.read_summary is not None
    stored = loaded.figure_summary()["variants"]["served"]["per_request"][0]
    read = loaded.read_summary["variants"]["served"]["per_request"][0]
    assert stored["removal_latency"] == read["removal_latency"]
    assert "removal_latency" not in res.figure_summary()["variants"]["served"]["per_request"][0]
    a = res.plot(tmp_path / "estimated", which="latency")["latency"]
    b = loaded.plot(tmp_path / "read", which="latency")["latency"]
    pixels = [np.asarray(Image.open(p)) for p in (a, b)]
    assert pixels[0].shape == pixels[1].shape
    np.testing.assert_array_equal(pixels[0], pixels[1])
