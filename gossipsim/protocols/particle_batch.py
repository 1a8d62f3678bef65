"""Particle protocols for a batch of runs at once (the vectorised engine's ``batched-steps``
kernel): what they share, and centralised SVGD (:class:`SVGDBatch`).

Row b of every array is one run; its particles are ``particles[b]`` ``(N, d)``. A slot is one call
of ``step`` with every run's holder; each run takes the one-run protocol's step
(:mod:`~gossipsim.protocols.svgd`, :mod:`~gossipsim.protocols.dsvgd`) with the same pure functions
(:mod:`gossipsim.particles`), called on the runs' particle sets stacked along a leading axis. Every
one of them treats each set on its own (per-set kernels, medians, sums and matrix products), so a
run's particles are the event engine's bit for bit whatever the other runs of its batch (tested).
Each run draws from its own generator, with the one-run calls in the one-run order: its prior
particles at each (re)start, and a mini-batch per likelihood score (``batch_size``).

States are recorded where the one-run protocol records them (:class:`ParticleProtocol.record
<gossipsim.protocols.particle_base.ParticleProtocol>`: at (re)starts, slot 1, every
``record_every``-th slot, the last slot and removals); :attr:`ParticleBatch.eta` is the set in force
(the last one recorded), which is what the run's trace reads after the slot and what the
vectorised engine streams out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gossipsim.particles.adagrad import AdaGradSettings, adagrad_step
from gossipsim.particles.svgd import svgd_direction
from gossipsim.protocols.run_batch import RunBatch

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


class ParticleBatch(RunBatch):
    """The global particles of ``batch`` runs (one row each), their records and requests."""

    def __init__(
        self,
        model: Any,
        data: Any,
        settings: Any,
        rngs: Sequence[np.random.Generator],
        nodes: int,
        record_every: int = 1,
        iterations: int | None = None,
    ) -> None:
        self.model = model
        self.data = data
        self.settings = settings
        super().__init__(rngs, nodes)
        self.nodes = nodes
        self.every = max(int(record_every), 1)
        self.last = iterations
        self.temperature = float(model.temperature)
        batch, count, dimension = len(self.rngs), settings.particles, model.particle_dimension
        self.particles: FloatArray = np.zeros((batch, count, dimension))
        #: the set in force: the last one recorded (what the run's trace reads after the slot)
        self.eta: FloatArray = np.zeros((batch, count, dimension))

    # ----------------------------------------------------------------------------------- records
    def _record(self, rows: IntArray, slot: int, forced: IntArray | None = None) -> None:
        """``rows`` end ``slot``: they record their particles where metrics.csv writes the slot
        (``ParticleProtocol.record``), the ``forced`` rows whatever the slot."""
        if not (slot == 1 or slot % self.every == 0 or slot == self.last):
            if forced is None or not forced.size:
                return
            rows = forced
        self.eta[rows] = self.particles[rows]
        self.recorded_now[rows] = True

    # ------------------------------------------------------------------------------- the slot
    def start(self, rows: IntArray, slot: int, forgotten: Sequence[int] = ()) -> None:
        """Rows (re)start at ``slot`` from particles drawn from the prior (each from its own
        generator), without the ``forgotten`` nodes: a fresh protocol built with
        ``start_slot = slot`` (the retrain baseline at each request), its set recorded."""
        count = self.settings.particles
        for r in rows.tolist():
            self.particles[r] = self.model.sample_prior(self.rngs[r], count)
        self.forgotten[rows] = False
        if len(forgotten):
            self.forgotten[np.ix_(rows, np.asarray(forgotten, dtype=np.int64))] = True
        self._restart(rows)
        self.eta[rows] = self.particles[rows]
        self.recorded_now[rows] = True

    def _restart(self, rows: IntArray) -> None:
        """The protocol's own state of ``rows`` as a fresh protocol's."""

    def step(self, holders: IntArray, slot: int, active: NDArray[np.bool_]) -> None:
        """Slot ``slot`` of the ``active`` runs, whose holders are ``holders`` (one per row)."""
        raise NotImplementedError

    def request(self, node: int, slot: int, rows: IntArray) -> None:
        """An unlearning request for ``node`` arrives before ``slot`` in ``rows``."""
        raise NotImplementedError

    def done(self) -> NDArray[np.bool_]:
        """A particle protocol is never done (``ParticleProtocol.done``)."""
        return np.zeros(len(self.rngs), dtype=bool)

    def stats(self, row: int) -> dict[str, float]:
        return {}

    # ------------------------------------------------------------------------------- scores
    def prior_score(self, particles: FloatArray) -> FloatArray:
        return np.asarray(self.model.log_prior(particles)[1])

    def likelihood_scores(self, rows: IntArray, nodes: IntArray, theta: FloatArray) -> FloatArray:
        """(1/α)·∇θ log p(D_k | θ) at ``theta[i]`` ``(G, N, d)`` for node ``nodes[i]`` of run
        ``rows[i]``: ``ParticleProtocol.likelihood_score`` of each run, runs of one node in one
        call (without mini-batches), with a mini-batch drawn from the run's generator per call
        (``batch_size``)."""
        model, data, batch = self.model, self.data, self.settings.batch_size
        out = np.empty_like(theta)
        for node in np.unique(nodes).tolist():
            chosen = np.flatnonzero(nodes == node)
            size = model.node_rows(data, node)
            if batch is not None and batch < size:
                for i in chosen.tolist():
                    picked = np.sort(self.rngs[rows[i]].choice(size, batch, replace=False))
                    score = model.log_likelihood_score(data, node, theta[i], picked)
                    out[i] = np.asarray(score) / self.temperature
            else:
                score = model.log_likelihood_score(data, node, theta[chosen])
                out[chosen] = np.asarray(score) / self.temperature
        return out


def adagrad_rows(
    particles: FloatArray,
    direction: FloatArray,
    history: FloatArray,
    fresh: NDArray[np.bool_],
    settings: AdaGradSettings,
) -> tuple[FloatArray, FloatArray]:
    """:func:`~gossipsim.particles.adagrad.adagrad_step` of each row, the ``fresh`` rows' history
    starting afresh (``None`` in the one-run protocol)."""
    if fresh.all():
        return adagrad_step(particles, direction, None, settings)
    if not fresh.any():
        return adagrad_step(particles, direction, history, settings)
    moved, new_history = np.empty_like(particles), np.empty_like(particles)
    for rows, past in ((fresh, None), (~fresh, history[~fresh])):
        moved[rows], new_history[rows] = adagrad_step(particles[rows], direction[rows], past,
                                                      settings)  # fmt: skip
    return moved, new_history


class SVGDBatch(ParticleBatch):
    """Centralised SVGD (:class:`~gossipsim.protocols.svgd.CentralisedSVGD`) for a batch of runs:
    one SVGD step a slot on the pooled data of each run's nodes not forgotten."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.history = np.zeros_like(self.particles)
        self.fresh = np.ones(len(self.rngs), dtype=bool)  # no AdaGrad history yet

    def _restart(self, rows: IntArray) -> None:
        self.fresh[rows] = True

    def step(self, holders: IntArray, slot: int, active: NDArray[np.bool_]) -> None:
        rows = np.flatnonzero(active)
        if not rows.size:
            return
        theta = self.particles[rows]
        total = self.prior_score(theta)
        for k in range(self.nodes):
            included = ~self.forgotten[rows, k]
            if included.all():
                total = total + self.likelihood_scores(rows, np.full(rows.size, k), theta)
            elif included.any():
                chosen = np.flatnonzero(included)
                scores = self.likelihood_scores(rows[chosen], np.full(chosen.size, k),
                                                theta[chosen])  # fmt: skip
                total[chosen] = total[chosen] + scores
        s = self.settings
        direction = svgd_direction(theta, total, rule=s.rule, bandwidth=s.fixed_bandwidth)
        self.particles[rows], self.history[rows] = adagrad_rows(
            theta, direction, self.history[rows], self.fresh[rows], s.adagrad
        )
        self.fresh[rows] = False
        self._record(rows, slot)

    def request(self, node: int, slot: int, rows: IntArray) -> None:
        """The node's data leave the score at once: removed at the slot before the request."""
        rows = rows[~self.forgotten[rows, node]]
        self.forgotten[rows, node] = True
        for r in rows.tolist():
            self.removed[r][node] = slot - 1
