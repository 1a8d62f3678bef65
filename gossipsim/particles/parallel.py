"""Parallel DSVGD's server step (paper 003, Section IV-E), for both DSVGD variants, as pure
functions.

Paper 003 describes parallel DSVGD in words only: every client updates from the same global
particles in the same iteration ("the parallel DSVGD algorithm can use the likelihood information
of all clients when updating the global particles") and the server combines them. The combination
rules here are gossipsim's, chosen so that with one client each is that client's DSVGD update
exactly (bit for bit).

**Sound variant** (:mod:`gossipsim.particles.aggregated`): client k sends its likelihood score
g_k = ∇log l_k at the broadcast particles θ; the server sums S = Σ_k g_k (in client order) and
takes one SVGD step (AdaGrad with its cumulative history, :func:`aggregated_visit`'s arithmetic)
towards the target whose score is

    ∇log p0(θ) + S,

i.e. one step of centralised SVGD on the prior and every client's data, with no stale score (every
g_k is taken at the particles that move).

**Paper variant** (:mod:`gossipsim.particles.dsvgd`): client k runs DSVGD's L steps from the
broadcast q towards q / t_k · l_k (eq. 7 of 000; Forget-SVGD's eq. 8 for a client being
forgotten), giving q_k, and refits its local particles t_k (eq. 14 of 003). The server combines
them by the PVI-style product

    q_new ∝ q · Π_k (q_k / q)                                    (equivalently p0 · Π_k t_k^new:
                                                                  with eq. 14, t_k^new = q_k / q · t_k)

realised with particles: it starts from the clients' displacements of each particle added up,
θ⁰ = q_1 + Σ_{k>1} (q_k − q) (each client moves the same N particles, so particle i's moves add;
written so that one client's start is its q_1 exactly), then takes L SVGD steps (a fresh AdaGrad
history, as every loop of the paper variant) towards the score of the product of the KDEs,
Σ_k ∇log q̂_k − (K − 1)·∇log q̂ (bandwidth λ and floor as the clients'). The displacements alone
count the tilt towards q̂ that each client's target contains K times instead of once; the steps
towards the product correct it. With one client the product is q_1 itself, whose particles the
server keeps: no steps. The KDEs are where the paper's "error in the KDE" enters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from gossipsim.particles.adagrad import AdaGradSettings
from gossipsim.particles.aggregated import AggregateState, aggregated_visit
from gossipsim.particles.dsvgd import PaperSettings, kde_score
from gossipsim.particles.kernels import BandwidthRule
from gossipsim.particles.svgd import run_svgd

FloatArray = NDArray[np.float64]
Score = Callable[[FloatArray], FloatArray]


def summed_scores(scores: Sequence[FloatArray], like: FloatArray) -> FloatArray:
    """S = Σ_k g_k, added in the order given (zeros like ``like`` for no client)."""
    if not scores:
        return np.zeros_like(like)
    total = np.asarray(scores[0], dtype=np.float64)
    for score in scores[1:]:
        total = total + score
    return total


def parallel_sound_step(
    particles: FloatArray,
    history: FloatArray | None,
    prior_score: Score,
    client_scores: Sequence[FloatArray],
    settings: AdaGradSettings,
    *,
    rule: BandwidthRule = "median",
    bandwidth: float | None = None,
) -> tuple[FloatArray, FloatArray | None]:
    """The sound variant's server step: the particles moved by one SVGD step towards
    ∇log p0 + Σ_k g_k (``client_scores``, each g_k taken at ``particles``), and AdaGrad's new
    history (``settings`` cumulative, as :func:`aggregated_visit`'s)."""
    state = AggregateState(particles, summed_scores(client_scores, particles), history)
    moved, _ = aggregated_visit(
        state, np.zeros_like(particles), prior_score, None, settings, rule=rule,
        bandwidth=bandwidth,
    )  # fmt: skip
    return moved.particles, moved.history


def displacement_start(
    global_particles: FloatArray, client_particles: Sequence[FloatArray]
) -> FloatArray:
    """θ⁰ = q_1 + Σ_{k>1} (q_k − q): every client's move of each particle added up (q_1 itself,
    not a sum, for one client)."""
    start = np.asarray(client_particles[0], dtype=np.float64)
    for moved in client_particles[1:]:
        start = start + (moved - global_particles)
    return start


def combine_paper(
    global_particles: FloatArray,
    client_particles: Sequence[FloatArray],
    settings: PaperSettings,
) -> FloatArray:
    """The paper variant's server combination q_new ∝ q · Π_k (q_k / q) with particles: from
    :func:`displacement_start`, L SVGD steps towards Σ_k ∇log q̂_k − (K − 1)·∇log q̂ (see the
    module docstring); q_1 for one client, q for none."""
    q = np.asarray(global_particles, dtype=np.float64)
    if not client_particles:
        return q
    start = displacement_start(q, client_particles)
    if len(client_particles) == 1:
        return start
    scores = [kde_score(settings, np.asarray(c, dtype=np.float64)) for c in client_particles]
    q_score = kde_score(settings, q)
    others = float(len(client_particles) - 1)

    def product(theta: FloatArray) -> FloatArray:
        total = summed_scores([score(theta) for score in scores], theta)
        return total - others * q_score(theta)

    return run_svgd(
        start, product, settings.local_iterations, settings.adagrad, rule=settings.kernel_rule,
        bandwidth=settings.kernel_bandwidth,
    )  # fmt: skip
