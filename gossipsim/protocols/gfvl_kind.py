"""``[protocol] kind = "gfvl"``: gossip federated variational learning (Algorithm 1) with unlearning.

With a model that has exact conjugate factors it is :class:`~gossipsim.protocols.gfvl.ConjugateGFVL`
(eqs. 13-14, 21); with a model that has expected log-likelihood gradients it is
:class:`~gossipsim.protocols.natgrad.NaturalGradientGFVL` (eq. 17 with L local steps, eq. 21, domain
recovery), configured by the natural-gradient keys below, which a conjugate model refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gossipsim.core.capabilities import (
    BATCHED_MEAN_GRADIENT,
    EXACT_FACTORS,
    MEAN_GRADIENT,
    EstimatorSettings,
)
from gossipsim.core.schema import Key, read_keys
from gossipsim.errors import ConfigError
from gossipsim.protocols.base import Protocol
from gossipsim.protocols.gfvl import ConjugateGFVL
from gossipsim.protocols.natgrad import NaturalGradientGFVL
from gossipsim.protocols.natgrad_batch import NaturalGradientBatch, StepRule
from gossipsim.protocols.registry import COMMON_KEYS, BatchBuildRequest, BuildRequest, ProtocolKind

#: the natural-gradient keys (non-conjugate models only), each stated once
NATGRAD_KEYS: tuple[Key, ...] = (
    Key(
        "local_iterations",
        "integer",
        1,
        "natural-gradient steps L per visit (the paper uses up "
        "to 50; at most 10,000, so that a run cannot silently take days)",
        minimum=1,
        maximum=10_000,
    ),  # fmt: skip
    Key("learning_rate", "number", 5e-3, "ρ", minimum=0.0, exclusive_minimum=True),
    Key(
        "schedule",
        "choice",
        "constant",
        "`inverse`: ρ_i = ρ / (1 + (i − 1)/`decay_iterations`), i counted from 1 at the "
        "protocol's first slot (slot 1; the retrain baseline's first slot; a domain recovery's "
        "restart)",
        choices=("constant", "inverse"),
    ),
    Key(
        "decay_iterations",
        "number",
        1000.0,
        "τ of the inverse schedule",
        minimum=0.0,
        exclusive_minimum=True,
    ),
    Key(
        "samples",
        "integer",
        30,
        "Monte Carlo draws S (a step holds S per data point: see "
        "[Limits](#limits-memory-and-simulated-time))",
        minimum=1,
    ),
    Key(
        "samples_per",
        "choice",
        "point",
        "`point`: S draws for each data point, each weighted by that point's loss (the authors' "
        "code); `total`: S draws weighted by the whole local loss (eq. 18 read literally)",
        choices=("point", "total"),
    ),
    Key("baseline", "number", 0.0, "REINFORCE baseline c, subtracted from each weight"),
    Key(
        "estimator",
        "string",
        "reinforce",
        "`reinforce` (eqs. 18-20, the Fisher inverse applied exactly), `reparameterization` "
        "(Gaussian families: E_q[∇L], E_q[∇²L] from draws θ = m + Lε; with S draws per point, each "
        "point's projection xᵀθ drawn directly), `exact` (Beta–exponential: "
        "closed form; logistic regression: the integration rule above); the model says which it "
        "has (`gossipsim list`)",
    ),
    Key(
        "refine_after_unlearning",
        "boolean",
        True,
        "after a request, the other nodes keep taking steps (towards the optimum without the "
        "forgotten data); with false every node stops updating once a request arrives, so q is "
        "exactly the subtraction of eq. (21)",
    ),
)


@dataclass(frozen=True)
class GFVLSettings:
    """The settings of one G-FVL protocol (the natural-gradient ones are unused with exact
    conjugate factors)."""

    local_iterations: int = 1
    learning_rate: float = 5e-3
    schedule: str = "constant"
    decay_iterations: float = 1000.0
    samples: int = 30
    samples_per: str = "point"
    baseline: float = 0.0
    estimator: str = "reinforce"
    refine_after_unlearning: bool = True

    @property
    def estimation(self) -> EstimatorSettings:
        """How the model estimates its mean gradients."""
        return EstimatorSettings(self.estimator, self.samples, self.samples_per, self.baseline)


class GFVL(ProtocolKind):
    """G-FVL: exact conjugate updates or natural-gradient steps, by the model's capabilities."""

    name = "gfvl"
    description = (
        "gossip federated variational learning (Algorithm 1): exact conjugate updates (eqs. 13-14) "
        "or natural-gradient steps (eq. 17); unlearning by subtracting the node's natural "
        "parameter (eq. 21)"
    )
    keys = NATGRAD_KEYS
    takes_back = True  # ConjugateGFVL and NaturalGradientGFVL

    def settings(self, table: Mapping[str, Any], model: type) -> GFVLSettings:
        own = {k: v for k, v in table.items() if k not in COMMON_KEYS}
        capabilities: frozenset[str] = getattr(model, "capabilities", frozenset())
        if EXACT_FACTORS in capabilities:
            for key in own:
                if key in {k.name for k in NATGRAD_KEYS}:
                    raise ConfigError(
                        f"protocol.{key}",
                        f"applies only to non-conjugate models; {getattr(model, 'kind', model)!r} is learned by "
                        "exact conjugate updates",
                    )
            read_keys((), own, "protocol", also=COMMON_KEYS)  # anything else is unknown
        values = read_keys(self.keys, own, "protocol", also=COMMON_KEYS)
        estimators = tuple(getattr(model, "estimators", ("reinforce",)))
        if EXACT_FACTORS not in capabilities and values["estimator"] not in estimators:
            raise ConfigError(
                "protocol.estimator",
                f"unknown value {values['estimator']!r}; allowed: {', '.join(estimators)}",
            )
        return GFVLSettings(**values)

    def check_model(self, model: type) -> None:
        capabilities: frozenset[str] = getattr(model, "capabilities", frozenset())
        if not ({EXACT_FACTORS, MEAN_GRADIENT} & set(capabilities)):
            raise ConfigError(
                "protocol.kind",
                f"gfvl needs a model with exact conjugate factors or expected log-likelihood "
                f"gradients; {getattr(model, 'kind', model)!r} has neither",
            )

    def build(self, request: BuildRequest) -> Protocol:
        model, settings = request.model, request.settings
        if EXACT_FACTORS in model.capabilities:
            return ConjugateGFVL(
                model.prior, model.factors(request.data), bits_per_message=request.bits,
                forgotten=request.forgotten, trace=request.trace, start_slot=request.start_slot,
                exact_sums=bool(getattr(model, "exact_sums", False)),
            )  # fmt: skip
        return NaturalGradientGFVL(
            model.family, model.prior, request.nodes,
            model.mean_gradient(request.data, settings.estimation), request.rng,
            local_iterations=settings.local_iterations, rho=settings.learning_rate,
            schedule=settings.schedule, decay_iterations=settings.decay_iterations,
            temperature=model.temperature, refine_after_unlearning=settings.refine_after_unlearning,
            bits_per_message=request.bits, forgotten=request.forgotten, trace=request.trace,
            start_slot=request.start_slot, in_domain=model.in_domain,
        )  # fmt: skip

    def without_recovery(self, settings: Any, model: type) -> str | None:
        """Exact conjugate G-FVL recovers a lost token exactly (:class:`ConjugateGFVL`)."""
        if EXACT_FACTORS in getattr(model, "capabilities", frozenset()):
            return None
        return (
            "natural-gradient G-FVL does not recover a token lost to a failure yet (the exact "
            "conjugate G-FVL does)"
        )

    def kernel(self, model: Any) -> str | None:
        """Exact conjugate G-FVL changes state only at first visits (and first visits after a
        request): the fast path's ``conjugate-first-visits`` kernel. Natural-gradient steps are
        stepped for many runs at once (``batched-steps``) where the model has batched estimators
        (capability ``batched-mean-gradient``)."""
        capabilities: frozenset[str] = getattr(model, "capabilities", frozenset())
        if EXACT_FACTORS in capabilities:
            return "conjugate-first-visits"
        if BATCHED_MEAN_GRADIENT in capabilities:
            return "batched-steps"
        return None

    def build_batch(self, request: BatchBuildRequest) -> NaturalGradientBatch:
        """Natural-gradient G-FVL for a batch of runs (:class:`NaturalGradientBatch`)."""
        model, settings = request.model, request.settings
        rule = StepRule(
            local_iterations=settings.local_iterations, rho=settings.learning_rate,
            schedule=settings.schedule, decay_iterations=settings.decay_iterations,
            temperature=model.temperature, refine_after_unlearning=settings.refine_after_unlearning,
        )  # fmt: skip
        return NaturalGradientBatch(
            model.prior, request.nodes,
            model.batched_mean_gradient(request.data, settings.estimation), request.rngs,
            model.in_domain_rows, rule,
        )  # fmt: skip

    def idle_stays(self, model: Any) -> bool:
        """Exact conjugate G-FVL adds a node's factor at its first visit and removes it at its
        first visit after a request (eqs. 13-14, 21): the slots after the first of a stay change
        nothing (a request arriving within a stay is handled by the engine)."""
        return EXACT_FACTORS in model.capabilities

    def slot_local_iterations(self, settings: GFVLSettings) -> int:
        """L natural-gradient steps (eq. 17) a visit; exact conjugate updates keep the default
        L = 1 (they refuse the key)."""
        return settings.local_iterations

    def stochastic(self, settings: Any, model: type) -> bool:
        capabilities: frozenset[str] = getattr(model, "capabilities", frozenset())
        return EXACT_FACTORS not in capabilities and settings.estimator != "exact"
