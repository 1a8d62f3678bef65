"""G-FVL for conjugate exponential-family models, with exact gossip unlearning.

Learning is Algorithm 1 with the closed-form update of eqs. (13)-(14): when node k holds the token,

    η ← η − η_k + s_k,     η_k ← s_k,

where s_k = (1/α) Σ_{x ∈ D_k} [s_l(x); 1] is the node's exact likelihood factor. A node's first visit
adds its factor; later visits change nothing. Unlearning (eq. 21, Section IV): once node k has asked
to be forgotten, its next visit sets η ← η − η_k, η_k ← 0, and it never contributes again. A node
that is forgotten before it was ever visited has nothing to remove.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .base import Protocol, StateTrace


class ConjugateGFVL(Protocol):
    """G-FVL with exact conjugate updates (eqs. 13-14) and exact unlearning (eq. 21).

    Parameters
    ----------
    prior : natural parameters η₀ of the prior, shape ``(D,)``.
    factors : exact local factors s_k, shape ``(K, D)`` (already divided by the temperature).
    bits_per_message : payload of one message (64 bits per natural-parameter entry by default).
    forgotten : nodes excluded from the start (used by the retrain-from-scratch baseline).
    trace : where to record the posterior; a new one if not given.
    start_slot : the slot at which the initial state is recorded (0 for a fresh run).
    """

    def __init__(
        self,
        prior: np.ndarray,
        factors: np.ndarray,
        *,
        bits_per_message: float | None = None,
        forgotten: Iterable[int] = (),
        trace: StateTrace | None = None,
        start_slot: int = 0,
    ) -> None:
        self.eta = np.array(prior, dtype=float, copy=True)
        self.factors = np.asarray(factors, dtype=float)
        n_nodes = self.factors.shape[0]
        self.local = np.zeros_like(self.factors)  # η_k, the factor each node currently has in η
        self.bits = float(64 * self.eta.size if bits_per_message is None else bits_per_message)
        self.forgotten = np.zeros(n_nodes, dtype=bool)
        self.forgotten[list(forgotten)] = True
        # idle[k]: a visit to k changes nothing (already contributed, or forgotten with nothing to remove)
        self._idle = self.forgotten.tolist()
        self._outstanding = n_nodes - int(self.forgotten.sum())
        self.trace = trace if trace is not None else StateTrace()
        self.trace.record(start_slot, self.eta)

    def on_token(self, holder: int, slot: int) -> float:
        if self._idle[holder]:
            return self.bits
        if self.forgotten[holder]:
            self.eta = self.eta - self.local[holder]  # eq. (21)
            self.local[holder] = 0.0
        else:
            self.eta = self.eta - self.local[holder] + self.factors[holder]  # eq. (13)
            self.local[holder] = self.factors[holder]  # eq. (14)
        self._idle[holder] = True
        self._outstanding -= 1
        self.trace.record(slot, self.eta)
        return self.bits

    def on_request(self, node: int, slot: int) -> None:
        if self.forgotten[node]:
            return
        self.forgotten[node] = True
        if not self._idle[node]:
            self._idle[node] = True  # never visited: nothing to remove, and it will not contribute
            self._outstanding -= 1
        elif np.any(self.local[node] != 0.0):
            self._idle[node] = False  # its factor must be removed at its next visit
            self._outstanding += 1

    def done(self) -> bool:
        return self._outstanding == 0

    def traces(self) -> dict[str, StateTrace]:
        return {"main": self.trace}
