"""FedUAB's aggregation rules and uncertainty split (paper 004, eqs. 7, 8, 11-12; issue 35)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate

from gossipsim.families.conflation import (
    KEEP_PREVIOUS,
    ConflationAggregate,
    add_factor,
    average,
    conflate,
    remove_factor,
    uncertainty_matrices,
    uncertainty_traces,
)

EPS = np.finfo(float).eps


def _clients(k: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(k, d)), rng.uniform(0.2, 3.0, size=(k, d)), rng.integers(1, 50, size=k)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_conflation_is_the_normalized_product_of_the_weighted_densities(seed):
    """Eq. (8) = ∏ N(μ_k, σ_k²)^{n_k/n}, normalized, by 1-D quadrature: mean and variance."""
    means, variances, counts = _clients(3, 1, seed)
    fractions = counts / counts.sum()
    mean, variance = conflate(means, variances, counts)

    def log_density(x: float) -> float:
        return float(np.sum(fractions * -0.5 * ((x - means[:, 0]) ** 2 / variances[:, 0])))

    top = log_density(float(mean[0]))  # the mode of a Gaussian: keeps exp() in range
    lo, hi = float(mean[0] - 30 * np.sqrt(variance[0])), float(mean[0] + 30 * np.sqrt(variance[0]))

    def moment(j: int, centre: float = 0.0) -> float:
        def f(x: float) -> float:
            return (x - centre) ** j * np.exp(log_density(x) - top)

        return integrate.quad(f, lo, hi, epsabs=0.0, epsrel=1e-12, limit=200)[0]

    z = moment(0)
    quad_mean = moment(1) / z
    np.testing.assert_allclose(mean[0], quad_mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(variance[0], moment(2, quad_mean) / z, rtol=1e-9)


def test_conflating_one_client_returns_it_bit_for_bit():
    means, variances, _ = _clients(1, 7, 3)
    mean, variance = conflate(means, variances, np.array([17.0]))
    assert np.array_equal(mean, means[0]) and np.array_equal(variance, variances[0])


def test_identical_clients_conflate_to_themselves_and_the_weights_are_data_fractions():
    means, variances, _ = _clients(1, 4, 4)
    mean, variance = conflate(np.repeat(means, 5, 0), np.repeat(variances, 5, 0), np.arange(1, 6))
    np.testing.assert_allclose(mean, means[0], rtol=1e-14)
    np.testing.assert_allclose(variance, variances[0], rtol=1e-14)
    # counts and their fractions give the same conflation; precision-weighted, not a plain product
    means, variances, counts = _clients(4, 3, 5)
    a = conflate(means, variances, counts)
    b = conflate(means, variances, counts / counts.sum())
    np.testing.assert_allclose(a, b, rtol=1e-14)
    f = (counts / counts.sum())[:, None]
    np.testing.assert_allclose(a[1], 1 / (f / variances).sum(0), rtol=1e-14)
    np.testing.assert_allclose(a[0], (f * means / variances).sum(0) * a[1], rtol=1e-13)


def test_the_running_aggregate_has_the_moments_of_eq_8():
    means, variances, counts = _clients(6, 5, 6)
    running = ConflationAggregate.empty(5)
    for m, v, n in zip(means, variances, counts, strict=True):
        running = add_factor(running, m, v, float(n))
    np.testing.assert_allclose(running.moments(), conflate(means, variances, counts), rtol=1e-13)
    whole = ConflationAggregate.of(means, variances, counts)
    np.testing.assert_allclose(whole.precision, running.precision, rtol=1e-14)
    with pytest.raises(ValueError, match="aggregate"):
        ConflationAggregate.empty(5).moments()


def test_add_then_remove_a_factor_returns_the_aggregate_up_to_rounding():
    """(P + a) − a differs from P by at most two roundings of numbers ≤ |P| + |a| in size:
    ≤ 2ε(|P| + |a|) per entry (the tolerance here, for P, S and W alike)."""
    means, variances, counts = _clients(5, 8, 7)
    base = ConflationAggregate.of(means[:4], variances[:4], counts[:4])
    m, v, n = means[4], variances[4], float(counts[4])
    outcome = remove_factor(add_factor(base, m, v, n), m, v, n)
    assert outcome.count == 0 and not outcome.outside.any()
    for got, was, part in [
        (outcome.aggregate.precision, base.precision, n / v),
        (outcome.aggregate.shift, base.shift, n * m / v),
        (outcome.aggregate.weight, base.weight, n),
    ]:
        assert np.all(np.abs(got - was) <= 2 * EPS * (np.abs(was) + np.abs(part)))


def test_a_removal_outside_the_family_is_reported_and_keeps_the_previous_state():
    means, variances, counts = _clients(2, 4, 8)
    agg = ConflationAggregate.of(means, variances, counts)
    # a stale factor: the client's variance on coordinates 1 and 3 is now far smaller than when
    # it was added, so its precision exceeds the aggregate's there
    stale = variances[1].copy()
    stale[[1, 3]] = 1e-3
    outcome = remove_factor(agg, means[1], stale, float(counts[1]))
    assert outcome.outside.tolist() == [False, True, False, True]
    assert outcome.count == 2 and outcome.rule == KEEP_PREVIOUS
    for name in ("precision", "shift", "weight"):
        got, was = getattr(outcome.aggregate, name), getattr(agg, name)
        assert np.array_equal(got[[1, 3]], was[[1, 3]])
    ok = remove_factor(agg, means[1], variances[1], float(counts[1])).aggregate
    np.testing.assert_allclose(outcome.aggregate.precision[[0, 2]], ok.precision[[0, 2]])
    # removing the only client: precision exactly 0 everywhere, all reported, nothing raised
    one = ConflationAggregate.of(means[:1], variances[:1], counts[:1])
    last = remove_factor(one, means[0], variances[0], float(counts[0]), rtol=0.0)
    assert last.outside.all() and np.array_equal(last.aggregate.precision, one.precision)
    # a weight removed twice: W ≤ 0 is outside too
    twice = remove_factor(agg, means[1], variances[1] * 1e3, float(counts.sum()))
    assert twice.outside.all()


def test_the_average_rule_is_eq_7_and_shrinks_the_variance_by_k_a_round():
    means, variances, counts = _clients(4, 3, 9)
    f = (counts / counts.sum())[:, None]
    mean, variance = average(means, variances, counts)
    np.testing.assert_allclose(mean, (f * means).sum(0), rtol=1e-14)
    np.testing.assert_allclose(variance, ((f * np.sqrt(variances)) ** 2).sum(0), rtol=1e-14)
    # r rounds of K identical equal-weight clients: σ² K^{-r} (σ · K^{-r/2}); conflation keeps σ²
    k, rounds = 5, 4
    m, v = np.array([[0.3, -1.0]]), np.array([[2.0, 0.5]])
    avg, conf = (m, v), (m, v)
    for _ in range(rounds):
        avg = average(np.repeat(avg[0], k, 0), np.repeat(avg[1], k, 0), np.ones(k))
        avg = (avg[0][None], avg[1][None])
        conf = conflate(np.repeat(conf[0], k, 0), np.repeat(conf[1], k, 0), np.ones(k))
        conf = (conf[0][None], conf[1][None])
    np.testing.assert_allclose(avg[1][0], v[0] * float(k) ** -rounds, rtol=1e-13)
    np.testing.assert_allclose(np.sqrt(avg[1][0]), np.sqrt(v[0]) * k ** (-rounds / 2), rtol=1e-13)
    np.testing.assert_allclose(conf[1][0], v[0], rtol=1e-13)
    # unequal weights: the factor is Σ (n_k/n)² per round
    w = np.array([1.0, 2.0, 7.0])
    _, once = average(np.zeros((3, 1)), np.full((3, 1), 2.0), w)
    np.testing.assert_allclose(once, 2.0 * np.sum((w / w.sum()) ** 2), rtol=1e-14)


def _predictive_covariance(p: np.ndarray) -> np.ndarray:
    mean = p.mean(axis=0)
    return np.einsum("ni,ij->nij", mean, np.eye(p.shape[2])) - np.einsum("ni,nj->nij", mean, mean)


@pytest.mark.parametrize(("z", "n", "c", "seed"), [(1, 3, 2, 0), (7, 11, 4, 1), (30, 5, 10, 2)])
def test_the_two_parts_sum_to_the_predictive_covariance(z, n, c, seed):
    p = np.random.default_rng(seed).dirichlet(np.full(c, 0.7), size=(z, n))
    parts = uncertainty_matrices(p)
    assert parts.aleatoric.shape == parts.epistemic.shape == (n, c, c)
    np.testing.assert_allclose(parts.aleatoric + parts.epistemic, _predictive_covariance(p),
                               rtol=0, atol=1e-12)  # fmt: skip
    traces = uncertainty_traces(p)
    np.testing.assert_allclose(traces.aleatoric, np.trace(parts.aleatoric, axis1=1, axis2=2),
                               rtol=0, atol=1e-12)  # fmt: skip
    np.testing.assert_allclose(traces.epistemic, np.trace(parts.epistemic, axis1=1, axis2=2),
                               rtol=0, atol=1e-12)  # fmt: skip
    assert np.all(np.linalg.eigvalsh(parts.epistemic) > -1e-12)


def test_one_hot_predictions_have_no_aleatoric_part_and_agreeing_samples_no_epistemic_part():
    rng = np.random.default_rng(10)
    one_hot = np.eye(4)[rng.integers(0, 4, size=(3, 6))]  # (Z=3, N=6, C=4), samples disagree
    assert np.all(uncertainty_matrices(one_hot).aleatoric == 0)
    assert np.all(uncertainty_traces(one_hot).aleatoric == 0)
    assert uncertainty_traces(one_hot).epistemic.max() > 0
    agree = np.repeat(rng.dirichlet(np.ones(5), size=(1, 4)), 3, axis=0)
    assert np.all(uncertainty_matrices(agree).epistemic == 0)
    assert np.all(uncertainty_traces(agree).epistemic == 0)


@pytest.mark.parametrize(
    ("means", "variances", "weights", "name"),
    [
        (np.zeros((0, 2)), np.ones((0, 2)), np.ones(0), "means"),
        (np.zeros((2, 2)), np.ones((2, 3)), np.ones(2), "variances"),
        (np.zeros((2, 2)), np.ones((2, 2)), np.ones(3), "weights"),
        (np.zeros(2), np.ones(2), np.ones(2), "means"),
        (np.zeros((2, 2)), np.array([[1.0, 0.0], [1.0, 1.0]]), np.ones(2), "variances"),
        (np.zeros((2, 2)), -np.ones((2, 2)), np.ones(2), "variances"),
        (np.zeros((2, 2)), np.ones((2, 2)), np.array([1.0, -1.0]), "weights"),
        (np.zeros((2, 2)), np.ones((2, 2)), np.zeros(2), "weights"),
        (np.full((2, 2), np.nan), np.ones((2, 2)), np.ones(2), "means"),
    ],
)
def test_bad_clients_are_a_value_error_naming_the_argument(means, variances, weights, name):
    for rule in (conflate, average, ConflationAggregate.of):
        with pytest.raises(ValueError, match=name):
            rule(means, variances, weights)


def test_bad_factors_and_probabilities_are_a_value_error_naming_the_argument():
    agg = ConflationAggregate.empty(3)
    for kwargs, name in [
        ({"mean": np.zeros(2), "variance": np.ones(3), "weight": 1.0}, "mean"),
        ({"mean": np.zeros(3), "variance": np.zeros(3), "weight": 1.0}, "variance"),
        ({"mean": np.zeros(3), "variance": np.ones(3), "weight": 0.0}, "weight"),
        ({"mean": np.zeros(3), "variance": np.ones(3), "weight": -2.0}, "weight"),
    ]:
        for rule in (add_factor, remove_factor):
            with pytest.raises(ValueError, match=name):
                rule(agg, **kwargs)
    with pytest.raises(ValueError, match="rtol"):
        remove_factor(agg, np.zeros(3), np.ones(3), 1.0, rtol=-1.0)
    for bad in (np.ones((2, 3)), np.zeros((0, 2, 3)), -np.ones((1, 1, 2)), np.full((1, 2, 2), 0.7)):
        with pytest.raises(ValueError, match="probabilities"):
            uncertainty_matrices(bad)
        with pytest.raises(ValueError, match="probabilities"):
            uncertainty_traces(bad)
