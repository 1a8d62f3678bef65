"""The SVGD core (issue 22, item 1) against closed forms, brute-force sums and the original code."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import fsolve
from scipy.spatial.distance import cdist, pdist, squareform
from scipy.special import logsumexp
from scipy.stats import multivariate_normal

from gossipsim.particles import (
    AdaGradSettings,
    adagrad_step,
    kde_log_density,
    kde_log_density_and_score,
    median_bandwidth,
    pairwise_squared_distances,
    rbf_gram,
    run_svgd,
    svgd_direction,
)


def _original_svgd_kernel(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The kernel of the original SVGD code, written out as it is there (pdist, a loop over d)."""
    pairwise = squareform(pdist(theta)) ** 2
    h = np.sqrt(0.5 * np.median(pairwise) / np.log(theta.shape[0] + 1))
    kxy = np.exp(-pairwise / h**2 / 2)
    dxkxy = -np.matmul(kxy, theta)
    sumkxy = np.sum(kxy, axis=1)
    for i in range(theta.shape[1]):
        dxkxy[:, i] = dxkxy[:, i] + np.multiply(theta[:, i], sumkxy)
    return kxy, dxkxy / (h**2)


def _original_svgd(theta, score, steps, stepsize, alpha=0.9, fudge=1e-6):
    """The update loop of the original SVGD code."""
    theta = np.copy(theta)
    historical_grad = 0.0
    for it in range(steps):
        kxy, dxkxy = _original_svgd_kernel(theta)
        grad_theta = (np.matmul(kxy, score(theta)) + dxkxy) / theta.shape[0]
        if it == 0:
            historical_grad = historical_grad + grad_theta**2
        else:
            historical_grad = alpha * historical_grad + (1 - alpha) * (grad_theta**2)
        theta = theta + stepsize * grad_theta / (fudge + np.sqrt(historical_grad))
    return theta


def test_pairwise_squared_distances_match_scipy_with_batch_axes() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 7, 5))
    y = rng.normal(size=(3, 4, 5))
    got = pairwise_squared_distances(x, y)
    assert got.shape == (3, 7, 4)
    for b in range(3):
        np.testing.assert_allclose(got[b], cdist(x[b], y[b], "sqeuclidean"), atol=1e-12)
    assert np.all(pairwise_squared_distances(x[0], x[0]) >= 0.0)


def test_median_bandwidth_rules_against_their_definitions() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(9, 3))
    squared = pairwise_squared_distances(x, x)
    paper = np.median(pdist(x)) ** 2 / np.log(9)
    assert median_bandwidth(squared, "median") == pytest.approx(paper, rel=1e-12)
    # The original code's exp(-d²/(2 h_code²)) is exp(-d²/h) with h = 2 h_code².
    h_code = np.sqrt(0.5 * np.median(squareform(pdist(x)) ** 2) / np.log(10))
    assert median_bandwidth(squared, "median-svgd-code") == pytest.approx(2 * h_code**2, rel=1e-12)
    # An even number of pairs: the median of the distances is squared, not the median of squares.
    x4 = np.array([[0.0], [1.0], [3.0], [7.0]])
    expected = np.median(pdist(x4)) ** 2 / np.log(4)
    got = median_bandwidth(pairwise_squared_distances(x4, x4))
    assert got == pytest.approx(expected, rel=1e-12)


def test_median_bandwidth_is_finite_where_the_rule_has_nothing_to_measure() -> None:
    one = np.zeros((1, 4))
    same = np.ones((5, 4))
    for rule in ("median", "median-svgd-code"):
        for x in (one, same):
            assert median_bandwidth(pairwise_squared_distances(x, x), rule) == 1.0
    with pytest.raises(ValueError, match="rule must be one of"):
        median_bandwidth(pairwise_squared_distances(one, one), "mean")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bandwidth must be > 0"):
        rbf_gram(np.zeros((2, 2)), 0.0)


def test_svgd_direction_is_equation_6_summed_pair_by_pair() -> None:
    """φ(θ_i) = (1/N) Σ_j [κ(θ_j, θ_i) s_j + ∇_{θ_j} κ(θ_j, θ_i)], the gradient by differences."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 3))
    s = rng.normal(size=(6, 3))
    h = 1.7

    def kernel(a, b):
        return math.exp(-float(np.sum((a - b) ** 2)) / h)

    expected = np.zeros_like(x)
    step = 1e-6
    for i in range(6):
        for j in range(6):
            grad = np.zeros(3)
            for c in range(3):
                e = np.zeros(3)
                e[c] = step
                grad[c] = (kernel(x[j] + e, x[i]) - kernel(x[j] - e, x[i])) / (2 * step)
            expected[i] += kernel(x[j], x[i]) * s[j] + grad
    expected /= 6
    np.testing.assert_allclose(svgd_direction(x, s, bandwidth=h), expected, atol=1e-8)


def test_svgd_direction_equals_the_original_codes_kernel() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(size=(11, 5)) * 2.0
    s = -x
    kxy, dxkxy = _original_svgd_kernel(x)
    expected = (kxy @ s + dxkxy) / 11
    got = svgd_direction(x, s, rule="median-svgd-code")
    np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-13)


def test_svgd_direction_batches_equal_one_set_at_a_time() -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 3, 8, 4))
    s = rng.normal(size=(2, 3, 8, 4))
    got = svgd_direction(x, s)
    for a in range(2):
        for b in range(3):
            np.testing.assert_allclose(got[a, b], svgd_direction(x[a, b], s[a, b]), rtol=1e-13)
    with pytest.raises(ValueError, match="scores must have the particles' shape"):
        svgd_direction(x, s[..., :2])


def test_two_particles_on_a_gaussian_settle_at_the_closed_form_fixed_point() -> None:
    """N = 2 on N(μ, σ²) with h = med²/log 2: φ = 0 exactly at μ ± σ√(log 2).

    With θ = μ ∓ δ the kernel between the two is exp(−4δ²/h) = 1/2, and φ(μ − δ) =
    (1/2)[δ/(2σ²) − log 2/(2δ)], zero at δ² = σ² log 2.
    """
    mu, sigma = 1.5, 0.7

    def phi(flat):
        x = flat.reshape(2, 1)
        return svgd_direction(x, -(x - mu) / sigma**2).ravel()

    root = np.sort(fsolve(phi, np.array([0.0, 4.0]), xtol=1e-13))
    delta = sigma * math.sqrt(math.log(2))
    np.testing.assert_allclose(root, [mu - delta, mu + delta], rtol=1e-9)


def test_adagrad_step_follows_the_original_rule() -> None:
    settings = AdaGradSettings(step_size=0.05, decay=0.9, fudge=1e-6)
    x = np.array([[1.0, -2.0]])
    g1 = np.array([[0.3, -4.0]])
    g2 = np.array([[-0.1, 2.0]])
    x1, h1 = adagrad_step(x, g1, None, settings)
    np.testing.assert_allclose(h1, g1**2)
    np.testing.assert_allclose(x1, x + 0.05 * g1 / (1e-6 + np.abs(g1)))
    x2, h2 = adagrad_step(x1, g2, h1, settings)
    np.testing.assert_allclose(h2, 0.9 * g1**2 + 0.1 * g2**2)
    np.testing.assert_allclose(x2, x1 + 0.05 * g2 / (1e-6 + np.sqrt(h2)))
    for bad in ({"step_size": 0.0}, {"decay": 1.0}, {"fudge": -1.0}):
        with pytest.raises(ValueError):
            AdaGradSettings(**bad)


def test_cumulative_adagrad_sums_the_squared_directions() -> None:
    settings = AdaGradSettings(step_size=0.05, fudge=1e-6, cumulative=True)
    x = np.array([[1.0, -2.0]])
    directions = [np.array([[0.3, -4.0]]), np.array([[-0.1, 2.0]]), np.array([[0.2, 0.5]])]
    history = None
    for count, g in enumerate(directions, start=1):
        moved, history = adagrad_step(x, g, history, settings)
        total = sum(d**2 for d in directions[:count])
        np.testing.assert_allclose(history, total)
        np.testing.assert_allclose(moved, x + 0.05 * g / (1e-6 + np.sqrt(total)))
        x = moved


def test_run_svgd_reproduces_the_original_svgd_code() -> None:
    rng = np.random.default_rng(6)
    mean = np.array([1.0, -1.0, 0.5])
    precision = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 0.5]])

    def score(theta):
        return -(theta - mean) @ precision

    start = rng.normal(size=(20, 3)) * 3.0
    expected = _original_svgd(start, score, steps=40, stepsize=0.05)
    got = run_svgd(start, score, 40, AdaGradSettings(step_size=0.05), rule="median-svgd-code")
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    # A batch of two starting sets moves each as alone.
    batch = np.stack([start, start[::-1] + 1.0])
    got_batch = run_svgd(batch, score, 40, AdaGradSettings(step_size=0.05), rule="median-svgd-code")
    np.testing.assert_allclose(got_batch[0], expected, rtol=1e-10, atol=1e-12)


def test_kde_matches_a_gaussian_mixture_and_its_score_finite_differences() -> None:
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(5, 2))
    points = rng.normal(size=(4, 2)) * 1.5
    lam = 0.55
    expected = logsumexp(
        [multivariate_normal.logpdf(points, c, lam**2 * np.eye(2)) for c in centres], axis=0
    ) - np.log(5)
    log_q, score = kde_log_density_and_score(points, centres, lam)
    np.testing.assert_allclose(log_q, expected, rtol=1e-12)
    np.testing.assert_allclose(kde_log_density(points, centres, lam), expected, rtol=1e-12)
    step = 1e-6
    for c in range(2):
        e = np.zeros(2)
        e[c] = step
        diff = kde_log_density(points + e, centres, lam) - kde_log_density(points - e, centres, lam)
        np.testing.assert_allclose(score[:, c], diff / (2 * step), rtol=1e-6, atol=1e-8)


def test_kde_floor_is_the_reference_codes_per_component_floor() -> None:
    rng = np.random.default_rng(8)
    centres = rng.normal(size=(6, 2))
    points = np.vstack([rng.normal(size=(3, 2)), [[6.0, 6.0]]])
    lam, floor = 0.55, 1e-9
    kernels = np.exp(-cdist(points, centres, "sqeuclidean") / (2 * lam**2)) + floor
    expected = np.log(kernels.mean(axis=1)) - np.log(2 * np.pi * lam**2)
    log_q, score = kde_log_density_and_score(points, centres, lam, floor=floor)
    np.testing.assert_allclose(log_q, expected, rtol=1e-12)
    step = 1e-6
    for c in range(2):
        e = np.zeros(2)
        e[c] = step
        plus = kde_log_density(points + e, centres, lam, floor=floor)
        minus = kde_log_density(points - e, centres, lam, floor=floor)
        np.testing.assert_allclose(score[:, c], (plus - minus) / (2 * step), rtol=1e-5, atol=1e-9)
    with pytest.raises(ValueError, match="floor"):
        kde_log_density(points, centres, lam, floor=-1.0)


def test_kde_in_55_dimensions_where_a_naive_kde_underflows() -> None:
    """Two particles, a point 45 kernel widths from the nearer: every kernel value is below exp(−1000),
    which is 0 in double precision.

    log q = logaddexp(a1, a2) − log 2 − (d/2) log(2πλ²) with a_n = −‖θ − θ_n‖²/(2λ²), and the score
    is w1 (θ1 − θ)/λ² + w2 (θ2 − θ)/λ² with w1 = 1/(1 + exp(a2 − a1)).
    """
    d, lam = 55, 0.55
    rng = np.random.default_rng(9)
    centres = rng.normal(size=(2, d))
    direction = rng.normal(size=d)
    point = centres[0] + 45.0 * lam * direction / np.linalg.norm(direction)
    a = -np.sum((point - centres) ** 2, axis=1) / (2 * lam**2)
    with np.errstate(divide="ignore"):
        naive = np.log(np.mean(np.exp(a)) * (2 * np.pi * lam**2) ** (-d / 2))
    assert naive == -np.inf  # the regime the test is about
    expected_log_q = np.logaddexp(a[0], a[1]) - np.log(2) - 0.5 * d * np.log(2 * np.pi * lam**2)
    w0 = 1.0 / (1.0 + np.exp(a[1] - a[0]))
    expected_score = (w0 * (centres[0] - point) + (1 - w0) * (centres[1] - point)) / lam**2
    log_q, score = kde_log_density_and_score(point[None, :], centres, lam)
    assert log_q[0] == pytest.approx(expected_log_q, rel=1e-12)
    np.testing.assert_allclose(score[0], expected_score, rtol=1e-9)
    assert np.linalg.norm(score[0]) > 1.0  # it still points back to the particles


def test_kde_batches_with_a_bandwidth_per_set() -> None:
    rng = np.random.default_rng(10)
    points = rng.normal(size=(3, 4, 2))
    centres = rng.normal(size=(3, 5, 2))
    lams = np.array([0.3, 0.55, 1.2])
    log_q, score = kde_log_density_and_score(points, centres, lams)
    for b in range(3):
        one_log_q, one_score = kde_log_density_and_score(points[b], centres[b], lams[b])
        np.testing.assert_allclose(log_q[b], one_log_q, rtol=1e-13)
        np.testing.assert_allclose(score[b], one_score, rtol=1e-13)
    with pytest.raises(ValueError, match="bandwidth must be a finite number > 0"):
        kde_log_density(points, centres, 0.0)
