"""The batch streams (gossipsim.core.streams) and start nodes against NumPy itself: exact equality."""

from __future__ import annotations

import numpy as np
import pytest

import gossipsim as gs
from gossipsim.core import streams
from gossipsim.execution.runner import START, WALK, build_world, run_seed, run_stream, start_node
from gossipsim.execution.vectorized.walks import start_nodes
from tests.helpers import base_scenario


@pytest.mark.parametrize("scenario_seed", [0, 1, 2023, 2**32 - 1, 2**32, 2**40 + 5, 2**70 + 3])
def test_run_seeds_equal_run_seed(scenario_seed):
    runs = np.r_[np.arange(0, 2000, 13), 2**31, 2**32 - 1, 2**40]
    expected = [run_seed(scenario_seed, int(r)) for r in runs]
    seeds = streams.run_seeds(scenario_seed, runs)
    assert seeds.dtype == np.uint64
    assert seeds.tolist() == expected


def test_run_seeds_take_lists_and_nothing():
    assert streams.run_seeds(5, [3, 1]).tolist() == [run_seed(5, 3), run_seed(5, 1)]
    assert streams.run_seeds(5, []).shape == (0,)


def test_negative_seeds_are_refused():
    with pytest.raises(ValueError, match="non-negative"):
        streams.run_seeds(-1, np.arange(2))


@pytest.mark.parametrize("stream", [WALK, START, 3, 70_000])
def test_blocks_equal_numpy_draws_forward_backward_and_far(stream):
    seeds = streams.run_seeds(2023, np.arange(12))
    ws = streams.WalkStreams(seeds, stream)
    reads = [
        (0, 300),  # the first block
        (300, 50),  # straight on (no advance)
        (8192, 300),  # a v block
        (16_384 * 3, 8192),  # a whole block further on (u blocks only: the uniform scheduler)
        (16_384 * 3 + 8192, 17),
        (2**40 + 3, 5),  # far ahead
        (8192, 10),  # back: the generators start again
        (8202, 0),
        (8202, 4),
    ]
    for first, need in reads:
        block = ws.block(first, need)
        assert block.shape == (12, need)
        for b in range(12):
            bit_generator = np.random.PCG64(run_stream(int(seeds[b]), stream))
            bit_generator.advance(first)
            np.testing.assert_array_equal(block[b], np.random.Generator(bit_generator).random(need))


def test_the_walkers_block_pattern_equals_numpy_draws():
    """u then v blocks of 8,192, as gossipsim.execution.vectorized.walks.stepped_walks reads them, the last one short."""
    seeds = streams.run_seeds(9, np.arange(5))
    ws = streams.WalkStreams(seeds, WALK)
    gens = [np.random.default_rng(run_stream(int(s), WALK)) for s in seeds.tolist()]
    for first, need in [(0, 8192), (8192, 8192), (16_384, 8192), (16_384 + 8192, 8192)]:
        block = ws.block(first, need)
        for b, gen in enumerate(gens):  # one generator per run, drawn straight through
            np.testing.assert_array_equal(block[b], gen.random(need))


@pytest.mark.parametrize("start", ["uniform", "stationary", 3])
def test_start_nodes_equal_start_node(start):
    raw = base_scenario(scheduler={"kind": "metropolis-hastings", "start": start})
    raw["topology"] = {"kind": "karate"}
    world = build_world(gs.parse_study(raw).variants[0].scenario)
    seeds = streams.run_seeds(4, np.arange(200))
    expected = [
        start_node(world, np.random.default_rng(run_stream(s, START))) for s in seeds.tolist()
    ]
    assert start_nodes(world, seeds).tolist() == expected
    if start == "uniform":
        assert len(set(expected)) > 20  # the draw is exercised
