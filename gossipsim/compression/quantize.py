"""Stochastic quantization of the kept entries (paper 000, eqs. 12-13, after QSGD): an entry x is
sent as its sign (1 bit) and a magnitude level (N_b − 1 bits), Q(x) = sign(x) ζ(min(|x|, a_max)),
where ζ rounds a ∈ [tδ, (t + 1)δ] up to (t + 1)δ with probability (a − tδ)/δ and down to tδ
otherwise, so E[ζ(a)] = a: unbiased inside [0, a_max], clipped to a_max beyond it.

The levels. The paper sets δ = a_max / (2^N_b − 1), which makes 2^N_b magnitude levels
0, δ, …, a_max; N_b − 1 magnitude bits name only 2^(N_b − 1) of them. Here the levels are those the
bits counted can name: L = 2^(N_b − 1) levels 0, δ, …, (L − 1)δ = a_max with δ = a_max / (L − 1)
(:func:`magnitude_levels`), so that an upload's bits (eqs. 9-11) pay for exactly what is sent. With
N_b = 5 that is 16 levels (the paper's δ would need 32). N_b ≥ 2 (one magnitude bit: the levels 0
and a_max).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def magnitude_levels(entry_bits: int) -> int:
    """How many magnitude levels N_b bits per entry name: 2^(N_b − 1) (one bit is the sign)."""
    if not isinstance(entry_bits, (int, np.integer)) or entry_bits < 2:
        raise ValueError(f"entry_bits must be an integer >= 2 (got {entry_bits!r})")
    return 1 << (int(entry_bits) - 1)


def quantize_with(x: np.ndarray, entry_bits: int, a_max: float, uniforms: np.ndarray) -> np.ndarray:
    """Q(x) (eqs. 12-13) of every entry of ``x``, with ``uniforms`` in [0, 1) of the same shape
    deciding each rounding (up where u < (a − tδ)/δ): the pure function of the quantizer."""
    if not (np.isfinite(a_max) and a_max > 0):
        raise ValueError(f"a_max must be a positive number (got {a_max!r})")
    x = np.asarray(x, dtype=float)
    uniforms = np.asarray(uniforms, dtype=float)
    if uniforms.shape != x.shape:
        raise ValueError(f"uniforms must have the shape of x, {x.shape} (got {uniforms.shape})")
    step = a_max / (magnitude_levels(entry_bits) - 1)
    scaled = np.minimum(np.abs(x), a_max) / step  # in [0, L − 1]
    lower = np.floor(scaled)
    up = uniforms < (scaled - lower)
    level = np.minimum(lower + up, magnitude_levels(entry_bits) - 1)
    return np.sign(x) * level * step


def quantize(
    x: np.ndarray,
    entry_bits: int,
    a_max: float,
    rng: np.random.Generator | Sequence[np.random.Generator],
) -> np.ndarray:
    """Q(x) with the uniforms drawn from ``rng``: one generator for the whole array, or one per
    entry of the leading (batch) axis, each drawing the uniforms of its own slice (so a run of a
    batch quantizes as it would alone)."""
    x = np.asarray(x, dtype=float)
    if isinstance(rng, np.random.Generator):
        uniforms = rng.random(x.shape)
    else:
        if len(rng) != x.shape[0]:
            raise ValueError(
                f"one generator per entry of the batch axis: {x.shape[0]} (got {len(rng)})"
            )
        slices = [g.random(x.shape[1:]) for g in rng]
        uniforms = np.stack(slices) if slices else np.zeros(x.shape)
    return quantize_with(x, entry_bits, a_max, uniforms)
