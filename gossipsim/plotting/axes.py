"""Axes pieces every figure shares: a log axis whose exact zeros are drawn past a break, the slots of
unlearning requests, and a legend that names every line and band."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.gridspec import SubplotSpec
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import NullFormatter, NullLocator

from .style import BAND_ALPHA, REQUEST

ZERO_LABEL = "0"
#: highest value a log axis shows (lines above it leave the top of the axes)
LOG_TOP = 1e200


class LogPanel:
    """Lines, bands and horizontal lines of a non-negative quantity (a KL divergence) on a log axis.

    They are recorded first and drawn by :meth:`render`, which then knows whether any value is
    exactly zero (a conjugate posterior reached exactly): if so, a thin strip under the log axis,
    past a break in the axis, carries the zeros, its only tick labelled "0". A line that drops to zero
    crosses the break; nothing is drawn at an arbitrary floor without saying so.
    """

    def __init__(self) -> None:
        self._ops: list[tuple[str, tuple[np.ndarray, ...], dict[str, Any]]] = []
        self.main: Axes | None = None
        self.zero: Axes | None = None

    def line(self, x: Any, y: Any, **kw: Any) -> None:
        self._ops.append(("line", (_arr(x), _arr(y)), kw))

    def band(self, x: Any, lo: Any, hi: Any, **kw: Any) -> None:
        self._ops.append(("band", (_arr(x), _arr(lo), _arr(hi)), kw))

    def hline(self, y: float, **kw: Any) -> None:
        self._ops.append(("hline", (np.array([float(y)]),), kw))

    @property
    def axes(self) -> list[Axes]:
        return [a for a in (self.main, self.zero) if a is not None]

    @property
    def bottom(self) -> Axes:
        """The axes that carries the x tick labels."""
        axes = self.axes
        if not axes:
            raise RuntimeError("render the panel first")
        return axes[-1]

    def has_zero(self) -> bool:
        for kind, arrays, _ in self._ops:
            if kind == "hline":
                continue
            for y in arrays[1:]:
                if (np.isfinite(y) & (y <= 0)).any():
                    return True
        return False

    def positive_range(self) -> tuple[float, float] | None:
        values = [
            y[np.isfinite(y) & (y > 0)]
            for kind, arrays, _ in self._ops
            for y in (arrays if kind == "hline" else arrays[1:])
        ]
        values = [v for v in values if v.size]
        if not values:
            return None
        return min(float(v.min()) for v in values), max(float(v.max()) for v in values)

    def render(self, fig: Figure, spec: SubplotSpec, *, sharex: Axes | None = None) -> Axes:
        """Create the axes in ``spec`` (two, split by a break, if a value is zero), draw what was
        recorded and return the log axis."""
        zero = self.has_zero()
        if zero:
            sub = spec.subgridspec(2, 1, height_ratios=[9, 1.1], hspace=0.0)
            self.main = fig.add_subplot(sub[0], sharex=sharex)
            self.zero = fig.add_subplot(sub[1], sharex=self.main)
        else:
            self.main = fig.add_subplot(spec, sharex=sharex)
        span = self.positive_range() or (1e-3, 1.0)
        # a diverged run's KL (1e285, finite) would put matplotlib's log ticks past the float range,
        # where its tick formatter fails: the axis stops at LOG_TOP and such lines leave the top
        lo, hi = min(span[0] / 2.0, LOG_TOP / 10.0), min(span[1] * 2.0, LOG_TOP)
        level = lo / 10.0  # where the zeros are drawn, inside the strip only
        for ax in self.axes:
            for kind, arrays, kw in self._ops:
                kw = dict(kw) if ax is self.main else {**kw, "label": "_nolegend_"}
                if kind == "line":
                    x, y = arrays
                    ax.plot(x, np.where(y <= 0, level, y), **kw)
                elif kind == "band":
                    x, b_lo, b_hi = arrays
                    ax.fill_between(
                        x, np.where(b_lo <= 0, level, b_lo), np.where(b_hi <= 0, level, b_hi), **kw
                    )
                else:
                    ax.axhline(float(arrays[0][0]), **kw)
            ax.set_yscale("log")
            ax.grid(True, which="major", alpha=0.3)
        self.main.set_ylim(lo, hi)
        if self.zero is not None:
            _break(self.main, self.zero, level)
        return self.main


def _break(main: Axes, strip: Axes, level: float) -> None:
    """The broken y axis: the strip shows only the zero level, diagonal marks on both spines."""
    strip.set_ylim(level / 2.5, level * 2.5)
    strip.set_yticks([level], [ZERO_LABEL])
    strip.yaxis.set_minor_locator(NullLocator())
    strip.yaxis.set_minor_formatter(NullFormatter())
    strip.grid(False)
    main.spines["bottom"].set_visible(False)
    strip.spines["top"].set_visible(False)
    main.tick_params(axis="x", which="both", bottom=False, labelbottom=False)
    marks: dict[str, Any] = {
        "marker": [(-1, -0.5), (1, 0.5)],
        "markersize": 6,
        "linestyle": "none",
        "color": "k",
        "mec": "k",
        "mew": 0.8,
        "clip_on": False,
        "label": "_axis break",
        "gid": "axis-break",
    }
    main.plot([0, 1], [0, 0], transform=main.transAxes, **marks)
    strip.plot([0, 1], [1, 1], transform=strip.transAxes, **marks)


def _arr(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=float).ravel()


# ---------------------------------------------------------------------------------------------------
# request slots


@dataclass(frozen=True)
class RequestMark:
    """Where the requests for one node arrive on a figure's x axis: one slot (``lo == hi``) or, when
    the arrival differs between runs (requests at a simulated time), the range over the runs."""

    node: str
    lo: float
    hi: float

    @property
    def fixed(self) -> bool:
        return self.lo == self.hi


def request_marks(
    requests: pd.DataFrame | None,
    variants: Sequence[str],
    column: str = "request_iteration",
    scale: dict[str, float] | None = None,
) -> list[RequestMark]:
    """The requests of ``variants`` (those that arrived within a run) as marks on an axis of
    ``column`` (``request_iteration`` or ``request_time``), each variant's x multiplied by
    ``scale[variant]``; marks equal across variants are given once."""
    if requests is None or requests.empty or column not in requests:
        return []
    out: list[RequestMark] = []
    part = requests.loc[requests["variant"].isin(list(variants))]
    for (variant, _, node), rows in part.groupby(
        ["variant", "request", "node"], sort=True, observed=True
    ):
        x = rows[column].to_numpy(dtype=float, na_value=np.nan)
        x = x[np.isfinite(x)] * (scale or {}).get(str(variant), 1.0)
        if x.size == 0:
            continue
        mark = RequestMark(str(node), float(x.min()), float(x.max()))
        if mark not in out:
            out.append(mark)
    return sorted(out, key=lambda m: (m.lo, m.node))


REQUEST_LABEL = "unlearning request (node: top axis)"


def draw_request_marks(
    axes: Sequence[Axes], top: Axes, marks: Sequence[RequestMark], *, name: bool = True
) -> None:
    """A vertical line at each request slot on every axis of a panel (a shaded span where arrival
    differs between runs), labelled with the node on a secondary axis above ``top`` (unless
    ``name`` is false: a panel under another that names them)."""
    if not marks:
        return
    for ax in axes:
        for i, m in enumerate(marks):
            label = REQUEST_LABEL if (ax is top and i == 0) else "_nolegend_"
            if m.fixed:
                ax.axvline(m.lo, label=label, gid="request", **REQUEST)
            else:
                ax.axvspan(m.lo, m.hi, color=REQUEST["color"], alpha=0.15, linewidth=0,
                           label=label, gid="request")  # fmt: skip
    if not name:
        return
    where: dict[float, list[str]] = {}
    for m in marks:
        where.setdefault((m.lo + m.hi) / 2, []).append(m.node)
    secondary = top.secondary_xaxis("top")
    secondary.set_xticks(
        list(where), [f"node {', '.join(nodes)}" for nodes in where.values()], fontsize=6
    )
    secondary.tick_params(length=2, pad=1)


def request_handle() -> Line2D:
    return Line2D([], [], **REQUEST)


# ---------------------------------------------------------------------------------------------------
# legends


@dataclass
class Legend:
    """Legend entries in the order they are added, each label once."""

    entries: dict[str, Any] = field(default_factory=dict)

    def add(self, label: str, handle: Any) -> None:
        self.entries.setdefault(label, handle)

    def __len__(self) -> int:
        return len(self.entries)

    def place(self, fig: Figure, *, ncols: int = 2, title: str | None = None) -> Artist | None:
        """Below the panels, outside every axis: it covers no data."""
        if not self.entries:
            return None
        return fig.legend(
            list(self.entries.values()),
            list(self.entries),
            loc="outside lower center",
            ncols=min(ncols, len(self.entries)),
            title=title or None,
            handlelength=2.4,
            columnspacing=1.2,
        )


def band_handle(color: str, **line: Any) -> tuple[Patch, Line2D]:
    """A legend key for a line with a shaded band: the band's patch with the line over it."""
    return (
        Patch(facecolor=color, alpha=BAND_ALPHA, linewidth=0),
        Line2D([], [], color=color, **line),
    )


def line_handle(**style: Any) -> Line2D:
    return Line2D([], [], **style)
