"""Plug-ins named by import path in test scenarios (``kind = "tests.plugins:..."``): a protocol
kind, a model, a scheduler and channels of one's own, without editing gossipsim."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from gossipsim.core.capabilities import LOGLIK_GRADIENT
from gossipsim.core.schema import Key
from gossipsim.errors import ConfigError
from gossipsim.models.conjugate import BetaBernoulliModel
from gossipsim.network.channels import Channel, ChannelRequest
from gossipsim.protocols import GFVL
from gossipsim.protocols.registry import BuildRequest, ProtocolKind
from gossipsim.scheduling.kinds import MetropolisHastings, Uniform

#: with this variable set, CoinModel appends a line to the file it names each time a process builds
#: it ("<process id> built") and each time it computes a target ("<process id> <forgotten nodes>")
TARGET_LOG = "GOSSIPSIM_TEST_TARGET_LOG"


def _log(what: str) -> None:
    path = os.environ.get(TARGET_LOG)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} {what}\n")


class CoinModel(BetaBernoulliModel):
    """A model of one's own: beta–Bernoulli under another name, which can log where it is built
    and where its targets are computed (:data:`TARGET_LOG`)."""

    kind = "tests.plugins:CoinModel"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _log("built")
        super().__init__(*args, **kwargs)

    def compute_target(self, data: Any, forgotten: frozenset[int]) -> Any:
        _log(str(sorted(forgotten)))
        return super().compute_target(data, forgotten)


class PlainGFVL(GFVL):
    """A protocol kind of one's own: G-FVL that declares no vectorised kernel (so it always runs on
    the event engine)."""

    name = "tests.plugins:PlainGFVL"
    description = "G-FVL without a fast-path kernel (tests only)"

    def kernel(self, model: Any) -> str | None:
        return None


class PlainWalk(MetropolisHastings):
    """A scheduler without a kernel declaration (the base default): never vectorised."""

    kind = "test-plain-walk"
    description = "Metropolis-Hastings without a fast-path kernel (tests only)"
    kernel = None


class PathWalk(MetropolisHastings):
    """A scheduler named by import path in a scenario (its kind is that path): Metropolis-Hastings
    under another name, with no kernel (so it runs on the event engine)."""

    kind = "tests.plugins:PathWalk"
    description = "Metropolis-Hastings named by import path (tests only)"
    kernel = None


class ValidateParticles(ProtocolKind):
    """A protocol kind that accepts the models of particle protocols and builds nothing: what
    ``gossipsim validate`` needs to reach a particle model's own checks (tests only; it never
    runs)."""

    name = "tests.plugins:ValidateParticles"
    description = "accepts loglik-gradient models, builds nothing (tests of validation only)"

    def check_model(self, model: type) -> None:
        if LOGLIK_GRADIENT not in getattr(model, "capabilities", frozenset()):
            raise ConfigError("protocol.kind", "needs a model with log-likelihood gradients")

    def build(self, request: BuildRequest) -> Any:
        raise NotImplementedError("ValidateParticles only validates scenarios")


class LeastScored(Uniform):
    """A server schedule that reads the protocol's NodeView: the next agent is the one with the
    smallest score (ties: the lowest index), never the current one; without scores, uniform."""

    kind = "tests.plugins:LeastScored"
    description = "the agent with the smallest NodeView score (tests only)"
    kernel = None

    def sampler(self, g: Any, rng: Any, view: Any = None) -> Any:
        if view is None or view.scores is None:
            return super().sampler(g, rng, view)
        scores = view.scores

        def least(k: int) -> int:
            masked = scores.copy()
            masked[k] = np.inf
            return int(np.argmin(masked))

        return least


class FixedDelay(Channel):
    """A channel of one's own built the default way, from its keys as constructor arguments
    (``[links] kind = "tests.plugins:FixedDelay"``, ``seconds``): every hop takes ``seconds``,
    nothing is lost; it declares no kernel and knows no bound on a hop (worst_seconds None)."""

    link_keys = (Key("seconds", "number", 0.001, "seconds of every hop", minimum=0.0),)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def delay(self, sender: int, receiver: int, bits: float) -> float:
        return self.seconds


class EdgeCount(FixedDelay):
    """A channel built from the graph (its own from_settings): every hop takes ``seconds`` × the
    number of the graph's edges, and it knows that bound."""

    @classmethod
    def from_settings(cls, request: ChannelRequest) -> EdgeCount:
        edges = int(request.graph.indices.size // 2)
        return cls(request.settings["seconds"] * edges)

    def worst_seconds(self, bits: float) -> float:
        return self.seconds


class NotBuilt(Channel):
    """A channel whose constructor does not take the keys it declares (the default from_settings
    cannot build it)."""

    link_keys = (Key("seconds", "number", 0.001, "seconds of every hop", minimum=0.0),)

    def delay(self, sender: int, receiver: int, bits: float) -> float:
        return 0.0


class StayAtStart(Uniform):
    """A server schedule that always picks the start agent again (tests only: one agent's
    rounds, e.g. DSVGD with one client against parallel DSVGD)."""

    kind = "tests.plugins:StayAtStart"
    description = "the start agent in every slot (tests only)"
    kernel = None

    def sampler(self, g: Any, rng: Any, view: Any = None) -> Any:
        return lambda k: k
