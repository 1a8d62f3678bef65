"""Distributed SVGD with Forget-SVGD for a batch of runs at once (the vectorised engine's
``batched-steps`` kernel): :class:`~gossipsim.protocols.dsvgd.DistributedSVGD`'s rules on the token
walk with a leading run axis, in its two variants.

At each slot every run's holder either forgets (its request pending since its last visit), visits
(learning, or stepping on the others' scores once forgotten: sound variant) or passes the token on
(a forgotten holder: paper variant). The runs doing the same thing are stepped together by the
one-run protocol's pure functions (:func:`~gossipsim.particles.aggregated.aggregated_visit`,
:func:`~gossipsim.particles.dsvgd.paper_visit`, :func:`~gossipsim.particles.dsvgd.paper_forget`) on
their stacked particle sets, the likelihood score of each run taken at its own holder's data
(:meth:`~.particle_batch.ParticleBatch.likelihood_scores`). The nodes' scores a scheduler may read
(``DistributedSVGD.node_view``) are not kept: the walk's schedulers the vectorised engine runs read
none.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gossipsim.particles.aggregated import AggregateState, aggregated_visit
from gossipsim.particles.dsvgd import paper_forget, paper_visit
from gossipsim.protocols.particle_batch import IntArray, ParticleBatch


class DSVGDBatch(ParticleBatch):
    """What both variants share: pending requests, visited nodes, removal slots."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        batch = len(self.rngs)
        self.pending = np.zeros((batch, self.nodes), dtype=bool)
        self.visited = np.zeros((batch, self.nodes), dtype=bool)

    def _restart(self, rows: IntArray) -> None:
        self.pending[rows] = False
        self.visited[rows] = False

    def step(self, holders: IntArray, slot: int, active: NDArray[np.bool_]) -> None:
        rows = np.flatnonzero(active)
        if not rows.size:
            return
        nodes = holders[rows]
        forgetting = self.pending[rows, nodes]
        gone = rows[forgetting]
        if gone.size:  # Forget-SVGD at the forgotten node's next visit: its removal slot
            self.pending[gone, nodes[forgetting]] = False
            self.forgotten[gone, nodes[forgetting]] = True
            for r, node in zip(gone.tolist(), nodes[forgetting].tolist(), strict=True):
                self.removed[r][node] = slot
            self.removed_now[gone] = True
        self._visit(rows, nodes, forgetting)
        self.visited[rows, nodes] = True
        self._record(rows, slot, forced=gone)

    def _visit(self, rows: IntArray, nodes: IntArray, forgetting: NDArray[np.bool_]) -> None:
        """The visit of each row's holder (``forgetting``: its removal)."""
        raise NotImplementedError

    def request(self, node: int, slot: int, rows: IntArray) -> None:
        """A node visited since its (re)start forgets at its next visit; one never visited has
        nothing to remove (removed at the slot before the request)."""
        rows = rows[~(self.forgotten[rows, node] | self.pending[rows, node])]
        visited = self.visited[rows, node]
        self.pending[rows[visited], node] = True
        empty = rows[~visited]
        self.forgotten[empty, node] = True
        for r in empty.tolist():
            self.removed[r][node] = slot - 1

    def stats(self, row: int) -> dict[str, float]:
        return {"forget_pending": float(self.pending[row].sum())}


class SoundDSVGDBatch(DSVGDBatch):
    """``variant = "sound"``: the token's aggregate of the nodes' scores and AdaGrad's cumulative
    history, each node's last score (:mod:`gossipsim.particles.aggregated`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.aggregate = np.zeros_like(self.particles)
        self.history = np.zeros_like(self.particles)
        self.fresh = np.ones(len(self.rngs), dtype=bool)  # no AdaGrad history yet
        #: each node's last score g_k (zeros before its first visit and once forgotten)
        self.own = np.zeros((len(self.rngs), self.nodes, *self.particles.shape[1:]))

    def _restart(self, rows: IntArray) -> None:
        super()._restart(rows)
        self.aggregate[rows] = 0.0
        self.fresh[rows] = True
        self.own[rows] = 0.0

    def _visit(self, rows: IntArray, nodes: IntArray, forgetting: NDArray[np.bool_]) -> None:
        gone = rows[forgetting]
        if gone.size:  # ``forget``: S loses g_k, AdaGrad's history starts afresh
            lost = nodes[forgetting]
            self.aggregate[gone] = self.aggregate[gone] - self.own[gone, lost]
            self.own[gone, lost] = 0.0
            self.fresh[gone] = True
        learns = ~self.forgotten[rows, nodes]
        own = self.own[rows, nodes]
        s = self.settings
        for _ in range(s.local_iterations):
            fresh = self.fresh[rows]
            for group in _groups(learns, fresh):
                g_rows, g_nodes = rows[group], nodes[group]
                state = AggregateState(
                    self.particles[g_rows], self.aggregate[g_rows],
                    None if fresh[group[0]] else self.history[g_rows],
                )  # fmt: skip
                local = (
                    partial(self.likelihood_scores, g_rows, g_nodes) if learns[group[0]] else None
                )
                state, own[group] = aggregated_visit(
                    state, own[group], self.prior_score, local, s.sound_adagrad, rule=s.rule,
                    bandwidth=s.fixed_bandwidth,
                )  # fmt: skip
                self.particles[g_rows] = state.particles
                self.aggregate[g_rows] = state.aggregate
                self.history[g_rows] = state.history
            self.fresh[rows] = False
        self.own[rows[learns], nodes[learns]] = own[learns]


class PaperDSVGDBatch(DSVGDBatch):
    """``variant = "paper"``: each node's local particles (its KDE factor), the papers' visits and
    Forget-SVGD (:mod:`gossipsim.particles.dsvgd`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.paper_settings = self.settings.paper(self.temperature)
        #: each node's local particles (the run's start particles before its first visit)
        self.local = np.zeros((len(self.rngs), self.nodes, *self.particles.shape[1:]))

    def _restart(self, rows: IntArray) -> None:
        super()._restart(rows)
        for node in range(self.nodes):  # the local particles start as the global ones
            self.local[rows, node] = self.particles[rows]

    def _visit(self, rows: IntArray, nodes: IntArray, forgetting: NDArray[np.bool_]) -> None:
        learns = ~forgetting & ~self.forgotten[rows, nodes]
        for group, visit in ((np.flatnonzero(forgetting), False), (np.flatnonzero(learns), True)):
            if not group.size:
                continue
            g_rows, g_nodes = rows[group], nodes[group]
            score = partial(self.likelihood_scores, g_rows, g_nodes)
            local = self.local[g_rows, g_nodes]
            if visit:
                self.particles[g_rows], self.local[g_rows, g_nodes] = paper_visit(
                    self.particles[g_rows], local, score, self.paper_settings
                )
            else:
                self.particles[g_rows] = paper_forget(
                    self.particles[g_rows], local, score, self.paper_settings
                )


def _groups(*flags: NDArray[np.bool_]) -> list[IntArray]:
    """The indices of the rows sharing each combination of ``flags`` (the ones present)."""
    keys = np.zeros(flags[0].size, dtype=np.int64)
    for flag in flags:
        keys = 2 * keys + flag
    return [np.flatnonzero(keys == key) for key in np.unique(keys).tolist()]
