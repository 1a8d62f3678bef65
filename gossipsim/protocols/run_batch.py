"""What every batch of protocols of the vectorised engine's ``batched-steps`` kernel keeps per run
(one row each): its generator, the nodes it has been asked to forget, its removal slots, and which
runs recorded a state or removed a node in the current slot (what the runner streams out after
each slot, :mod:`gossipsim.execution.vectorized.steps`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class RunBatch:
    """The per-run bookkeeping shared by :class:`~.natgrad_batch.NaturalGradientBatch` and the
    particle batches (:mod:`.particle_batch`)."""

    def __init__(self, rngs: Sequence[np.random.Generator], nodes: int) -> None:
        self.rngs = list(rngs)
        batch = len(self.rngs)
        self.forgotten = np.zeros((batch, nodes), dtype=bool)
        #: for each run, the slot at whose end each forgotten node's contribution had left
        self.removed: list[dict[int, int]] = [{} for _ in range(batch)]
        #: the runs that recorded a state in the current slot, and those that removed a node
        self.recorded_now = np.zeros(batch, dtype=bool)
        self.removed_now = np.zeros(batch, dtype=bool)

    def new_slot(self) -> None:
        """A new slot begins: nothing recorded or removed in it yet."""
        self.recorded_now[:] = False
        self.removed_now[:] = False
