"""The figures of a results folder, drawn from its tables.

The figure functions are imported from here: ``from gossipsim.figures import plot_latency`` (the
names below load their module on first use, so importing one helper imports no figure). Each
takes the tables as DataFrames, so a notebook can call it on a :class:`gossipsim.results.Results`
directly. With a path it writes the figure there and returns the path; without one it returns the
Figure; ``ax=`` draws it in the place of an axes of the caller's (a SubFigure in its cell), ``fig=``
into a Figure or SubFigure of the caller's. Figures are made without pyplot (:mod:`.canvas`), so
that the backend of a notebook or script is left alone.

One module per family of figures: the divergence curves against the slot, time or local
iterations (:mod:`.divergence_curves`), the curves of several folders (:mod:`.compare`), the
unlearning curves (:mod:`.unlearning_kl`), the latencies (:mod:`.latency`), the cover time
(:mod:`.cover_time`), the map of visits (:mod:`.visits`), the held-out metrics
(:mod:`.evaluation`), the accuracy on forgotten and remaining labels (:mod:`.unlearning_accuracy`),
the particle sets (:mod:`.particles`), where a walk spends its simulated time (:mod:`.time_map`);
:mod:`.standard` holds the registry of the standard figures
and draws those of a folder (:func:`plot_results`, :func:`draw_figures`).

Their helpers: one scheme of colours, line styles and sizes (:mod:`.style`), the statistics a
figure draws across runs (:mod:`.stats`: median and percentile band, mean and its confidence
interval), the layout of sweeps (:mod:`.layout`: one panel per value of the second and later sweep
dimensions, grids by the sweep's factors), the axes pieces every figure shares (:mod:`.axes`: a log
axis with exact zeros drawn past a break, request slots and their names, wrapped text, legends that
fit), figures made, saved and shown without pyplot (:mod:`.canvas`), the requests of a latency
figure (:mod:`.requests`: their censoring and expected latency) and the positions of a graph's
nodes (:mod:`.graph_layout`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gossipsim.figures.churn import plot_churn
    from gossipsim.figures.compare import plot_comparison
    from gossipsim.figures.cover_time import plot_cover_time
    from gossipsim.figures.divergence_curves import plot_kl_vs_iteration, plot_kl_vs_time
    from gossipsim.figures.evaluation import EVALUATION_LABELS, evaluation_columns, plot_evaluation
    from gossipsim.figures.latency import plot_latency
    from gossipsim.figures.particles import plot_particles
    from gossipsim.figures.standard import (
        FIGURES,
        FORMATS,
        STATISTICS,
        FigureSource,
        draw_figures,
        plot_results,
    )
    from gossipsim.figures.style import COLUMN_WIDTH_IN
    from gossipsim.figures.time_map import plot_time_map, time_on_graph
    from gossipsim.figures.tradeoff import plot_accuracy_vs_ece
    from gossipsim.figures.unlearning_accuracy import plot_unlearning_accuracy
    from gossipsim.figures.unlearning_kl import plot_unlearning_kl
    from gossipsim.figures.visits import MAX_NODES_DRAWN, plot_visits

#: the public names of the figures, by the module that defines them (handed on lazily)
_LAZY = {
    "COLUMN_WIDTH_IN": "style",
    "EVALUATION_LABELS": "evaluation",
    "FIGURES": "standard",
    "FORMATS": "standard",
    "FigureSource": "standard",
    "MAX_NODES_DRAWN": "visits",
    "STATISTICS": "standard",
    "draw_figures": "standard",
    "evaluation_columns": "evaluation",
    "plot_comparison": "compare",
    "plot_cover_time": "cover_time",
    "plot_evaluation": "evaluation",
    "plot_accuracy_vs_ece": "tradeoff",
    "plot_churn": "churn",
    "plot_kl_vs_iteration": "divergence_curves",
    "plot_kl_vs_time": "divergence_curves",
    "plot_latency": "latency",
    "plot_particles": "particles",
    "plot_results": "standard",
    "plot_unlearning_accuracy": "unlearning_accuracy",
    "plot_unlearning_kl": "unlearning_kl",
    "plot_visits": "visits",
    "plot_time_map": "time_map",
    "time_on_graph": "time_map",
}

__all__ = [
    "COLUMN_WIDTH_IN",
    "EVALUATION_LABELS",
    "FIGURES",
    "FORMATS",
    "FigureSource",
    "MAX_NODES_DRAWN",
    "STATISTICS",
    "draw_figures",
    "evaluation_columns",
    "plot_comparison",
    "plot_cover_time",
    "plot_evaluation",
    "plot_kl_vs_iteration",
    "plot_kl_vs_time",
    "plot_latency",
    "plot_particles",
    "plot_results",
    "plot_unlearning_accuracy",
    "plot_unlearning_kl",
    "plot_visits",
    "plot_time_map",
    "time_on_graph",
    "plot_accuracy_vs_ece",
    "plot_churn",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
