"""KL divergences of Dirichlet (Beta) and Gamma members with large parameters, without the
cancellation of the Bregman form.

The Bregman form KL(q_η ‖ p_λ) = A(λ) − A(η) − (λ − η)ᵀ∇A(η) (eq. 10 of the core paper's family)
subtracts terms of the size of the log-partition: a Beta whose concentrations are 1e102 (a
temperature of 1e-100) has A near 1e104, so every KL below about 1e88 computes as 0 (or as
rounding noise); a run holding half the nodes' factors, with the same proportion of ones as all of
them, has KL 0.15 to its target and was judged converged. Here each KL is a sum of terms that are
each ≥ 0 (or small), with the ratios that decide them computed exactly from the float64 parameters.

With lnΓ(x) = S(x) + R(x), S(x) = (x − ½)ln x − x + ½ln 2π (Stirling) and R the small remainder
(Binet's function, R(x) ≈ 1/(12x)), the Bregman divergence of lnΓ is

    D(x, y) = lnΓ(x) − lnΓ(y) − (x − y)ψ(y) = y·φ(ρ) + ½(ρ − log(1 + ρ)) + D_R(x, y),
    ρ = x/y − 1,  φ(σ) = (1 + σ)log(1 + σ) − σ ≥ 0,  D_R(x, y) = R(x) − R(y) − (x − y)R'(y).

Dirichlet(a) ‖ Dirichlet(c) (a Beta is one of two categories), A = Σa_i, C = Σc_i:

    KL = Σ_i D(c_i, a_i) − D(C, A)
       = (C/A) Σ_i a_i φ(σ_i) + ½[Σ_i (ρ_i − log(1 + ρ_i)) − (ρ − log(1 + ρ))] + Σ_i D_R(c_i, a_i)
         − D_R(C, A),         σ_i = (c_i A − a_i C)/(a_i C),  ρ_i = c_i/a_i − 1,  ρ = C/A − 1,

(the first sum is the Jensen gap of φ, a sum of Bregman divergences of φ, each ≥ 0).
Gamma(a, b) ‖ Gamma(c, d) (shape, rate):

    KL = D(c, a) + c·log(b/d) + a(d − b)/b = (a d/b) φ(ω) + ½(ρ − log(1 + ρ)) + D_R(c, a),
    ω = (c b − a d)/(a d),  ρ = c/a − 1.

The ratios σ_i, ρ_i, ω and the weights are computed from the parameters as exact integers (every
float64 is an integer times a power of two; a = η + 1 exactly) and rounded once, so the KL is
accurate to a few rounding errors of its own size plus about 1e-15 for the remainder terms, at any
magnitude; two identical members give exactly 0. The decomposition holds for every positive
parameter (R and R' by their asymptotic series from 10 on, from SciPy's lnΓ and ψ below, where
they are of the size of log(1/x) and 1/x: each D_R is ≥ 0, R being convex, and its errors are
rounding errors of its own terms).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import digamma, gammaln

from gossipsim.families.exactsum import as_integers

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
#: below this, R and R' from SciPy's lnΓ and ψ; from here on, their asymptotic series
_SERIES_FROM = 10.0
#: below this |σ|, φ(σ) and σ − log(1 + σ) by their power series (no cancellation)
_SMALL = 1e-2


def phi(s: float) -> float:
    """φ(σ) = (1 + σ)log(1 + σ) − σ ≥ 0, accurate to a few rounding errors of its value."""
    if abs(s) < _SMALL:  # Σ_{n≥2} (−1)^n σ^n / (n(n − 1)); 12 terms: below 1e-24 relative
        return sum((-s) ** n / (n * (n - 1)) for n in range(2, 14))
    return (1.0 + s) * math.log1p(s) - s


def log1p_gap(r: float) -> float:
    """r − log(1 + r) ≥ 0, accurate to a few rounding errors of its value."""
    if abs(r) < _SMALL:  # Σ_{n≥2} (−1)^n r^n / n
        return sum((-r) ** n / n for n in range(2, 14))
    return r - math.log1p(r)


def _log_ratio(numerator: int, denominator: int) -> float:
    """log(numerator/denominator) of positive integers of any size (math.log takes them)."""
    return math.log(numerator) - math.log(denominator)


def _phi_of(numerator: int, denominator: int) -> float:
    """φ(σ) for 1 + σ = numerator/denominator (positive integers): by σ, or, where σ ≤ −½ (its
    rounding near −1 would lose log(1 + σ)), by t = 1 + σ and log t from the integers."""
    s = _ratio(numerator - denominator, denominator)
    if s > -0.5:
        return phi(s)
    t = _ratio(numerator, denominator)
    return t * _log_ratio(numerator, denominator) - t + 1.0


def _gap_of(numerator: int, denominator: int) -> float:
    """r − log(1 + r) for 1 + r = numerator/denominator (positive integers), as :func:`_phi_of`."""
    r = _ratio(numerator - denominator, denominator)
    if r > -0.5:
        return log1p_gap(r)
    return r - _log_ratio(numerator, denominator)


def _remainder(x: float) -> float:
    """R(x) = lnΓ(x) − (x − ½)ln x + x − ½ln 2π (x > 0)."""
    if x < _SERIES_FROM:
        return float(gammaln(x)) - (x - 0.5) * math.log(x) + x - _HALF_LOG_2PI
    y = 1.0 / (x * x)
    return (
        1 / 12 - y * (1 / 360 - y * (1 / 1260 - y * (1 / 1680 - y * (1 / 1188 - y * 691 / 360360))))
    ) / x


def _remainder_slope(x: float) -> float:
    """R'(x) = ψ(x) − ln x + 1/(2x) (x > 0)."""
    if x < _SERIES_FROM:
        return float(digamma(x)) - math.log(x) + 0.5 / x
    y = 1.0 / (x * x)
    return -y * (
        1 / 12 - y * (1 / 120 - y * (1 / 252 - y * (1 / 240 - y * (1 / 132 - y * 691 / 32760))))
    )


def _remainder_divergence(x: float, y: float, difference: float) -> float:
    """D_R(x, y) = R(x) − R(y) − (x − y)R'(y), ``difference`` = x − y (rounded once)."""
    return _remainder(x) - _remainder(y) - difference * _remainder_slope(y)


def _integers(values: np.ndarray) -> tuple[list[int], int, int]:
    """Float64 ``values`` exactly as integers times one power of two 2^q: (the integers, the
    integer of 1, q)."""
    flat = np.concatenate([np.asarray(values, dtype=float).ravel(), np.ones(1)])
    integers, q = as_integers(flat)
    out = [int(n) for n in integers]
    return out[:-1], out[-1], q


def _ratio(numerator: int, denominator: int, q: int = 0) -> float:
    """numerator·2^q / denominator correctly rounded (CPython's int / int is), ±inf beyond
    float64's range."""
    if q >= 0:
        numerator <<= q
    else:
        denominator <<= -q
    try:
        return numerator / denominator
    except OverflowError:
        return math.inf if (numerator > 0) == (denominator > 0) else -math.inf


def dirichlet_kl(eta_q: np.ndarray, eta_p: np.ndarray) -> float:
    """KL(Dir(a) ‖ Dir(c)), a = η_q + 1, c = η_p + 1 (see the module's text): in float64
    arithmetic, vectorised over the categories, where every concentration is at most
    :data:`FLOAT_RATIOS_UP_TO` (:func:`_dirichlet_kl_float`), else with exact ratios."""
    q_eta, p_eta = np.asarray(eta_q, dtype=float), np.asarray(eta_p, dtype=float)
    if max(np.max(np.abs(q_eta)), np.max(np.abs(p_eta))) <= FLOAT_RATIOS_UP_TO:
        return float(_dirichlet_kl_float(q_eta[None, :] + 1.0, p_eta[None, :] + 1.0)[0])
    integers, one, q = _integers(np.concatenate([q_eta, p_eta]))
    na = [n + one for n in integers[: q_eta.size]]
    nc = [n + one for n in integers[q_eta.size :]]
    total_a, total_c = sum(na), sum(nc)
    jensen = gaps = remainders = 0.0
    for ai, ci in zip(na, nc, strict=True):
        if ci * total_a != ai * total_c:
            jensen += _ratio(total_c * ai, total_a, q) * _phi_of(ci * total_a, ai * total_c)
        gaps += _gap_of(ci, ai)
        remainders += _remainder_divergence(
            _ratio(ci, 1, q), _ratio(ai, 1, q), _ratio(ci - ai, 1, q)
        )
    gaps -= _gap_of(total_c, total_a)
    remainders -= _remainder_divergence(
        _ratio(total_c, 1, q), _ratio(total_a, 1, q), _ratio(total_c - total_a, 1, q)
    )
    return jensen + 0.5 * gaps + remainders


def gamma_kl(eta_q: np.ndarray, eta_p: np.ndarray) -> float:
    """KL(Gamma(a, b) ‖ Gamma(c, d)), η = (shape − 1, −rate) (see the module's text)."""
    (eq1, eq2, ep1, ep2), one, q = _integers(np.array([eta_q[0], eta_q[1], eta_p[0], eta_p[1]]))
    a, b, c, d = eq1 + one, -eq2, ep1 + one, -ep2
    jensen = _ratio(a * d, b, q) * _phi_of(c * b, a * d) if c * b != a * d else 0.0
    remainder = _remainder_divergence(_ratio(c, 1, q), _ratio(a, 1, q), _ratio(c - a, 1, q))
    return jensen + 0.5 * _gap_of(c, a) + remainder


#: the largest concentration for which the ratios σ_i are computed in float64: their rounding errors
#: (a few ε) change a KL near 1e-9 nats by about ε·√(1e-9·α) ≤ 2e-13 nats, and a KL of exactly
#: proportional members by α·ε² ≤ 1e-16
FLOAT_RATIOS_UP_TO = 2.0**50


def _phis(s: np.ndarray) -> np.ndarray:
    """:func:`phi` of each entry (σ > −1)."""
    small = np.abs(s) < _SMALL
    series = np.zeros_like(s)
    for n in range(13, 1, -1):  # Horner in −σ: Σ_{n≥2} (−σ)^n / (n(n − 1))
        series = (series + 1.0 / (n * (n - 1))) * (-s) if n > 2 else (series + 0.5) * s * s
    with np.errstate(all="ignore"):
        direct = (1.0 + s) * np.log1p(s) - s
    return np.where(small, series, direct)


def _gaps(r: np.ndarray) -> np.ndarray:
    """:func:`log1p_gap` of each entry (r > −1)."""
    small = np.abs(r) < _SMALL
    series = np.zeros_like(r)
    for n in range(13, 1, -1):  # Σ_{n≥2} (−r)^n / n
        series = (series + 1.0 / n) * (-r) if n > 2 else (series + 0.5) * r * r
    with np.errstate(all="ignore"):
        direct = r - np.log1p(r)
    return np.where(small, series, direct)


def _remainders(x: np.ndarray) -> np.ndarray:
    """:func:`_remainder` of each entry."""
    x = np.asarray(x, dtype=float)
    out = np.empty_like(x)
    near = x < _SERIES_FROM
    low = x[near]
    out[near] = gammaln(low) - (low - 0.5) * np.log(low) + low - _HALF_LOG_2PI
    high = x[~near]
    y = 1.0 / (high * high)
    out[~near] = (
        1 / 12 - y * (1 / 360 - y * (1 / 1260 - y * (1 / 1680 - y * (1 / 1188 - y * 691 / 360360))))
    ) / high
    return out


def _remainder_slopes(x: np.ndarray) -> np.ndarray:
    """:func:`_remainder_slope` of each entry."""
    x = np.asarray(x, dtype=float)
    out = np.empty_like(x)
    near = x < _SERIES_FROM
    low = x[near]
    out[near] = digamma(low) - np.log(low) + 0.5 / low
    high = x[~near]
    y = 1.0 / (high * high)
    out[~near] = -y * (
        1 / 12 - y * (1 / 120 - y * (1 / 252 - y * (1 / 240 - y * (1 / 132 - y * 691 / 32760))))
    )
    return out


def _dirichlet_kl_float(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """:func:`dirichlet_kl` in float64 of rows of concentrations (categories on the last axis, up
    to :data:`FLOAT_RATIOS_UP_TO`): σ_i = (c_i A − a_i C)/(a_i C) with error-free products
    (:func:`difference_of_products`), and 1 + σ_i = c_i A/(a_i C) where σ_i ≤ −½."""
    total_a = np.sum(a, axis=-1, keepdims=True)
    total_c = np.sum(c, axis=-1, keepdims=True)
    wide_a = np.broadcast_to(total_a, a.shape)
    wide_c = np.broadcast_to(total_c, a.shape)
    sigma = difference_of_products(c, wide_a, a, wide_c) / (a * wide_c)
    with np.errstate(all="ignore"):
        t = (c * wide_a) / (a * wide_c)
        low = t * np.log(t) - t + 1.0
    phis = np.where(sigma > -0.5, _phis(np.maximum(sigma, -0.5)), low)
    jensen = np.sum((wide_c / wide_a) * a * phis, axis=-1)
    every_a = np.concatenate([a, total_a], axis=-1)
    every_c = np.concatenate([c, total_c], axis=-1)
    rho = (every_c - every_a) / every_a
    with np.errstate(all="ignore"):
        gaps = np.where(rho > -0.5, _gaps(np.maximum(rho, -0.5)), rho - np.log(every_c / every_a))
    d_r = (
        _remainders(every_c)
        - _remainders(every_a)
        - (every_c - every_a) * _remainder_slopes(every_a)
    )
    gap = np.sum(gaps[..., :-1], axis=-1) - gaps[..., -1]
    remainder = np.sum(d_r[..., :-1], axis=-1) - d_r[..., -1]
    return jensen + 0.5 * gap + remainder


def dirichlet_kl_rows(eta_q: np.ndarray, eta_p: np.ndarray) -> np.ndarray:
    """:func:`dirichlet_kl` of each pair of rows (shape (n, K)): in float64 at once for the rows
    whose concentrations are at most :data:`FLOAT_RATIOS_UP_TO`, with exact ratios for the others."""
    q = np.asarray(eta_q, dtype=float)
    p = np.asarray(eta_p, dtype=float)
    small = np.maximum(np.max(np.abs(q), axis=-1), np.max(np.abs(p), axis=-1)) <= FLOAT_RATIOS_UP_TO
    out = np.empty(q.shape[0])
    if small.any():
        out[small] = _dirichlet_kl_float(q[small] + 1.0, p[small] + 1.0)
    for i in np.flatnonzero(~small).tolist():
        out[i] = dirichlet_kl(q[i], p[i])
    return out


def gamma_kl_rows(eta_q: np.ndarray, eta_p: np.ndarray) -> np.ndarray:
    """:func:`gamma_kl` of each pair of rows (shape (n, 2))."""
    return np.array([gamma_kl(q, p) for q, p in zip(eta_q, eta_p, strict=True)], dtype=float)


#: Veltkamp's splitting constant 2^27 + 1, and the magnitude below which splitting cannot overflow
_SPLITTER = 134217729.0
_SPLIT_LIMIT = 2.0**995


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a·b as p + e exactly, p the rounded product and e its error (Dekker's product with
    Veltkamp's splitting; e is 0 where a factor or the product is too large to split)."""
    p = a * b

    def split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c = _SPLITTER * x
        high = c - (c - x)
        return high, x - high

    a_high, a_low = split(a)
    b_high, b_low = split(b)
    e = ((a_high * b_high - p) + a_high * b_low + a_low * b_high) + a_low * b_low
    safe = (np.abs(a) < _SPLIT_LIMIT) & (np.abs(b) < _SPLIT_LIMIT) & np.isfinite(p)
    return p, np.where(safe, e, 0.0)


def difference_of_products(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray
) -> np.ndarray:
    """a·b − c·d to a few rounding errors of its own size even when the products nearly cancel:
    the rounded products' difference plus their exact errors'."""
    with np.errstate(all="ignore"):
        p, p_error = _two_product(a, b)
        q, q_error = _two_product(c, d)
        return (p - q) + (p_error - q_error)
