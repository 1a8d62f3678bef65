"""Aggregated-score DSVGD (``variant = "sound"``, the default): one SVGD step per visit on the
prior, the other nodes' last likelihood scores and the holder's fresh one.

The token carries the global particles θ (N × d), the aggregate S = Σ_j g_j of every node's last
likelihood score at the particles, and the AdaGrad history. Node k keeps g_k, its last contribution.
A visit moves θ by one SVGD step towards the target whose score is

    ∇log p0(θ) + (S − g_k) + ∇log l_k(θ),

then replaces g_k by ∇log l_k at the moved particles. Scores of the other nodes are stale (taken
where the particles were at their last visit); as the particles settle they become exact, so the
fixed point is centralised SVGD's on all the data. Forgetting node k subtracts g_k from S once: the
next visits move the particles to the fixed point of the data without k.

Nothing here is a density estimate: every score is exact at the particles where it was taken, the
prior's is exact at every step (no direction without a restoring force: no drift), and each node's
state g_k lies at the global particles (always within reach). This replaces the KDE factors of the
papers' DSVGD (:mod:`gossipsim.particles.dsvgd`), whose ratios tilt linearly far from the
particles; the token carries three N × d arrays (particles, aggregate, AdaGrad history) instead of
one.

The steps are AdaGrad's with its *cumulative* history (``AdaGradSettings(cumulative=True)``): the
other nodes' scores are stale, constant forces until those nodes are visited again, and a step
normalised by a moving average of recent directions (the original SVGD code's) moves at full size
along them however small they are; on a walk that stays among a few nodes (a star's leaves hold the
token for about nine slots under Metropolis–Hastings) that inflated the particle spread 3-40 times
over centralised SVGD's. Steps shrinking as 1/√t keep the variant stable on every topology; a
request starts the history afresh.

``local_score`` of None is a visit by a node that holds no data any more (it steps on the
others' scores and contributes nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gossipsim.particles.adagrad import AdaGradSettings, adagrad_step
from gossipsim.particles.kernels import BandwidthRule
from gossipsim.particles.svgd import svgd_direction

FloatArray = NDArray[np.float64]
Score = Callable[[FloatArray], FloatArray]


@dataclass(frozen=True)
class AggregateState:
    """What the token carries: particles, the aggregate of the nodes' scores, AdaGrad's history
    (``None`` before the first step)."""

    particles: FloatArray
    aggregate: FloatArray
    history: FloatArray | None


def start_state(particles: FloatArray) -> AggregateState:
    """The state before any visit: the given particles, no node's score yet."""
    particles = np.asarray(particles, dtype=np.float64)
    return AggregateState(particles, np.zeros_like(particles), None)


def aggregated_visit(
    state: AggregateState,
    own: FloatArray,
    prior_score: Score,
    local_score: Score | None,
    settings: AdaGradSettings,
    *,
    rule: BandwidthRule = "median",
    bandwidth: float | None = None,
) -> tuple[AggregateState, FloatArray]:
    """One visit of the node whose last contribution is ``own`` (zeros before its first visit):
    the new token state and the node's new contribution (zeros for ``local_score`` None)."""
    others = state.aggregate - own
    particles = state.particles
    scores = prior_score(particles) + others
    if local_score is not None:
        scores = scores + local_score(particles)
    direction = svgd_direction(particles, scores, rule=rule, bandwidth=bandwidth)
    moved, history = adagrad_step(particles, direction, state.history, settings)
    fresh = local_score(moved) if local_score is not None else np.zeros_like(moved)
    return AggregateState(moved, others + fresh, history), fresh


def forget(state: AggregateState, own: FloatArray) -> AggregateState:
    """The state without the node whose last contribution is ``own``: its data leave the target
    once; the particles move there on the next visits, AdaGrad's history started afresh (the
    target has changed: the steps regain their size)."""
    return AggregateState(state.particles, state.aggregate - own, None)
