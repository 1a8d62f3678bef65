"""``churn``: what failures cost, against the fraction of time a node is down (``[failures]``).

Each variant of a study with ``[failures]`` is placed at the fraction of time a node is down,
``node_down_s / (node_up_s + node_down_s)`` (0 for ``node_up_s = inf``; scripted outages are not
in it). Three panels, each point the median over the variant's runs with a bar from the 12.5th to
the 87.5th percentile:

1. learning: the convergence time in simulated seconds (runs that converged; the count of those
   that did not is written beside the point when there are any);
2. unlearning: for each request, the removal latency (solid) and the unlearning latency (dashed)
   in seconds from the request's time (a request from a node that is down waits for it), over the
   runs that served it;
3. recovery: tokens regenerated (lost messages and holders lost) per 1,000 slots.

Variants that differ in something else than ``failures.node_up_s`` and ``node_down_s`` (a second
sweep dimension, ``failures.token_timeout_s`` included) are drawn as separate series, in the order
of the sweep; a panel nothing reached (no run converged) says so. Drawn for a study of two or more variants whose
``runs.csv`` has ``regenerations``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from gossipsim.figures import style as S
from gossipsim.figures.canvas import Where, drawing_area, finish, fit_height

#: the runs' band drawn as bars (as the other figures' bands)
BAND = (12.5, 87.5)
#: the keys that place a variant on the x axis (any other swept key makes a series of its own)
X_KEYS = ("failures.node_up_s", "failures.node_down_s")
#: markers of the series (variants that differ besides the failures)
MARKERS = ("o", "s", "^", "D", "v")


def down_fraction(failures: dict[str, Any] | None) -> float:
    """The fraction of time a node is down under churn alone: down / (up + down) (0 without
    churn or with ``node_up_s = inf``)."""
    if not failures or failures.get("node_up_s") is None:
        return 0.0
    up, down = float(failures["node_up_s"]), float(failures["node_down_s"])
    return 0.0 if math.isinf(up) else down / (up + down)


def applies(runs: pd.DataFrame, variants: Sequence[str]) -> bool:
    """Whether the figure applies: two or more variants, with failures (``regenerations``)."""
    return len(variants) >= 2 and "regenerations" in runs.columns


def _series(summary: dict[str, Any], variants: Sequence[str]) -> dict[str, list[tuple[str, float]]]:
    """Variants grouped by what they set besides ``failures.*``: series name -> (variant, x)."""
    out: dict[str, list[tuple[str, float]]] = {}
    for v in variants:
        entry = summary.get("variants", {}).get(v, {})
        values = entry.get("values", {})
        rest = ", ".join(f"{k} = {val}" for k, val in values.items() if k not in X_KEYS)
        x = down_fraction(entry.get("resolved", {}).get("failures"))
        out.setdefault(rest, []).append((v, x))
    return out


def _median_band(values: np.ndarray) -> tuple[float, float, float]:
    if not values.size:
        return math.nan, math.nan, math.nan
    lo, hi = np.percentile(values, BAND)
    return float(np.median(values)), float(lo), float(hi)


def panel_points(
    runs: pd.DataFrame, requests: pd.DataFrame, summary: dict[str, Any], variants: Sequence[str]
) -> pd.DataFrame:
    """One row per variant (and request, for the latency rows): the figure's numbers, as drawn."""
    rows = []
    for series, members in _series(summary, variants).items():
        for v, x in members:
            r = runs.loc[runs["variant"].astype(str) == v]
            conv = r["convergence_time"].astype(float).dropna().to_numpy()
            regen = (1000.0 * r["regenerations"] / r["iterations"]).astype(float).to_numpy()
            for what, values, extra in (
                ("convergence_time", conv, len(r) - conv.size),
                ("regenerations_per_1000", regen, 0),
            ):
                med, lo, hi = _median_band(values)
                rows.append({"series": series, "variant": v, "x": x, "what": what, "request": -1,
                             "median": med, "lo": lo, "hi": hi, "missing": extra})  # fmt: skip
            q = requests.loc[requests["variant"].astype(str) == v] if len(requests) else requests
            for req, group in q.groupby("request") if len(q) else ():
                node = str(group["node"].iloc[0])  # a label (the column mixes in empty cells)
                for what in ("removal_latency_time", "latency_time"):
                    values = group[what].astype(float).dropna().to_numpy()
                    med, lo, hi = _median_band(values)
                    rows.append({"series": series, "variant": v, "x": x, "what": what,
                                 "request": int(str(req)), "node": node,
                                 "median": med, "lo": lo, "hi": hi,
                                 "missing": len(group) - values.size})  # fmt: skip
    return pd.DataFrame(rows)


def plot_churn(
    runs: pd.DataFrame,
    requests: pd.DataFrame,
    variants: Sequence[str],
    path: Where = None,
    *,
    summary: dict[str, Any],
    title: str = "",
) -> Path | Any:
    """Draw the ``churn`` figure (module docstring) to ``path`` (None: return the Figure)."""
    points = panel_points(runs, requests, summary, variants)
    series = list(dict.fromkeys(points["series"])) if len(points) else []
    requests_drawn = sorted(r for r in set(points["request"]) if r >= 0) if len(points) else []
    panels = (
        (("convergence_time",), "convergence time (s)", "learning"),
        (("removal_latency_time", "latency_time"), "seconds after the request", "unlearning"),
        (("regenerations_per_1000",), "tokens regenerated per 1,000 slots", "recovery"),
    )
    with mpl.rc_context(S.RC):
        area = drawing_area(S.DOUBLE_WIDTH_IN, 2.6)
        axes = [area.add_subplot(1, 3, i + 1) for i in range(3)]
        for ax, (whats, ylabel, heading) in zip(axes, panels, strict=True):
            for s_index, name in enumerate(series):
                for what in whats:
                    rows = points[(points["series"] == name) & (points["what"] == what)]
                    for req, group in rows.groupby("request"):
                        group = group.sort_values("x")
                        colour = S.colour(
                            requests_drawn.index(req) if req >= 0 else s_index
                        )  # a request's colour in the latency panel, a series' elsewhere
                        marker = MARKERS[s_index % len(MARKERS)]
                        label = None  # the series go to the figure's legend (markers)
                        if req >= 0 and s_index == 0:
                            kind = "unlearning" if what == "latency_time" else "removal"
                            label = f"node {group['node'].iloc[0]}: {kind}"
                        ax.errorbar(
                            group["x"], group["median"],
                            yerr=[group["median"] - group["lo"], group["hi"] - group["median"]],
                            color=colour, linestyle="--" if what == "latency_time" else "-",
                            marker=marker, ms=4, lw=0.9, capsize=1.5, label=label,
                        )  # fmt: skip
                        for _, row in group.iterrows():
                            if row["missing"]:
                                gone = "not converged" if req < 0 else "not served"
                                ax.annotate(
                                    f"{int(row['missing'])} {gone}", (row["x"], row["median"]),
                                    fontsize=6, textcoords="offset points", xytext=(3, 3),
                                )  # fmt: skip
            drawn = points[points["what"].isin(whats)]["median"]
            if not np.isfinite(drawn.astype(float)).any():  # e.g. no run converged: say so
                ax.text(0.5, 0.5, "no run reached it", ha="center", va="center",
                        transform=ax.transAxes, color="0.4")  # fmt: skip
                ax.set_yticks([])
            ax.set_xlabel("fraction of time a node is down")
            ax.set_ylabel(ylabel)
            ax.set_title(heading)
            ax.grid(True, alpha=0.3)
            if ax.get_legend_handles_labels()[1]:
                ax.legend(fontsize=6, loc="upper left")
        counts = runs.groupby("variant").size()
        per_point = (
            f"{int(counts.min())}" if counts.min() == counts.max()
            else f"{int(counts.min())} to {int(counts.max())}"
        )  # fmt: skip
        artists = []
        if len(series) > 1:
            handles = [Line2D([], [], color=S.colour(i), marker=MARKERS[i % len(MARKERS)], lw=0.9)
                       for i in range(len(series))]  # fmt: skip
            artists.append(area.legend(
                handles, series, loc="outside lower center", ncols=min(len(series), 3),
                fontsize=7, title="series (marker; colour in the learning and recovery panels)",
            ))  # fmt: skip
        suptitle = area.suptitle(
            f"{title or 'failures and churn'}\nmedian over {per_point} runs a point, bars "
            f"{BAND[0]:g}th to {BAND[1]:g}th percentile"
        )
        fit_height(area, True, 2.4, suptitle, *artists)
        return finish(area, path)
