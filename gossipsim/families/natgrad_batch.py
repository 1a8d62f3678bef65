"""The natural-gradient estimators of :mod:`.natgrad` for a batch of members at once (a leading
run axis B): what the vectorised engine's natural-gradient kernel steps every run with.

Each function is the batched form of a one-member function, with the same formula:

* :func:`beta_reinforce` — :meth:`~.expfam.Beta.reinforce_mean_gradient` (eqs. 18-20, the 2 × 2
  Fisher inverted in closed form);
* :func:`gaussian_mean_gradient` — the Gaussian families' ``mean_gradient`` (Bonnet and Price);
* :func:`padded_rows` — node data of unequal sizes as one zero-padded array with a mask, so that the
  runs' holders (different nodes) are handled in one array operation.

Padded entries carry zero weight, so they add exactly nothing to any sum.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import digamma

from gossipsim.families.expfam import trigamma
from gossipsim.families.gaussian import GaussianDiagonal, GaussianFull, _sym


def padded_rows(arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """K arrays of shape (n_k, ...) as one (K, max n_k, ...) array padded with zeros, and the
    (K, max n_k) mask of real rows."""
    arrays = [np.asarray(a, dtype=float) for a in arrays]
    width = max((a.shape[0] for a in arrays), default=0)
    tail = next((a.shape[1:] for a in arrays if a.ndim), ())
    out = np.zeros((len(arrays), width, *tail))
    mask = np.zeros((len(arrays), width), dtype=bool)
    for k, a in enumerate(arrays):
        out[k, : a.shape[0]] = a
        mask[k, : a.shape[0]] = True
    return out, mask


def beta_reinforce(
    eta: np.ndarray,
    log_theta: np.ndarray,
    log_one_minus: np.ndarray,
    weights: np.ndarray,
    counts: Sequence[int],
    scale: float,
) -> np.ndarray:
    """F(η_b)⁻¹ · scale · Σ_s w_bs (s(θ_bs) − μ_b) for each row b (eqs. 18-20), shape (B, 2):
    :meth:`~.expfam.Beta.reinforce_mean_gradient` row by row, with its arithmetic (each row's two
    sums are the same dot products of its first ``counts[b]`` draws, stacked by count; the rest
    elementwise), so a run's steps are the event engine's bit for bit. ``log_theta``, ``log_one_minus`` and
    ``weights`` are (B, N); a row without draws gets a zero gradient."""
    a, b = eta[:, 0] + 1.0, eta[:, 1] + 1.0
    args = np.stack([a, b, a + b])
    ta, tb, tab = trigamma(args)
    pa, pb, pab = digamma(args)
    first, second = log_theta - (pa - pab)[:, None], log_one_minus - (pb - pab)[:, None]
    s1, s2 = np.zeros(eta.shape[0]), np.zeros(eta.shape[0])
    sizes = np.asarray(counts, dtype=np.int64)
    for count in np.unique(sizes[sizes > 0]).tolist():
        # rows with this many draws: a stack of dot products, each the BLAS dot of its row (the
        # one-run ``w @ x``, the same bits: a padded or longer row would round differently)
        rows = np.flatnonzero(sizes == count)
        w = weights[rows, None, :count]
        s1[rows] = scale * (w @ first[rows, :count, None])[:, 0, 0]
        s2[rows] = scale * (w @ second[rows, :count, None])[:, 0, 0]
    f11, f22, f12 = ta - tab, tb - tab, -tab
    det = f11 * f22 - f12 * f12
    return np.stack([(f22 * s1 - f12 * s2) / det, (f11 * s2 - f12 * s1) / det], axis=1)


def gaussian_mean_gradient(
    family: GaussianFull | GaussianDiagonal,
    mean: np.ndarray,
    expected_grad: np.ndarray,
    expected_hess: np.ndarray,
) -> np.ndarray:
    """∇_μ E_q[f] for each row from E_q[∇f] (B, d) and E_q[∇²f]: (B, d, d) for the full family,
    its diagonal (B, d) for the diagonal one (the families' ``mean_gradient``, Bonnet and Price):
    ∇_{μ₂} = ½ E[∇²f], ∇_{μ₁} = E[∇f] − E[∇²f] m."""
    if isinstance(family, GaussianDiagonal):
        return np.concatenate([expected_grad - expected_hess * mean, 0.5 * expected_hess], axis=1)
    hess = _sym(expected_hess)
    g1 = expected_grad - np.einsum("bij,bj->bi", hess, mean)
    return np.concatenate([g1, (0.5 * hess).reshape(hess.shape[0], -1)], axis=1)
