"""``accuracy_vs_ece``: each variant's held-out accuracy against its expected calibration error at
the last slot (paper 000's Fig. 4: a point per variant, up and to the left is better).

Each variant is one marker at the median over its runs of the accuracy and of the ECE at the last
slot every run reached, with bars from the 12.5th to the 87.5th percentile of its runs on both axes.
In a sweep of two or more dimensions the first dimension gives the colour (with a line joining its
points in the order of the second) and the second the marker shape (Fig. 4: the protocol in colour,
the budget R_u as the marker); with one dimension each variant has its colour and the same marker.
Drawn for any study of two or more variants whose metrics hold ``accuracy`` and ``ece``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from gossipsim.figures import style as S
from gossipsim.figures.axes import fitted_legend, runs_text
from gossipsim.figures.canvas import Where, drawing_area, finish, fit_height
from gossipsim.figures.layout import dimensions

#: marker shapes of the second dimension, in its order
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
#: the runs' band drawn as bars: the 12.5th to 87.5th percentile (as the other figures' bands)
BAND = (12.5, 87.5)


def applies(metrics: pd.DataFrame, variants: Sequence[str]) -> bool:
    """Whether the figure applies: two or more variants with accuracy and ECE."""
    return len(variants) >= 2 and {"accuracy", "ece"} <= set(metrics.columns)


def final_points(metrics: pd.DataFrame, variants: Sequence[str]) -> pd.DataFrame:
    """Per variant (rows in ``variants``' order): the slot (the last every run of it recorded),
    the runs, and the median and band of ``accuracy`` and ``ece`` over its runs at that slot."""
    rows = []
    for v in variants:
        m = metrics.loc[metrics["variant"].astype(str) == v]
        if not len(m):
            continue
        slot = int(m.groupby("run")["iteration"].max().min())
        at = m.loc[m["iteration"] == slot, ["accuracy", "ece"]].astype(float).dropna()
        if not len(at):
            continue
        row: dict[str, Any] = {"variant": v, "slot": slot, "runs": len(at)}
        for name in ("accuracy", "ece"):
            values = at[name].to_numpy()
            row[name] = float(np.median(values))
            row[f"{name}_lo"], row[f"{name}_hi"] = np.percentile(values, BAND)
        rows.append(row)
    return pd.DataFrame(rows)


def plot_accuracy_vs_ece(
    metrics: pd.DataFrame,
    variants: Sequence[str],
    path: Where = None,
    *,
    summary: dict[str, Any] | None = None,
    title: str = "",
) -> Path | Any:
    """Draw the figure (see the module docstring) to ``path``, or return it without one."""
    points = final_points(metrics, variants)
    dims = dimensions(summary or {}, list(points["variant"])) if len(points) else []
    colour_of: dict[str, str]
    marker_of: dict[str, str]
    if len(dims) >= 2:
        (colour_title, colour_dim), (marker_title, marker_dim) = dims[0], dims[1]
    else:
        colour_title, colour_dim = dims[0] if dims else ("variant", {})
        colour_dim = colour_dim or {v: v for v in points["variant"]}
        marker_title, marker_dim = "", {v: "" for v in points["variant"]}
    colour_values = list(dict.fromkeys(colour_dim[v] for v in points["variant"]))
    marker_values = list(dict.fromkeys(marker_dim[v] for v in points["variant"]))
    colour_of = {c: S.colour(i) for i, c in enumerate(colour_values)}
    marker_of = {m: MARKERS[i % len(MARKERS)] for i, m in enumerate(marker_values)}
    with mpl.rc_context(S.RC):
        area = drawing_area(S.COLUMN_WIDTH_IN * 1.5, 3.6)
        ax = area.add_subplot(1, 1, 1)
        for c in colour_values:
            mine = points.loc[[colour_dim[v] == c for v in points["variant"]]]
            if len(marker_values) > 1 and len(mine) > 1:
                ax.plot(mine["ece"], mine["accuracy"], color=colour_of[c], lw=0.8, alpha=0.6)
            for _, row in mine.iterrows():
                ax.errorbar(
                    row["ece"], row["accuracy"],
                    xerr=[[row["ece"] - row["ece_lo"]], [row["ece_hi"] - row["ece"]]],
                    yerr=[[row["accuracy"] - row["accuracy_lo"]],
                          [row["accuracy_hi"] - row["accuracy"]]],
                    color=colour_of[c], marker=marker_of[marker_dim[row["variant"]]], ms=5,
                    lw=0.8, capsize=1.5, linestyle="none",
                )  # fmt: skip
        ax.set_xlabel("expected calibration error (ECE) at the last slot")
        ax.set_ylabel("held-out accuracy at the last slot")
        ax.grid(True, alpha=0.3)
        slots = sorted(set(points["slot"])) if len(points) else []
        where = f"slot {slots[0]:,}" if len(slots) == 1 else "each variant's last slot"
        handles: list[Any] = [Line2D([], [], color=colour_of[c], marker="o", lw=0.8)
                              for c in colour_values]  # fmt: skip
        labels = [str(c) for c in colour_values]
        if len(marker_values) > 1:
            handles += [Line2D([], [], color="0.3", marker=marker_of[m], linestyle="none")
                        for m in marker_values]  # fmt: skip
            labels += [str(m) for m in marker_values]
        fig = area
        legend = fitted_legend(
            fig.legend, handles, labels, width_px=fig.bbox.width, dpi=fig.dpi, ncols=2,
            title=(f"colour: {colour_title}" + (f"; marker: {marker_title}" if marker_title
                   else "") + f"; median at {where}, 12.5-87.5th percentile bars "
                   f"({runs_text(list(points['runs']))})"),
            loc="outside lower center",
        )  # fmt: skip
        heading = fig.suptitle(title or "accuracy against calibration error")
        fit_height(area, True, 3.0, legend, heading)
        return finish(area, path)
