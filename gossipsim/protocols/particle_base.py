"""What the particle protocols share: the global particles, their trace, requests and removals.

The states recorded are the global particles ``(N, d)``; they change at every slot, and a trace of
every slot would hold iterations × N × d numbers, so they are recorded at the slots metrics.csv
writes (slot 1, every ``[metrics] record_every``-th, the last) and at every removal slot. The
divergence and the metrics between two records are those of the last record (the tables say so).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from gossipsim.network.messages import Message
from gossipsim.protocols.base import Protocol, StateTrace
from gossipsim.protocols.registry import BuildRequest

FloatArray = NDArray[np.float64]


class ParticleProtocol(Protocol):
    """Global particles drawn from the prior, recorded at the slots that are written."""

    representation = "particles"

    def __init__(self, request: BuildRequest) -> None:
        self.model: Any = request.model
        self.data: Any = request.data
        self.rng = request.rng
        self.settings: Any = request.settings
        self.message = Message(request.bits)
        self.nodes = request.nodes
        self.forgotten: set[int] = set(request.forgotten)
        self.every = max(int(request.record_every), 1)
        self.last = request.iterations
        self.particles: FloatArray = np.asarray(
            self.model.sample_prior(self.rng, self.settings.particles), dtype=np.float64
        )
        self.trace = request.trace if request.trace is not None else StateTrace()
        self.trace.record(request.start_slot, self.particles)
        self._removals: dict[int, int] = {}

    def note_request(self, node: int, slot: int, visited: set[int], pending: set[int]) -> None:
        """A request from ``node`` before ``slot``: pending (its data leave the state at the
        protocol's removal) where it has contributed (in ``visited``), else forgotten at once with
        nothing to remove (removal slot ``slot − 1``); a node already forgotten or pending: nothing."""
        if node in self.forgotten or node in pending:
            return
        if node in visited:
            pending.add(node)
        else:
            self.forgotten.add(node)
            self._removals[node] = slot - 1

    def record(self, slot: int, force: bool = False) -> None:
        """Record the particles at the end of ``slot`` if metrics.csv writes it (or ``force``)."""
        if force or slot == 1 or slot % self.every == 0 or slot == self.last:
            self.trace.record(slot, self.particles)

    def rewind(self, length: int, slot: int) -> None:
        """The trace as it was when it held ``length`` records, the particles (restored by the
        caller) recorded again at ``slot`` if metrics.csv writes it (a slot taken back:
        :meth:`~gossipsim.protocols.base.Protocol.take_back`)."""
        if len(self.trace) > length:
            self.trace.truncate(length)
            self.record(slot)

    def likelihood_score(self, node: int) -> Any:
        """θ ↦ (1/α)·∇θ log p(D_node | θ), on a fresh mini-batch per call with ``batch_size``."""
        model, data, batch = self.model, self.data, self.settings.batch_size
        temperature = float(model.temperature)

        def score(theta: FloatArray) -> FloatArray:
            rows = None
            size = model.node_rows(data, node)
            if batch is not None and batch < size:
                rows = np.sort(self.rng.choice(size, batch, replace=False))
            return np.asarray(model.log_likelihood_score(data, node, theta, rows)) / temperature

        return score

    def prior_score(self, theta: FloatArray) -> FloatArray:
        return np.asarray(self.model.log_prior(theta)[1])

    def done(self) -> bool:
        return False

    def traces(self) -> dict[str, StateTrace]:
        return {"main": self.trace}

    def removals(self) -> dict[int, int]:
        return dict(self._removals)
