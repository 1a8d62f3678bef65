"""A batch's walks as a table of slots: the holder, end and start time and bits of any run at any
slot the measurement asks about, whether the walks were stepped slot by slot or drawn as stays.

The vectorised engine records a batch of runs either as runs × slots arrays (every slot stepped:
:class:`SteppedSlots`) or as *stays* (a holder, the first slot it holds, the moves before it:
:class:`StaySlots`), which keeps memory to runs × moves when a walk mostly waits. Both answer the
same questions (:class:`SlotTable`), by the definitions of docs/architecture.md: slot i of a walk ends
at t_i = s_i + c (c the compute time of a slot) and starts at s_i = (i − 1)·c + h_i·hop, where h_i
is the number of moves (hops to another node) before slot i; ``bits`` at slot i is h_i times the
message's bits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


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
    within each run, summed as the stays were drawn."""

    rows: np.ndarray
    starts: np.ndarray
    holders: np.ndarray
    hops: np.ndarray
    columns: int
    seconds_per_slot: float
    hop_seconds: float
    message_bits: float
    per_run_visits: np.ndarray

    def _stay(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        span = self.columns + 1
        keys = self.rows * span + self.starts
        return np.searchsorted(keys, rows * span + slots, side="right") - 1

    def holder(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        return self.holders[self._stay(rows, slots)]

    def end_time(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        return slots * self.seconds_per_slot + self._moved(rows, slots) * self.hop_seconds

    def start_time(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        return (slots - 1) * self.seconds_per_slot + self._moved(rows, slots) * self.hop_seconds

    def bits(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        return self._moved(rows, slots) * self.message_bits

    def _moved(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        return self.hops[self._stay(rows, slots)]

    def visits(self, n_slots: np.ndarray, kept: np.ndarray | None = None) -> np.ndarray:
        chosen = self.per_run_visits if kept is None else self.per_run_visits[kept]
        return chosen.sum(axis=0).astype(np.int64)
