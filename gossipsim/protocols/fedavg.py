"""FedAvg (``[protocol] kind = "fedavg"``): the frequentist baseline of paper 000, Section IV.

One set of weights θ (the model's coordinates; for logistic regression θ = [w, log ξ], for the
``bnn`` its weights and log-precisions), started at one draw from the prior and recorded as a
particle set of one (:mod:`gossipsim.states.pointstate`). In slot i the scheduled agent k starts
from the global weights θ and takes ``local_iterations`` SGD steps

    θ ← θ − η ∇f_k(θ),   f_k(θ) = −(1/n_k)·(1/α)·log p(D_k | θ) − (1/n)·log p0(θ),

on its loss f_k: its mean negative log-likelihood per row (tempered by 1/α as the particle
protocols' likelihood is; over a fresh mini-batch of ``batch_size`` rows per step, drawn from
the run's protocol stream) plus the prior's share per row of the n training rows of every node
learnt from (the prior's negative log-density as the regulariser: for the hierarchical priors of
``logistic-regression`` and ``bnn`` an L2 penalty whose precision is learnt with the weights).
Weighted by n_k/n the agents' losses sum to −(1/n)·log p(θ | data): the point FedAvg aims at is the
posterior's mode (MAP), the one the ``score_norm`` divergence is 0 at. η is constant (no
schedule); with several local steps on unequal data the point reached drifts from that mode
(client drift), which the divergence shows.

- Parameter server (``architecture = "server"``): the agent downloads θ (d × ``bits_per_entry``
  bits), computes θ_k, uploads Δθ = θ_k − θ and the server sets θ ← θ + decoded(Δθ).
  Uncompressed, decoded(Δθ) = Δθ and the server takes θ_k itself (the wrapper
  :class:`~gossipsim.protocols.server.ServerRounds` charges d × ``bits_per_entry`` each way); with
  ``compression`` the upload is Δθ (1 × d) sparsified to its top k and quantized by
  :class:`~gossipsim.protocols.compressed.Uploader` (eq. 10 with N_p = 1 bits), in the protocol's
  own round.
- Walk (decentralised SGD): the token carries θ; the holder takes its local steps and passes θ_k
  on (d × ``bits_per_entry`` bits a hop). Uncompressed, server and walk learn the same weights
  slot for slot under the same scheduler.

Unlearning: FedAvg has none of its own; a request is served by the retrain baseline (the runner
restarts the protocol from a new prior draw without the forgotten nodes, on the same schedule).
The main protocol keeps what the forgotten node taught it (its contribution never leaves the
weights: no removal slot, unless the node had contributed nothing when the request arrived), and
the node stops contributing: its later slots leave θ unchanged (with compression: no upload,
0 bits). A node without training rows never changes θ either.
"""

from __future__ import annotations

from typing import Any

from gossipsim.network.messages import Message, Round
from gossipsim.protocols.particle_base import FloatArray, ParticleProtocol
from gossipsim.protocols.registry import BuildRequest
from gossipsim.protocols.server import server_round


class FederatedAveraging(ParticleProtocol):
    """FedAvg on whatever schedule the engine runs (the token walk or the server's)."""

    representation = "point"

    def __init__(self, request: BuildRequest) -> None:
        super().__init__(request)  # θ: one prior draw (1, d), recorded at the start slot
        self.rows = [int(self.model.node_rows(self.data, k)) for k in range(self.nodes)]
        #: n, the training rows of every node learnt from (the prior's share per row is 1/n)
        self.total_rows = max(sum(n for k, n in enumerate(self.rows) if k not in self.forgotten), 1)
        self.contributed: set[int] = set()
        self.uploader = None
        if self.settings.compression is not None:
            from gossipsim.protocols.compressed import Uploader

            self.uploader = Uploader(
                self.settings.compression, 1, self.particles.shape[1], self.rng
            )

    def local_steps(self, agent: int, theta: FloatArray) -> FloatArray:
        """θ after the agent's ``local_iterations`` SGD steps on its loss f_k (module docstring)."""
        s = self.settings
        score = self.likelihood_score(agent)  # (1/α)∇ log p(D_k | θ), a fresh mini-batch a call
        per_row = 1.0 / self.rows[agent]
        prior_share = 1.0 / self.total_rows
        for _ in range(s.local_iterations):
            descent = per_row * score(theta) + prior_share * self.prior_score(theta)  # −∇f_k
            theta = theta + s.learning_rate * descent
        return theta

    def on_token(self, holder: int, slot: int) -> Message | Round:
        works = holder not in self.forgotten and self.rows[holder] > 0
        if self.uploader is None:
            if works:
                self.particles = self.local_steps(holder, self.particles)
                self.contributed.add(holder)
            self.record(slot)
            return self.message
        bits = 0.0
        if works:
            start = self.particles
            sent, bits = self.uploader.upload(holder, self.local_steps(holder, start) - start)
            self.particles = start + sent
            self.contributed.add(holder)
        self.record(slot)
        return server_round(holder, self.message, Message(bits))

    def checkpoint(self, holder: int) -> tuple[Any, ...]:
        """θ, whether the holder has contributed, the error-feedback residuals and the trace's
        length: all that a slot changes."""
        residual = dict(self.uploader.residual) if self.uploader is not None else None
        return holder, self.particles, holder in self.contributed, residual, len(self.trace)

    def take_back(self, saved: tuple[Any, ...], slot: int) -> None:
        """The slot never happened: θ as before at the server and the agent, and the agent's
        error-feedback residual (its update is computed afresh at its next slot)."""
        holder, particles, contributed, residual, length = saved
        self.particles = particles
        if not contributed:
            self.contributed.discard(holder)
        if self.uploader is not None:
            self.uploader.residual = residual
        self.rewind(length, slot)

    def on_request(self, node: int, slot: int) -> None:
        """The node stops contributing; what it taught stays (its removal slot is the slot before
        the request only when it had contributed nothing)."""
        if node in self.forgotten:
            return
        self.forgotten.add(node)
        if node not in self.contributed:
            self._removals[node] = slot - 1
