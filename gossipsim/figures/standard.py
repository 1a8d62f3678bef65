"""The standard figures of a results folder: their registry (:data:`FIGURES`), the figures that
apply to a folder and their drawing (:func:`plot_results` writes them, :func:`draw_figures` draws
those of a :class:`gossipsim.results.Results`), readable at paper-column width. Each is drawn by the
module of its family:

- ``kl_vs_iteration``: KL(q ‖ target) against the slot, one line per variant: the median over runs
  with the 12.5th-87.5th percentile band, or (``statistic="mean"``) the mean with its 95% confidence
  interval; log scale, exact zeros drawn past a break in the axis; request slots marked;
- ``kl_vs_time``: the same against simulated seconds (skipped when no slot takes any time), each
  variant's line ending where its last run ends;
- ``kl_vs_local_iterations``: the same against total local iterations L·i (Fig. 4) (these three:
  :mod:`gossipsim.figures.divergence_curves`);
- ``unlearning_kl``: one panel per variant from its first request: KL of the unlearning protocol
  (blue, solid) and of the retrain-from-scratch baseline (vermillion, dashed), best in family
  (:mod:`gossipsim.figures.unlearning_kl`);
- ``latency``: one panel per request, rows the variants and columns their requests: Kaplan–Meier
  estimates over *all* requests of the removal, unlearning and retrain latencies (a request not
  served by the end of its run censored there), each median with its Brookmeyer–Crowley interval
  and the (restricted) mean with its interval, the observation window and the expected removal
  latency, named for what it is (:mod:`gossipsim.figures.latency`);
- ``cover_time``: mean cover time (moves, 95% CI) per variant or against the number of nodes, with
  the exact expectation, Matthews' bounds and the asymptotic formula where known (a centralised
  protocol, which has no walk, left out; tick labels kept apart; :mod:`gossipsim.figures.cover_time`);
- ``evaluation``: every held-out metric (:func:`~gossipsim.figures.evaluation.evaluation_columns`)
  and KL to the optimum against the slot, the target's own metrics dashed, request slots marked;
  for particle protocols accuracy, NLL, ECE, particle spread, a mixture's MMD² and the KSD, the
  retrain baseline's ``retrain_`` metrics and KSD dashed beside the protocol's
  (:mod:`gossipsim.figures.evaluation`);
- ``unlearning_accuracy``: accuracy on the forgotten and on the remaining labels against the slot,
  the protocol (blue, solid) against retraining from scratch (vermillion, dashed), request slots
  marked (particle protocols with requests; :mod:`gossipsim.figures.unlearning_accuracy`);
- ``particles``: the particle sets of one run (particles.csv) after learning and after forgetting,
  the protocol's and the retrain baseline's, over the exact posterior's highest-density regions
  (summary.json ``theory.target_density``; :mod:`gossipsim.figures.particles`);
- ``visits``: the graph of each variant that walks, each node coloured by the deviation of its
  share of token visits from the walk's stationary share, sized by degree, requested nodes ringed
  (:mod:`gossipsim.figures.visits`);
- ``accuracy_vs_ece``: each variant's held-out accuracy against its ECE at the last slot, the
  runs' medians with percentile bars, a colour per value of the sweep's first dimension and a
  marker per value of its second (paper 000's Fig. 4; two or more variants with both metrics;
  :mod:`gossipsim.figures.tradeoff`);
- ``time_map``: where the walk spends its simulated time, the graph of each variant with its edges
  coloured and widened by the share of time on their links and its nodes by the share computing
  there (every slot recorded; drawn by default where links differ by edge or lose messages,
  otherwise on request; :mod:`gossipsim.figures.time_map`).

Against cost (``x``: ``gossipsim plot --x bits|time``, ``Results.plot(x=...)``): the figures
with a slot axis (``kl_vs_iteration``, ``evaluation``, ``unlearning_kl``, ``unlearning_accuracy``)
drawn against cumulative bits or simulated seconds instead, written as ``kl_vs_bits``,
``evaluation_vs_bits``, ... beside the slot figures (``kl_vs_iteration`` against time is
``kl_vs_time``); the rule that puts runs of different costs on one axis is
:mod:`gossipsim.figures.costaxis`'s. The other figures have no slot axis and are not drawn
against a cost (:func:`x_refusal`).

Not one of them: ``compare.png`` of ``gossipsim compare``
(:func:`~gossipsim.figures.compare.plot_comparison`), the KL curves of several results folders in
one panel.

Each variant's divergence is read from the metrics table (:mod:`gossipsim.states.divergences`): KL(q ‖
target) for natural parameters, the kernelized Stein discrepancy (``ksd``) for particle sets. The
``kl_*`` figures (named so for every folder), ``unlearning_kl``, ``latency``, ``evaluation`` and
``compare.png`` draw and label the one each variant has; variants (or folders) of different
divergences never share a panel or a scale.

A sweep of two or more dimensions is faceted: one panel per value of its second (and later)
dimensions, one line per value of the first (:mod:`gossipsim.figures.layout`); the panels of a
figure share their axes. Legends sit below the panels, fitted to the figure's width, and name every
line and band; titles wrap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import networkx as nx
import pandas as pd
from matplotlib.figure import Figure

from gossipsim.figures.canvas import Figures
from gossipsim.figures.churn import applies as churn_applies
from gossipsim.figures.churn import plot_churn
from gossipsim.figures.costaxis import SLOT_FIGURES, X_AXES, figure_name
from gossipsim.figures.cover_time import plot_cover_time
from gossipsim.figures.divergence_curves import (
    plot_kl_vs_iteration,
    plot_kl_vs_time,
    summary_excess,
    summary_tolerance,
)
from gossipsim.figures.evaluation import evaluation_columns, plot_evaluation
from gossipsim.figures.latency import plot_latency
from gossipsim.figures.particles import plot_particles
from gossipsim.figures.stats import STATISTICS
from gossipsim.figures.time_map import per_edge_links, plot_time_map, time_map_refusal
from gossipsim.figures.tradeoff import applies as tradeoff_applies
from gossipsim.figures.tradeoff import plot_accuracy_vs_ece
from gossipsim.figures.unlearning_accuracy import ACCURACY_SPLIT, plot_unlearning_accuracy
from gossipsim.figures.unlearning_kl import plot_unlearning_kl
from gossipsim.figures.visits import plot_visits
from gossipsim.states.divergences import divergences, joined_names
from gossipsim.states.divergences import title as divergence_title

__all__ = [
    "FIGURES", "FORMATS", "STATISTICS", "X_AXES", "FigureSource", "draw_figures", "plot_results",
    "x_refusal",
]  # fmt: skip

FORMATS = ("png", "pdf", "svg")
#: the standard figures, by the name of their file (what Results.plot(which=...) picks from)
FIGURES = (
    "kl_vs_iteration", "kl_vs_time", "unlearning_kl", "latency", "cover_time",
    "kl_vs_local_iterations", "evaluation", "unlearning_accuracy", "particles", "visits",
    "accuracy_vs_ece", "churn", "time_map",
)  # fmt: skip


def x_refusal(x: str, which: Sequence[str] | None) -> str | None:
    """Why figures ``which`` (None: all that apply) cannot be drawn against ``x`` (None: they
    can): ``x`` is not one of :data:`X_AXES`, or names a cost and one of ``which`` has no slot
    axis."""
    if x not in X_AXES:
        return f"must be one of {', '.join(X_AXES)} (got {x!r})"
    if x == "iteration" or which is None:
        return None
    other = [name for name in which if name not in SLOT_FIGURES]
    if other:
        return (
            f"figure {other[0]!r} has no slot axis to draw against {x}; the figures that take "
            f"--x bits or time: {', '.join(SLOT_FIGURES)}"
        )
    return None


class FigureSource(Protocol):
    """What :func:`draw_figures` draws from: the tables, graphs and summary of a results folder
    (:class:`gossipsim.results.Results` is one; the results stage sits above the figures, which
    import nothing of it)."""

    @property
    def metrics(self) -> pd.DataFrame: ...
    @property
    def runs(self) -> pd.DataFrame: ...
    @property
    def requests(self) -> pd.DataFrame: ...
    @property
    def visits(self) -> pd.DataFrame | None: ...
    @property
    def graphs(self) -> dict[str, nx.Graph]: ...
    @property
    def particles(self) -> pd.DataFrame | None: ...

    def figure_summary(self) -> dict[str, Any]:
        """summary.json as the figures read it."""
        ...


def plot_results(
    metrics: pd.DataFrame,
    runs: pd.DataFrame,
    requests: pd.DataFrame,
    visits: pd.DataFrame | None,
    summary: dict[str, Any],
    out_dir: Path,
    *,
    fmt: str = "png",
    statistic: str = "median",
    graphs: dict[str, nx.Graph] | None = None,
    which: Sequence[str] | None = None,
    particles: pd.DataFrame | None = None,
    x: str = "iteration",
) -> list[Path]:
    """Write every standard figure that applies (or those of ``which``, names from
    :data:`FIGURES`) to ``out_dir``; returns the files written. ``x = "bits"`` or ``"time"``:
    the figures with a slot axis against that cost instead, as :func:`figure_name` names them
    (the others are not drawn)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = _figure_jobs(metrics, runs, requests, visits, summary, statistic, graphs, particles, x,
                        which)  # fmt: skip
    written = [
        job(out_dir / f"{figure_name(name, x)}.{fmt}")
        for name, job in jobs.items()
        if which is None or name in which
    ]
    return [p for p in written if isinstance(p, Path)]


def draw_figures(
    results: FigureSource,
    out_dir: Path | None,
    *,
    which: Sequence[str] | None = None,
    fmt: str = "png",
    statistic: str = "median",
    x: str = "iteration",
) -> dict[str, Path] | dict[str, Figure]:
    """The standard figures of ``results`` (:meth:`gossipsim.results.results.Results.plot`): written to
    ``out_dir`` (name -> file), or, without a folder, returned as :class:`Figures` (matplotlib
    Figures by name, made without pyplot, which a notebook shows); against ``x`` as
    :func:`plot_results` draws them (named as their files are)."""
    summary = results.figure_summary()  # without estimating what summary.json holds
    args = (results.metrics, results.runs, results.requests, results.visits, summary)
    if out_dir is not None:
        written = plot_results(*args, out_dir, fmt=fmt, statistic=statistic,
                               graphs=results.graphs, which=which,
                               particles=results.particles, x=x)  # fmt: skip
        return {p.stem: p for p in written}
    figures = Figures()
    jobs = _figure_jobs(*args, statistic, results.graphs, results.particles, x, which)
    for name, job in jobs.items():
        if which is None or name in which:
            drawn = job(None)
            if isinstance(drawn, Figure):
                figures[figure_name(name, x)] = drawn
    return figures


def _figure_jobs(
    metrics: pd.DataFrame,
    runs: pd.DataFrame,
    requests: pd.DataFrame,
    visits: pd.DataFrame | None,
    summary: dict[str, Any],
    statistic: str,
    graphs: dict[str, nx.Graph] | None,
    particles: pd.DataFrame | None = None,
    x: str = "iteration",
    which: Sequence[str] | None = None,
) -> dict[str, Callable[[Path | None], Path | Figure | None]]:
    """Each standard figure that may apply, by name: a function drawing it to a path (or, given
    None, returning its Figure); with ``x`` a cost, those with a slot axis drawn against it.
    ``which``: the figures asked for (None: every one that applies; ``time_map`` applies to
    more folders when asked for)."""
    variants = list(summary.get("variants", {})) or list(
        dict.fromkeys(metrics["variant"].astype(str))
    )
    tolerance = summary_tolerance(summary)
    excess = summary_excess(summary)
    name = summary.get("name", "")
    kinds = divergences(metrics, variants)  # KL, or the KSD of particle protocols
    heading = divergence_title(kinds)
    common: dict[str, Any] = {"statistic": statistic, "tolerance": tolerance, "excess": excess}
    jobs: dict[str, Callable[[Path | None], Path | Figure | None]] = {
        "kl_vs_iteration": lambda path: plot_kl_vs_iteration(
            metrics, variants, path, **common,
            title=f"{name}: {heading}", summary=summary, requests=requests,
        ),
        "kl_vs_time": lambda path: plot_kl_vs_time(
            metrics, variants, path, **common,
            title=f"{name}: {heading} against simulated time",
            summary=summary, requests=requests,
        ),
        "unlearning_kl": lambda path: plot_unlearning_kl(
            metrics, requests, variants, path, **common, summary=summary
        ),
        "latency": lambda path: plot_latency(requests, variants, path, summary, runs=runs,
                                             divergence=kinds),
        "cover_time": lambda path: plot_cover_time(runs, summary, path),
    }  # fmt: skip
    local = _local_iterations(summary)
    if any(v > 1 for v in local.values()):  # Fig. 4: against total local iterations L·i
        jobs["kl_vs_local_iterations"] = lambda path: plot_kl_vs_iteration(
            metrics, variants, path, **common, x_scale=local,
            xlabel="total local iterations L·i",
            title=f"{name}: {joined_names(kinds)} against total local iterations",
            summary=summary, requests=requests,
        )  # fmt: skip
    evaluation = evaluation_columns(metrics)
    if evaluation:
        reference = {
            label: entry.get("theory", {}).get("target", {}).get("all", {})
            for label, entry in summary.get("variants", {}).items()
        }
        jobs["evaluation"] = lambda path: plot_evaluation(
            metrics, variants, evaluation, path, statistic=statistic, reference=reference,
            title=f"{name}: held-out metrics and {joined_names(kinds)} to the target",
            summary=summary, requests=requests,
        )  # fmt: skip
    if any(c in metrics.columns for c, _ in ACCURACY_SPLIT):
        jobs["unlearning_accuracy"] = lambda path: plot_unlearning_accuracy(
            metrics, requests, variants, path, statistic=statistic, summary=summary
        )
    if particles is not None and len(particles):
        jobs["particles"] = lambda path: plot_particles(
            particles, requests, variants, path, summary=summary, metrics=metrics
        )
    if visits is not None and graphs:
        jobs["visits"] = lambda path: plot_visits(visits, graphs, path, summary, requests)
    entries = summary.get("variants", {})
    asked = which is not None and "time_map" in which
    if (
        graphs
        and (asked or any(per_edge_links(entries[v], graphs[v]) for v in entries if v in graphs))
        and time_map_refusal(metrics, summary, graphs) is None
    ):  # where links differ by edge or lose messages, or on request
        jobs["time_map"] = lambda path: plot_time_map(metrics, graphs, summary, path)
    if tradeoff_applies(metrics, variants):
        jobs["accuracy_vs_ece"] = lambda path: plot_accuracy_vs_ece(
            metrics, variants, path, summary=summary,
            title=f"{name}: held-out accuracy against calibration error",
        )  # fmt: skip
    if churn_applies(runs, variants):
        jobs["churn"] = lambda path: plot_churn(
            runs, requests, variants, path, summary=summary,
            title=f"{name}: learning and unlearning under failures",
        )  # fmt: skip
    if x != "iteration":
        return _cost_jobs(jobs, metrics, requests, summary, statistic, x)
    return jobs


def _local_iterations(summary: dict[str, Any]) -> dict[str, float]:
    out = {}
    for label, entry in summary.get("variants", {}).items():
        value = entry.get("resolved", {}).get("protocol", {}).get("local_iterations", 1)
        out[label] = float(value or 1)
    return out


def _cost_jobs(
    slot_jobs: dict[str, Callable[[Path | None], Path | Figure | None]],
    metrics: pd.DataFrame,
    requests: pd.DataFrame,
    summary: dict[str, Any],
    statistic: str,
    x: str,
) -> dict[str, Callable[[Path | None], Path | Figure | None]]:
    """The figures of :data:`~gossipsim.figures.costaxis.SLOT_FIGURES` that may apply, drawn against
    the cost ``x`` (``kl_vs_iteration`` against time is the ``kl_vs_time`` figure); ``slot_jobs``
    are the figures against the slot that apply."""
    variants = list(summary.get("variants", {})) or list(
        dict.fromkeys(metrics["variant"].astype(str))
    )
    tolerance = summary_tolerance(summary)
    excess = summary_excess(summary)
    name = summary.get("name", "")
    kinds = divergences(metrics, variants)
    heading = divergence_title(kinds)
    common: dict[str, Any] = {"statistic": statistic, "tolerance": tolerance, "excess": excess}
    jobs: dict[str, Callable[[Path | None], Path | Figure | None]] = {}
    if x == "time":
        jobs["kl_vs_iteration"] = slot_jobs["kl_vs_time"]
    else:
        jobs["kl_vs_iteration"] = lambda path: plot_kl_vs_iteration(
            metrics, variants, path, **common, x=x,
            title=f"{name}: {heading} against cumulative bits", summary=summary,
            requests=requests,
        )  # fmt: skip
    jobs["unlearning_kl"] = lambda path: plot_unlearning_kl(
        metrics, requests, variants, path, **common, summary=summary, x=x
    )
    if "evaluation" in slot_jobs:
        evaluation = evaluation_columns(metrics)
        reference = {
            label: entry.get("theory", {}).get("target", {}).get("all", {})
            for label, entry in summary.get("variants", {}).items()
        }
        against = "cumulative bits" if x == "bits" else "simulated time"
        jobs["evaluation"] = lambda path: plot_evaluation(
            metrics, variants, evaluation, path, statistic=statistic, reference=reference,
            title=f"{name}: held-out metrics and {joined_names(kinds)} to the target against "
            f"{against}", summary=summary, requests=requests, x=x,
        )  # fmt: skip
    if "unlearning_accuracy" in slot_jobs:
        jobs["unlearning_accuracy"] = lambda path: plot_unlearning_accuracy(
            metrics, requests, variants, path, statistic=statistic, summary=summary, x=x
        )
    return jobs
