"""003's client-selection framework on the parameter server (Section III-A, Algorithms 1 and 2).

Each iteration i:

1. the server **broadcasts** what every client's indicator needs to every client taking part (not
   yet forgotten), all at once: the global particles, and for the sound variant's KSD the scores'
   aggregate S too;
2. every client computes its **indicator** from them and **reports** it, all at once:
   - ``ksd`` (eq. 17): S(q, p̃_k), the kernelized Stein discrepancy between the particles and the
     client's tilted distribution p̃_k, one number;
   - ``hip`` (eqs. 19, 24): the client's likelihood scores ∇log p_k at the N particles (N × d
     numbers), from which the server forms every client's ⟨φ_k, φ'⟩ at once;
3. the server turns the indicators into the **selection distribution** P
   (:func:`~gossipsim.particles.selection.selection_distribution`: P_k ∝ max(I_k, 0); uniform,
   counted as a fallback, when no indicator is positive or one is not finite), **draws** the client
   (the scheduler: kinds ``ksd`` and ``hip``, :mod:`gossipsim.scheduling.selection`, which read P in
   :attr:`NodeView.weights <gossipsim.scheduling.NodeView.weights>`);
4. the server sends the selected client the **rest** of its state (the sound variant's AdaGrad
   history, and S where the broadcast did not carry it: what a plain round's download holds beyond
   the broadcast), and the client runs its DSVGD update and **uploads** it.

The slot's :class:`~gossipsim.network.messages.Round` has these phases (broadcast, reports, the
rest, the upload; the paper variant has no rest), chained, the computation before the upload. The tilted distribution's score, per
DSVGD variant (the paper defines KSD for its KDE-based variant; here both):

- ``paper``: ∇log q̂(θ) − ∇log t̂_k(θ) + (1/α)∇log p(D_k | θ), q̂ and t̂_k the KDEs of the global and
  of the client's local particles (its t_k; the initial particles before its first visit);
- ``sound``: ∇log p0(θ) + (S − g_k) + (1/α)∇log p(D_k | θ), the target a visit steps on: the prior,
  the other clients' last scores (the aggregate S without the client's own g_k) and its fresh one.

HIP uses the likelihood's score (1/α)∇log p(D_k | θ) in both (Algorithm 2, step 4). The kernel of
the indicators is the SVGD kernel of the protocol's steps: the median rule on the global particles,
or ``kernel_bandwidth`` when it is a number.

**Requests.** A client with a pending unlearning request is selected next, with probability 1
(several: the lowest index first): the server serves requests before it learns, as a user expects
of unlearning; a forgotten client takes no part (no broadcast, no report, probability 0).

**What is charged.** Bits: every transfer of the round; ``indicator_bits`` counts what selection
adds to a plain round (a download to the scheduled agent and its upload): the broadcast to the other
clients and every report (the selected client's broadcast and rest are a plain download). Seconds: the three phases' transfers (each phase as long as its slowest)
and the selected client's computation; the clients' computation of their indicators is not
charged (one score evaluation each, in parallel, small beside the update's).

The indicators of iteration i + 1 are computed at the end of iteration i, from the particles the
slot made: the scheduler draws the next client from them before the next slot starts; the first
client is drawn from those of the initial particles (:func:`gossipsim.world.world.start_node`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from gossipsim.network.messages import SERVER, Message, Round, Transfer
from gossipsim.particles.kernels import BandwidthRule, median_bandwidth, pairwise_squared_distances
from gossipsim.particles.selection import (
    inner_products,
    inner_products_with_average,
    selection_distribution,
    stein_discrepancies,
)

FloatArray = NDArray[np.float64]

#: the indicators a client can report, each with what it uploads
INDICATORS: Final[dict[str, str]] = {
    "ksd": "S(q, p̃_k), the KSD of the particles to the client's tilted distribution (1 number)",
    "hip": "the client's likelihood scores at the N particles (N × d numbers); the server forms "
    "⟨φ_k, φ'⟩",
}


def kernel_bandwidth(particles: FloatArray, rule: BandwidthRule, fixed: float | None) -> float:
    """h of the indicators' RBF kernel: ``fixed`` if given, else the median ``rule`` on the
    particles (the SVGD steps' own)."""
    if fixed is not None:
        return fixed
    return float(median_bandwidth(pairwise_squared_distances(particles, particles), rule))


@dataclass(frozen=True)
class SelectionSettings:
    """What the protocol needs to know of the scheduler's selection: the ``indicator`` (a key of
    :data:`INDICATORS`) and the ``floor`` mixed with the uniform distribution; on the walk
    (``degrees``: each node's number of neighbours, who receive its indicator) the
    importance-weighted walk's (:class:`WalkSelection`)."""

    indicator: str
    floor: float = 0.0
    degrees: tuple[int, ...] | None = None
    #: h of the indicators' kernel, or None: the SVGD steps' (``[scheduler] indicator_bandwidth``)
    bandwidth: float | None = None

    def __post_init__(self) -> None:
        if self.indicator not in INDICATORS:
            raise ValueError(
                f"indicator must be one of {sorted(INDICATORS)}, got {self.indicator!r}"
            )


class ClientSelection:
    """The server's side of the framework for one run: the selection weights it publishes, the
    slot's round, and what the tables report of it."""

    def __init__(
        self,
        settings: SelectionSettings,
        nodes: int,
        entry_bits: float,
        rule: BandwidthRule,
        fixed_bandwidth: float | None,
    ) -> None:
        self.settings = settings
        self.nodes = nodes
        self.entry_bits = float(entry_bits)
        self.rule: BandwidthRule = rule
        self.fixed_bandwidth = fixed_bandwidth
        #: the distribution the next client is drawn from (the scheduler reads it, in place)
        self.weights = np.full(nodes, 1.0 / nodes)
        self._entropy = float(np.log(nodes))  # of the distribution in :attr:`weights`
        self._taking_part = np.ones(nodes, dtype=bool)  # when the weights were made
        self.fallbacks = 0
        self.entropies: list[float] = []  # per slot: the distribution that selected its client
        self.indicator_bits: list[float] = []  # per slot, cumulative

    def bandwidth(self, particles: FloatArray) -> float:
        return kernel_bandwidth(particles, self.rule, self.fixed_bandwidth)

    def refresh(
        self,
        particles: FloatArray,
        scores: Callable[[int], FloatArray],
        taking_part: NDArray[np.bool_],
        pending: set[int],
    ) -> None:
        """Compute every client's indicator at ``particles`` from ``scores(k)`` (the tilted
        distribution's score for ``ksd``, the likelihood's for ``hip``, ``(N, d)``) and publish the
        distribution the next client is drawn from (in :attr:`weights`, in place)."""
        self._taking_part = taking_part.copy()
        weights = np.zeros(self.nodes)
        if pending:
            weights[min(pending)] = 1.0
            self.weights[:] = weights
            self._entropy = 0.0
            return
        clients = np.flatnonzero(taking_part)
        if clients.size == 0:
            self.weights[:] = 1.0 / self.nodes
            self._entropy = float(np.log(self.nodes))
            return
        stacked = np.stack([scores(int(k)) for k in clients])
        h = self.bandwidth(particles)
        with np.errstate(all="ignore"):  # a diverged score gives a non-finite indicator
            if self.settings.indicator == "ksd":
                values = stein_discrepancies(particles, stacked, h)
            else:
                values = inner_products_with_average(particles, stacked, h)
        chosen = selection_distribution(values, self.settings.floor)
        self.fallbacks += int(chosen.fallback)
        weights[clients] = chosen.probabilities
        self.weights[:] = weights
        self._entropy = chosen.entropy

    def report_entries(self, particle_entries: int) -> int:
        """Numbers a client reports: 1 (``ksd``) or its scores at the particles (``hip``)."""
        return 1 if self.settings.indicator == "ksd" else particle_entries

    def round(
        self,
        selected: int,
        broadcast_bits: float,
        rest_bits: float,
        upload_bits: float,
        particle_entries: int,
    ) -> Round:
        """The slot's round with ``selected`` (see the module docstring), and its bookkeeping:
        the entropy of the distribution that selected it, the indicator bits. Every client
        receives ``broadcast_bits`` (what its indicator needs); the selected one also the
        ``rest_bits`` of the server's state its update needs, then uploads ``upload_bits``."""
        clients = np.flatnonzero(self._taking_part)
        count = len(clients)
        previous = self.indicator_bits[-1] if self.indicator_bits else 0.0
        self.entropies.append(self._entropy)
        if count == 0:  # every client forgotten: a plain round with the scheduled one
            self.indicator_bits.append(previous)
            download = Message(broadcast_bits + rest_bits)
            return Round((Transfer(SERVER, selected, download),
                          Transfer(selected, SERVER, Message(upload_bits))),
                         sequential=True, chained=True, compute_after=1)  # fmt: skip
        report = Message(self.entry_bits * self.report_entries(particle_entries))
        broadcast = Message(broadcast_bits)
        transfers = [Transfer(SERVER, int(k), broadcast) for k in clients]
        transfers += [Transfer(int(k), SERVER, report) for k in clients]
        phases = [count, count]
        if rest_bits > 0:  # the rest of the state, to the selected client alone
            transfers.append(Transfer(SERVER, selected, Message(rest_bits)))
            phases.append(1)
        compute_after = len(transfers)
        transfers.append(Transfer(selected, SERVER, Message(upload_bits)))
        phases.append(1)
        # what a plain round (the state to the agent, its upload) would not have sent
        self.indicator_bits.append(previous + (count - 1) * broadcast_bits + count * report.bits)
        return Round(
            tuple(transfers), phases=tuple(phases), chained=True, compute_after=compute_after
        )

    def series(self) -> dict[str, FloatArray]:
        """Per slot: ``selection_entropy`` (nats) and the cumulative ``indicator_bits``."""
        return {
            "selection_entropy": np.asarray(self.entropies, dtype=np.float64),
            "indicator_bits": np.asarray(self.indicator_bits, dtype=np.float64),
        }


class WalkSelection:
    """The importance-weighted walk's indicators (kinds ``ksd-walk``, ``hip-walk``), kept by the
    nodes: a node computes its own when it holds the token, from the particles it passes on, and
    shares it with its neighbours (one number each: ``degree × bits_per_entry`` side bits of its
    slot). A neighbour's weight is therefore as old as that node's last slot with the token:
    :attr:`ages` says how old, per slot. At slot 0 every node computes its indicator at the
    initial particles (the prior's draws, which the nodes can make from a shared seed) and shares
    it: 2|E| numbers, counted in slot 1.

    The weight of node k is max(I_k, 0) (:func:`~gossipsim.particles.selection.selection_distribution`'s
    rule; a non-finite indicator gives 0 and is counted in ``selection_fallbacks``); the walk reads
    the weights in place (:attr:`weights`). ``hip`` on the walk pairs the holder's likelihood
    scores with the average the token knows: (S − g_k + its fresh score)/K, S the sound variant's
    aggregate of every node's last scores (stale where theirs are)."""

    def __init__(
        self,
        settings: SelectionSettings,
        entry_bits: float,
        rule: BandwidthRule,
        fixed_bandwidth: float | None,
    ) -> None:
        assert settings.degrees is not None
        self.settings = settings
        self.rule: BandwidthRule = rule
        self.fixed_bandwidth = fixed_bandwidth
        self.degrees = np.asarray(settings.degrees, dtype=np.int64)
        self.entry_bits = float(entry_bits)
        nodes = self.degrees.size
        self.weights = np.zeros(nodes)  # published: the walk reads them at every hop
        self.refreshed = np.zeros(nodes, dtype=np.int64)  # the slot of each node's last value
        self._refreshed_total = 0  # their sum, kept as they change (the mean age in O(1))
        self.fallbacks = 0
        self.ages: list[float] = []  # per slot: the mean age (slots) of the weights in force
        self.indicator_bits: list[float] = []  # per slot, cumulative
        self._messages: dict[int, Message] = {}
        self._first = float(self.degrees.sum()) * self.entry_bits  # slot 0's sharing

    def weight(self, value: float) -> float:
        if not np.isfinite(value):
            self.fallbacks += 1
            return 0.0
        return max(float(value), 0.0)

    def start(self, values: FloatArray) -> None:
        """Every node's indicator at the initial particles (slot 0)."""
        self.weights[:] = [self.weight(float(v)) for v in values]

    def indicator(
        self, particles: FloatArray, scores: FloatArray, average: FloatArray | None
    ) -> float:
        """One node's indicator: its KSD (``scores`` its tilted distribution's) or its HIP
        (``scores`` its likelihood's, ``average`` the average likelihood's)."""
        h = kernel_bandwidth(particles, self.rule, self.fixed_bandwidth)
        with np.errstate(all="ignore"):
            if self.settings.indicator == "ksd":
                return float(stein_discrepancies(particles, scores[None], h)[0])
            assert average is not None
            return float(inner_products(particles, scores[None], average, h)[0])

    def requested(self, node: int, pending: bool) -> None:
        """A request from ``node``: with data to remove (``pending``) its weight becomes +inf, so
        that every neighbour passes it the token (its removal comes at its next visit, and the
        walk, which then cannot leave it, moves on once its weight is 0); with nothing to remove,
        0 (a forgotten node is never proposed again). Its neighbours learn it at once (its
        message's bits are not counted: one flag per neighbour)."""
        self.weights[node] = np.inf if pending else 0.0

    def shared(self, holder: int, slot: int, value: float, message: Message) -> Message:
        """Record the holder's new indicator and return the slot's message with its sharing's
        side bits (slot 1: every node's first sharing too)."""
        self.weights[holder] = self.weight(value)
        self._refreshed_total += slot - int(self.refreshed[holder])
        self.refreshed[holder] = slot
        side = float(self.degrees[holder]) * self.entry_bits
        if slot == 1:
            side += self._first
        previous = self.indicator_bits[-1] if self.indicator_bits else 0.0
        self.indicator_bits.append(previous + side)
        nodes = self.refreshed.size  # the mean of slot − refreshed, exactly as NumPy's (integers)
        self.ages.append((nodes * slot - self._refreshed_total) / nodes)
        if slot == 1:
            return Message(message.bits, message.payload, side)
        found = self._messages.get(holder)
        if found is None or found.bits != message.bits:
            found = self._messages[holder] = Message(message.bits, message.payload, side)
        return found

    def series(self) -> dict[str, FloatArray]:
        """Per slot: the cumulative ``indicator_bits`` and the mean ``indicator_age`` (slots since
        each node last refreshed its weight, at the end of the slot)."""
        return {
            "indicator_bits": np.asarray(self.indicator_bits, dtype=np.float64),
            "indicator_age": np.asarray(self.ages, dtype=np.float64),
        }
