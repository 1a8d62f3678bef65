"""The ``cover_time`` figure: the mean cover time of the token walk (moves, 95% CI) per variant, or
against the number of nodes, beside the exact expectation, Matthews' bounds and the asymptotic
formula where they are known; a centralised protocol, which has no walk, is left out, and the
means of runs that were not all covered are drawn hollow.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure, SubFigure
from matplotlib.ticker import NullLocator

from gossipsim.figures import style as S
from gossipsim.figures.axes import (
    Legend,
    keep_tick_labels_apart,
    line_handle,
    tidy_log_axis,
)
from gossipsim.figures.canvas import Where, drawing_area, finish, fit_height
from gossipsim.figures.layout import (
    facets,
)
from gossipsim.figures.stats import (
    cover_moves,
    mean_and_half_width,
)

if TYPE_CHECKING:
    pass


def _group_label(values: dict[str, Any], fallback: str) -> str:
    from gossipsim.study.sweeps import variant_label

    rest = {k: v for k, v in values.items() if not k.endswith(".nodes")}
    return variant_label(rest, fallback) if rest else fallback


def _cover_rows(runs: pd.DataFrame, summary: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for label, entry in summary.get("variants", {}).items():
        x, total = cover_moves(runs.loc[runs["variant"] == label])
        if x.size == 0:
            continue
        topo = entry.get("resolved", {}).get("topology", {})
        theory = entry.get("theory", {}) or {}
        mean, half = mean_and_half_width(x, recorded=entry.get("cover_mean"))
        matthews = theory.get("matthews_cover_moves")
        rows.append(
            {
                "label": label,
                "group": _group_label(entry.get("values", {}) or {}, topo.get("kind", label)),
                "nodes": theory.get("nodes", topo.get("nodes")),
                "mean": mean,
                "ci": half if np.isfinite(half) else 0.0,
                "censored": 1.0 - x.size / total,
                "exact": theory.get("exact_cover_moves"),
                "theory": theory.get("theoretical_cover_moves")
                if theory.get("theoretical_cover_method") == "asymptotic"
                else None,
                "matthews_lo": matthews[0] if matthews else None,
                "matthews_hi": matthews[1] if matthews else None,
            }
        )
    return pd.DataFrame(rows)


SIMULATED = "simulated mean (95% CI)"


EXACT_COVER = "exact expectation"


ASYMPTOTIC = "asymptotic formula"


MATTHEWS = "Matthews' bounds"


CENSORED = "hollow: some runs not covered\n(mean of the covered runs, biased low)"


def plot_cover_time(
    runs: pd.DataFrame,
    summary: dict[str, Any],
    path: Where = None,
    *,
    ax: Axes | None = None,
    fig: Figure | SubFigure | None = None,
) -> Path | Figure | None:
    """Mean cover time (moves, 95% CI) per variant, or against the number of nodes when that differs
    between variants (one line per other sweep value), with the exact expectation (closed form or
    subset chain), Matthews' bounds (a bar from lower to upper) and the asymptotic formula where
    known. A sweep of two or more dimensions puts the values of its first dimension on the axis and
    gives the others a colour each, side by side. A mean over only the covered runs (some runs
    ended first) is drawn hollow."""
    if runs["cover_iteration"].notna().sum() == 0:
        return None
    table = _cover_rows(runs, summary)
    if table.empty:
        return None
    by_nodes = table["nodes"].nunique() > 1
    fac = facets(summary, list(table["label"]))
    grouped = not by_nodes and len(fac.panels) > 1
    categories = list(dict.fromkeys(fac.label[v] for v in table["label"])) if grouped else []
    slots = len(table)
    width = S.COLUMN_WIDTH_IN if by_nodes or slots <= 8 else S.DOUBLE_WIDTH_IN
    legend = Legend()
    styles = Legend()
    with mpl.rc_context(S.RC):
        area = drawing_area(width, 3.4 if by_nodes else 3.2, ax=ax, fig=fig)
        ax_ = area.add_subplot()
        ticks: list[str] = []  # the x tick labels, kept apart once the figure is laid out
        if by_nodes:
            groups = list(dict.fromkeys(table["group"]))
            for i, group in enumerate(groups):
                part = table.loc[table["group"] == group].sort_values("nodes")
                colour = S.colour(i)
                offset = 1.0 + 0.035 * (i - (len(groups) - 1) / 2)  # bars side by side
                x = part["nodes"].to_numpy(dtype=float) * offset
                _cover_points(ax_, x, part, colour, styles, joined=True)
                legend.add(group, line_handle(color=colour, marker="o", ms=4, linestyle="none"))
            ax_.set_xscale("log")
            ax_.set_yscale("log")
            sizes = sorted({int(n) for n in table["nodes"]})
            ax_.set_xticks(sizes)
            ticks = [f"{n:,}" for n in sizes]
            ax_.xaxis.set_minor_locator(NullLocator())
            low, high = _cover_extent(table)
            ax_.set_ylim(low / 1.3, high * 1.3)
            tidy_log_axis(ax_.yaxis, low / 1.3, high * 1.3)
            ax_.set_xlabel("number of nodes K (log scale)")
        elif grouped:
            step = 0.8 / len(fac.panels)
            for i, panel in enumerate(fac.panels):
                part = table.loc[table["label"].isin(panel.variants)]
                x = np.array([categories.index(fac.label[v]) for v in part["label"]], dtype=float)
                x += step * (i - (len(fac.panels) - 1) / 2)
                _cover_points(ax_, x, part, S.colour(i), styles, joined=False, width=step)
                legend.add(panel.title, line_handle(color=S.colour(i), marker="o", ms=4,
                                                    linestyle="none"))  # fmt: skip
            ax_.set_xticks(range(len(categories)))
            ticks = list(categories)
            ax_.set_xlim(-0.6, len(categories) - 0.4)
            ax_.set_xlabel(fac.line_title or "variant")
            ax_.set_ylim(0, _cover_extent(table)[1] * 1.08)
        else:
            x = np.arange(slots, dtype=float)
            _cover_points(ax_, x, table, S.PALETTE[0], styles, joined=False)
            ax_.set_xticks(x)
            ticks = [str(v) for v in table["label"]]
            ax_.set_xlim(-0.6, slots - 0.4)
            ax_.set_xlabel(fac.line_title or "variant")
            ax_.set_ylim(0, _cover_extent(table)[1] * 1.08)
        ax_.set_ylabel("cover time (moves =\ncover iteration − 1)")
        ax_.grid(True, alpha=0.3)
        heading = area.suptitle("Cover time of the token walk")
        for label, handle in styles.entries.items():  # the variants first, then what marks mean
            legend.add(label, handle)
        key = legend.place(area, ncols=2)
        # labels taller than four lines (two rows, upright) take their room from the figure
        taken = keep_tick_labels_apart(ax_, ticks)
        panels_in = 2.6 + max(0.0, taken - 0.5)
        fit_height(area, ax is None and fig is None, panels_in, heading, key)
        return finish(area, path)


def _cover_extent(table: pd.DataFrame) -> tuple[float, float]:
    """The smallest and largest value a cover figure draws: whiskers, exact values and bounds."""
    values = np.concatenate(
        [
            (table["mean"] - table["ci"]).to_numpy(dtype=float),
            (table["mean"] + table["ci"]).to_numpy(dtype=float),
            *(table[c].to_numpy(dtype=float, na_value=np.nan) for c in
              ("exact", "theory", "matthews_lo", "matthews_hi")),
        ]
    )  # fmt: skip
    values = values[np.isfinite(values) & (values > 0)]
    return (float(values.min()), float(values.max())) if values.size else (1.0, 10.0)


def _cover_points(
    ax: Axes,
    x: np.ndarray,
    part: pd.DataFrame,
    colour: str,
    legend: Legend,
    *,
    joined: bool,
    width: float = 1.0,
) -> None:
    """The simulated means with their intervals at ``x`` and, where known, the exact value, the
    bounds and the asymptotic formula: joined by lines in ``colour`` (against K) or as separate
    marks ``width`` wide (a category)."""
    grey = "0.3"
    bounds = part["matthews_hi"].notna().to_numpy()
    if bounds.any():
        lo = part["matthews_lo"].to_numpy(dtype=float)[bounds]
        hi = part["matthews_hi"].to_numpy(dtype=float)[bounds]
        ax.vlines(x[bounds], lo, hi, color=colour if joined else grey, linewidth=5, alpha=0.3,
                  label=MATTHEWS)  # fmt: skip
        legend.add(MATTHEWS, line_handle(color=grey, linewidth=5, alpha=0.3))
    exact = part["exact"].notna().to_numpy()
    if exact.any():
        y = part["exact"].to_numpy(dtype=float)[exact]
        if joined:
            # an open diamond at each exact value (a line of one point would not show), over the
            # simulated mean so that both are seen where they agree
            ax.plot(x[exact], y, color=colour, linewidth=0.9, marker="D", ms=6, mfc="none",
                    mew=1.0, zorder=4, label=EXACT_COVER)  # fmt: skip
            legend.add(
                EXACT_COVER, line_handle(color=grey, linewidth=0.9, marker="D", ms=6, mfc="none")
            )
        else:
            ax.plot(x[exact], y, linestyle="none", marker="_", ms=16 if width >= 1 else 8, mew=1.6,
                    color="black", label=EXACT_COVER)  # fmt: skip
            legend.add(
                EXACT_COVER,
                line_handle(color="black", linestyle="none", marker="_", ms=12, mew=1.6),
            )
    asym = part["theory"].notna().to_numpy() & ~exact
    if asym.any():
        y = part["theory"].to_numpy(dtype=float)[asym]
        ax.plot(x[asym], y, color=colour if joined else grey, linestyle="--" if joined else "none",
                linewidth=0.9, marker="x", ms=4, label=ASYMPTOTIC)  # fmt: skip
        legend.add(
            ASYMPTOTIC, line_handle(color=grey, linestyle="--", linewidth=0.9, marker="x", ms=4)
        )
    censored = part["censored"].to_numpy() > 0
    for hollow in (False, True):
        sel = censored == hollow
        if not sel.any():
            continue
        ax.errorbar(
            x[sel], part["mean"].to_numpy(dtype=float)[sel], yerr=part["ci"].to_numpy(dtype=float)[sel],
            fmt="o", ms=3.5, color=colour, mfc="white" if hollow else colour, capsize=2,
            linewidth=0.9, label=CENSORED if hollow else SIMULATED, zorder=3,
        )  # fmt: skip
        legend.add(SIMULATED, line_handle(color=grey, marker="o", ms=3.5, linestyle="none"))
        if hollow:
            legend.add(
                CENSORED, line_handle(color=grey, marker="o", ms=3.5, mfc="white", linestyle="none")
            )
    if not joined:
        for p, (_, row) in zip(x, part.iterrows(), strict=True):
            if row["censored"] > 0:
                ax.annotate(f"{row['censored']:.0%} of runs\nnot covered", (p, row["mean"]),
                            textcoords="offset points", xytext=(6, -4), fontsize=6, va="top")  # fmt: skip
