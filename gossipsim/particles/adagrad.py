"""AdaGrad with momentum, the step-size rule of the original SVGD code (also used by DSVGD).

The squared-gradient history starts at the first direction squared and is then averaged,
``history ← decay·history + (1 − decay)·φ²``; each coordinate moves by
``step_size · φ / (fudge + √history)``. Applied to SVGD directions, this is eq. (5) of 000 with a
per-coordinate learning rate. With ``cumulative`` the history is the plain sum of the squared
directions (AdaGrad as Duchi et al. define it), so the steps shrink as 1/√t: the sound DSVGD variant
uses it (:mod:`gossipsim.particles.aggregated`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class AdaGradSettings:
    """The constants of :func:`adagrad_step`.

    The defaults are the original SVGD code's (``stepsize = 1e-3``, ``alpha = 0.9``,
    ``fudge_factor = 1e-6``); the DSVGD reference code uses ``step_size = 0.05`` and
    ``fudge = 1e-9``.
    """

    step_size: float = 1e-3
    decay: float = 0.9
    fudge: float = 1e-6
    cumulative: bool = False

    def __post_init__(self) -> None:
        if not (np.isfinite(self.step_size) and self.step_size > 0.0):
            raise ValueError(f"step_size must be a finite number > 0, got {self.step_size!r}")
        if not 0.0 <= self.decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {self.decay!r}")
        if not (np.isfinite(self.fudge) and self.fudge > 0.0):
            raise ValueError(f"fudge must be a finite number > 0, got {self.fudge!r}")


def adagrad_step(
    particles: FloatArray,
    direction: FloatArray,
    history: FloatArray | None,
    settings: AdaGradSettings,
) -> tuple[FloatArray, FloatArray]:
    """One AdaGrad-with-momentum move of ``particles`` along ``direction`` (eq. 5 of 000).

    ``history`` is the squared-direction average returned by the previous step, or ``None`` for
    the first step of a loop (it then starts at ``direction²``, as in the original code). Returns
    the moved particles and the new history; neither input is modified.
    """
    squared = np.square(direction)
    if history is None:
        new_history = squared
    elif settings.cumulative:
        new_history = history + squared
    else:
        new_history = settings.decay * history + (1.0 - settings.decay) * squared
    moved = particles + settings.step_size * direction / (settings.fudge + np.sqrt(new_history))
    return moved, new_history
