"""Selection on the decentralised walk: the importance-weighted Metropolis-Hastings walk, whose
stationary distribution is proportional to the selection weights a protocol publishes.

``ksd-walk``, ``hip-walk``
    the holder k proposes a neighbour j uniformly (entry ``int(u·deg(k))`` of its CSR row, as
    ``metropolis-hastings``) and passes the token with probability
    ``min(1, w_j·deg(k) / (w_k·deg(j)))``, otherwise keeps it, with ``w`` the live array
    :attr:`~.base.NodeView.weights` (the protocol changes it in place; the sampler reads it at every
    hop). The two kinds share the rule and differ in the indicator the protocol must publish
    (:attr:`~.base.Scheduler.indicator`: the KSD, eq. 17 of 003, or the HIP, eq. 24).

**Arithmetic**, on the hop's uniforms ``u`` then ``v`` (:func:`~.base.uniform_blocks`): accept when
``v·w_k·deg(j) < w_j·deg(k)``. No division, and the zero cases follow: ``w_j = 0`` always
rejects (the right side is 0); ``w_k = 0`` and ``w_j > 0`` always accepts (the left side is 0).
Weights must be non-negative and not NaN (a NaN rejects every proposal to or from its node); +inf
marks a node every neighbour passes the token to (DSVGD's node with a pending unlearning request,
whose weight drops to 0 at the visit that removes it: a holder of weight +inf keeps the token).

**Stationary distribution.** The move probability ``P(k, j) = min(1/deg(k), w_j/(w_k·deg(j)))``
(for ``w_k > 0``) gives ``w_k·P(k, j) = min(w_k/deg(k), w_j/deg(j))``, symmetric in k and j: the
walk is reversible with respect to ``π ∝ w`` (detailed balance; also where a weight is 0: such a
node is never entered, and is left at its first proposal of a neighbour of positive weight). π is
the walk's only stationary distribution when the nodes of positive weight are connected among
themselves (every weight positive on a connected graph).

**Under failures** (a view with ``up`` and ``live_degree``: ``[failures]``) the walk sees only the
live graph, as ``metropolis-hastings`` does: with d(k) the number of k's live neighbours, the
``int(u·d(k))``-th live neighbour j in row order, accepted when ``v·w_k·d(j) < w_j·d(k)``: the
stationary distribution is ∝ w on each connected part of the live graph. A holder without a live
neighbour keeps the token.

**No exact value for a run.** The weights move with the protocol's state, so the walk a run follows
has no fixed transition matrix: the kinds declare ``reads_state = True``, and the theory of a run
says so instead of printing numbers (:mod:`gossipsim.measurement.theory`). For weights *held fixed*
the matrix, the stationary distribution and the exact cover and hitting times are those of
:meth:`ImportanceWeightedWalk.edge_weights` for the view given
(``gossipsim.cover.hitting_times_to(g, node, "ksd-walk", view=NodeView(weights=w))``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gossipsim.errors import ConfigError
from gossipsim.scheduling.base import (
    UNIFORM_BLOCK,
    NodeView,
    Scheduler,
    machine_csr,
    register,
    uniform_blocks,
)
from gossipsim.scheduling.graph import IndexedGraph
from gossipsim.scheduling.kinds import _live_entries, _live_sampler

__all__ = ["HipWalk", "ImportanceWeightedWalk", "KsdWalk", "fixed_weights"]


def fixed_weights(kind: str, g: IndexedGraph, view: NodeView | None) -> np.ndarray:
    """The view's weights as a float array of one entry per node, checked (finite, non-negative);
    a view without weights is a one-line :class:`ConfigError` naming ``scheduler.kind``."""
    if view is None or view.weights is None:
        raise ConfigError(
            "scheduler.kind",
            f"{kind!r} moves by the selection weights the protocol publishes "
            "(NodeView.weights), and it published none: choose a protocol that publishes them, or "
            "pass view=NodeView(weights=...) for weights held fixed",
        )
    w = np.asarray(view.weights, dtype=float)
    if w.shape != (g.size,):
        raise ConfigError(
            "weights", f"expected one weight per node ({g.size}), got shape {w.shape}"
        )
    if not (np.all(np.isfinite(w)) and np.all(w >= 0)):
        raise ConfigError("weights", "selection weights must be finite and non-negative")
    return w


class ImportanceWeightedWalk(Scheduler):
    """The importance-weighted Metropolis-Hastings walk (module docstring): stationary
    distribution ∝ :attr:`NodeView.weights`. A subclass sets ``kind``, ``description`` and
    ``indicator``."""

    reads_state = True
    reads_liveness = True
    kernel = None  # event engine only: the weights change between hops
    stay_kernel = None

    def edge_weights(self, g: IndexedGraph, view: NodeView | None = None) -> np.ndarray:
        """The move probabilities for the weights the view holds at this moment."""
        w = fixed_weights(self.kind, g, view)
        assert view is not None
        rows = np.repeat(np.arange(g.size), g.degree)
        cols = g.indices
        if view.has_failures:  # the live graph's degrees, as metropolis-hastings
            live, deg = _live_entries(g, view)
        else:
            live, deg = np.ones(cols.size, dtype=bool), g.degree.astype(float)
        wk, wj, dk, dj = w[rows], w[cols], deg[rows], deg[cols]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(wk > 0, wj * dk / (wk * dj), np.inf)  # w_k = 0: accept
            accept = np.where(wj > 0, np.minimum(1.0, ratio), 0.0)  # w_j = 0: reject
            probs = accept / dk
        return np.where(live & (dk > 0), probs, 0.0)

    def stationary(self, g: IndexedGraph, view: NodeView | None = None) -> np.ndarray:
        """π ∝ w (closed form, module docstring); uniform where every weight is 0 (the walk then
        never moves)."""
        w = fixed_weights(self.kind, g, view)
        total = w.sum()
        if total == 0:
            return np.full(g.size, 1.0 / g.size)
        return w / total

    def sampler(
        self, g: IndexedGraph, rng: np.random.Generator, view: NodeView | None = None
    ) -> Callable[[int], int]:
        fixed_weights(self.kind, g, view)  # a view without weights fails here, before the run
        assert view is not None and view.weights is not None
        indptr, indices, deg = machine_csr(g)
        buf, pos, refill = uniform_blocks(rng)
        weights = view.weights
        if not (isinstance(weights, np.ndarray) and weights.dtype.kind == "f"):
            raise ConfigError(
                "scheduler.kind",
                f"{self.kind!r} reads NodeView.weights in place at every hop: the protocol must "
                f"publish a float NumPy array (got {type(weights).__name__})",
            )
        w = weights.data  # a memory view: the protocol's in-place changes are seen at every hop
        if view.has_failures:
            return _live_sampler(
                indptr, indices, deg, view, buf, pos, refill, accept=True, weights=w
            )

        def importance_weighted(k: int) -> int:
            if pos[0] >= UNIFORM_BLOCK:
                refill()
            i = pos[0]
            pos[0] = i + 1
            d = deg[k]
            j = indices[indptr[k] + int(buf[0][i] * d)]  # u*d < d for u < 1, as metropolis-hastings
            if buf[1][i] * w[k] * deg[j] < w[j] * d:  # min(1, w_j·deg(k) / (w_k·deg(j)))
                return j
            return k

        return importance_weighted


@register
class KsdWalk(ImportanceWeightedWalk):
    kind = "ksd-walk"
    indicator = "ksd"
    description = (
        "propose a uniform neighbour j, accept with min(1, w_j deg(k)/(w_k deg(j))): visits in "
        "proportion to the KSD weights"
    )


@register
class HipWalk(ImportanceWeightedWalk):
    kind = "hip-walk"
    indicator = "hip"
    description = (
        "propose a uniform neighbour j, accept with min(1, w_j deg(k)/(w_k deg(j))): visits in "
        "proportion to the HIP weights"
    )
