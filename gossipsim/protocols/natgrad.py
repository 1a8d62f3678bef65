"""Natural-gradient G-FVL for non-conjugate models (Section III-C), with gossip unlearning.

Every factor shares the prior's sufficient statistics (eqs. 15-16), so q has natural parameter
η = η₀ + Σ_k η_k. When node k holds the token it takes L local steps (eq. 17),

    η^[l] = η^[l−1] − ρ_i (η_k^[l−1] + (1/α) ∇_μ E_{q(θ|η^[l−1])}[L_k(θ)]),
    η_k^[l] = η_k^[l−1] + (η^[l] − η^[l−1])                     (eq. 8: t_k ← t_k · q^[l] / q^[l−1]),

with the gradient in mean parameters supplied by the model (REINFORCE, eqs. 18-20, or another
estimator). L_k is the *sum* of the node's log-losses. A step that would leave the natural-parameter
domain is halved until it does not (backtracking) and counted in ``damped_steps``; after 60 halvings
the step is dropped. A gradient estimate that is not finite (a Monte Carlo draw at the edge of the
support) is dropped and counted the same way.

Unlearning (eq. 21): at the forgotten node's next visit η ← η − η_k and η_k ← 0; the node never
contributes again. With ``refine_after_unlearning`` (default) the other nodes keep taking
natural-gradient steps at their visits, which moves q towards the optimum without the forgotten data;
without it, every node stops updating once a request has arrived, so q is exactly the subtraction.

**Domain recovery.** The other nodes' factors were fitted in a context that included node k, so for a
non-conjugate model η − η_k can lie outside the natural-parameter domain (a Beta with a ≤ 1, a
covariance that is not positive definite): the paper leaves this case open. Then the token's state
*restarts*: η ← η₀ and every remaining factor η_j ← 0 (in a deployment the token carries an epoch
number and a node discards a factor of an older epoch at its next visit, which is what zeroing them
all at once amounts to), the step-size schedule restarts, and the remaining nodes learn again from
the prior, so q converges to the optimum without the forgotten nodes as a retrain would. Node k's
contribution has left the state at that slot (its removal slot). The restart is counted in
``domain_recoveries``; with ``refine_after_unlearning = false`` learning resumes after it (the
subtraction alone cannot be represented). A local step that would leave the domain is handled
differently: it is halved until it does not (``damped_steps``).

Learning-rate schedules: ``constant`` (ρ_i = ρ) and ``inverse`` (ρ_i = ρ / (1 + (i − 1)/τ), with i
the protocol's own slot count: i = 1 at its first slot, carried by the token, and τ =
``decay_iterations``). A retrain baseline starting at slot r and a state restarted by a domain
recovery count i from 1 again, so they do not start with a decayed step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from gossipsim.core.capabilities import MeanGradient
from gossipsim.families import ExponentialFamily
from gossipsim.network.messages import Message
from gossipsim.protocols.base import Protocol, StateTrace

#: ∇_μ E_{q(θ|η)}[L_k(θ)] for node k, estimated with the given generator

MAX_HALVINGS = 60


def learning_rate(rho: float, schedule: str, decay_iterations: float, step: int) -> float:
    """ρ_i of the documented schedules at the protocol's ``step``-th slot (i = 1, 2, ...)."""
    if schedule == "inverse":
        return rho / (1.0 + (step - 1) / decay_iterations)
    return rho


class NaturalGradientGFVL(Protocol):
    """G-FVL with L natural-gradient steps per visit (eq. 17) and exact unlearning (eq. 21)."""

    def __init__(
        self,
        family: ExponentialFamily,
        prior: np.ndarray,
        nodes: int,
        gradient: MeanGradient,
        rng: np.random.Generator,
        *,
        local_iterations: int = 1,
        rho: float = 5e-3,
        schedule: str = "constant",
        decay_iterations: float = 1000.0,
        temperature: float = 1.0,
        refine_after_unlearning: bool = True,
        bits_per_message: float | None = None,
        forgotten: Iterable[int] = (),
        trace: StateTrace | None = None,
        start_slot: int = 0,
        in_domain: Callable[[np.ndarray], bool] | None = None,
    ) -> None:
        self.family = family
        self.in_domain = (
            in_domain if in_domain is not None else (lambda eta: bool(family.in_domain(eta)))
        )
        self.prior = np.array(prior, dtype=float, copy=True)
        self.eta = self.prior.copy()
        self.local = np.zeros((nodes, self.eta.size))
        self.gradient = gradient
        self.rng = rng
        self.local_iterations = local_iterations
        self.rho = rho
        self.schedule = schedule
        self.decay_iterations = decay_iterations
        self.temperature = temperature
        self.refine = refine_after_unlearning
        self.bits = float(64 * self.eta.size if bits_per_message is None else bits_per_message)
        self.message = Message(self.bits)  # constant size: one object for every hop
        self.forgotten = np.zeros(nodes, dtype=bool)
        self.forgotten[list(forgotten)] = True
        self.frozen = False
        self.damped_steps = 0
        self.domain_recoveries = 0
        #: slot before the protocol's first slot: ρ_i is taken at i = slot − origin
        self.origin = max(start_slot - 1, 0)
        self.removed: dict[int, int] = {}
        self.trace = trace if trace is not None else StateTrace()
        self.trace.record(start_slot, self.eta)

    def on_token(self, holder: int, slot: int) -> Message:
        if self.forgotten[holder]:
            if np.any(self.local[holder] != 0.0):
                self._remove(holder, slot)
            return self.message
        if self.frozen:
            return self.message
        rho = learning_rate(self.rho, self.schedule, self.decay_iterations, slot - self.origin)
        eta = self.eta
        local = self.local[holder]
        for _ in range(self.local_iterations):
            with np.errstate(all="ignore"):  # a non-finite estimate is counted below, not warned
                g = self.gradient(eta, holder, self.rng)
            if not np.all(np.isfinite(g)):
                self.damped_steps += 1  # e.g. a Monte Carlo draw at the edge of the support
                continue
            step = -rho * (local + g / self.temperature)  # eq. (17)
            candidate = eta + step
            if not self.in_domain(candidate):
                self.damped_steps += 1
                for _ in range(MAX_HALVINGS):
                    step = 0.5 * step
                    candidate = eta + step
                    if self.in_domain(candidate):
                        break
                else:
                    continue  # no admissible step: drop it
            eta = candidate
            local = local + step
        self.eta = eta
        self.local[holder] = local
        self.trace.record(slot, eta)
        return self.message

    def _remove(self, node: int, slot: int) -> None:
        """Eq. (21), η ← η − η_k, η_k ← 0; a restart from the prior when that leaves the domain."""
        candidate = self.eta - self.local[node]
        if self.in_domain(candidate):
            self.eta = candidate
            self.local[node] = 0.0
        else:  # domain recovery (module docstring)
            for other in np.flatnonzero(self.forgotten & np.any(self.local != 0.0, axis=1)):
                self.removed.setdefault(int(other), slot)  # every pending removal happens here
            self.eta = self.prior.copy()
            self.local[:] = 0.0
            self.origin = slot
            self.frozen = False
            self.domain_recoveries += 1
        self.removed[node] = slot
        self.trace.record(slot, self.eta)

    def checkpoint(self, holder: int) -> tuple[Any, ...]:
        """q, the holder's factor η_k (every factor, and the removals, when the holder is to be
        forgotten: a domain recovery zeroes them all), the schedule's origin, the counters and
        the trace's length: all that a visit changes."""
        removal = bool(self.forgotten[holder])
        return (
            holder, self.eta, self.local.copy() if removal else self.local[holder].copy(),
            dict(self.removed) if removal else None, self.origin, self.frozen,
            self.damped_steps, self.domain_recoveries, len(self.trace),
        )  # fmt: skip

    def take_back(self, saved: tuple[Any, ...], slot: int) -> None:
        """The visit never happened: q and the agent's factor η_k as before (so η = η₀ + Σ_k η_k
        still holds at the server and the agents), and so its steps, damped steps included, and
        a removal or a domain recovery it made."""
        holder, eta, local, removed, origin, frozen, damped, recoveries, length = saved
        self.eta = eta
        if removed is None:
            self.local[holder] = local
        else:
            self.local[:] = local
            self.removed = removed
        self.origin, self.frozen = origin, frozen
        self.damped_steps, self.domain_recoveries = damped, recoveries
        self.trace.truncate(length)

    def on_request(self, node: int, slot: int) -> None:
        if self.forgotten[node]:
            return
        self.forgotten[node] = True
        if not np.any(self.local[node] != 0.0):
            self.removed[node] = slot - 1  # nothing to remove: served on arrival
        if not self.refine:
            self.frozen = True

    def done(self) -> bool:
        # stochastic steps keep changing q; only a frozen protocol with nothing left to remove is done
        return self.frozen and not np.any(self.local[self.forgotten] != 0.0)

    def traces(self) -> dict[str, StateTrace]:
        return {"main": self.trace}

    def removals(self) -> dict[int, int]:
        return dict(self.removed)

    def stats(self) -> dict[str, float]:
        return {
            "damped_steps": float(self.damped_steps),
            "domain_recoveries": float(self.domain_recoveries),
        }
