"""Panels of a sweep: its first dimension gives the lines of a panel (one colour per value, the same in
every panel), the second and later dimensions give the panels (facets), so a two-dimensional sweep
never puts all its variants on one axis under one legend. A grid of a sweep's factors
(:func:`variant_cells`) labels its rows and columns (:func:`label_cells`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from matplotlib.axes import Axes

from gossipsim.figures.axes import wrap
from gossipsim.figures.style import COLUMN_WIDTH_IN, DOUBLE_WIDTH_IN, colour
from gossipsim.study.sweeps import variant_label

CASES = "case"


@dataclass(frozen=True)
class Panel:
    title: str  # "" for the only panel
    variants: list[str]


@dataclass(frozen=True)
class Facets:
    """Which variants share a panel, their label inside it and their colour."""

    panels: list[Panel]
    line_title: str  # what the lines of a panel differ by (the legend's title), "" if not known
    label: dict[str, str] = field(default_factory=dict)  # variant -> its label inside a panel
    colour: dict[str, str] = field(default_factory=dict)

    @property
    def variants(self) -> list[str]:
        return [v for p in self.panels for v in p.variants]


def dimensions(
    summary: dict[str, Any], variants: Sequence[str]
) -> list[tuple[str, dict[str, str]]]:
    """The sweep's dimensions in order, each as (name, variant -> the value it shows): the
    ``[[sweep.cases]]`` first (the outer loop of the sweep), then the ``[sweep]`` keys."""
    entries = summary.get("variants", {})
    values = {v: entries.get(v, {}).get("values", {}) or {} for v in variants}
    out: list[tuple[str, dict[str, str]]] = []
    raw_sweep = (summary.get("scenario", {}) or {}).get("sweep", {}) or {}
    cases = raw_sweep.get("cases") if isinstance(raw_sweep, dict) else None
    if isinstance(cases, list) and cases:
        shown: dict[str, str] = {}
        for v in variants:
            # the most specific case the variant's values match: a case whose keys are a subset
            # of another's (a baseline protocol beside the same protocol compressed) matches
            # that other case's variants too
            best = -1
            for case in cases:
                keys = {k: c for k, c in case.items() if k != "label"}
                if (
                    len(keys) > best
                    and keys
                    and all(values[v].get(k) == c for k, c in keys.items())
                ):
                    shown[v] = str(case.get("label") or variant_label(keys, ""))
                    best = len(keys)
        if len(shown) == len(variants):
            out.append((CASES, shown))
    for key in summary.get("sweep", {}) or {}:
        if all(key in values[v] for v in variants):
            out.append((key, {v: variant_label({key: values[v][key]}, "") for v in variants}))
    return out


def facets(summary: dict[str, Any] | None, variants: Sequence[str]) -> Facets:
    """One panel for a study of one dimension (or none); for more, one panel per combination of the
    second and later dimensions, in sweep order, each with a line per value of the first."""
    variants = list(variants)
    dims = dimensions(summary or {}, variants)
    if len(dims) < 2:
        title = dims[0][0] if dims else ""
        title = "" if title == CASES else title
        return Facets(
            [Panel("", variants)],
            title,
            {v: v for v in variants},
            {v: colour(i) for i, v in enumerate(variants)},
        )
    (line_name, line_values), rest = dims[0], dims[1:]
    panels: dict[str, list[str]] = {}
    for v in variants:
        title = ", ".join(f"{_short(name)} = {shown[v]}" for name, shown in rest)
        panels.setdefault(title, []).append(v)
    order = list(dict.fromkeys(line_values[v] for v in variants))
    return Facets(
        [Panel(t, vs) for t, vs in panels.items()],
        "" if line_name == CASES else line_name,
        {v: line_values[v] for v in variants},
        {v: colour(order.index(line_values[v])) for v in variants},
    )


def _short(name: str) -> str:
    return "case" if name == CASES else name


def grid(panels: int) -> tuple[int, int, float]:
    """Rows, columns and width (inches) of a figure of ``panels`` panels: stacked in one column at
    column width up to two, else two or three columns across the page."""
    if panels <= 2:
        return max(panels, 1), 1, COLUMN_WIDTH_IN
    cols = 2 if panels <= 6 else 3
    return math.ceil(panels / cols), cols, DOUBLE_WIDTH_IN


@dataclass(frozen=True)
class Cells:
    """Where each panel of a figure goes: ``where[key] = (row, column)`` of a ``rows`` × ``cols``
    grid, with the labels of its rows and columns when the grid is a sweep's factors (then a panel
    needs no title of its own), else None."""

    where: dict[Any, tuple[int, int]]
    rows: int
    cols: int
    row_labels: list[str] | None = None
    col_labels: list[str] | None = None


def variant_cells(fac: Facets, variants: Sequence[str]) -> Cells:
    """One panel per variant of ``variants``: for a sweep of two or more dimensions a row per value
    of its first dimension and a column per facet (the other dimensions), labelled; otherwise
    :func:`grid` in order, each panel titled by its variant."""
    present = [[v for v in p.variants if v in variants] for p in fac.panels]
    titles = [p.title for p, vs in zip(fac.panels, present, strict=True) if vs]
    present = [vs for vs in present if vs]
    if len(present) > 1:
        values = list(dict.fromkeys(fac.label[v] for vs in present for v in vs))
        where = {v: (values.index(fac.label[v]), c) for c, vs in enumerate(present) for v in vs}
        head = f"{_short(fac.line_title)} = " if fac.line_title else ""
        return Cells(where, len(values), len(present), [head + x for x in values], titles)
    ordered = [v for vs in present for v in vs]
    rows, cols, _ = grid(len(ordered))
    return Cells({v: (i // cols, i % cols) for i, v in enumerate(ordered)}, rows, cols)


def figure_width(cols: int, panel_in: float = COLUMN_WIDTH_IN * 2 / 3) -> float:
    """Width of a figure of ``cols`` columns of panels: one column at paper-column width, two or
    three across the page, more at ``panel_in`` inches each."""
    if cols <= 1:
        return COLUMN_WIDTH_IN
    return max(DOUBLE_WIDTH_IN, cols * panel_in)


def label_cells(
    placed: dict[tuple[int, int], Axes], cells: Cells, panel_width: float, panel_height: float
) -> None:
    """A grid of a sweep's factors: each column's label above its top panel, each row's label to
    the right of its last panel (read downwards), both wrapped to the panel's size (inches)."""
    if cells.col_labels:
        for c, label in enumerate(cells.col_labels):
            top = min((r for r, cc in placed if cc == c), default=None)
            if top is not None and label:
                placed[top, c].set_title(wrap(label, panel_width - 0.3, 8))
    if cells.row_labels:
        for r, label in enumerate(cells.row_labels):
            last = max((c for rr, c in placed if rr == r), default=None)
            if last is None or not label:
                continue
            ax = placed[r, last]
            ax.annotate(wrap(label, panel_height, 7), xy=(1.03, 0.5), xycoords="axes fraction",
                        rotation=270, ha="left", va="center", fontsize=7, gid="row-label",
                        annotation_clip=False)  # fmt: skip
