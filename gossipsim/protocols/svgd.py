"""Centralised SVGD (``[protocol] kind = "svgd"``): eqs. (5)-(6) of 000 on the pooled data.

Every slot the particles take one SVGD step with AdaGrad (its history kept from step to step)
towards the posterior of the prior and every node's data not forgotten (tempered by 1/α), at a
centre that holds every node's data: no token moves; the runner charges the one upload of every
node's data in slot 1 and nothing afterwards (:mod:`~gossipsim.protocols.centre`). A request drops the node's data from the score at once: its removal slot is
the slot before the request (its data are never used again); the particles then move to the
posterior without it, which the ``ksd`` column and the held-out metrics follow.
"""

from __future__ import annotations

from gossipsim.network.messages import Message
from gossipsim.particles.adagrad import adagrad_step
from gossipsim.particles.svgd import svgd_direction
from gossipsim.protocols.particle_base import FloatArray, ParticleProtocol
from gossipsim.protocols.registry import BuildRequest


class CentralisedSVGD(ParticleProtocol):
    """One SVGD step a slot on the pooled data of the nodes not forgotten."""

    def __init__(self, request: BuildRequest) -> None:
        super().__init__(request)
        self.history: FloatArray | None = None
        self.scores = [self.likelihood_score(k) for k in range(self.nodes)]

    def on_token(self, holder: int, slot: int) -> Message:
        theta = self.particles
        total = self.prior_score(theta)
        for k in range(self.nodes):
            if k not in self.forgotten:
                total = total + self.scores[k](theta)
        s = self.settings
        direction = svgd_direction(theta, total, rule=s.rule, bandwidth=s.fixed_bandwidth)
        self.particles, self.history = adagrad_step(theta, direction, self.history, s.adagrad)
        self.record(slot)
        return self.message

    def on_request(self, node: int, slot: int) -> None:
        if node not in self.forgotten:
            self.forgotten.add(node)
            self._removals[node] = slot - 1
