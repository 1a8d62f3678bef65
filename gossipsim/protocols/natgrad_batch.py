"""Natural-gradient G-FVL for a batch of runs at once: :class:`~.natgrad.NaturalGradientGFVL`'s
state and rules with a leading run axis (the vectorised engine's ``batched-steps`` kernel).

Row b of every array is one run. A slot is one call of :meth:`NaturalGradientBatch.step` with every
run's holder; each rule of the one-run protocol is applied to the rows it concerns, with the same
arithmetic:

- a forgotten holder whose factor is still in q removes it (eq. 21), or restarts q from the prior
  when the subtraction leaves the domain (domain recovery);
- otherwise, unless the run is frozen, L local steps (eq. 17) with ρ_i of the run's own slot count,
  each step halved until it stays in the domain (at most :data:`~.natgrad.MAX_HALVINGS` times,
  then dropped), a non-finite gradient estimate dropped; both counted in ``damped_steps``.

The gradient is the model's batched estimator (capability ``batched-mean-gradient``): it draws each
run's Monte Carlo samples from that run's own generator with the same calls, in the same order, as
the one-run estimator does, so a run realises the same draws in both engines and its states agree
with the event engine's up to rounding (tested).

States are recorded where the one-run protocol records them (every learning slot, every removal):
the vectorised engine streams them out after each slot (:mod:`gossipsim.execution.vectorized.trace`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gossipsim.core.capabilities import BatchedMeanGradient
from gossipsim.protocols.natgrad import MAX_HALVINGS
from gossipsim.protocols.run_batch import RunBatch


@dataclass(frozen=True)
class StepRule:
    """The settings of eq. (17) shared by every run of a batch."""

    local_iterations: int = 1
    rho: float = 5e-3
    schedule: str = "constant"
    decay_iterations: float = 1000.0
    temperature: float = 1.0
    refine_after_unlearning: bool = True

    def rates(self, steps: np.ndarray) -> np.ndarray:
        """ρ_i at each run's ``steps``-th slot (i = 1, 2, ...): :func:`~.natgrad.learning_rate`."""
        if self.schedule == "inverse":
            return self.rho / (1.0 + (steps - 1) / self.decay_iterations)
        return np.full(steps.shape, self.rho)


class NaturalGradientBatch(RunBatch):
    """The natural-gradient G-FVL state of a batch of runs, one row per generator in ``rngs``.

    After each slot, :attr:`recorded_now` says which runs recorded their state :attr:`eta` (a
    later record of a slot replaces an earlier one, as
    :meth:`~gossipsim.engine.protocol_api.StateTrace.at` reads records) and :attr:`removed_now` which
    removed a factor."""

    def __init__(
        self,
        prior: np.ndarray,
        nodes: int,
        gradient: BatchedMeanGradient,
        rngs: Sequence[np.random.Generator],
        in_domain: Callable[[np.ndarray], np.ndarray],
        rule: StepRule,
    ) -> None:
        super().__init__(rngs, nodes)  # one run (row) per generator
        batch = len(self.rngs)
        self.prior = np.asarray(prior, dtype=float)
        self.eta = np.tile(self.prior, (batch, 1))
        self.local = np.zeros((batch, nodes, self.prior.size))
        self.gradient = gradient
        self.in_domain = in_domain
        self.rule = rule
        self.frozen = np.zeros(batch, dtype=bool)
        self.origin = np.zeros(batch, dtype=np.int64)
        self.damped_steps = np.zeros(batch, dtype=np.int64)
        self.domain_recoveries = np.zeros(batch, dtype=np.int64)

    # ----------------------------------------------------------------------------------- records
    def _record(self, rows: np.ndarray, slot: int) -> None:
        """``rows`` record their state (:attr:`eta`) at the end of ``slot``: the runner streams
        it out (:class:`~gossipsim.execution.vectorized.trace.StreamedWorlds`)."""
        self.recorded_now[rows] = True

    # ------------------------------------------------------------------------------- the slot
    def start(self, rows: np.ndarray, slot: int, forgotten: Sequence[int] = ()) -> None:
        """Rows (re)start from the prior at ``slot`` without the ``forgotten`` nodes: a fresh
        protocol built with ``start_slot = slot`` (the retrain baseline at each request)."""
        self.eta[rows] = self.prior
        self.local[rows] = 0.0
        self.forgotten[rows] = False
        if len(forgotten):
            self.forgotten[np.ix_(rows, np.asarray(forgotten, dtype=np.int64))] = True
        self.frozen[rows] = False
        self.origin[rows] = max(slot - 1, 0)
        self._record(rows, slot)

    def step(self, holders: np.ndarray, slot: int, active: np.ndarray) -> None:
        """Slot ``slot`` of the ``active`` runs, whose holders are ``holders`` (one per row)."""
        rows = np.arange(holders.size)
        forgotten = self.forgotten[rows, holders]
        asked = np.flatnonzero(active & forgotten)
        if asked.size:  # a forgotten holder whose factor is still in q removes it
            holding = np.any(self.local[asked, holders[asked]] != 0.0, axis=1)
            if holding.any():
                self._remove(asked[holding], holders, slot)
        learn = np.flatnonzero(active & ~forgotten & ~self.frozen)
        if learn.size:
            self._learn(learn, holders[learn], slot)

    def _learn(self, rows: np.ndarray, holders: np.ndarray, slot: int) -> None:
        """L steps of eq. (17) for ``rows`` (one-run: ``NaturalGradientGFVL.on_token``)."""
        rule = self.rule
        rho = rule.rates(slot - self.origin[rows])[:, None]
        eta = self.eta[rows]
        local = self.local[rows, holders]
        rngs = [self.rngs[r] for r in rows.tolist()]
        for _ in range(rule.local_iterations):
            with np.errstate(all="ignore"):  # a non-finite estimate is counted below, not warned
                g = self.gradient(eta, holders, rngs)
            finite = np.all(np.isfinite(g), axis=1)
            np.add.at(self.damped_steps, rows[~finite], 1)
            with np.errstate(all="ignore"):
                step = -rho * (local + g / rule.temperature)  # eq. (17)
                candidate = eta + step
            inside = np.zeros(rows.size, dtype=bool)
            if finite.any():
                inside[finite] = self.in_domain(candidate[finite])
            outside = np.flatnonzero(finite & ~inside)
            if outside.size:  # halve until inside (at most MAX_HALVINGS times), else drop
                np.add.at(self.damped_steps, rows[outside], 1)
                pending = outside
                for _ in range(MAX_HALVINGS):
                    step[pending] = 0.5 * step[pending]
                    candidate[pending] = eta[pending] + step[pending]
                    ok = self.in_domain(candidate[pending])
                    inside[pending[ok]] = True
                    pending = pending[~ok]
                    if not pending.size:
                        break
            accept = finite & inside
            if accept.all():  # the usual case: no fancy indexing
                eta = candidate
                local = local + step
            else:
                eta[accept] = candidate[accept]
                local[accept] = local[accept] + step[accept]
        self.eta[rows] = eta
        self.local[rows, holders] = local
        self._record(rows, slot)

    def _remove(self, rows: np.ndarray, holders: np.ndarray, slot: int) -> None:
        """Eq. (21) for ``rows`` whose holder is forgotten with its factor still in q; a restart
        from the prior where the subtraction leaves the domain (domain recovery)."""
        nodes = holders[rows]
        candidate = self.eta[rows] - self.local[rows, nodes]
        ok = self.in_domain(candidate)
        kept, lost = rows[ok], rows[~ok]
        self.eta[kept] = candidate[ok]
        self.local[kept, nodes[ok]] = 0.0
        for r in lost.tolist():  # domain recovery: rare, one run at a time
            pending = self.forgotten[r] & np.any(self.local[r] != 0.0, axis=1)
            for other in np.flatnonzero(pending).tolist():
                self.removed[r].setdefault(other, slot)  # every pending removal happens here
        self.eta[lost] = self.prior
        self.local[lost] = 0.0
        self.origin[lost] = slot
        self.frozen[lost] = False
        self.domain_recoveries[lost] += 1
        for r, node in zip(rows.tolist(), nodes.tolist(), strict=True):
            self.removed[r][node] = slot
        self.removed_now[rows] = True
        self._record(rows, slot)

    def request(self, node: int, slot: int, rows: np.ndarray) -> None:
        """An unlearning request for ``node`` arrives before ``slot`` in ``rows``."""
        rows = rows[~self.forgotten[rows, node]]
        self.forgotten[rows, node] = True
        empty = rows[~np.any(self.local[rows, node] != 0.0, axis=1)]
        for r in empty.tolist():
            self.removed[r][node] = slot - 1  # nothing to remove: served on arrival
        if not self.rule.refine_after_unlearning:
            self.frozen[rows] = True

    def done(self) -> np.ndarray:
        """Per run: frozen with nothing left to remove (``NaturalGradientGFVL.done``)."""
        pending = self.forgotten[:, :, None] & (self.local != 0.0)
        return self.frozen & ~pending.any(axis=(1, 2))

    def stats(self, row: int) -> dict[str, float]:
        return {
            "damped_steps": float(self.damped_steps[row]),
            "domain_recoveries": float(self.domain_recoveries[row]),
        }
