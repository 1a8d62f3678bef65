"""Where a figure is drawn, and how it is saved or shown, without pyplot.

gossipsim's figures are :class:`matplotlib.figure.Figure` objects with an Agg canvas of their own:
making them selects no backend and registers nothing with pyplot, so importing or drawing them
leaves a notebook's or a user's backend as it was, and ``plt.show()`` shows only the user's own
figures. A notebook shows them through IPython's display protocol: :class:`PlotFigure` has a PNG
representation, and :class:`Figures` (what ``Results.plot()`` returns without a folder) shows each
of its figures under its name. Every figure ends in :func:`finish`: written to its file, laid out
once at the resolution it is saved at, or returned.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import matplotlib as mpl
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure, SubFigure
from matplotlib.transforms import Bbox

from gossipsim.figures.axes import RequestNames, separate_request_names
from gossipsim.figures.style import RC

#: the resolution of a figure shown in a notebook (files use ``savefig.dpi`` of :data:`RC`)
DISPLAY_DPI = 110


class PlotFigure(Figure):
    """A matplotlib Figure that IPython shows as a PNG (``_repr_png_``) whatever the backend, even
    when pyplot was never imported."""

    def _repr_png_(self) -> bytes:
        return png_bytes(self)


def png_bytes(fig: Figure, dpi: float = DISPLAY_DPI) -> bytes:
    """The figure as PNG bytes, cropped to what is drawn, in the figures' style."""
    buffer = io.BytesIO()
    with mpl.rc_context(RC):
        fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


class SharedTextCanvas(FigureCanvasAgg):
    """An Agg canvas whose renderers share what they measure of text: one mathtext parser for
    all (:data:`_MATHTEXT`), and the width, height and descent of each plain text for the
    renderers of this figure.

    A figure is laid out on one renderer and saved, cropped to another size, on another, and
    matplotlib keeps what it measured per renderer: every text was measured twice (FreeType's
    layout of a string, about 0.5-1 ms with this matplotlib: about half a figure's text work) and
    every log axis's tick label (``$\\mathdefault{10^{-9}}$``) parsed again by each renderer's own
    parser (24 parses of 6 labels for the two KL figures of Fig. 3, about 5 ms each). What is
    measured depends on the text, its font and the resolution (a parse on the hinting too, in its
    parser's cache key): the renderers of a figure have the same resolution, so the same numbers,
    and the same pixels. Shared per figure, as matplotlib's own cache is per renderer: a change
    of the fonts' settings between two drawings of one figure is seen by neither."""

    def __init__(self, figure: Figure | None = None) -> None:
        super().__init__(figure)
        self._text_sizes: dict[tuple[Any, ...], tuple[float, float, float]] = {}

    def get_renderer(self, *args: Any, **kwargs: Any) -> Any:
        global _MATHTEXT
        renderer = super().get_renderer(*args, **kwargs)
        if getattr(renderer, "_shared_text", None) is self:
            return renderer
        parser = getattr(renderer, "mathtext_parser", None)
        if parser is not None:
            if _MATHTEXT is None:
                _MATHTEXT = parser
            renderer.mathtext_parser = _MATHTEXT
        measure = renderer.get_text_width_height_descent  # the renderer's own method

        def text_size(s: str, prop: Any, ismath: Any) -> tuple[float, float, float]:
            if ismath:  # mathtext: the shared parser's cache; TeX: matplotlib's
                return measure(s, prop, ismath)
            key = (s, prop.copy(), renderer.dpi)  # a copy: a FontProperties can be changed
            found = self._text_sizes.get(key)
            if found is None:
                found = self._text_sizes[key] = measure(s, prop, ismath)
            return found

        renderer.get_text_width_height_descent = text_size
        renderer._shared_text = self
        return renderer


#: the mathtext parser of every :class:`SharedTextCanvas` (the first renderer's)
_MATHTEXT: Any = None


def new_figure(width: float, height: float) -> PlotFigure:
    """A figure of ``width`` × ``height`` inches with constrained layout and its own Agg canvas
    (:class:`SharedTextCanvas`)."""
    fig = PlotFigure(figsize=(width, height), layout="constrained")
    SharedTextCanvas(fig)
    engine = cast(Any, fig.get_layout_engine())
    engine.set(h_pad=0.03, w_pad=0.03, hspace=0.03, wspace=0.03)
    return fig


def drawing_area(
    width: float, height: float, *, ax: Axes | None = None, fig: Figure | SubFigure | None = None
) -> Figure | SubFigure:
    """Where a figure function draws: ``fig`` when given (a Figure or SubFigure of the caller's),
    the place of ``ax`` when given (a SubFigure in its grid cell replaces it, so a figure of several
    panels, its legend and title fit where the axes was), else a new :func:`new_figure`. A
    caller's figure without a layout engine gets matplotlib's constrained layout: the legends go
    outside the panels, which only a layout engine makes room for."""
    if ax is not None and fig is not None:
        raise ValueError("give ax or fig, not both")
    if fig is not None:
        _with_layout(root(fig))
        return fig
    if ax is not None:
        spec = ax.get_subplotspec()
        if spec is None:
            raise ValueError("ax must be a subplot of a grid (made by add_subplot or subplots)")
        parent = cast(Figure | SubFigure, ax.figure)
        _with_layout(root(parent))
        ax.remove()
        return parent.add_subfigure(spec)
    return new_figure(width, height)


def _with_layout(fig: Figure) -> None:
    """Constrained layout for a figure that has no layout engine (one it has is left alone)."""
    if fig.get_layout_engine() is None:
        fig.set_layout_engine("constrained")


def fit_height(area: Figure | SubFigure, own: bool, panels_in: float, *artists: Any) -> None:
    """Make a figure gossipsim made (``own``) as tall as its panels need (``panels_in`` inches)
    plus its title and legend (``artists``), so that a long legend never squeezes the panels."""
    if not own or not isinstance(area, Figure):
        return
    extra = sum(a.get_window_extent().height for a in artists if a is not None) / area.dpi
    area.set_size_inches(area.get_figwidth(), panels_in + extra + 0.2)


def root(area: Figure | SubFigure) -> Figure:
    """The top-level Figure of a drawing area."""
    return cast(Figure, area.get_figure(root=True))


class Figures(dict[str, Figure]):
    """Figures by name (``"latency"``, ...). A notebook shows each one under its name when this is
    the value of a cell; ``figures["latency"]`` is one matplotlib Figure."""

    def _repr_html_(self) -> str:
        parts = []
        for name, fig in self.items():
            data = base64.b64encode(png_bytes(fig)).decode("ascii")
            parts.append(
                f'<figure style="margin: 0 0 1.5em 0"><figcaption><b>{html.escape(name)}'
                f'</b></figcaption><img src="data:image/png;base64,{data}" alt="{html.escape(name)}"'
                f' style="max-width: 100%"/></figure>'
            )
        return "\n".join(parts) or "<p>no figure applies</p>"


#: where a figure goes: a file (``path``), or nowhere (the Figure is returned)
Where = Path | str | None
#: zlib's level for the PNG files (lossless at any level): 3 encodes the figures about a third
#: faster than PIL's default 6, in files no larger (4% smaller on Fig. 3's and
#: unlearning_complete's nine)
PNG_COMPRESSION = 3


def finish(
    area: Figure | SubFigure, path: Where, names: Sequence[RequestNames | None] = ()
) -> Path | Figure:
    """Write the figure of ``area`` to ``path`` and return the path, or without a path return the
    figure (the caller's own when it gave ``ax`` or ``fig``); the request names of ``names`` are
    separated (:func:`separate_request_names`) first."""
    fig = root(area)
    agg = isinstance(fig.canvas, FigureCanvasAgg)  # gossipsim's own figures; not every caller's
    if path is None or Path(path).suffix.lower() != ".png" or not agg:
        separate_request_names(area, names)
        return fig if path is None else _save(fig, Path(path))
    return _save(fig, Path(path), _lay_out(fig, names))


def _lay_out(fig: Figure, names: Sequence[RequestNames | None] = ()) -> Bbox:
    """Lay ``fig`` out once, at the resolution it is saved at, separating its request names on
    that layout (laid out again only if names were merged), and return the tight box (inches)
    that ``savefig(bbox_inches="tight")`` would crop it to. ``savefig`` finds that box by drawing
    the figure without output (the draw lays it out) before the draw that renders it, and the
    request names took one more such draw at the figure's own resolution; the layout alone gives
    the same box and the same pixels (compared on every shipped scenario's figures)."""
    with mpl.rc_context(RC):
        dpi, pad = mpl.rcParams["savefig.dpi"], mpl.rcParams["savefig.pad_inches"]
        shown = fig.dpi
        try:
            fig.dpi = dpi
            engine = fig.get_layout_engine()
            if engine is not None:
                engine.execute(fig)  # constrained layout, as savefig's first draw does
                if separate_request_names(fig, names, drawn=True):
                    engine.execute(fig)  # names merged: their new width may move a margin
            else:
                separate_request_names(fig, names)
            # the renderer the layout measured with (the Agg canvas keeps it for the figure's size)
            canvas = fig.canvas
            assert isinstance(canvas, FigureCanvasAgg)
            box = fig.get_tightbbox(canvas.get_renderer())
        finally:
            fig.dpi = shown
    return box.padded(pad)


def _save(fig: Figure, path: Path, box: Bbox | None = None) -> Path:
    """Write ``fig`` to ``path``; ``box`` (from :func:`_lay_out`, the figure laid out already) is
    the area written, and the figure is rendered without laying it out again."""
    with mpl.rc_context(RC):
        if box is None:
            fig.savefig(path)
            return path
        engine = fig.get_layout_engine()
        fig.set_layout_engine(None)  # none at all: savefig would lay a placeholder engine out again
        try:
            fig.savefig(path, bbox_inches=box, pil_kwargs={"compress_level": PNG_COMPRESSION})
        finally:
            fig.set_layout_engine(engine)
    return path
