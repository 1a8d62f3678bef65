"""An upload as it is sent and as the server reads it: the positions of each sparsity pattern and
the quantized values of the kept entries (:func:`encode`), and the dense ΔΘ decoded from them
(:func:`decode`). Only the N_p × k kept entries are quantized (the uniforms drawn are theirs), so
encoding costs the top-k selection plus O(N_p k), not a pass over every entry; its bits are
:func:`~gossipsim.compression.bits.upload_bits`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gossipsim.compression.bits import upload_bits
from gossipsim.compression.quantize import quantize
from gossipsim.compression.sparsify import pattern_positions


@dataclass(frozen=True)
class EncodedUpdate:
    """``positions`` (…, groups, k): the kept coordinates of each pattern, increasing;
    ``values`` (…, N_p, k): each particle's quantized entries at its group's positions."""

    scheme: str
    d: int
    alpha: float
    entry_bits: int
    positions: np.ndarray
    values: np.ndarray

    @property
    def bits(self) -> float:
        """What the upload costs (eqs. 9-11)."""
        particles, k = self.values.shape[-2:]
        return float(upload_bits(self.scheme, self.d, k, particles, self.entry_bits, self.alpha))


def encode(
    delta: np.ndarray,
    scheme: str,
    k: int,
    entry_bits: int,
    a_max: float | None,
    rng: np.random.Generator | Sequence[np.random.Generator],
    alpha: float = 1.0,
) -> EncodedUpdate:
    """ΔΘ (…, N_p, d) sparsified to k entries a pattern (:func:`~.sparsify.sparsify`'s patterns)
    and its kept entries quantized (:func:`~.quantize.quantize`, one generator or one per entry of
    the batch axis). ``a_max`` None: the range is the kept entries' largest magnitude
    (:func:`kept_range`; one update, no batch axis), which the sender then sends."""
    delta = np.asarray(delta, dtype=float)
    d = delta.shape[-1]
    positions = pattern_positions(delta, scheme, k, alpha)  # (…, groups, k), increasing
    size = delta.shape[-2] // positions.shape[-2]
    per_particle = np.repeat(positions, size, axis=-2)  # (…, N_p, k)
    kept = np.take_along_axis(delta, per_particle, axis=-1)
    if a_max is None:
        a_max = kept_range(kept)
    return EncodedUpdate(
        scheme, d, alpha, entry_bits, positions, quantize(kept, entry_bits, a_max, rng)
    )


def kept_range(kept: np.ndarray) -> float:
    """The range sent with an upload whose range is not fixed: the largest magnitude of its kept
    entries rounded up to a float32 (so that no entry is clipped by the rounding); 1 when every
    entry is 0 (nothing to scale)."""
    top = float(np.max(np.abs(kept))) if kept.size else 0.0
    if top == 0.0:
        return 1.0
    single = np.float32(top)
    return float(single if float(single) >= top else np.nextafter(single, np.float32(np.inf)))


def decode(encoded: EncodedUpdate) -> np.ndarray:
    """The dense ΔΘ (…, N_p, d) the server adds: the sent values at their positions, 0 elsewhere."""
    values = encoded.values
    size = values.shape[-2] // encoded.positions.shape[-2]
    out = np.zeros((*values.shape[:-1], encoded.d))
    np.put_along_axis(out, np.repeat(encoded.positions, size, axis=-2), values, axis=-1)
    return out
