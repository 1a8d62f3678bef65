"""Error feedback (beyond paper 000, off by default in the protocols): what compression left out
of an upload is carried to the agent's next one, so that nothing is lost for good. With residual
e (0 at first) and true update ΔΘ, the agent compresses ΔΘ + e, sends C(ΔΘ + e) and keeps
e' = ΔΘ + e − C(ΔΘ + e): after any number of uploads, the sum of what was sent plus the residual
is the sum of the true updates (up to rounding)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def feedback_step(
    delta: np.ndarray, residual: np.ndarray, compress: Callable[[np.ndarray], np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """(what is sent, the new residual) for the true update ``delta`` and the residual carried so
    far; ``compress`` maps an update to what the server decodes of it (e.g. ``lambda x:
    decode(encode(x, ...))``)."""
    corrected = np.asarray(delta, dtype=float) + residual
    sent = compress(corrected)
    return sent, corrected - sent
