"""One scheme of colours, line styles and sizes for every figure.

Variants (the lines of a panel) take the Okabe–Ito colours, safe for colour-blind readers, in sweep
order; the same value of a sweep's first dimension has the same colour in every panel. The roles of
the unlearning figures differ in colour *and* style, so they read in grey print too: unlearning blue
and solid, retraining from scratch vermillion and dashed, the removal latency a wide pale line, exact
expectations black and dotted, request slots grey dash-dotted.
"""

from __future__ import annotations

from typing import Any

COLUMN_WIDTH_IN = 3.5  # one column of a two-column paper
DOUBLE_WIDTH_IN = 7.0  # a figure across both columns (sweep grids of two or three columns)
PANEL_HEIGHT_IN = 2.0  # a panel of the divergence curves

#: Okabe & Ito (2008), without the yellow (too pale on white); black last
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000")

RC: Any = {
    "font.size": 8,
    "axes.titlesize": 8,
    "figure.titlesize": 9,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "legend.title_fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "lines.linewidth": 1.2,
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.03,
    "legend.frameon": False,
    # TrueType (Type 42) fonts in PDF and PostScript: paper submission checkers reject Type 3
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
}

# roles of the unlearning figures
UNLEARNING: dict[str, Any] = {"color": "#0072B2", "linestyle": "-"}
RETRAIN: dict[str, Any] = {"color": "#D55E00", "linestyle": "--"}
REMOVAL: dict[str, Any] = {"color": "#56B4E9", "linestyle": "-", "linewidth": 3.5, "alpha": 0.55}
EXACT: dict[str, Any] = {"color": "black", "linestyle": ":", "linewidth": 1.1}
BEST: dict[str, Any] = {"color": "black", "linestyle": "--", "linewidth": 0.8}
BEST_PLUS_TOLERANCE: dict[str, Any] = {"color": "black", "linestyle": ":", "linewidth": 0.8}
TOLERANCE: dict[str, Any] = {"color": "0.45", "linestyle": ":", "linewidth": 0.8}
REQUEST: dict[str, Any] = {"color": "0.35", "linestyle": (0, (5, 2, 1, 2)), "linewidth": 0.8}
REFERENCE_STYLE = "--"  # a target's own held-out metric, in its variant's colour
BAND_ALPHA = 0.2


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]
