"""The runs' random streams for a batch of runs, built with NumPy's public API only.

Each run's randomness comes from NumPy (below): its integer seed is
``SeedSequence(scenario_seed, spawn_key=(run,)).generate_state(1, uint64)[0] >> 1`` and stream ``s``
(walk, start, ...) is ``default_rng(SeedSequence(seed, spawn_key=(s,)))``, a PCG64 generator. This
module builds exactly those objects, run by run, and lets them draw, so the vectorised engine's
numbers are NumPy's own by construction and do not depend on how NumPy implements them.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

DATA_TAG = 0x64617461  # "data"
TOPOLOGY_TAG = 0x746F706F  # "topo"
LINKS_TAG = (
    0x6C696E6B  # "link": link values drawn per edge (``[links] rate_bps = { lognormal = ... }``)
)


WALK, START, PROTOCOL, DATA = range(4)  # the run's independent random streams
#: the run's graph, with ``[topology] draw = "per-run"`` (drawn only then: no other stream changes)
TOPOLOGY = 4
#: a lossy channel's draws (which attempts are lost), with ``[links] loss`` > 0 (drawn only then)
CHANNEL = 5
#: the failures' up and down times, with ``[failures]`` (drawn only then)
FAILURES = 6


def run_stream(seed: int, stream: int) -> np.random.SeedSequence:
    """Stream ``stream`` of the run with integer seed ``seed``: the same as
    ``SeedSequence(seed).spawn(4)[stream]``, built alone (cheaper when only some are needed)."""
    return np.random.SeedSequence(seed, spawn_key=(stream,))


def run_seed(scenario_seed: int, run: int) -> int:
    """The integer seed of run ``run`` (the ``seed`` column of runs.csv)."""
    seq = np.random.SeedSequence(scenario_seed, spawn_key=(run,))
    return int(seq.generate_state(1, np.uint64)[0] >> np.uint64(1))


def run_seeds(scenario_seed: int, runs: npt.ArrayLike) -> np.ndarray:
    """The integer seeds of ``runs`` (as uint64), those of :func:`run_seed`:
    ``SeedSequence(scenario_seed, spawn_key=(r,)).generate_state(1, uint64)[0] >> 1``."""
    runs = np.asarray(runs, dtype=np.int64)
    words = np.empty(runs.size, dtype=np.uint64)
    for i, r in enumerate(runs.tolist()):
        seq = np.random.SeedSequence(scenario_seed, spawn_key=(r,))
        words[i] = seq.generate_state(1, np.uint64)[0]
    return words >> np.uint64(1)


class WalkStreams:
    """The walk uniforms of a batch of runs, exactly as each run's own
    ``default_rng(SeedSequence(seed, spawn_key=(stream,)))`` gives them to
    :class:`~gossipsim.scheduling.Walker`: uniform number ``i`` is output ``i`` of the stream.

    ``block(first, need)`` returns ``need`` consecutive uniforms from output ``first`` for every run
    (runs × need). Each run keeps its generator: a later block is reached with ``PCG64.advance``,
    an earlier one by building the generators again.
    """

    def __init__(self, seeds: np.ndarray, stream: int) -> None:
        self.seeds = np.asarray(seeds, dtype=np.uint64)
        self.stream = stream
        self._rewind()

    def _rewind(self) -> None:
        self._bit_generators = [
            np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(self.stream,)))
            for seed in self.seeds.tolist()
        ]
        self._generators = [np.random.Generator(bg) for bg in self._bit_generators]
        self._next = 0  # the stream output every generator draws next

    def keep(self, mask: np.ndarray) -> None:
        """Keep only the runs where ``mask`` is true (each with its generator where it is)."""
        self.seeds = self.seeds[mask]
        chosen = np.flatnonzero(mask).tolist()
        self._bit_generators = [self._bit_generators[i] for i in chosen]
        self._generators = [self._generators[i] for i in chosen]

    def block(self, first: int, need: int) -> np.ndarray:
        if first < self._next:
            self._rewind()
        if first > self._next:
            for bit_generator in self._bit_generators:
                bit_generator.advance(first - self._next)
        out = np.empty((len(self._generators), need))
        for generator, row in zip(self._generators, out, strict=True):
            generator.random(out=row)
        self._next = first + need
        return out
