"""A batch's walks as a table of slots: the holder, end and start time and bits of any run at any
slot the measurement asks about, whether the walks were stepped slot by slot or drawn as stays.

The vectorised engine records a batch of runs either as runs × slots arrays (every slot stepped:
:class:`SteppedSlots`) or as *stays* (a holder, the first slot it holds, the moves before it:
:class:`StaySlots`), which keeps memory to runs × moves when a walk mostly waits. Both answer the
same questions (:class:`SlotTable`), by the definitions of docs/architecture.md, from what a slot
costs (:class:`SlotCosts`): slot i ends at t_i = s_i + c + r (c the compute time of a slot, r the
time of its round with the parameter server, 0 on the walk) and starts at s_i = (i − 1)·(c + r) +
h_i·hop, where h_i is the number of moves (hops to another node) before slot i (none with the
server, where no token moves); ``bits`` at slot i is h_i times the message's bits plus i times the
bits of a round (the server's download and upload). A centralised run has one round, in slot 1
(every node's upload of its data): its time and bits are added from slot 1 on. Stepped walks add these costs up slot by slot in
the event engine's order (:func:`stepped_clock`), so their times are the event engine's bit for
bit. When nodes compute at their own speeds (``[compute] seconds_per_iteration`` per node), c is
the holder's own and the (i − 1)·c above is the sum of the earlier holders' times: stepped walks
only (the stays' products assume one c).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class SlotCosts:
    """What every slot of a run costs, in the order the event engine pays it: the holder's
    computation (``compute_seconds``: one number, or one per node index, the holder's entry);
    then the slot's round with the parameter server, if there is
    one (``round_seconds`` for its transfers, ``round_bits`` each transfer's bits in order), which
    the slot's end waits for; then, when the next holder is another node, the token's hop
    (``hop_seconds``, ``hop_bits``) before the next slot starts. The walk has hops and no rounds,
    the server a round every slot and no hops. ``first_round_seconds`` and ``first_round_bits``
    (the bits of its transfers, summed in their order) are a round in slot 1 only: a centralised
    run's upload of every node's data (:mod:`gossipsim.protocols.centre`), which has no other
    round."""

    compute_seconds: float | tuple[float, ...]
    hop_seconds: float = 0.0
    hop_bits: float = 0.0
    round_seconds: float = 0.0
    round_bits: tuple[float, ...] = ()
    first_round_seconds: float = 0.0
    first_round_bits: float = 0.0

    def __post_init__(self) -> None:
        first = self.first_round_seconds or self.first_round_bits
        if first and (self.round_seconds or self.round_bits):
            raise ValueError("a first round is the run's only round: no round in every slot too")

    @property
    def per_node(self) -> bool:
        """Whether nodes compute at their own speeds (``compute_seconds`` one per node)."""
        return isinstance(self.compute_seconds, tuple)

    @property
    def slot_seconds(self) -> float:
        """A slot's own time, its hop left out: the computation and the round (the same at every
        holder: not for compute times per node)."""
        if isinstance(self.compute_seconds, tuple):
            raise ValueError("a slot's time depends on its holder: compute times are per node")
        return self.compute_seconds + self.round_seconds


def stepped_clock(
    costs: SlotCosts, holders: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """End and start time of each slot and the payload bits sent by each slot's end (runs × slots:
    the holders of every slot of every run), with the event engine's arithmetic: times are running
    sums of the costs in the order they are paid (computation, the holder's own when compute times
    are per node; round; hop if the token moves; a cost of zero is left out, adding it changes no
    bit), bits whole numbers summed exactly."""
    batch, columns = holders.shape
    moved = holders[:, 1:] != holders[:, :-1]
    rounds = costs.round_seconds or costs.first_round_seconds
    parts = [0.0] + ([costs.round_seconds] if rounds else [])  # the computation: below
    hop = costs.hop_seconds != 0.0
    width = len(parts) + hop  # increments per slot
    increments = np.empty((batch, columns * width))
    for p, value in enumerate(parts):
        increments[:, p::width] = value
    compute = costs.compute_seconds
    increments[:, 0::width] = (
        np.asarray(compute, dtype=np.float64)[holders] if isinstance(compute, tuple) else compute
    )
    if costs.first_round_seconds and columns:  # slot 1's round, after its computation
        increments[:, 1] = costs.first_round_seconds
    if hop:  # the hop after each slot (none after the last)
        hops = increments[:, width - 1 :: width]
        hops[:, :-1] = np.where(moved, costs.hop_seconds, 0.0)
        hops[:, -1] = 0.0
    cumulative = np.cumsum(increments, axis=1)
    end_times = cumulative[:, len(parts) - 1 :: width]
    starts = np.zeros((batch, columns))
    starts[:, 1:] = cumulative[:, width - 1 :: width][:, :-1]
    return end_times, starts, _sent(costs, moved)


def _sent(costs: SlotCosts, moved: np.ndarray) -> np.ndarray:
    """Bits sent by the end of each slot: a round's transfers during the slot, a hop's after it,
    summed in that order (exactly, as products, when they are whole numbers below 2^53)."""
    batch, columns = moved.shape[0], moved.shape[1] + 1
    per_round = math.fsum(costs.round_bits)
    first = costs.first_round_bits
    whole = all(float(b).is_integer() for b in (*costs.round_bits, costs.hop_bits, first))
    if whole and (per_round + costs.hop_bits) * columns + first < 2**53:
        hops = np.zeros((batch, columns), dtype=np.int64)
        np.cumsum(moved, axis=1, out=hops[:, 1:])
        sent = costs.hop_bits * hops
        if per_round:
            sent += per_round * np.arange(1, columns + 1)
        return sent + first if first else sent
    rounds = len(costs.round_bits) or 1  # slot 1's round stands where a round's bits stand
    width = rounds + 1  # per slot: the round's transfers, then the hop
    increments = np.zeros((batch, 1 + columns * width))  # a zero first: nothing sent before
    for p, bits in enumerate(costs.round_bits):
        increments[:, 1 + p :: width] = bits
    if first:
        increments[:, 1] = first
    increments[:, width::width][:, :-1] = np.where(moved, costs.hop_bits, 0.0)
    return np.cumsum(increments, axis=1)[:, rounds::width][:, :columns]


class SlotTable(Protocol):
    """What a batch's walks give at (run row, 1-based slot) pairs, for slots within each run."""

    @property
    def columns(self) -> int:
        """The slots walked by the longest run of the batch."""
        ...

    def holder(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray: ...

    def end_time(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray: ...

    def start_time(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray: ...

    def bits(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray: ...

    def visits(self, n_slots: np.ndarray, kept: np.ndarray | None = None) -> np.ndarray:
        """Slots each node held the token within each run's ``n_slots``, summed over the runs
        (the rows where ``kept``, default all)."""
        ...


@dataclass
class SteppedSlots:
    """Every slot of every run stepped: runs × slots arrays (the event engine's arithmetic)."""

    holders: np.ndarray
    end_times: np.ndarray
    start_times: np.ndarray
    sent: np.ndarray
    nodes: int

    @property
    def columns(self) -> int:
        return int(self.holders.shape[1])

    def holder(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        return self.holders[rows, slots - 1]

    def end_time(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        return self.end_times[rows, slots - 1]

    def start_time(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        return self.start_times[rows, slots - 1]

    def bits(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        return self.sent[rows, slots - 1]

    def visits(self, n_slots: np.ndarray, kept: np.ndarray | None = None) -> np.ndarray:
        within = np.arange(1, self.columns + 1)[None, :] <= n_slots[:, None]
        if kept is None:
            return np.bincount(self.holders[within], minlength=self.nodes)
        return np.bincount(self.holders[kept][within[kept]], minlength=self.nodes)


@dataclass
class StaySlots:
    """Walks kept as stays: row ``rows[m]`` holds ``holders[m]`` from slot ``starts[m]`` until the
    next stay of its row, after ``hops[m]`` moves; sorted by row, then slot. Only the stays the
    measurement can ask about need be kept (a lookup answers from the last kept stay starting at
    or before the slot). ``per_run_visits`` (runs × nodes) are the slots each node held the token
    within each run, summed as the stays were drawn. Times and bits are those of ``costs``, as
    products (the stays' tables agree with stepped walks in distribution, not in value)."""

    rows: np.ndarray
    starts: np.ndarray
    holders: np.ndarray
    hops: np.ndarray
    columns: int
    costs: SlotCosts
    per_run_visits: np.ndarray

    def _stay(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        span = self.columns + 1
        keys = self.rows * span + self.starts
        return np.searchsorted(keys, rows * span + slots, side="right") - 1

    def holder(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        return self.holders[self._stay(rows, slots)]

    def end_time(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        costs = self.costs
        end = slots * costs.slot_seconds + self._moved(rows, slots) * costs.hop_seconds
        return end + costs.first_round_seconds if costs.first_round_seconds else end

    def start_time(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        costs = self.costs
        start = (slots - 1) * costs.slot_seconds + self._moved(rows, slots) * costs.hop_seconds
        if costs.first_round_seconds:  # every slot after the first starts after slot 1's round
            start = start + np.where(slots > 1, costs.first_round_seconds, 0.0)
        return start

    def bits(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        sent = self._moved(rows, slots) * self.costs.hop_bits + self.costs.first_round_bits
        per_round = math.fsum(self.costs.round_bits)
        return sent + slots * per_round if per_round else sent

    def _moved(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        return self.hops[self._stay(rows, slots)]

    def visits(self, n_slots: np.ndarray, kept: np.ndarray | None = None) -> np.ndarray:
        chosen = self.per_run_visits if kept is None else self.per_run_visits[kept]
        return chosen.sum(axis=0).astype(np.int64)


def round_seconds(delays: Sequence[float], sequential: bool | Sequence[int]) -> float:
    """How long a round whose transfers take ``delays`` seconds lasts: its phases one after
    another, each as long as its slowest transfer (:attr:`Round.phase_sizes
    <gossipsim.network.messages.Round.phase_sizes>`); ``True`` is a phase per transfer (their sum,
    in order), ``False`` one phase of all (the slowest). The vectorised engine times the server's
    rounds with it too."""
    if sequential is True:
        return sum(delays)
    if sequential is False:
        return max(delays, default=0.0)
    total, first = 0.0, 0
    for size in sequential:
        total += max(delays[first : first + size])
        first += size
    return total
