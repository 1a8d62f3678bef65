"""Axes pieces every figure shares: a log axis whose exact zeros are drawn past a break, the slots of
unlearning requests, wrapped text and the number of runs a title gives, and a legend that names
every line and band."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure, SubFigure
from matplotlib.font_manager import FontProperties
from matplotlib.gridspec import SubplotSpec
from matplotlib.legend import Legend as MplLegend
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.textpath import TextToPath
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

from gossipsim.figures.style import BAND_ALPHA, REQUEST

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

    def render(
        self,
        fig: Figure | SubFigure,
        spec: SubplotSpec,
        *,
        sharex: Axes | None = None,
        sharey: LogPanel | None = None,
        span: tuple[float, float] | None = None,
        zero: bool | None = None,
    ) -> Axes:
        """Create the axes in ``spec`` (two, split by a break, if a value is zero, or if ``zero``),
        draw what was recorded and return the log axis. ``span`` (the positive range to show, by
        default this panel's own) and ``sharey`` (a panel rendered before, whose y axes these share)
        give the panels of a figure one scale."""
        zero = self.has_zero() if zero is None else zero
        if zero:
            sub = spec.subgridspec(2, 1, height_ratios=[9, 1.1], hspace=0.0)
            self.main = fig.add_subplot(sub[0], sharex=sharex, sharey=sharey and sharey.main)
            self.zero = fig.add_subplot(sub[1], sharex=self.main, sharey=sharey and sharey.zero)
        else:
            self.main = fig.add_subplot(spec, sharex=sharex, sharey=sharey and sharey.main)
        span = span or self.positive_range() or (1e-3, 1.0)
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
        tidy_log_axis(self.main.yaxis, lo, hi)
        if self.zero is not None:
            _break(self.main, self.zero, level)
        return self.main


def tidy_log_axis(axis: Axis, lo: float, hi: float) -> None:
    """Only major ticks carry labels (matplotlib labels minor ones on a short log axis, crowded);
    over fewer than 2.5 decades the majors include 2 and 5 times the powers of ten (all nine
    multiples under one decade), in plain numbers."""
    decades = math.log10(hi / lo) if lo > 0 and hi > lo else 0.0
    if decades < 2.5:
        subs = tuple(range(1, 10)) if decades < 1 else (1.0, 2.0, 5.0)
        axis.set_major_locator(LogLocator(subs=subs))
        axis.set_major_formatter(FuncFormatter(_log_label))
    axis.set_minor_formatter(NullFormatter())


def _log_label(x: float, _pos: int | None = None) -> str:
    if not x > 0:
        return ""
    e = math.floor(math.log10(x) + 1e-9)
    if -3 <= e <= 3:
        return f"{x:g}"
    m = round(x / 10.0**e, 6)
    return f"$10^{{{e}}}$" if m == 1 else f"${m:g}\\times10^{{{e}}}$"


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


def merge_marks(marks: dict[str, list[RequestMark]], variants: Sequence[str]) -> list[RequestMark]:
    """The marks of ``variants`` (by variant, :func:`marks_by_variant`) in one list, each once."""
    out: list[RequestMark] = []
    for v in variants:
        for m in marks.get(v, []):
            if m not in out:
                out.append(m)
    return out


def marks_by_variant(
    requests: pd.DataFrame | None,
    variants: Sequence[str],
    column: str,
    scale: dict[str, float] | None = None,
) -> dict[str, list[RequestMark]]:
    """Each variant's request marks (:func:`request_marks`)."""
    return {v: request_marks(requests, [v], column, scale) for v in variants}


REQUEST_LABEL = "unlearning request (node: top axis)"
#: a request whose arrival differs between runs (a request at a slot, on a time axis; a request at
#: a time, on a slot axis): the span from its earliest to its latest arrival, shaded
REQUEST_SPAN_LABEL = "unlearning request: shaded from its first to its last arrival over the runs"
REQUEST_NAME_SIZE = 6  # points
REQUEST_SPAN_ALPHA = 0.15


@dataclass
class RequestNames:
    """The names of a panel's requests on the secondary x axis above it (see
    :func:`separate_request_names`)."""

    axes: Axes
    secondary: Any
    marks: list[RequestMark]


def draw_request_marks(
    axes: Sequence[Axes], top: Axes, marks: Sequence[RequestMark], *, name: bool = True
) -> RequestNames | None:
    """A vertical line at each request slot on every axis of a panel (a shaded span where arrival
    differs between runs) and, unless ``name`` is false (a panel under another that names them),
    the nodes named on a secondary axis above ``top``: call :func:`separate_request_names` once
    the figure is complete, so that names that would overlap are merged ("nodes 0, 17")."""
    if not marks:
        return None
    for ax in axes:
        named: set[bool] = set()  # the kinds (fixed or not) whose first mark carries the label
        for m in marks:
            label = "_nolegend_"
            if ax is top and m.fixed not in named:
                named.add(m.fixed)
                label = REQUEST_LABEL if m.fixed else REQUEST_SPAN_LABEL
            if m.fixed:
                ax.axvline(m.lo, label=label, gid="request", **REQUEST)
            else:
                ax.axvspan(m.lo, m.hi, color=REQUEST["color"], alpha=REQUEST_SPAN_ALPHA,
                           linewidth=0, label=label, gid="request")  # fmt: skip
    if not name:
        return None
    secondary = top.secondary_xaxis("top")
    secondary.set_gid("request-names")
    secondary.tick_params(length=0, pad=1.5, labelsize=REQUEST_NAME_SIZE)
    names = RequestNames(top, secondary, list(marks))
    _set_names(names, [[m] for m in _sorted_marks(marks)])
    return names


def _sorted_marks(marks: Sequence[RequestMark]) -> list[RequestMark]:
    return sorted(marks, key=lambda m: ((m.lo + m.hi) / 2, m.node))


def _centre(group: Sequence[RequestMark]) -> float:
    return float(np.mean([(m.lo + m.hi) / 2 for m in group]))


def request_name(group: Sequence[RequestMark]) -> str:
    """ "node 0" for one node, "nodes 0, 17" for several (each node once)."""
    nodes = list(dict.fromkeys(m.node for m in group))
    return f"node {nodes[0]}" if len(nodes) == 1 else f"nodes {', '.join(nodes)}"


def _set_names(names: RequestNames, groups: list[list[RequestMark]]) -> None:
    names.secondary.set_xticks(
        [_centre(g) for g in groups], [request_name(g) for g in groups], fontsize=REQUEST_NAME_SIZE
    )


def separate_request_names(
    fig: Figure | SubFigure, panels: Sequence[RequestNames | None], *, drawn: bool = False
) -> bool:
    """Merge the names of neighbouring requests whose labels would overlap at the figure's final
    layout into one label at their mean position ("nodes 0, 17" for requests 3 slots apart on an
    axis of thousands), until no two labels of a panel overlap; panels with the same requests get
    the same labels (merged as in the narrowest of them). The figure is drawn (laid out) first,
    unless ``drawn`` says the caller just did. Returns whether any names were merged."""
    named = [p for p in panels if p is not None]
    if not named:
        return False
    root = fig.get_figure(root=True)
    assert root is not None
    if not drawn:
        root.draw_without_rendering()
    gap = REQUEST_NAME_SIZE / 72.0  # about two characters between labels, in inches

    def width_px(group: Sequence[RequestMark]) -> float:
        return text_width_in(request_name(group), REQUEST_NAME_SIZE) * root.dpi

    # the boundaries between neighbouring marks that stay (a set of indices i: i | i + 1)
    cuts: dict[tuple[RequestMark, ...], set[int]] = {}
    for names in named:
        marks = tuple(_sorted_marks(names.marks))
        to_px = names.axes.transData.transform
        groups = [[i] for i in range(len(marks))]
        merged = True
        while merged and len(groups) > 1:
            merged = False
            for k in range(len(groups) - 1):
                a, b = ([marks[i] for i in g] for g in (groups[k], groups[k + 1]))
                xa, xb = (float(to_px((_centre(g), 0.0))[0]) for g in (a, b))
                if xa + width_px(a) / 2 + gap * root.dpi > xb - width_px(b) / 2:
                    groups[k : k + 2] = [groups[k] + groups[k + 1]]
                    merged = True
                    break
        kept = {g[-1] for g in groups[:-1]}
        cuts[marks] = cuts[marks] & kept if marks in cuts else kept
    merged_any = False
    for names in named:
        marks = tuple(_sorted_marks(names.marks))
        labelled: list[list[RequestMark]] = [[]]
        for i, m in enumerate(marks):
            labelled[-1].append(m)
            if i in cuts[marks]:
                labelled.append([])
        if len(labelled) < len(marks):  # some merged (draw_request_marks named each alone)
            _set_names(names, labelled)
            merged_any = True
    return merged_any


def request_handle() -> Line2D:
    return Line2D([], [], **REQUEST)


def add_request_entries(legend: Legend, marks: Sequence[RequestMark]) -> None:
    """The legend's entries for ``marks``: the line of a request arriving at one slot (or time) in
    every run, and the shaded span of one whose arrival differs between runs."""
    if any(m.fixed for m in marks):
        legend.add(REQUEST_LABEL, request_handle())
    if any(not m.fixed for m in marks):
        legend.add(
            REQUEST_SPAN_LABEL,
            Patch(color=REQUEST["color"], alpha=REQUEST_SPAN_ALPHA, linewidth=0),
        )


# ---------------------------------------------------------------------------------------------------
# text that fits


def text_width_in(text: str, fontsize: float) -> float:
    """Width in inches of one line of ``text`` at ``fontsize`` points in the default font."""
    return _width_in(text, FontProperties(size=fontsize))


@functools.lru_cache(maxsize=4096)
def _width_in(text: str, font: FontProperties) -> float:
    """:func:`text_width_in`, measured once per text and font (the font's properties are the key:
    a change of the default font measures again); :func:`wrap` measures the same words and
    lines again and again."""
    width, _, _ = _TEXT.get_text_width_height_descent(text, font, False)
    return float(width) / 72.0


_TEXT = TextToPath()


#: where a word too long for a line may be broken: after a hyphen, underscore, slash, "=" or ":"
_BREAKS = re.compile(r"(?<=[-_/=:])(?=.)")


def wrap(text: str, width_in: float, fontsize: float) -> str:
    """``text`` broken at spaces into lines of at most ``width_in`` inches at ``fontsize`` points
    (measured; existing line breaks kept); a word longer than a line is broken after its hyphens
    (``metropolis-`` / ``hastings``), underscores, slashes, "=" or ":", and stays whole only where
    it has none."""
    out: list[str] = []
    for line in text.split("\n"):
        # a line that fits is kept whole, as the loop below keeps it (no word or start of a line
        # is wider than the line), measured once instead of once per word and per trial
        if text_width_in(line, fontsize) <= width_in:
            out.append(line)
            continue
        current = ""
        for word in line.split(" "):
            pieces = [word]
            if text_width_in(word, fontsize) > width_in:
                pieces = _BREAKS.split(word)
            for i, piece in enumerate(pieces):
                glue = "" if i else " "  # a broken word's pieces join without a space
                trial = f"{current}{glue}{piece}" if current else piece
                if current and text_width_in(trial, fontsize) > width_in:
                    out.append(current)
                    current = piece
                else:
                    current = trial
        out.append(current)
    return "\n".join(out)


def runs_text(counts: Sequence[int]) -> str:
    """The number of runs a title gives: "20 runs", "20 runs each", "18-20 runs per variant"."""
    counts = [c for c in counts if c]
    if not counts:
        return "no runs"
    lo, hi = min(counts), max(counts)
    each = " each" if len(counts) > 1 else ""
    return f"{lo:,} runs{each}" if lo == hi else f"{lo:,}-{hi:,} runs per variant"


#: the smallest font a tick label is shrunk to, in points
MIN_TICK_SIZE = 6.0
#: the least room between two neighbouring tick labels, in inches
TICK_GAP_IN = 0.05


def keep_tick_labels_apart(ax: Axes, labels: Sequence[str], fontsize: float = 7.0) -> float:
    """Put ``labels`` at the x ticks of ``ax`` (one each, in order) so that no two overlap at the
    figure's layout, in the first of these that fits:

    1. one row: each label wrapped (:func:`wrap`) to the room its ticks leave it as the figure is
       laid out (the distance to its nearer neighbour, less :data:`TICK_GAP_IN`), at ``fontsize``
       or a font shrunk in half points down to :data:`MIN_TICK_SIZE`;
    2. two rows, every other label one row lower (its tick's pad), each wrapped to the distance to
       the nearer label of its own row: a word wider than a tick's room (``(centralised)`` beside
       five other variants under a column-wide axis) fits there;
    3. upright labels, whole.

    Returns how tall the labels are, pad included (inches), for the caller to make room."""
    fig = ax.get_figure(root=True)
    assert fig is not None
    ticks = np.asarray(ax.get_xticks(), dtype=float)
    ax.set_xticks(ticks, ["" for _ in ticks])
    engine = fig.get_layout_engine()
    if engine is not None:
        engine.execute(fig)  # where the ticks are once the figure is laid out
    inches = ax.transData.transform(np.column_stack([ticks, np.zeros_like(ticks)]))[:, 0] / fig.dpi
    texts = [str(t) for t in labels]
    for rows in (1, 2):
        room = _tick_room(inches, rows, ax.get_window_extent().width / fig.dpi)
        size = fontsize
        while True:
            wrapped = [wrap(t, float(r), size) for t, r in zip(texts, room, strict=True)]
            fits = all(
                text_width_in(line, size) <= r
                for t, r in zip(wrapped, room, strict=True)
                for line in t.split("\n")
            )
            if fits or size <= MIN_TICK_SIZE:
                break
            size = max(MIN_TICK_SIZE, size - 0.5)
        if fits:
            ax.set_xticks(ticks, wrapped, fontsize=size)
            major = ax.xaxis.get_major_ticks(ticks.size)  # in the order of ``ticks``
            pad = float(cast(Any, major[0]).get_pad()) if major else 0.0  # (stubs say None)
            lines = [t.count("\n") + 1 for t in wrapped]
            if rows == 1:
                return (pad + max(lines, default=0) * size * 1.2) / 72.0
            # every other label from the left, under the tallest of the others
            order = np.argsort(inches)
            lower = pad + max(lines[i] for i in order[0::2]) * size * 1.2 + 0.4 * size
            for i in order[1::2]:
                major[i].set_pad(lower)
            return (lower + max(lines[i] for i in order[1::2]) * size * 1.2) / 72.0
    ax.set_xticks(ticks, texts, fontsize=fontsize, rotation=90)  # a label as wide as it is tall
    return max((text_width_in(t, fontsize) for t in texts), default=0.0) + 3.5 / 72.0


def _tick_room(inches: np.ndarray, rows: int, alone: float) -> np.ndarray:
    """The width each tick label may take (inches) when every ``rows``-th label shares a row: the
    distance to the nearer label of its row, less :data:`TICK_GAP_IN` (``alone`` for a label alone
    in its row)."""
    order = np.argsort(inches)
    near = np.full(inches.size, alone)
    for first in range(rows):
        row = order[first::rows]
        gaps = np.diff(inches[row])
        if gaps.size:
            near[row] = np.minimum(np.r_[np.inf, gaps], np.r_[gaps, np.inf])
    return np.maximum(near - TICK_GAP_IN, 0.0)


def fitted_legend(
    place: Callable[..., MplLegend],
    handles: Sequence[Any],
    labels: Sequence[str],
    *,
    width_px: float,
    dpi: float,
    ncols: int = 1,
    title: str | None = None,
    fontsize: float = 7.0,
    **kw: Any,
) -> MplLegend:
    """``place(handles, labels, ncols=..., title=..., **kw)`` (a ``Figure.legend`` or
    ``Axes.legend``) with as many of ``ncols`` columns as fit in ``width_px`` pixels (at ``dpi``);
    a title or labels longer than that are wrapped, so that a legend never widens the figure or
    runs into its neighbour."""
    inches = width_px / dpi
    labels = list(labels)
    title = wrap(title, 0.97 * inches, fontsize) if title else None
    ncols = max(1, min(ncols, len(labels)))
    while True:
        legend = place(list(handles), labels, ncols=ncols, title=title, fontsize=fontsize, **kw)
        if legend.get_window_extent().width <= width_px:
            return legend
        legend.remove()
        if ncols > 1:
            ncols -= 1
            continue
        key = (kw.get("handlelength", 2.0) + 1.5) * fontsize / 72.0  # the key and the padding
        shorter = [wrap(t, 0.97 * inches - key, fontsize) for t in labels]
        if shorter == labels:
            return place(list(handles), labels, ncols=1, title=title, fontsize=fontsize, **kw)
        labels = shorter


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

    def place(
        self, fig: Figure | SubFigure, *, ncols: int = 2, title: str | None = None
    ) -> MplLegend | None:
        """Below the panels, outside every axis (it covers no data), in as many of ``ncols``
        columns as fit the figure's width (:func:`fitted_legend`)."""
        if not self.entries:
            return None
        return fitted_legend(
            fig.legend,
            list(self.entries.values()),
            list(self.entries),
            width_px=fig.bbox.width,
            dpi=fig.dpi,
            ncols=ncols,
            fontsize=FontProperties(size=mpl.rcParams["legend.fontsize"]).get_size_in_points(),
            title=title,
            loc="outside lower center",
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
