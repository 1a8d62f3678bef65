"""Metrics computed from the raw records, vectorised: KL traces, convergence, latencies, quantiles.

Definitions (``docs/architecture.md``, binding):

- the *target* at slot i is the exact posterior of the data meant to be learned at slot i: all data,
  then, from the slot before which an unlearning request arrives, all data but every node forgotten
  so far;
- the *convergence iteration* is the first slot at whose end KL(q ‖ target) ≤ tolerance and stays
  so for ``window`` slots (``[metrics] latency_window``; 1 — a first passage — for deterministic
  protocols);
- a request arriving before slot r has *latency* i* − r + 1, with i* the first slot ≥ r from which
  KL(q ‖ target) ≤ tolerance holds in the same sense (1 if it is served in slot r itself); its
  *removal latency* is the same with i* the slot at which the node's contribution leaves the state;
- a run's *cover iteration* is the first slot at which every node has held the token.

States and targets are piecewise constant over slots, so KL is evaluated once per change (not once
per slot) and looked up at any slot.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gossipsim.engine.protocol_api import StateTrace

if TYPE_CHECKING:
    from gossipsim.states.representations import Target


@dataclass(frozen=True)
class Segments:
    """A piecewise-constant function of the slot: ``kl[m]`` holds on slots
    ``starts[m] .. starts[m+1] - 1`` (the last segment runs to the end of the run).

    ``best[m]`` is the best-in-family KL of the target in force (NaN when the target is in the
    family); with ``excess`` the thresholds apply to ``kl − best`` instead of ``kl``. Each value is
    the divergence to the target in force at its slots, so a stretch runs on across a change of
    target only while the KL to the new target is within the tolerance too.
    """

    starts: np.ndarray
    kl: np.ndarray
    best: np.ndarray
    excess: bool = False
    #: for each segment, the index of its state in the trace and of its target (None: not kept)
    state_index: np.ndarray | None = None
    target_index: np.ndarray | None = None

    @property
    def values(self) -> np.ndarray:
        """What the tolerance is compared with."""
        return self.kl - np.nan_to_num(self.best) if self.excess else self.kl

    def _lookup(self, series: np.ndarray, slots: np.ndarray) -> np.ndarray:
        idx = np.searchsorted(self.starts, np.asarray(slots), side="right") - 1
        out = np.full(idx.shape, np.nan)
        ok = idx >= 0
        out[ok] = series[idx[ok]]
        return out

    def at(self, slots: np.ndarray) -> np.ndarray:
        """KL at each of ``slots`` (NaN before the first segment)."""
        return self._lookup(self.kl, slots)

    def best_at(self, slots: np.ndarray) -> np.ndarray:
        return self._lookup(self.best, slots)

    def first_at_or_below(self, threshold: float, from_slot: int = 1) -> int | None:
        """First slot ≥ ``from_slot`` where the value is ≤ ``threshold``; None if there is none."""
        values = self.values
        idx = int(np.searchsorted(self.starts, from_slot, side="right") - 1)
        if idx >= 0 and values[idx] <= threshold:
            return from_slot
        later = np.flatnonzero(values[idx + 1 :] <= threshold)
        if later.size == 0:
            return None
        return int(self.starts[idx + 1 + later[0]])

    def nonfinite_slots(self, last_slot: int) -> int:
        """How many slots of 1..``last_slot`` (after the first record) have a KL that is NaN or
        infinite: a divergence the run could not track (reported, never silently averaged)."""
        if self.starts.size == 0:
            return 0
        ends = np.append(self.starts[1:], last_slot + 1)
        lengths = np.clip(np.minimum(ends, last_slot + 1) - self.starts, 0, None)
        return int(lengths[~np.isfinite(self.kl)].sum())

    def first_nonfinite(self, last_slot: int) -> int | None:
        """The index of the first segment within slots 1..``last_slot`` whose KL is NaN or
        infinite (None: every KL of the run is a number)."""
        bad = ~np.isfinite(self.kl) & (self.starts <= last_slot)
        return int(np.argmax(bad)) if bad.any() else None

    def all_at_or_below(self, threshold: float, first: int, last: int) -> bool:
        """Whether the value is ≤ ``threshold`` at every slot of ``first..last`` (False when the
        range is empty or holds a slot without a value)."""
        if last < first or first < 1:
            return False
        lo = max(int(np.searchsorted(self.starts, first, side="right")) - 1, 0)
        hi = int(np.searchsorted(self.starts, last, side="right"))
        if self.starts[lo] > first:
            return False
        return bool(np.all(self.values[lo:hi] <= threshold))

    def first_settled(
        self,
        threshold: float,
        from_slot: int,
        window: int,
        last_slot: int,
        *,
        final: bool = False,
    ) -> int | None:
        """First slot i ≥ ``from_slot`` (and ≤ ``last_slot``, the run's last slot) from which the
        value stays ≤ ``threshold`` for ``window`` consecutive slots, i..i + window − 1.

        The value at each slot is judged against the target in force there: a stretch that a later
        request interrupts (the target changes) goes on only if the KL to the new target is within
        the threshold too, else it does not count (a dip of estimator noise just before another
        request is not a settled latency). With ``final`` (the run stopped because nothing could
        change any more) a stretch may end with the run; a stretch cut short by the end of an
        ordinary run does not count: the result is None (not settled within the run). With
        ``window = 1`` this is :meth:`first_at_or_below` limited to the run.
        """
        if window <= 1:
            found = self.first_at_or_below(threshold, from_slot)
            return found if found is not None and found <= last_slot else None
        if from_slot > last_slot:
            return None
        values = self.values
        starts = self.starts
        first = max(int(np.searchsorted(starts, from_slot, side="right")) - 1, 0)
        lo = np.maximum(starts[first:], from_slot)
        hi = np.append(starts[first + 1 :] - 1, last_slot)
        keep = lo <= min(hi[-1], last_slot)
        lo, hi = lo[keep], np.minimum(hi[keep], last_slot)
        good = values[first:][keep] <= threshold  # NaN (before a late world starts) is not good
        if lo.size == 0 or not good.any():
            return None
        edge = np.diff(np.concatenate([[0], good.astype(np.int8), [0]]))
        run_first = np.flatnonzero(edge == 1)  # index of each stretch's first and last segment
        run_last = np.flatnonzero(edge == -1) - 1
        begin, end = lo[run_first], hi[run_last]
        long_enough = end - begin + 1 >= window
        at_end = (end >= last_slot) & final
        ok = np.flatnonzero(long_enough | at_end)
        return int(begin[ok[0]]) if ok.size else None


def reference_level(segments: Segments, first: int, last: int) -> float:
    """The median of the value (what a tolerance is compared with) over the slots
    ``first..last``, each slot counted once: the level a relative tolerance is a multiple of.
    NaN when the range is empty or a slot in it has no finite value."""
    if last < first or first < 1 or segments.starts.size == 0 or segments.starts[0] > first:
        return float("nan")
    lo = int(np.searchsorted(segments.starts, first, side="right")) - 1
    hi = int(np.searchsorted(segments.starts, last, side="right"))
    begins = np.maximum(segments.starts[lo:hi], first)
    ends = np.append(segments.starts[lo + 1 : hi], last + 1)
    values = segments.values[lo:hi]
    if not np.all(np.isfinite(values)):
        return float("nan")
    return float(np.median(np.repeat(values, ends - begins)))


def reference_slots(since: int, before: int) -> tuple[int, int]:
    """The slots a relative tolerance's level is read from: the last tenth (rounded up) of the
    slots ``since .. before − 1``, those since the previous request arrived (or slot 1) up to the
    request arriving before slot ``before``; for convergence without requests, ``before`` is the
    run's last slot + 1."""
    count = before - since
    if count <= 0:
        return before, before - 1  # empty: no level
    return before - -(-count // 10), before - 1


def kl_segments(
    trace: StateTrace,
    target_slots: np.ndarray,
    targets: Sequence[Target],
    first_slot: int = 1,
    *,
    excess: bool = False,
    divergence: Callable[[Target, np.ndarray], np.ndarray] | None = None,
) -> Segments:
    """KL(q ‖ target) as a piecewise-constant function of the slot, from ``first_slot`` on.

    ``target_slots[m]`` is the first slot at which ``targets[m]`` applies (the first is ≤ ``first_slot``).
    Slots before the trace's first record (a world that started late) have no value.
    """
    slots = trace.slots
    states = trace.states
    begin = max(first_slot, int(slots[0]) if slots.size else first_slot)
    starts = np.unique(
        np.concatenate([[begin], slots[slots > begin], target_slots[target_slots > begin]])
    )
    state_idx = np.searchsorted(slots, starts, side="right") - 1
    target_idx = np.searchsorted(target_slots, starts, side="right") - 1
    kl = np.empty(starts.size)
    best = np.full(starts.size, np.nan)
    for t in np.unique(target_idx):  # vectorised calls per target
        mask = target_idx == t
        kl[mask] = divergence_of(targets[t], states, state_idx[mask], divergence)
        if targets[t].best_family_kl is not None:
            best[mask] = targets[t].best_family_kl
    return Segments(starts.astype(np.int64), kl, best, excess, state_idx, target_idx)


#: states per call of a divergence: the arrays of a call stay in the CPU's caches (a Gaussian's KL
#: over 20,000 states of d = 31 at once is several times slower per state than in pieces)
DIVERGENCE_ROWS = 256


def divergence_of(
    target: Target,
    states: np.ndarray,
    index: np.ndarray | tuple[np.ndarray, ...],
    divergence: Callable[[Target, np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """The divergence of ``states[index]`` (``index`` an array of state indices, or a tuple of
    them, one per leading axis) from ``target`` (``divergence``, or the target's KL), in pieces of
    :data:`DIVERGENCE_ROWS` states (each state's value is the same whatever the piece)."""
    parts = index if isinstance(index, tuple) else (index,)
    count = parts[0].size
    out = np.empty(count)
    for begin in range(0, count, DIVERGENCE_ROWS):
        chosen = states[tuple(part[begin : begin + DIVERGENCE_ROWS] for part in parts)]
        out[begin : begin + DIVERGENCE_ROWS] = (
            divergence(target, chosen) if divergence else target.kl(chosen)
        )
    return out


def recorded_slots(n_slots: int, every: int, extra: list[int]) -> np.ndarray:
    """Slots to write to ``metrics.csv``: slot 1, every multiple of ``every``, the last slot, and ``extra``."""
    grid = _grid(n_slots, every)
    extras = [s for s in extra if 1 < s < n_slots and s % every != 0]
    if not extras:
        return grid
    return np.union1d(grid, np.asarray(extras, dtype=np.int64))


@functools.lru_cache(maxsize=256)
def _grid(n_slots: int, every: int) -> np.ndarray:
    grid = np.unique(
        np.concatenate([[1, n_slots], np.arange(every, n_slots + 1, every, dtype=np.int64)])
    )
    grid.setflags(write=False)  # shared between runs: never modified
    return grid


def quantile_summary(values: np.ndarray) -> dict[str, float | int | None]:
    """Mean, median and the 12.5th / 87.5th percentiles (the 75% band) of the non-missing values."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {
            "count": 0,
            "missing": int(np.size(values)),
            "mean": None,
            "median": None,
            "p12_5": None,
            "p87_5": None,
        }
    return {
        "count": int(x.size),
        "missing": int(np.size(values) - x.size),
        "mean": float(np.mean(x)),
        "median": float(np.median(x)),
        "p12_5": float(np.percentile(x, 12.5)),
        "p87_5": float(np.percentile(x, 87.5)),
    }
