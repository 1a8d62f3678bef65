"""The standard figures of a results folder, readable at paper-column width.

- ``kl_vs_iteration``: KL(q ‖ target) against the slot, median (or mean) over runs with the 75% band
  (12.5th to 87.5th percentile), one line per variant, log scale;
- ``kl_vs_time``: the same against simulated seconds (skipped when no slot takes any time);
- ``unlearning_kl``: after the first unlearning request, KL of the unlearning protocol and of the
  retrain-from-scratch baseline against the slot;
- ``latency``: empirical CDF of unlearning latency and of retrain latency, means marked;
- ``cover_time``: mean cover time (moves) per variant or against the number of nodes, with the exact
  or theoretical value;
- ``visits``: the graph with each node's share of token visits.

Every function takes the tables as DataFrames, so a notebook can call them on :class:`Results`
directly; :func:`plot_results` writes all that apply.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

FORMATS = ("png", "pdf", "svg")
STATISTICS = ("median", "mean")
COLUMN_WIDTH_IN = 3.5  # one column of a two-column paper
_STYLE: Any = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "lines.linewidth": 1.2,
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
}
MAX_NODES_DRAWN = 500


def _figure(height: float = 2.6, width: float = COLUMN_WIDTH_IN) -> tuple[Figure, Axes]:
    fig, ax = plt.subplots(figsize=(width, height))
    return fig, ax


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path)
    plt.close(fig)
    return path


def _band_matrix(
    metrics: pd.DataFrame, variant: str, column: str, x: str = "iteration"
) -> tuple[np.ndarray, np.ndarray]:
    """Runs × recorded-slot matrix of ``column`` for one variant, each run carried forward past its end
    (a run stopped once done keeps its final state)."""
    part = metrics.loc[metrics["variant"] == variant, ["run", x, column]]
    grid = np.unique(part[x].to_numpy())
    wide = part.pivot_table(index=x, columns="run", values=column, aggfunc="last", dropna=False)
    wide = wide.reindex(grid).ffill()
    return grid, wide.to_numpy(dtype=float).T


def _center(values: np.ndarray, statistic: str) -> np.ndarray:
    if values.shape[0] == 0:  # a variant without runs
        return np.full(values.shape[1:], np.nan)
    if not np.isnan(values).any():  # the nan-aware reductions are much slower
        return values.mean(axis=0) if statistic == "mean" else np.median(values, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values, axis=0) if statistic == "mean" else np.nanmedian(values, axis=0)


def _band(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 75% band: 12.5th and 87.5th percentiles across runs at each point (NaN without runs)."""
    if values.shape[0] == 0:
        nothing = np.full(values.shape[1:], np.nan)
        return nothing, nothing
    if not np.isnan(values).any():
        lo, hi = np.percentile(values, [12.5, 87.5], axis=0)
        return lo, hi
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanpercentile(values, 12.5, axis=0), np.nanpercentile(values, 87.5, axis=0)


def _floor(tolerance: float | None) -> float:
    return (tolerance or 1e-9) * 1e-3


def plot_kl_vs_iteration(
    metrics: pd.DataFrame,
    variants: Sequence[str],
    path: Path,
    *,
    statistic: str = "median",
    tolerance: float | None = None,
    title: str = "",
    x_scale: dict[str, float] | None = None,
    xlabel: str = "iteration (slot)",
    excess: bool = False,
) -> Path:
    """KL(q ‖ target) vs slot: ``statistic`` over runs and the 75% band, one line per variant.

    ``x_scale`` multiplies each variant's slots (e.g. by L for total local iterations L·i, Fig. 4).
    Where the target lies outside the family, its best-in-family KL is drawn dashed.
    """
    floor = _floor(tolerance)
    with plt.rc_context(_STYLE):
        fig, ax = _figure()
        best_drawn = False
        for i, variant in enumerate(variants):
            grid, values = _band_matrix(metrics, variant, "kl")
            x = grid * (x_scale or {}).get(variant, 1.0)
            _draw_band(ax, x, np.maximum(values, floor), statistic, f"C{i}", variant)
            if "best_family_kl" in metrics.columns:
                _, best = _band_matrix(metrics, variant, "best_family_kl")
                if np.isfinite(best).any():
                    label = None if best_drawn else "best in family"
                    line = _center(best, "median")
                    ax.plot(x, line, color=f"C{i}", linestyle="--", linewidth=0.8, label=label)
                    if excess and tolerance:
                        label = None if best_drawn else f"best + tolerance {tolerance:g}"
                        ax.plot(
                            x,
                            line + tolerance,
                            color=f"C{i}",
                            linestyle=":",
                            linewidth=0.8,
                            label=label,
                        )
                    best_drawn = True
        _finish_kl_axes(ax, tolerance, floor, statistic, xlabel, title, excess=excess)
        return _save(fig, path)


def plot_kl_vs_time(
    metrics: pd.DataFrame,
    variants: Sequence[str],
    path: Path,
    *,
    statistic: str = "median",
    tolerance: float | None = None,
    title: str = "",
    points: int = 400,
) -> Path | None:
    """KL vs simulated time, on a common time grid (each run's KL is a step function of time)."""
    if not (metrics["time"].max() > 0):
        return None
    floor = _floor(tolerance)
    grid = np.linspace(0.0, float(metrics["time"].max()), points)
    with plt.rc_context(_STYLE):
        fig, ax = _figure()
        for i, variant in enumerate(variants):
            part = metrics.loc[metrics["variant"] == variant]
            rows = []
            for _, run in part.groupby("run", sort=True):
                t = run["time"].to_numpy()
                kl = run["kl"].to_numpy(dtype=float)
                idx = np.searchsorted(t, grid, side="right") - 1
                vals = np.where(idx >= 0, kl[np.clip(idx, 0, None)], np.nan)
                rows.append(vals)
            _draw_band(ax, grid, np.maximum(np.asarray(rows), floor), statistic, f"C{i}", variant)
        _finish_kl_axes(ax, tolerance, floor, statistic, "simulated time (s)", title)
        return _save(fig, path)


def _draw_band(
    ax: Axes,
    x: np.ndarray,
    values: np.ndarray,
    statistic: str,
    color: str,
    label: str,
    *,
    linestyle: str = "-",
    alpha: float = 0.2,
) -> None:
    """The centre line (median or mean over runs) and the shaded 75% band."""
    lo, hi = _band(values)
    ax.plot(x, _center(values, statistic), color=color, linestyle=linestyle, label=label)
    ax.fill_between(x, lo, hi, color=color, alpha=alpha, linewidth=0)


def _finish_kl_axes(
    ax: Axes,
    tolerance: float | None,
    floor: float,
    statistic: str,
    xlabel: str,
    title: str,
    *,
    excess: bool = False,
) -> None:
    ax.set_yscale("log")
    if tolerance and not excess:
        ax.axhline(
            tolerance, color="0.4", linestyle=":", linewidth=0.8, label=f"tolerance {tolerance:g}"
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"KL(q ‖ target) (nats), {statistic}")
    data = [np.asarray(line.get_ydata(), dtype=float) for line in ax.get_lines()]
    lowest = min(
        (float(np.nanmin(y)) for y in data if y.size and np.isfinite(y).any()), default=floor
    )
    ax.set_ylim(bottom=max(floor, lowest) / 2)
    ax.set_title(
        title or f"KL divergence: {statistic} and 75% band (values < {floor:.0e} drawn at it)"
    )
    ax.xaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]))
    ax.legend(frameon=False)
    ax.grid(True, which="major", alpha=0.3)


def plot_unlearning_kl(
    metrics: pd.DataFrame,
    requests: pd.DataFrame,
    variants: Sequence[str],
    path: Path,
    *,
    statistic: str = "median",
    tolerance: float | None = None,
    excess: bool = False,
) -> Path | None:
    """KL of unlearning (solid) vs retraining from scratch (dashed) against the slot, from the first
    request; the best-in-family KL (dotted) where the target is outside the family."""
    if "retrain_kl" not in metrics.columns or requests.empty:
        return None
    if requests["request_iteration"].isna().all():  # no request arrived within any run
        return None
    floor = _floor(tolerance)
    with plt.rc_context(_STYLE):
        fig, ax = _figure()
        for i, variant in enumerate(variants):
            first = requests.loc[requests["variant"] == variant, "request_iteration"].min()
            if pd.isna(first):  # no request of this variant arrived within the runs
                continue
            first = int(first)
            grid, main = _band_matrix(metrics, variant, "kl")
            _, retrain = _band_matrix(metrics, variant, "retrain_kl")
            keep = grid >= first - 1
            color = f"C{i}"
            for values, style, name in ((main, "-", "unlearning"), (retrain, "--", "retrain")):
                v = np.maximum(values[:, keep], floor)
                label = f"{variant}: {name}" if len(variants) > 1 else name
                _draw_band(ax, grid[keep], v, statistic, color, label, linestyle=style, alpha=0.12)
            if "best_family_kl" in metrics.columns:
                _, best = _band_matrix(metrics, variant, "best_family_kl")
                line = _center(best[:, keep], "median")
                if np.isfinite(line).any():
                    ax.plot(
                        grid[keep],
                        line,
                        color=color,
                        linestyle=":",
                        linewidth=0.8,
                        label="best in family",
                    )
                    if excess and tolerance:
                        ax.plot(
                            grid[keep],
                            line + tolerance,
                            color="0.4",
                            linestyle=":",
                            linewidth=0.8,
                            label=f"best + tolerance {tolerance:g}",
                        )
        _finish_kl_axes(
            ax,
            tolerance,
            floor,
            statistic,
            "iteration (slot)",
            "Unlearning vs retraining from scratch",
            excess=excess,
        )
        ax.set_ylabel("KL(q ‖ posterior without forgotten) (nats)")
        return _save(fig, path)


def plot_latency(
    requests: pd.DataFrame,
    variants: Sequence[str],
    path: Path,
    summary: dict[str, Any] | None = None,
) -> Path | None:
    """Empirical CDFs, per request (variant and node), of the removal latency (wide pale line; the
    paper's unlearning latency, with its exact expectation from the hitting times as a vertical
    line), the KL-based unlearning latency (solid) and the retrain latency (dashed). Each ECDF is a
    fraction of *all* requests, so it ends below 1 when some were not served within the run."""
    columns = [c for c in ("removal_latency", "latency", "retrain_latency") if c in requests]
    if requests.empty or not any(requests[c].notna().any() for c in columns):
        return None
    theory = {
        label: entry.get("theory", {}).get("expected_unlearning_latency", {})
        for label, entry in (summary or {}).get("variants", {}).items()
    }
    styles: dict[str, dict[str, Any]] = {
        "removal_latency": {"linestyle": "-", "linewidth": 3.5, "alpha": 0.35},
        "latency": {"linestyle": "-", "linewidth": 1.2},
        "retrain_latency": {"linestyle": "--", "linewidth": 1.2},
    }
    names = {
        "removal_latency": "removal",
        "latency": "unlearning (KL)",
        "retrain_latency": "retrain (KL)",
    }
    groups = [
        (variant, node, part)
        for variant in variants
        for node, part in requests.loc[requests["variant"] == variant].groupby("node", sort=False)
    ]
    with plt.rc_context(_STYLE):
        fig, ax = _figure(height=2.6 + 0.28 * (len(groups) * 4 + 1) / 2)
        for i, (variant, node, part) in enumerate(groups):
            color = f"C{i}"
            who = (f"{variant}, " if len(variants) > 1 else "") + f"node {node}"
            for column in columns:
                x = part[column].to_numpy(dtype=float, na_value=np.nan)
                total = x.size
                x = np.sort(x[np.isfinite(x)])
                if x.size == 0:
                    continue
                y = np.arange(1, x.size + 1) / total
                ax.step(
                    np.concatenate([x, [x[-1]]]),
                    np.concatenate([y, [y[-1]]]),
                    where="post",
                    color=color,
                    label=f"{who}: {names[column]}, mean {x.mean():.3g}"
                    + (f" ({x.size}/{total} served)" if x.size < total else ""),
                    **styles[column],
                )
            exact = theory.get(variant, {}).get(str(node))
            if exact is not None:
                ax.axvline(exact, color=color, linestyle=":", linewidth=1.0,
                           label=f"{who}: exact E[removal] {exact:.3g}")  # fmt: skip
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlim(left=0)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("slots after the request (log scale; 0: nothing to remove)")
        ax.set_ylabel("fraction of requests served")
        ax.set_title("Unlearning and retrain latency (ECDF)")
        ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2,
                  fontsize="x-small")  # fmt: skip
        ax.grid(True, alpha=0.3)
        return _save(fig, path)


def plot_cover_time(runs: pd.DataFrame, summary: dict[str, Any], path: Path) -> Path | None:
    """Mean cover time (moves, 95% CI) per variant, or against the number of nodes when that is swept,
    with the exact / theoretical expectation where known."""
    if runs["cover_iteration"].notna().sum() == 0:
        return None
    variants = summary.get("variants", {})
    rows = []
    for label, entry in variants.items():
        column = runs.loc[runs["variant"] == label, "cover_iteration"]
        all_runs = column.to_numpy(dtype=float, na_value=np.nan) - 1
        x = all_runs[np.isfinite(all_runs)]
        if x.size == 0:
            continue
        resolved = entry.get("resolved", {})
        topo = resolved.get("topology", {})
        theory = entry.get("theory", {}) or {}
        rows.append(
            {
                "label": label,
                "kind": topo.get("kind", label),
                "nodes": theory.get("nodes", topo.get("nodes")),
                "mean": float(x.mean()),
                "ci": 1.96 * float(x.std(ddof=1)) / math.sqrt(x.size) if x.size > 1 else 0.0,
                "censored": 1.0 - x.size / all_runs.size,
                "exact": theory.get("exact_cover_moves"),
                "theory": theory.get("theoretical_cover_moves"),
            }
        )
    if not rows:
        return None
    table = pd.DataFrame(rows)
    by_nodes = table["nodes"].nunique() > 1
    with plt.rc_context(_STYLE):
        fig, ax = _figure()
        if by_nodes:
            for i, (kind, part) in enumerate(table.groupby("kind", sort=False)):
                part = part.sort_values("nodes")
                color = f"C{i}"
                ax.errorbar(
                    part["nodes"],
                    part["mean"],
                    yerr=part["ci"],
                    fmt="o",
                    ms=3,
                    color=color,
                    label=f"{kind} (simulated)",
                )
                exact = part["exact"].notna()
                if exact.any():  # exact expectation: closed form or subset chain
                    ax.plot(part["nodes"][exact], part["exact"][exact], color=color, linewidth=0.9)
                asymptotic = part["exact"].isna() & part["theory"].notna()
                if asymptotic.any():  # only an asymptotic formula is known at these sizes
                    ax.plot(
                        part["nodes"][asymptotic],
                        part["theory"][asymptotic],
                        color=color,
                        linewidth=0.9,
                        linestyle="--",
                    )
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("number of nodes K")
            ax.plot([], [], color="0.3", linestyle="-", label="exact expectation")
            if table["exact"].isna().any() and table["theory"].notna().any():
                ax.plot([], [], color="0.3", linestyle="--", label="asymptotic theory")
        else:
            pos = np.arange(len(table))
            ax.errorbar(
                pos,
                table["mean"],
                yerr=table["ci"],
                fmt="o",
                ms=4,
                color="C0",
                label="simulated mean (95% CI)",
            )
            ex = table["exact"].astype(float)
            if ex.notna().any():
                ax.scatter(
                    pos[ex.notna()],
                    ex[ex.notna()],
                    marker="_",
                    s=300,
                    color="C3",
                    label="exact expectation",
                    zorder=3,
                )
            for p, (_, row) in zip(pos, table.iterrows(), strict=True):
                if row["censored"] > 0:  # runs that ended before covering bias the mean down
                    ax.annotate(
                        f"{row['censored']:.0%} not covered:\nmean of covered runs",
                        (p, row["mean"]),
                        textcoords="offset points",
                        xytext=(6, -14),
                        fontsize=6,
                    )
            ax.set_xticks(pos, table["label"], rotation=0)
            ax.set_xlabel("variant")
        ax.set_ylabel("cover time (moves)")
        ax.set_title("Cover time of the token walk")
        ax.legend(frameon=False)
        ax.grid(True, alpha=0.3)
        return _save(fig, path)


def plot_visits(visits: pd.DataFrame, graphs: dict[str, nx.Graph], path: Path) -> Path | None:
    """The graph of each variant (up to 6), node colour and size by share of token visits."""
    drawable = [(v, g) for v, g in graphs.items() if g.number_of_nodes() <= MAX_NODES_DRAWN]
    if not drawable:
        return None
    drawable = drawable[:6]
    n = len(drawable)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    with plt.rc_context(_STYLE):
        fig, axes = plt.subplots(
            rows, cols, figsize=(COLUMN_WIDTH_IN * max(cols, 1.5) / 1.5, 2.6 * rows), squeeze=False
        )
        shown = visits[visits["variant"].isin([v for v, _ in drawable])]["share"]
        vmin = float(shown.min()) if len(shown) else 0.0
        vmax = float(shown.max()) if len(shown) else 1.0
        vmax = vmax if vmax > vmin else vmin + 1e-12
        size = 8 + 60 * 34 / max(max(g.number_of_nodes() for _, g in drawable), 34)
        mappable = None
        for ax, (variant, graph) in zip(axes.flat, drawable, strict=False):
            part = visits.loc[visits["variant"] == variant]
            share = dict(zip(part["node"].map(str), part["share"], strict=True))
            values = np.array([share.get(str(node), 0.0) for node in graph.nodes])
            pos = (
                nx.kamada_kawai_layout(graph)
                if graph.number_of_nodes() <= 100
                else nx.spring_layout(graph, seed=1)
            )
            nx.draw_networkx_edges(graph, pos, ax=ax, width=0.4, alpha=0.4)
            mappable = nx.draw_networkx_nodes(
                graph,
                pos,
                ax=ax,
                node_size=size * (0.5 + (values - vmin) / (vmax - vmin)),
                node_color=values,
                cmap="viridis",
                vmin=vmin,
                vmax=vmax,
                edgecolors="0.3",
                linewidths=0.3,
            )
            ax.set_title(variant)
            ax.margins(0.08)
            ax.set_axis_off()
        for ax in list(axes.flat)[n:]:
            ax.set_axis_off()
        if mappable is not None:
            fig.colorbar(
                mappable, ax=axes.ravel().tolist(), shrink=0.8, label="share of token visits"
            )
        fig.suptitle("Share of slots each node held the token (summed over runs)", y=1.02)
        return _save(fig, path)


EVALUATION_LABELS = {
    "accuracy": "held-out accuracy",
    "nll": "held-out NLL (nats)",
    "ece": "held-out ECE",
    "rmse": "held-out RMSE",
}


def plot_evaluation(
    metrics: pd.DataFrame,
    variants: Sequence[str],
    columns: Sequence[str],
    path: Path,
    *,
    statistic: str = "median",
    reference: dict[str, dict[str, float]] | None = None,
    title: str = "",
) -> Path | None:
    """Held-out metrics (accuracy, NLL, ECE, ...) and KL vs slot, one panel each; dashed: the same
    metrics of the target posterior (the centralised optimum) where known."""
    columns = [c for c in columns if c in metrics.columns]
    if not columns:
        return None
    panels = [*columns, "kl"]
    with plt.rc_context(_STYLE):
        fig, axes = plt.subplots(
            len(panels), 1, figsize=(COLUMN_WIDTH_IN, 1.5 * len(panels)), sharex=True
        )
        for ax, column in zip(np.atleast_1d(axes), panels, strict=True):
            for i, variant in enumerate(variants):
                grid, values = _band_matrix(metrics.dropna(subset=[column]), variant, column)
                if column == "kl":
                    values = np.maximum(values, 1e-12)
                _draw_band(ax, grid, values, statistic, f"C{i}", variant)
                ref = (reference or {}).get(variant, {}).get(column)
                if ref is not None:
                    ax.axhline(ref, color=f"C{i}", linestyle="--", linewidth=0.8)
            if column == "kl":
                ax.set_yscale("log")
                ax.set_ylabel("KL to optimum")
            else:
                ax.set_ylabel(EVALUATION_LABELS.get(column, column))
            ax.grid(True, alpha=0.3)
        last = np.atleast_1d(axes)[-1]
        last.set_xlabel("iteration (slot)")
        np.atleast_1d(axes)[0].legend(frameon=False, fontsize=6)
        np.atleast_1d(axes)[0].set_title(
            title or f"{statistic} and 75% band; dashed: centralised optimum"
        )
        return _save(fig, path)


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
) -> list[Path]:
    """Write every standard figure that applies to ``out_dir``; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    variants = list(summary.get("variants", {})) or sorted(metrics["variant"].unique())
    tolerance = _tolerance(summary)
    excess = _excess(summary)
    name = summary.get("name", "")
    written: list[Path | None] = [
        plot_kl_vs_iteration(
            metrics,
            variants,
            out_dir / f"kl_vs_iteration.{fmt}",
            statistic=statistic,
            tolerance=tolerance,
            title=f"{name}: KL vs iteration ({statistic}, 75% band)",
            excess=excess,
        ),
        plot_kl_vs_time(
            metrics,
            variants,
            out_dir / f"kl_vs_time.{fmt}",
            statistic=statistic,
            tolerance=tolerance,
            title=f"{name}: KL vs simulated time ({statistic}, 75% band)",
        ),
        plot_unlearning_kl(
            metrics,
            requests,
            variants,
            out_dir / f"unlearning_kl.{fmt}",
            statistic=statistic,
            tolerance=tolerance,
            excess=excess,
        ),
        plot_latency(requests, variants, out_dir / f"latency.{fmt}", summary),
        plot_cover_time(runs, summary, out_dir / f"cover_time.{fmt}"),
    ]
    local = _local_iterations(summary)
    if any(v > 1 for v in local.values()):  # Fig. 4: against total local iterations L·i
        written.append(
            plot_kl_vs_iteration(
                metrics,
                variants,
                out_dir / f"kl_vs_local_iterations.{fmt}",
                statistic=statistic,
                tolerance=tolerance,
                x_scale=local,
                xlabel="total local iterations L·i",
                excess=excess,
                title=f"{name}: KL vs total local iterations ({statistic}, 75% band)",
            )  # fmt: skip
        )
    evaluation = [c for c in EVALUATION_LABELS if c in metrics.columns]
    if evaluation:
        reference = {
            label: entry.get("theory", {}).get("target", {}).get("all", {})
            for label, entry in summary.get("variants", {}).items()
        }
        written.append(
            plot_evaluation(
                metrics,
                variants,
                evaluation,
                out_dir / f"evaluation.{fmt}",
                statistic=statistic,
                reference=reference,
                title=f"{name}: held-out metrics ({statistic}, 75% band)",
            )  # fmt: skip
        )
    if visits is not None and graphs:
        written.append(plot_visits(visits, graphs, out_dir / f"visits.{fmt}"))
    return [p for p in written if p is not None]


def _local_iterations(summary: dict[str, Any]) -> dict[str, float]:
    out = {}
    for label, entry in summary.get("variants", {}).items():
        value = entry.get("resolved", {}).get("protocol", {}).get("local_iterations", 1)
        out[label] = float(value or 1)
    return out


def _excess(summary: dict[str, Any]) -> bool:
    return any(
        bool(entry.get("resolved", {}).get("metrics", {}).get("excess", False))
        for entry in summary.get("variants", {}).values()
    )


def _tolerance(summary: dict[str, Any]) -> float | None:
    for entry in summary.get("variants", {}).values():
        tol = entry.get("resolved", {}).get("metrics", {}).get("tolerance")
        if tol:
            return float(tol)
    return None
