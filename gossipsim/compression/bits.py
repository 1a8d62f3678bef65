"""What an upload of a sparsified, quantized particle update costs in bits (paper 000, eqs. 9-11),
and the largest sparsity k whose upload fits a budget.

An agent uploads the N_p × d matrix of its particles' updates ΔΘ. Of each sparsity pattern (the k
coordinates kept of d) the positions cost log2 C(d, k) bits (Golomb position encoding, the paper's
count: a real number of bits, not rounded up); every kept entry costs ``entry_bits`` N_b bits (1
sign bit and N_b − 1 magnitude bits, :mod:`gossipsim.compression.quantize`). The schemes differ in
how many patterns are sent:

- ``per-particle`` (eq. 9): one pattern per particle, N_p (log2 C(d, k) + N_b k);
- ``shared`` (eq. 10): one pattern for all, log2 C(d, k) + N_p N_b k;
- ``alpha-shared`` (eq. 11): the particles in 1/α groups of α N_p each, a pattern per group,
  (1/α) log2 C(d, k) + N_p N_b k; α = 1/N_p is per-particle, α = 1 shared.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy.special import gammaln

SCHEMES = ("per-particle", "shared", "alpha-shared")
_LN2 = math.log(2.0)


def groups_of(scheme: str, particles: int, alpha: float = 1.0) -> int:
    """How many sparsity patterns an upload of ``particles`` particles carries under ``scheme``:
    N_p per particle, 1 shared, 1/α for ``alpha-shared`` (which must be a whole number dividing
    N_p; α in [1/N_p, 1]). Raises ValueError naming what is allowed."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(SCHEMES)} (got {scheme!r})")
    if particles < 1:
        raise ValueError(f"particles must be at least 1 (got {particles})")
    if scheme == "per-particle":
        return particles
    if scheme == "shared":
        return 1
    if not (isinstance(alpha, (int, float)) and 0 < alpha <= 1):
        raise ValueError(f"alpha must be in [1/N_p, 1] = [1/{particles}, 1] (got {alpha!r})")
    groups = round(1.0 / alpha)
    if abs(groups * alpha - 1.0) > 1e-9 or particles % groups:
        raise ValueError(
            f"alpha must make 1/alpha a whole number of groups dividing the {particles} particles "
            f"(e.g. {', '.join(f'1/{g}' for g in range(1, particles + 1) if particles % g == 0)}; "
            f"got {alpha!r})"
        )
    return groups


def position_bits(d: int, k: npt.ArrayLike) -> np.ndarray | float:
    """log2 C(d, k): the bits of the positions of k kept coordinates out of d (eqs. 9-11), through
    log-gamma, ln Γ(d + 1) − ln Γ(k + 1) − ln Γ(d − k + 1) over ln 2 (no factorial is formed, so
    d = 79,510 is as exact as d = 10). 0 for k = 0 and k = d. ``k`` may be an array."""
    if d < 1:
        raise ValueError(f"d must be at least 1 (got {d})")
    kk = np.asarray(k)
    if np.any((kk < 0) | (kk > d)):
        raise ValueError(f"k must be within 0..d = 0..{d}")
    value = (gammaln(d + 1.0) - gammaln(kk + 1.0) - gammaln(d - kk + 1.0)) / _LN2
    value = np.where((kk == 0) | (kk == d), 0.0, value)
    return float(value) if np.ndim(value) == 0 else value


def upload_bits(
    scheme: str,
    d: int,
    k: npt.ArrayLike,
    particles: int,
    entry_bits: int,
    alpha: float = 1.0,
) -> np.ndarray | float:
    """The bits of one upload of N_p = ``particles`` particle updates of ``d`` coordinates, ``k``
    kept per pattern, each kept entry ``entry_bits`` N_b bits: eq. 9 (``per-particle``), eq. 10
    (``shared``) or eq. 11 (``alpha-shared``, 1/α patterns). ``k`` may be an array."""
    if entry_bits < 1:
        raise ValueError(f"entry_bits must be at least 1 (got {entry_bits})")
    groups = groups_of(scheme, particles, alpha)
    kk = np.asarray(k)
    value = groups * np.asarray(position_bits(d, kk)) + particles * entry_bits * kk
    return float(value) if np.ndim(value) == 0 else value


def largest_k(
    scheme: str,
    d: int,
    particles: int,
    entry_bits: int,
    budget_bits: float,
    alpha: float = 1.0,
) -> int:
    """The largest k in 0..d whose upload (:func:`upload_bits`) fits ``budget_bits``: 0 when not
    even one entry fits. The bits are not monotone in k near k = d (the positions' count falls
    again past d/2), so every k is evaluated (one vectorised pass: a millisecond at d = 79,510)
    and the largest that fits is taken; with the same arithmetic as :func:`upload_bits`, so
    ``upload_bits(k) <= budget_bits`` holds for the k returned and fails for every larger one."""
    if not budget_bits >= 0:
        raise ValueError(f"budget_bits must be a number of bits >= 0 (got {budget_bits!r})")
    every = upload_bits(scheme, d, np.arange(d + 1), particles, entry_bits, alpha)
    fits = np.flatnonzero(np.asarray(every) <= budget_bits)
    return int(fits[-1]) if fits.size else 0
