"""A scheduler of one's own, plugged into gossipsim without editing it (docs/extending.md).

The lazy Metropolis-Hastings walk: at every slot the holder keeps the token with probability 1/2,
and otherwise makes a Metropolis-Hastings move (eq. 5 of the core paper: propose a uniform
neighbour j, pass with probability min(1, deg(k)/deg(j))). Its transition matrix is (I + P)/2 for
the Metropolis-Hastings matrix P: the same uniform stationary distribution, and every hitting time
exactly twice as long. gossipsim's exact cover and hitting-time computations use it as they use the
built-in walks.

    PYTHONPATH=examples gossipsim run examples/lazy_walk.toml
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gossipsim.scheduling import (
    CSR,
    UNIFORM_BLOCK,
    IndexedGraph,
    MetropolisHastings,
    NodeView,
    machine_csr,
    uniform_blocks,
)


class LazyMetropolisHastings(MetropolisHastings):
    """``scheduler.kind = "lazy_walk:LazyMetropolisHastings"``. Every hop reads two uniforms u, v:
    u < 1/2 keeps the token; else 2u - 1 (uniform on [0, 1), and exact in floating point) picks
    the proposed neighbour and v accepts it, as in Metropolis-Hastings (whose uniform stationary
    distribution it keeps, inherited with the rest)."""

    kind = "lazy_walk:LazyMetropolisHastings"  # a scheduler named by import path has it as kind
    description = "keep the token with probability 1/2, else a Metropolis-Hastings move"
    kernel = "batched-step"  # step() moves a batch exactly as sampler() moves one walk

    def edge_weights(self, g: IndexedGraph, view: NodeView | None = None) -> np.ndarray:
        return 0.5 * super().edge_weights(g, view)  # (I + P)/2: half of every move; the rest stays

    def sampler(
        self, g: IndexedGraph, rng: np.random.Generator, view: NodeView | None = None
    ) -> Callable[[int], int]:
        indptr, indices, deg = machine_csr(g)
        buf, pos, refill = uniform_blocks(rng)  # u and v, 8,192 at a time, as every kind reads them

        def lazy_metropolis_hastings(k: int) -> int:
            if pos[0] >= UNIFORM_BLOCK:
                refill()
            i = pos[0]
            pos[0] = i + 1
            u = buf[0][i]
            if u < 0.5:
                return k
            d = deg[k]
            j = indices[indptr[k] + int((2.0 * u - 1.0) * d)]
            return j if buf[1][i] * deg[j] < d else k

        return lazy_metropolis_hastings

    def step(
        self,
        positions: np.ndarray,
        u: np.ndarray,
        v: np.ndarray,
        csr: CSR,
        view: NodeView | None = None,
    ) -> np.ndarray:
        moving = u >= 0.5
        # the Metropolis-Hastings move on the rescaled u (0.0 for the walks that stay: not taken)
        moved = super().step(positions, np.where(moving, 2.0 * u - 1.0, 0.0), v, csr, view)
        return np.where(moving, moved, positions)
