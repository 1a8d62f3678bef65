"""The exact density of a 2-D target on a grid: what summary.json records for the contours of the
``particles`` figure, so that the figure is drawn from the results folder without running again.

A model that knows its target posterior's density exactly (``[model] kind = "gaussian-mixture"``)
gives it as an :class:`ExactDensity`: the normalised log-density and a box holding nearly all of
its mass (:meth:`gossipsim.models.particle.ParticleCapable.exact_density`; None for models that
do not know it, whose figure then has no contours). :func:`density_grid` evaluates the targets of a
variant (all data, and without each set of forgotten nodes) on one grid over the union of their
boxes, for d = 2 only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

#: grid points along each axis (the box's corners included)
GRID_POINTS = 81
#: log-densities relative to the peak are kept down to this (e^-50: far below any contour drawn)
LOG_FLOOR = -50.0
#: decimals the relative log-densities and the grid's coordinates are written with
LOG_DECIMALS = 2
AXIS_DECIMALS = 6
#: what the recorded values are (summary.json ``theory.target_density.values``)
SCALE = (
    "log of the exact density relative to its largest value on the grid (0 at the peak, at least "
    f"{LOG_FLOOR:g}); stages[k].log_density[i][j] at (x[j], y[i])"
)


@dataclass(frozen=True)
class ExactDensity:
    """A target's normalised log-density at points ``(..., d)`` → ``(...)``, and a box
    ``[low, high]`` (each ``(d,)``) holding nearly all of its mass."""

    log_density: Callable[[FloatArray], FloatArray]
    low: FloatArray
    high: FloatArray

    @property
    def dimension(self) -> int:
        return int(np.asarray(self.low).size)


def density_grid(
    stages: Sequence[tuple[Sequence[Any], ExactDensity]], points: int = GRID_POINTS
) -> dict[str, Any] | None:
    """The density of each stage (the labels of the nodes forgotten by then, and the target's
    :class:`ExactDensity`) on one grid of ``points`` × ``points`` over the union of their boxes,
    as summary.json records it: ``x``, ``y`` (the grid's coordinates), ``stages`` (one entry per
    stage: ``forgotten``, the node labels, and ``log_density``, rows along y of the log-density
    relative to its peak on the grid, floored at :data:`LOG_FLOOR`) and ``scale`` (saying so).
    None unless every density is 2-D."""
    if not stages or any(density.dimension != 2 for _, density in stages):
        return None
    low = np.min([np.asarray(density.low, dtype=float) for _, density in stages], axis=0)
    high = np.max([np.asarray(density.high, dtype=float) for _, density in stages], axis=0)
    x = np.linspace(low[0], high[0], points)
    y = np.linspace(low[1], high[1], points)
    grid = np.stack(np.meshgrid(x, y, indexing="xy"), axis=-1)  # (y, x, 2)
    entries = []
    for forgotten, density in stages:
        log_density = np.asarray(density.log_density(grid), dtype=float)
        relative = np.maximum(log_density - np.max(log_density), LOG_FLOOR)
        entries.append(
            {
                "forgotten": list(forgotten),
                "log_density": np.round(relative, LOG_DECIMALS).tolist(),
            }
        )
    return {
        "x": np.round(x, AXIS_DECIMALS).tolist(),
        "y": np.round(y, AXIS_DECIMALS).tolist(),
        "stages": entries,
        "scale": SCALE,
    }


def highest_density_levels(log_density: FloatArray, masses: tuple[float, ...]) -> FloatArray:
    """The relative log-density levels whose super-level sets hold each of ``masses`` of the
    grid's mass (the highest-density regions), ascending: the level of mass m is the smallest
    value v such that the cells with value ≥ v hold at least m of the total (cells of equal size)."""
    values = np.sort(np.asarray(log_density, dtype=float).ravel())[::-1]
    weights = np.exp(values - values[0])
    cumulative = np.cumsum(weights) / weights.sum()
    index = np.searchsorted(cumulative, np.asarray(masses, dtype=float), side="left")
    levels = values[np.minimum(index, values.size - 1)]
    return np.sort(levels)
