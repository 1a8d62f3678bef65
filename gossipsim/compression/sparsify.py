"""Top-k sparsification of particle updates ΔΘ (paper 000, Section III-A): the k coordinates of
largest absolute value kept, the rest set to 0, with the pattern chosen

- ``per-particle``: for each particle on its own |Δθ_n|;
- ``shared``: once for all particles, on Σ_n |Δθ_n| (the pattern applied to every particle);
- ``alpha-shared``: once per group, on the sum over the group's particles; the groups are the
  1/α contiguous blocks of α N_p particles (particles 0 … αN_p − 1 the first, and so on).

Ties at the k-th largest value go to the lower coordinate (a stable order), so the pattern is a
function of the update alone, the same for a batch of runs as for one.
"""

from __future__ import annotations

import numpy as np

from gossipsim.compression.bits import groups_of


def top_k_mask(scores: np.ndarray, k: int) -> np.ndarray:
    """A boolean mask of the ``k`` largest entries of ``scores`` along its last axis (ties to the
    lower index); leading axes are batch axes."""
    d = scores.shape[-1]
    if not 0 <= k <= d:
        raise ValueError(f"k must be within 0..d = 0..{d} (got {k})")
    if k == 0 or k == d:
        return np.full(scores.shape, k == d, dtype=bool)
    # the k-th largest value by a partition (linear time, no sort): every score above it is kept,
    # and of those equal to it the lowest-indexed ones until k are kept
    kth = np.partition(scores, d - k, axis=-1)[..., d - k : d - k + 1]
    above = scores > kth
    equal = scores == kth
    wanted = k - above.sum(axis=-1, keepdims=True)
    if np.array_equal(equal.sum(axis=-1, keepdims=True), wanted):  # no tie to break (usual)
        return above | equal
    return above | (equal & (np.cumsum(equal, axis=-1) <= wanted))


def top_k_positions(scores: np.ndarray, k: int) -> np.ndarray:
    """The coordinates of :func:`top_k_mask` in increasing order, (…, k): found by one
    ``argpartition`` where no tie straddles the k-th largest value (the usual case: the kept set is
    then the same whatever order the partition leaves), by the mask otherwise."""
    d = scores.shape[-1]
    if not 0 <= k <= d:
        raise ValueError(f"k must be within 0..d = 0..{d} (got {k})")
    if 0 < k < d:
        chosen = np.argpartition(scores, d - k, axis=-1)[..., d - k :]
        values = np.take_along_axis(scores, chosen, axis=-1)
        kth = values.min(axis=-1, keepdims=True)
        if np.array_equal((scores == kth).sum(axis=-1), (values == kth).sum(axis=-1)):
            chosen.sort(axis=-1)
            return chosen
    mask = top_k_mask(scores, k)
    return np.nonzero(mask)[-1].reshape(*scores.shape[:-1], k)


def _pattern_scores(delta: np.ndarray, scheme: str, alpha: float) -> np.ndarray:
    """What each pattern ranks: |Δθ| of its particle, or summed over its group (…, groups, d)."""
    delta = np.asarray(delta, dtype=float)
    if delta.ndim < 2:
        raise ValueError(f"delta must be (..., particles, d) (got shape {delta.shape})")
    particles, d = delta.shape[-2:]
    groups = groups_of(scheme, particles, alpha)
    size = particles // groups
    grouped = np.abs(delta).reshape(*delta.shape[:-2], groups, size, d)
    return grouped[..., 0, :] if size == 1 else grouped.sum(axis=-2)


def patterns(delta: np.ndarray, scheme: str, k: int, alpha: float = 1.0) -> np.ndarray:
    """The sparsity patterns of ``delta`` (…, N_p, d): a mask (…, groups, d) of the k coordinates
    each pattern keeps, a group being one particle (per-particle), all of them (shared) or 1/α
    contiguous blocks (α-shared); particle n uses pattern n // (N_p / groups)."""
    return top_k_mask(_pattern_scores(delta, scheme, alpha), k)


def pattern_positions(delta: np.ndarray, scheme: str, k: int, alpha: float = 1.0) -> np.ndarray:
    """The coordinates each pattern of :func:`patterns` keeps, increasing: (…, groups, k)."""
    return top_k_positions(_pattern_scores(delta, scheme, alpha), k)


def sparsify(
    delta: np.ndarray, scheme: str, k: int, alpha: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """``delta`` (…, N_p, d) with all but k coordinates of each pattern set to 0, and the mask of
    the kept entries (same shape): per particle, shared or α-shared (module docstring)."""
    delta = np.asarray(delta, dtype=float)
    pattern = patterns(delta, scheme, k, alpha)
    mask = np.repeat(pattern, delta.shape[-2] // pattern.shape[-2], axis=-2)
    return np.where(mask, delta, 0.0), mask
