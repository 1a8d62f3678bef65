"""The parameter server's client selection of 003: the next client drawn from the selection
distribution the protocol publishes (kinds ``ksd`` and ``hip``).

The protocol's clients compute the indicators and the server turns them into the distribution P
(:mod:`gossipsim.protocols.selection`); it publishes P in :attr:`NodeView.weights
<gossipsim.scheduling.NodeView.weights>`, changed in place after every slot. The sampler draws
client j with probability ``weights[j] / Σ weights`` from the hop's uniform u: the first j whose
cumulative weight exceeds u·Σ. The graph is ignored (a server reaches every client).

The transitions depend on the protocol's state (``reads_state``): no exact cover or hitting time
applies to a run, and the theory says so. :meth:`Selection.transition_matrix` gives the matrix of
the distribution the view holds at that moment (every row P): the law of the next draw only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from gossipsim.errors import ConfigError
from gossipsim.scheduling.base import UNIFORM_BLOCK, NodeView, Scheduler, register, uniform_blocks
from gossipsim.scheduling.graph import IndexedGraph
from gossipsim.scheduling.jump import JumpChain

if TYPE_CHECKING:
    import scipy.sparse as sp


def _weights(view: NodeView | None, kind: str) -> np.ndarray:
    if view is None or view.weights is None:
        raise ConfigError(
            "scheduler.kind",
            f"{kind!r} draws clients from the indicators a particle protocol publishes, and this "
            'protocol publishes none (use protocol.kind = "dsvgd")',
        )
    return view.weights


class Selection(Scheduler):
    """Draw the next client from the protocol's selection distribution (module docstring)."""

    reads_v = False
    ignores_graph = True
    reads_state = True
    kind: ClassVar[str]

    def transition_matrix(self, g: IndexedGraph, view: NodeView | None = None) -> sp.csr_array:
        """Every row the distribution the view holds now (the next draw's law)."""
        import scipy.sparse as sp

        weights = _weights(view, self.kind)
        p = weights / weights.sum()
        return sp.csr_array(np.tile(p, (g.size, 1)))

    def stationary(self, g: IndexedGraph, view: NodeView | None = None) -> np.ndarray:
        weights = _weights(view, self.kind)
        return np.asarray(weights / weights.sum())

    def jump_chain(self, g: IndexedGraph, view: NodeView | None = None) -> JumpChain:
        raise ConfigError(
            "scheduler.kind",
            f"{self.kind!r} depends on the protocol's state: it has no jump chain to draw from",
        )

    def sampler(
        self, g: IndexedGraph, rng: np.random.Generator, view: NodeView | None = None
    ) -> Callable[[int], int]:
        weights = _weights(view, self.kind)
        buf, pos, refill = uniform_blocks(rng)

        def select(k: int) -> int:
            if pos[0] >= UNIFORM_BLOCK:
                refill()
            i = pos[0]
            pos[0] = i + 1
            cumulative = np.cumsum(weights)
            j = int(np.searchsorted(cumulative, buf[0][i] * cumulative[-1], side="right"))
            if j < len(weights):
                return j
            return int(np.flatnonzero(weights)[-1])  # u·Σ rounded up to Σ: the last with weight

        return select


@register
class KSDSelection(Selection):
    kind = "ksd"
    indicator = "ksd"
    description = (
        "parameter server: the client drawn with probability ∝ its KSD to its tilted distribution "
        "(eq. 17 of 003; dsvgd)"
    )


@register
class HIPSelection(Selection):
    kind = "hip"
    indicator = "hip"
    description = (
        "parameter server: the client drawn with probability ∝ the RKHS inner product of its "
        "SVGD direction with the average likelihood's (eq. 24 of 003; dsvgd)"
    )
