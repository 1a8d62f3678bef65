"""G-FVL for conjugate exponential-family models, with exact gossip unlearning.

Learning is Algorithm 1 with the closed-form update of eqs. (13)-(14): when node k holds the token,

    η ← η − η_k + s_k,     η_k ← s_k,

where s_k = (1/α) Σ_{x ∈ D_k} [s_l(x); 1] is the node's exact likelihood factor. A node's first visit
adds its factor; later visits change nothing. Unlearning (eq. 21, Section IV): once node k has asked
to be forgotten, its next visit sets η ← η − η_k, η_k ← 0, and it never contributes again. A node
that is forgotten before it was ever visited has nothing to remove.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from gossipsim.families.exactsum import running_sums
from gossipsim.network.messages import Message
from gossipsim.protocols.base import Protocol, StateTrace


class FactorTrace(StateTrace):
    """The trace of a conjugate G-FVL posterior, recorded as events instead of states.

    Each change of q adds (+1) or removes (−1) one node's exact factor, or resets q to the prior (the
    retrain baseline restarting); the states are rebuilt after the run by cumulative sums in the same
    order as the updates. Recording is then a few list appends per change, whatever the dimension
    of the factors.

    With ``exact_sums`` each state is the correctly rounded sum of the prior and the factors it
    holds (:func:`~gossipsim.families.exactsum.running_sums`): a function of that set alone, so a
    factor added and removed again leaves q exactly as it was, and q holding every factor is the
    target bit for bit. Without, the sums are float64's in update order.
    """

    __slots__ = ("prior", "factors", "exact_sums", "_nodes", "_signs")

    def __init__(self, prior: np.ndarray, factors: np.ndarray, *, exact_sums: bool = False) -> None:
        super().__init__()
        self.prior = np.asarray(prior, dtype=float)
        self.factors = np.asarray(factors, dtype=float)
        self.exact_sums = exact_sums
        self._nodes: list[int] = []
        self._signs: list[int] = []

    def reset(self, slot: int) -> None:
        """From the end of ``slot`` on, q is the prior."""
        self._slots.append(slot)
        self._nodes.append(0)
        self._signs.append(0)

    def add(self, slot: int, node: int, sign: int) -> None:
        """At the end of ``slot``, node's factor enters (+1) or leaves (−1) q."""
        self._slots.append(slot)
        self._nodes.append(node)
        self._signs.append(sign)

    def record(self, slot: int, state: np.ndarray) -> None:
        raise TypeError("a FactorTrace records factor events (add, reset), not states")

    def truncate(self, length: int) -> None:
        del self._slots[length:]
        del self._nodes[length:]
        del self._signs[length:]

    @property
    def states(self) -> np.ndarray:
        signs = np.asarray(self._signs, dtype=float)
        steps = self.factors[np.asarray(self._nodes, dtype=np.int64)] * signs[:, None]  # ±f exactly
        resets = np.flatnonzero(signs == 0)
        out = np.empty_like(steps)
        add_up = running_sums if self.exact_sums else np.cumsum
        for i, begin in enumerate(resets):
            end = resets[i + 1] if i + 1 < resets.size else steps.shape[0]
            block = steps[begin:end].copy()
            block[0] = self.prior
            out[begin:end] = add_up(block, axis=0)  # prior + f₁ + f₂ ..., in update order
        return out


class ConjugateGFVL(Protocol):
    """G-FVL with exact conjugate updates (eqs. 13-14) and exact unlearning (eq. 21).

    Parameters
    ----------
    prior : natural parameters η₀ of the prior, shape ``(D,)``.
    factors : exact local factors s_k, shape ``(K, D)`` (already divided by the temperature).
    bits_per_message : payload of one message (64 bits per natural-parameter entry by default).
    forgotten : nodes excluded from the start (used by the retrain-from-scratch baseline).
    trace : the :class:`FactorTrace` to record into (the retrain baseline passes one on from
        restart to restart); a new one if not given.
    start_slot : the slot at which the initial state is recorded (0 for a fresh run).
    exact_sums : whether states are correctly rounded sums of the factors they hold (a new
        trace's :class:`FactorTrace` ``exact_sums``; the model's ``exact_sums``).
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
        exact_sums: bool = False,
    ) -> None:
        self.prior = np.array(prior, dtype=float, copy=True)
        self.factors = np.asarray(factors, dtype=float)
        n_nodes = self.factors.shape[0]
        self.bits = float(64 * self.prior.size if bits_per_message is None else bits_per_message)
        self.message = Message(self.bits)  # constant size: one object for every hop
        # per-node flags in byte arrays (one byte per node; per-hop reads of numpy scalars are slow)
        self.forgotten = bytearray(n_nodes)
        for node in forgotten:
            self.forgotten[node] = 1
        self.contributed = bytearray(n_nodes)  # η_k ≠ 0: the node's factor is in q
        self._nonzero = bytearray(np.any(self.factors != 0.0, axis=1).astype(np.uint8).tobytes())
        # idle[k]: a visit to k changes nothing (already contributed, or forgotten with nothing to remove)
        self._idle = bytearray(self.forgotten)
        self._outstanding = n_nodes - sum(self.forgotten)
        self.removed: dict[int, int] = {}
        # failures: the custodian's copy (holder, its factor in?), the nodes a regenerated token
        # names (their last update was lost), and the bits of a name
        self._kept = (0, 0)
        self._named: set[int] = set()
        self.id_bits = max(1, math.ceil(math.log2(max(n_nodes, 1))))
        if trace is None:
            trace = FactorTrace(self.prior, self.factors, exact_sums=exact_sums)
        if not isinstance(trace, FactorTrace):
            raise TypeError("ConjugateGFVL records into a FactorTrace")
        self.trace = trace
        self._add = trace.add
        trace.reset(start_slot)

    @property
    def eta(self) -> np.ndarray:
        """Natural parameters of the current q (rebuilt from the trace)."""
        return self.trace.states[-1]

    def on_token(self, holder: int, slot: int) -> Message:
        if self._named and holder in self._named:  # it read its flag: the token drops its name
            self._named.discard(holder)
            self.message = Message(self.bits + self.id_bits * len(self._named))
        if self._idle[holder]:
            return self.message
        if self.forgotten[holder]:
            self._add(slot, holder, -1)  # eq. (21): η ← η − η_k, η_k ← 0
            self.contributed[holder] = 0
            self.removed[holder] = slot
        else:
            self._add(slot, holder, 1)  # eq. (13) with η_k = 0: η ← η + s_k; eq. (14): η_k ← s_k
            self.contributed[holder] = 1
        self._idle[holder] = 1
        self._outstanding -= 1
        return self.message

    def checkpoint(self, holder: int) -> tuple[int, int, int, int, int | None, int]:
        """The holder's flags, the count of outstanding nodes, its removal slot and the trace's
        length: all that a visit changes."""
        return (
            holder, self.contributed[holder], self._idle[holder], self._outstanding,
            self.removed.get(holder), len(self.trace),
        )  # fmt: skip

    def take_back(self, saved: tuple[int, int, int, int, int | None, int], slot: int) -> None:
        """The visit never happened: the node's factor t_k is as before (its factor still to be
        added, or still to be removed, at its next visit), and so is q."""
        holder, contributed, idle, outstanding, removed, length = saved
        self.contributed[holder] = contributed
        self._idle[holder] = idle
        self._outstanding = outstanding
        if removed is None:
            self.removed.pop(holder, None)
        else:
            self.removed[holder] = removed
        self.trace.truncate(length)

    def on_request(self, node: int, slot: int) -> None:
        if self.forgotten[node]:
            return
        self.forgotten[node] = 1
        if not self._idle[node]:
            self._idle[node] = 1  # never visited: nothing to remove, and it will not contribute
            self._outstanding -= 1
            self.removed[node] = slot - 1
        elif self.contributed[node] and self._nonzero[node]:
            self._idle[node] = 0  # its factor must be removed at its next visit
            self._outstanding += 1
        else:  # a node without data: its factor is zero
            self.removed[node] = slot - 1

    # ------------------------------------------------------------------ failures (engine.token)

    recovers_token = True

    def hand_over(self, slot: int, holder: int) -> None:
        """The custodian's copy: whether ``holder``'s factor is in the token (the only factor the
        slots until the next hand-over can change)."""
        self._kept = (holder, self.contributed[holder])

    def on_holder_lost(self, holder: int, slot: int) -> None:
        """Exact recovery: the token goes back to the custodian's copy, whose factors are those it
        lists (one flag per node: q is the prior plus exactly those factors, eq. 13). The holder
        made its update and believes its factor is in; the regenerated token names it (its index,
        :attr:`id_bits` bits, until its next visit) and the holder takes its flag from the token:
        it adds its factor again at its next visit (or, if forgotten, removes the factor the
        token still holds). Restoring only q, with the holder's belief kept, would leave its
        factor out for good."""
        node, was_in = self._kept
        assert node == holder, "only the holder's slots change the token between hand-overs"
        if self.contributed[holder] != was_in:
            self._add(slot, holder, 1 if was_in else -1)  # back to the copy's set of factors
            self.contributed[holder] = was_in
        idle_before = self._idle[holder]
        if self.forgotten[holder] and was_in and self._nonzero[holder]:
            self._idle[holder] = 0  # its factor is in the token again: remove it at the next visit
            self.removed.pop(holder, None)
        elif self.forgotten[holder]:
            self._idle[holder] = 1
            self.removed.setdefault(holder, slot)
        else:
            self._idle[holder] = was_in
        self._outstanding += idle_before - self._idle[holder]
        self._named.add(holder)
        self.message = Message(self.bits + self.id_bits * len(self._named))

    def serve_for(self, holder: int, node: int, slot: int) -> bool:
        """A delegate removes the down node's factor (eq. 21), of which it holds a copy: the
        node's next visit would do exactly this, in ``slot`` instead."""
        if not (self.forgotten[node] and not self._idle[node]):
            return False
        self._add(slot, node, -1)
        self.contributed[node] = 0
        self.removed[node] = slot
        self._idle[node] = 1
        self._outstanding -= 1
        return True

    def done(self) -> bool:
        return self._outstanding == 0

    def removals(self) -> dict[int, int]:
        return dict(self.removed)

    def traces(self) -> dict[str, StateTrace]:
        return {"main": self.trace}
