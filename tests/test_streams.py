"""The batch stream derivation (gossipsim.streams) against NumPy itself: exact equality."""

from __future__ import annotations

import numpy as np
import pytest

from gossipsim import streams
from gossipsim.runner import START, WALK, run_seed, run_stream


@pytest.mark.parametrize("scenario_seed", [0, 1, 2023, 2**32 - 1, 2**32, 2**40 + 5, 2**70 + 3])
def test_run_seeds_equal_run_seed(scenario_seed):
    runs = np.r_[np.arange(0, 2000, 13), 2**31, 2**32 - 1]
    expected = [run_seed(scenario_seed, int(r)) for r in runs]
    assert streams.run_seeds(scenario_seed, runs).tolist() == expected


@pytest.mark.parametrize("stream", [WALK, START, 3, 70_000])
def test_pcg64_origins_equal_numpy_seeding(stream):
    seeds = streams.run_seeds(7, np.arange(300))
    origins = streams.pcg64_origins(seeds, stream)
    for b in range(0, 300, 11):
        state = np.random.PCG64(run_stream(int(seeds[b]), stream)).state["state"]
        assert origins.as_ints(b) == (state["state"], state["inc"])


@pytest.mark.parametrize("delta", [1, 2, 8191, 8192, 16_384 * 5 + 8192, 2**40 + 3])
def test_advance_equals_numpy_advance(delta):
    seeds = streams.run_seeds(11, np.arange(20))
    later = streams.pcg64_advance(streams.pcg64_origins(seeds, WALK), delta)
    for b in range(20):
        bg = np.random.PCG64(run_stream(int(seeds[b]), WALK))
        bg.advance(delta)
        assert later.as_ints(b) == (bg.state["state"]["state"], bg.state["state"]["inc"])


def test_first_output_is_numpy_first_raw_output():
    seeds = streams.run_seeds(5, np.arange(50))
    raw = streams.pcg64_origins(seeds, START).step().output()
    for b in range(50):
        assert int(raw[b]) == int(np.random.PCG64(run_stream(int(seeds[b]), START)).random_raw())


@pytest.mark.parametrize("n", [1, 2, 3, 10, 34, 1000, 10**6, 2**31 + 1])
def test_first_bounded_equals_integers_and_flags_exactly_the_rejections(n):
    seeds = streams.run_seeds(3, np.arange(400))
    values, rejected = streams.first_bounded(streams.pcg64_origins(seeds, START), n)
    threshold = ((1 << 32) - n) % n
    for b in range(400):
        gen = np.random.default_rng(run_stream(int(seeds[b]), START))
        low32 = int(np.random.PCG64(run_stream(int(seeds[b]), START)).random_raw()) & 0xFFFFFFFF
        assert bool(rejected[b]) == (n > 1 and (low32 * n) & 0xFFFFFFFF < threshold)
        if not rejected[b]:
            assert int(values[b]) == int(gen.integers(n))
    if n == 2**31 + 1:  # half the draws are rejected at this n: the flag is exercised
        assert 100 < rejected.sum() < 300


def test_first_bounded_rejects_bad_bounds():
    origins = streams.pcg64_origins(streams.run_seeds(1, np.arange(2)), START)
    for n in (0, 2**32):
        with pytest.raises(ValueError, match="n must be"):
            streams.first_bounded(origins, n)


@pytest.mark.parametrize("words", [True, False])
def test_walk_stream_blocks_equal_numpy_draws(words, monkeypatch):
    if not words:  # through PCG64.state instead of the direct view
        monkeypatch.setattr(streams, "_state_words", lambda bg: None)
    seeds = streams.run_seeds(2023, np.arange(12))
    ws = streams.WalkStreams(seeds, WALK)
    assert (ws._words is not None) == words
    for first, need in [(0, 300), (8192, 300), (16_384 * 3, 8192), (16_384 * 3 + 8192, 17)]:
        block = ws.block(first, need)
        for b in range(12):
            gen = np.random.default_rng(run_stream(int(seeds[b]), WALK))
            gen.bit_generator.advance(first)
            np.testing.assert_array_equal(block[b], gen.random(need))


def test_the_emulation_check_passes_on_this_numpy():
    assert streams.emulation_exact()


def test_negative_seeds_are_refused():
    with pytest.raises(ValueError, match="non-negative"):
        streams.run_seeds(-1, np.arange(2))
