"""The compression math of paper 000 (issue 32, item 1): bits of an upload (eqs. 9-11) against
hand counts and exact binomials, the budget solver's maximality, top-k sparsification against
brute force, and the stochastic quantizer (eqs. 12-13): unbiased within standard errors, no more
levels than its bits name, never beyond a_max."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gossipsim.compression import (
    encode,
    groups_of,
    largest_k,
    magnitude_levels,
    patterns,
    position_bits,
    quantize,
    quantize_with,
    sparsify,
    top_k_mask,
    upload_bits,
)


@pytest.mark.parametrize(
    ("d", "k", "bits"),
    [(5, 0, 0), (5, 5, 0), (2, 1, 1), (4, 1, 2), (8, 1, 3), (8, 7, 3), (16, 15, 4), (1024, 1, 10)],
)
def test_position_bits_are_whole_where_the_binomial_is_a_power_of_two(d, k, bits):
    assert position_bits(d, k) == pytest.approx(bits, abs=1e-9)


@pytest.mark.parametrize("d", [1, 2, 3, 10, 99, 1000])
def test_position_bits_by_log_gamma_are_those_of_the_exact_binomial(d):
    exact = np.array([math.log2(math.comb(d, k)) for k in range(d + 1)])
    np.testing.assert_allclose(position_bits(d, np.arange(d + 1)), exact, rtol=1e-12, atol=1e-9)


def test_upload_bits_are_the_papers_equations_by_hand():
    # d = 4, k = 1: log2 C(4, 1) = 2 bits of positions; N_p = 4 particles of N_b = 5 bits an entry
    assert upload_bits("per-particle", 4, 1, 4, 5) == pytest.approx(4 * (2 + 5))  # eq. 9: 28
    assert upload_bits("shared", 4, 1, 4, 5) == pytest.approx(2 + 4 * 5)  # eq. 10: 22
    assert upload_bits("alpha-shared", 4, 1, 4, 5, alpha=0.5) == pytest.approx(2 * 2 + 20)  # 24
    # d = 8, k = 7: C(8, 7) = 8, 3 bits a pattern; 2 particles of 3 bits an entry
    assert upload_bits("per-particle", 8, 7, 2, 3) == pytest.approx(2 * (3 + 21))
    assert upload_bits("shared", 8, 0, 2, 3) == 0.0


@pytest.mark.parametrize("particles", [1, 2, 6, 10])
def test_alpha_shared_is_per_particle_at_1_over_n_and_shared_at_1(particles):
    k = np.arange(0, 51)
    np.testing.assert_array_equal(
        upload_bits("alpha-shared", 50, k, particles, 5, alpha=1 / particles),
        upload_bits("per-particle", 50, k, particles, 5),
    )
    np.testing.assert_array_equal(
        upload_bits("alpha-shared", 50, k, particles, 5, alpha=1.0),
        upload_bits("shared", 50, k, particles, 5),
    )


@pytest.mark.parametrize("scheme", ["per-particle", "shared", "alpha-shared"])
def test_the_budget_solver_fits_and_is_maximal(scheme):
    """Brute force over every k with the exact binomial: the k returned fits and no larger one
    does (the bits are not monotone near k = d, so "k + 1 exceeds" is checked for every k' > k)."""
    rng = np.random.default_rng(7)
    for _ in range(60):
        d = int(rng.integers(1, 120))
        particles = int(rng.choice([1, 2, 4, 6]))
        entry_bits = int(rng.integers(2, 9))
        alpha = 0.5 if particles % 2 == 0 else 1.0
        budget = float(
            rng.uniform(0, 1.2) * upload_bits(scheme, d, d, particles, entry_bits, alpha)
        )
        k = largest_k(scheme, d, particles, entry_bits, budget, alpha)
        groups = groups_of(scheme, particles, alpha)
        exact = [
            groups * math.log2(math.comb(d, j)) + particles * entry_bits * j for j in range(d + 1)
        ]
        assert exact[k] <= budget + 1e-9
        assert all(b > budget - 1e-9 for b in exact[k + 1 :]), (d, k, budget)


def test_a_budget_below_one_entry_gives_no_entry_and_the_papers_budgets_fit():
    d = 79_510
    assert largest_k("shared", d, 10, 5, position_bits(d, 1) + 10 * 5 - 1) == 0
    for factor in (0.5, 1, 5, 10):
        for scheme, alpha in (("per-particle", 1.0), ("shared", 1.0), ("alpha-shared", 0.5)):
            k = largest_k(scheme, d, 10, 5, factor * d, alpha)
            assert upload_bits(scheme, d, k, 10, 5, alpha) <= factor * d
            assert upload_bits(scheme, d, k + 1, 10, 5, alpha) > factor * d
    # shared sends one pattern, so it keeps at least as many entries as per-particle
    assert largest_k("shared", d, 10, 5, d) >= largest_k("per-particle", d, 10, 5, d)


@pytest.mark.parametrize(
    ("scheme", "particles", "alpha", "match"),
    [
        ("alpha-shared", 10, 0.3, "whole number of groups"),
        ("alpha-shared", 10, 1 / 3, "whole number of groups"),
        ("alpha-shared", 10, 0.0, r"in \[1/N_p, 1\]"),
        ("alpha-shared", 10, 1.5, r"in \[1/N_p, 1\]"),
        ("top-k", 10, 1.0, "scheme must be one of"),
    ],
)
def test_bad_alpha_or_scheme_is_one_line(scheme, particles, alpha, match):
    with pytest.raises(ValueError, match=match):
        groups_of(scheme, particles, alpha)


def _brute_top_k(scores: np.ndarray, k: int) -> set[int]:
    order = sorted(range(scores.size), key=lambda i: (-scores[i], i))
    return set(order[:k])


@pytest.mark.parametrize(
    ("scheme", "alpha", "groups"),
    [("per-particle", 1.0, 6), ("shared", 1.0, 1), ("alpha-shared", 1 / 3, 3)],
)
def test_sparsify_keeps_the_top_k_of_each_pattern_by_brute_force(scheme, alpha, groups):
    rng = np.random.default_rng(3)
    delta = rng.normal(size=(4, 6, 25))  # 4 runs, 6 particles, d = 25
    delta[0, :, :5] = 0.5  # ties: the lower coordinate wins
    k = 7
    sparse, mask = sparsify(delta, scheme, k, alpha)
    assert np.array_equal(sparse, np.where(mask, delta, 0.0))
    size = 6 // groups
    for run in range(4):
        for g in range(groups):
            rows = range(g * size, (g + 1) * size)
            scores = np.abs(delta[run, list(rows)]).sum(axis=0)
            kept = _brute_top_k(scores, k)
            for n in rows:
                assert set(np.flatnonzero(mask[run, n])) == kept
        alone, _ = sparsify(delta[run], scheme, k, alpha)  # a run of a batch as it would alone
        assert np.array_equal(alone, sparse[run])


def test_sparsify_keeps_everything_at_k_equal_d_and_nothing_at_0():
    delta = np.random.default_rng(0).normal(size=(3, 9))
    assert np.array_equal(sparsify(delta, "shared", 9)[0], delta)
    assert not sparsify(delta, "per-particle", 0)[1].any()


@pytest.mark.parametrize("entry_bits", [2, 3, 5])
def test_the_quantizer_is_unbiased_within_four_standard_errors(entry_bits):
    """E[Q(x)] = x inside [0, a_max]: the mean of n draws within 4 standard errors, the standard
    error from the quantizer's own variance δ² p (1 − p) (p the chance of rounding up)."""
    a_max, n = 2.0, 40_000
    levels = magnitude_levels(entry_bits)
    step = a_max / (levels - 1)
    x = np.array([0.0, 0.013, -0.4, 0.77, step, -1.999, 2.0])
    rng = np.random.default_rng(11)
    draws = quantize(np.broadcast_to(x, (n, x.size)).copy(), entry_bits, a_max, rng)
    frac = np.abs(x) / step - np.floor(np.abs(x) / step)
    se = step * np.sqrt(frac * (1 - frac) / n)
    assert np.all(np.abs(draws.mean(axis=0) - x) <= 4 * se + 1e-12)


@pytest.mark.parametrize("entry_bits", [2, 4, 5, 8])
def test_the_quantizer_uses_only_the_levels_its_bits_name_and_never_passes_a_max(entry_bits):
    a_max = 0.7
    x = np.random.default_rng(5).normal(scale=1.0, size=20_000)  # many beyond a_max
    q = quantize(x, entry_bits, a_max, np.random.default_rng(6))
    assert np.all(np.abs(q) <= a_max)
    step = a_max / (magnitude_levels(entry_bits) - 1)
    levels = np.unique(np.round(np.abs(q) / step, 9))
    assert levels.size <= 2 ** (entry_bits - 1)
    np.testing.assert_allclose(levels, np.round(levels), atol=1e-9)
    assert np.all(np.sign(q[q != 0]) == np.sign(x[q != 0]))
    assert np.all(q[np.abs(x) >= a_max] == np.sign(x[np.abs(x) >= a_max]) * a_max)


def test_a_batch_quantized_with_a_generator_per_run_is_each_run_alone():
    x = np.random.default_rng(1).normal(size=(3, 4, 10))
    seeds = [21, 22, 23]
    batch = quantize(x, 5, 1.0, [np.random.default_rng(s) for s in seeds])
    for run, seed in enumerate(seeds):
        assert np.array_equal(batch[run], quantize(x[run], 5, 1.0, np.random.default_rng(seed)))


@pytest.mark.parametrize(
    ("entry_bits", "a_max", "match"),
    [
        (1, 1.0, "entry_bits must be an integer >= 2"),
        (5, 0.0, "a_max must be a positive"),
        (5, -1, "a_max"),
    ],
)
def test_bad_quantizer_settings_are_one_line(entry_bits, a_max, match):
    with pytest.raises(ValueError, match=match):
        quantize_with(np.zeros(3), entry_bits, a_max, np.zeros(3))


@pytest.mark.parametrize(
    ("scheme", "alpha"), [("per-particle", 1.0), ("shared", 1.0), ("alpha-shared", 0.5)]
)
def test_an_encoded_upload_decodes_to_the_sparsified_update_within_one_step(scheme, alpha):
    """decode(encode(ΔΘ)) holds exactly the patterns of sparsify, each value within one quantizer
    step of the true entry (a_max above every entry), and costs upload_bits."""
    from gossipsim.compression import decode, encode

    rng = np.random.default_rng(4)
    delta = rng.normal(size=(3, 4, 30))  # 3 runs, 4 particles, d = 30
    k, entry_bits, a_max = 6, 6, 5.0
    encoded = encode(
        delta, scheme, k, entry_bits, a_max, [np.random.default_rng(s) for s in range(3)], alpha
    )
    dense = decode(encoded)
    sparse, mask = sparsify(delta, scheme, k, alpha)
    assert not np.any(dense[~mask])
    step = a_max / (magnitude_levels(entry_bits) - 1)
    assert np.all(np.abs(dense - sparse)[mask] <= step + 1e-12)
    assert encoded.bits == upload_bits(scheme, 30, k, 4, entry_bits, alpha)
    for run in range(3):  # a run of the batch as it would be alone
        alone = encode(delta[run], scheme, k, entry_bits, a_max, np.random.default_rng(run), alpha)
        assert np.array_equal(decode(alone), dense[run])


def test_error_feedback_loses_nothing_for_good():
    """After 30 uploads compressed to 3 of 40 coordinates and quantized, the sum of what was sent
    plus the residual equals the sum of the true updates (to rounding)."""
    from gossipsim.compression import decode, encode, feedback_step

    rng = np.random.default_rng(9)
    quantizer = np.random.default_rng(10)

    def compress(x):
        return decode(encode(x, "shared", 3, 5, 4.0, quantizer))

    residual = np.zeros((2, 40))
    sent_total = np.zeros((2, 40))
    true_total = np.zeros((2, 40))
    for _ in range(30):
        delta = rng.normal(scale=0.1, size=(2, 40))
        sent, residual = feedback_step(delta, residual, compress)
        sent_total += sent
        true_total += delta
    np.testing.assert_allclose(sent_total + residual, true_total, rtol=0, atol=1e-12)
    assert np.abs(sent_total).max() > 0  # something was sent


def test_a_range_not_fixed_is_the_kept_entries_largest_magnitude_as_a_float32():
    from gossipsim.compression.encoding import kept_range

    delta = np.random.default_rng(4).normal(size=(4, 50)) * 0.37
    sent = encode(delta, "shared", 6, 5, None, np.random.default_rng(1))
    mask = patterns(delta, "shared", 6)[0]
    top = float(np.abs(delta[:, mask]).max())
    a_max = kept_range(delta[:, mask])
    assert a_max >= top and np.float32(a_max) == a_max and a_max - top < 1e-6 * top
    same = encode(delta, "shared", 6, 5, a_max, np.random.default_rng(1))
    assert np.array_equal(sent.values, same.values)
    assert np.abs(sent.values).max() <= a_max
    assert kept_range(np.zeros((2, 3))) == 1.0


@pytest.mark.parametrize("k", [1, 3, 7, 12])
def test_top_k_positions_are_the_masks_coordinates_with_and_without_ties(k):
    from gossipsim.compression.sparsify import top_k_positions

    rng = np.random.default_rng(k)
    for scores in (rng.normal(size=(3, 2, 13)), rng.integers(0, 4, size=(3, 2, 13)).astype(float)):
        expected = np.nonzero(top_k_mask(scores, k))[-1].reshape(3, 2, k)
        assert np.array_equal(top_k_positions(scores, k), expected)
