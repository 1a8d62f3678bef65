"""Streamed traces for the vectorised engine's ``batched-steps`` kernel: the divergence of every
run's state to the target in force, computed as the states are made, and only the states the
measurement reads kept.

A natural-gradient state changes at every slot, and a run of 20,000 slots of a full-covariance
Gaussian in d = 31 would hold 160 MB of states. :func:`~gossipsim.measurement.measure.measure` reads a trace in
two ways: the divergence of the state in force at each segment start (every record slot and every
target change, :func:`~gossipsim.measurement.metrics.kl_segments`), and the states themselves at the slots
written to metrics.csv (for held-out metrics) and at the first segment whose divergence is not a
number (for the failure's message). The slots written are slot 1, every ``record_every``-th slot,
the run's last slot, and its convergence, latency and removal slots
(:func:`~gossipsim.measurement.metrics.recorded_slots`). The last three are either a request's slot (or the one
before it), a slot at which the protocol removed a node's factor, or the first slot of a stretch of
segments whose divergence is within the tolerance after one that is not
(:meth:`~gossipsim.measurement.metrics.Segments.first_settled`). So :class:`StreamedWorlds` buffers a few slots
of every run's state at a time, computes the divergence of each segment start batched over runs and
slots (with the representation's own divergence, row by row the same arithmetic as the
measurement), and keeps the state in force at exactly those slots, for both worlds (the protocol's
and the retrain baseline's, whose metrics are read at the same slots). Each run then gets its
:class:`~gossipsim.measurement.metrics.Segments` and a :class:`~gossipsim.engine.protocol_api.RecordedTrace` of its
kept states; :func:`~gossipsim.measurement.measure.measure` takes the segments as given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from gossipsim.engine.protocol_api import RecordedTrace
from gossipsim.measurement.metrics import Segments, divergence_of
from gossipsim.states.representations import Target

#: bytes of buffered states (both worlds) a batch holds between two flushes
BUFFER_BYTES = 64 * 2**20


@dataclass
class _World:
    """One world's buffer and what has been streamed out of it."""

    begin: int  # the first slot of its first segment (1 for the protocol, the first request's for the retrain baseline)
    buffer: np.ndarray  # (B, columns, *shape): the state in force after each buffered slot
    recorded: np.ndarray  # (B, columns): a record at that slot
    in_force: np.ndarray  # (B,): slot of the record in force (-1: none yet)
    good: np.ndarray  # (B,): the value at the last segment start is within the tolerance
    failed: np.ndarray  # (B,): a segment whose divergence is not a number has been kept
    parts: list[tuple[np.ndarray, ...]] = field(default_factory=list)  # segment rows per flush
    kept: list[tuple[np.ndarray, ...]] = field(default_factory=list)  # kept rows per flush


class StreamedWorlds:
    """The streamed traces of a batch's protocol (``"main"``) and retrain baseline
    (``"retrain"``, when there is one).

    Call :meth:`push` once per slot after the slot's work (slot 0: the initial records), with every
    run's state and whether it recorded; :meth:`finish` gives each run's segments and kept states.
    """

    def __init__(
        self,
        batch: int,
        shape: int | tuple[int, ...],
        worlds: dict[str, int],
        targets: Sequence[Target],
        target_slots: np.ndarray,
        divergence: Callable[[Target, np.ndarray], np.ndarray],
        *,
        excess: bool,
        tolerance: float | None,
        keep_slots: np.ndarray,
    ) -> None:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        entries = int(np.prod(shape))
        columns = max(1, min(256, BUFFER_BYTES // max(1, len(worlds) * batch * entries * 8)))
        self.worlds = {
            name: _World(
                begin=begin,
                buffer=np.zeros((batch, columns, *shape)),
                recorded=np.zeros((batch, columns), dtype=bool),
                in_force=np.full(batch, -1, dtype=np.int64),
                good=np.zeros(batch, dtype=bool),
                failed=np.zeros(batch, dtype=bool),
            )
            for name, begin in worlds.items()
        }
        self.batch = batch
        self.columns = columns
        self.targets = list(targets)
        self.target_slots = np.asarray(target_slots, dtype=np.int64)
        self.best = np.array(
            [np.nan if t.best_family_kl is None else t.best_family_kl for t in self.targets]
        )
        self.divergence = divergence
        self.excess = excess
        self.tolerance = tolerance
        self.keep_slots = np.asarray(keep_slots, dtype=np.int64)
        self.slots: list[int] = []
        self.active = np.zeros((batch, columns), dtype=bool)
        self.keep = np.zeros((batch, columns), dtype=bool)

    def push(
        self,
        slot: int,
        states: dict[str, tuple[np.ndarray, np.ndarray]],
        active: np.ndarray,
        keep: np.ndarray | None = None,
    ) -> None:
        """After slot ``slot``: each world's states (B, *shape: (B, D) natural parameters, (B, N, d)
        particle sets) and whether each run recorded one
        (B,), the runs ``active`` in that slot, and runs whose state in force must be kept
        (a removal, the run's last slot)."""
        column = len(self.slots)
        for name, (eta, recorded) in states.items():
            world = self.worlds[name]
            world.buffer[:, column] = eta
            world.recorded[:, column] = recorded & active
        self.active[:, column] = active
        self.keep[:, column] = False if keep is None else keep
        self.slots.append(slot)
        if column + 1 == self.columns:
            self.flush()

    def flush(self) -> None:
        """Streams the buffered slots out: divergences at segment starts, kept states."""
        if not self.slots:
            return
        count = len(self.slots)
        slots = np.asarray(self.slots, dtype=np.int64)
        active = self.active[:, :count]
        change = np.isin(slots, self.target_slots[1:])
        target = np.searchsorted(self.target_slots, slots, side="right") - 1
        keep = self.keep[:, :count] | np.isin(slots, self.keep_slots)[None, :]
        found = {name: self._values(world, slots, change, target, active) for name, world in
                 self.worlds.items()}  # fmt: skip
        for values in found.values():  # a stretch may start there: keep every world's state
            keep = keep | values[3]
        for name, world in self.worlds.items():
            in_force, starts, value, _, failed = found[name]
            keep_here = (keep | failed) & active & (in_force >= 0)
            rows, columns = np.nonzero(keep_here)
            world.kept.append((rows, in_force[rows, columns], world.buffer[rows, columns]))
            rows, columns = np.nonzero(starts)
            world.parts.append(
                (
                    rows,
                    slots[columns],
                    value[rows, columns],
                    target[columns],
                    in_force[rows, columns],
                )
            )
        self.slots.clear()

    def _values(
        self,
        world: _World,
        slots: np.ndarray,
        change: np.ndarray,
        target: np.ndarray,
        active: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """For the buffered slots of one world: the slot of the record in force (B, n), segment
        starts, the divergence at each start, the starts that begin a stretch within the
        tolerance, and the first start whose divergence is not a number."""
        count = slots.size
        recorded = world.recorded[:, :count]
        marks = np.where(recorded, slots[None, :], -1)
        in_force = np.maximum.accumulate(np.maximum(marks, world.in_force[:, None]), axis=1)
        world.in_force = in_force[:, -1].copy()
        after = slots > world.begin
        starts = (
            active
            & (in_force >= 0)
            & (slots >= world.begin)
            & ((recorded & after) | (change & after) | (slots == world.begin))
        )
        value = np.full(starts.shape, np.nan)
        buffer = world.buffer[:, :count]
        for t in np.unique(target[starts.any(axis=0)]).tolist():
            mask = starts & (target == t)[None, :]
            rows, columns = np.nonzero(mask)
            with np.errstate(all="ignore"):
                value[rows, columns] = divergence_of(
                    self.targets[t], buffer, (rows, columns), self.divergence
                )
        judged = value - np.nan_to_num(self.best[target])[None, :] if self.excess else value
        good = judged <= (self.tolerance if self.tolerance is not None else np.inf)
        # the previous start's verdict, carried across flushes
        index = np.where(starts, np.arange(count)[None, :], -1)
        last = np.maximum.accumulate(index, axis=1)
        previous = np.concatenate([np.full((self.batch, 1), -1), last[:, :-1]], axis=1)
        rows = np.arange(self.batch)[:, None]
        before = np.where(previous >= 0, good[rows, np.maximum(previous, 0)], world.good[:, None])
        begins = starts & good & ~before
        if self.tolerance is None:  # a relative tolerance is known once the run has ended: any
            begins = starts  # start may begin a settled stretch (particle sets keep them anyway)
        has = starts.any(axis=1)
        world.good = np.where(
            has, good[np.arange(self.batch), np.maximum(last[:, -1], 0)], world.good
        )
        bad = starts & ~np.isfinite(value)
        first_bad = bad & (np.cumsum(bad, axis=1) == 1) & ~world.failed[:, None]
        world.failed |= bad.any(axis=1)
        return in_force, starts, value, begins, first_bad

    def finish(self) -> list[dict[str, tuple[Segments, RecordedTrace]]]:
        """Each run's segments and kept states, by world."""
        self.flush()
        out: list[dict[str, tuple[Segments, RecordedTrace]]] = [{} for _ in range(self.batch)]
        for name, world in self.worlds.items():
            segments = _by_row(world.parts, self.batch)
            kept = _by_row(world.kept, self.batch)
            world.parts, world.kept = [], []  # (their arrays were copied: free them now)
            for row in range(self.batch):
                _, record_slots, states = kept[row]
                record_slots, first = np.unique(record_slots, return_index=True)
                trace = RecordedTrace(record_slots, states[first])
                _, starts, values, target, in_force = segments[row]
                state_index = np.searchsorted(record_slots, in_force, side="right") - 1
                out[row][name] = (
                    Segments(starts, values, self.best[target], self.excess, state_index, target),
                    trace,
                )
        return out


def _by_row(parts: list[tuple[np.ndarray, ...]], batch: int) -> list[tuple[np.ndarray, ...]]:
    """Columns streamed flush by flush (the first one the row), split by row in streaming order."""
    rows = np.concatenate([part[0] for part in parts])
    order = np.argsort(rows, kind="stable")
    bounds = np.cumsum(np.bincount(rows, minlength=batch))[:-1]
    split = [np.split(rows[order], bounds)]
    for index in range(1, len(parts[0])):  # one column at a time: a single copy in flight
        split.append(np.split(np.concatenate([part[index] for part in parts])[order], bounds))
    return list(zip(*split, strict=True))
