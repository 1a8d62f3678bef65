"""Plug-ins named by import path in test scenarios (``kind = "tests.plugins:..."``): a protocol
kind, a model and a scheduler of one's own, without editing gossipsim."""

from __future__ import annotations

from typing import Any

from gossipsim.models.conjugate import BetaBernoulliModel
from gossipsim.protocols import GFVL
from gossipsim.scheduling.kinds import MetropolisHastings


class CoinModel(BetaBernoulliModel):
    """A model of one's own: beta–Bernoulli under another name."""

    kind = "tests.plugins:CoinModel"


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
