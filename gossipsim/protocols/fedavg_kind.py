"""``[protocol] kind = "fedavg"``: the frequentist FedAvg baseline (paper 000, Section IV), its keys
and its needs.

One model, its weights a single point θ (the ``bnn`` or ``logistic-regression`` model's
coordinates, a particle of one: :mod:`gossipsim.states.pointstate`), learnt by local SGD steps at
the scheduled agent (:mod:`gossipsim.protocols.fedavg`): with the parameter server
(``architecture = "server"``: the agent downloads the global weights and uploads its update,
optionally compressed by top-k and the paper's quantizer) or on the walk (decentralised SGD: the
token carries the weights). It needs a model with log-likelihood gradients at points (capability
``loglik-gradient``). It has no unlearning of its own: a request is served by the retrain
baseline, so ``[[unlearning]]`` requires ``retrain_baseline = true``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gossipsim.core.capabilities import LOGLIK_GRADIENT
from gossipsim.core.schema import Key, read_keys
from gossipsim.errors import ConfigError
from gossipsim.protocols.base import Protocol
from gossipsim.protocols.registry import COMMON_KEYS, BuildRequest, ProtocolKind
from gossipsim.study.budget import SlotWork

FEDAVG_KEYS: tuple[Key, ...] = (
    Key("learning_rate", "number", 0.1, "η, the step size of the local SGD steps on the agent's "
        "loss (its mean negative log-likelihood per row plus the prior's share, see "
        "[Particles](particles.md#fedavg))", minimum=0, exclusive_minimum=True),
    Key("local_iterations", "integer", 1, "SGD steps an agent takes from the global weights per "
        "slot (at most 10,000)", minimum=1, maximum=10_000),
    Key("batch_size", "integer", None, "rows of the agent's data per SGD step (a mini-batch drawn "
        "without replacement from the run's protocol stream); absent: all rows", minimum=1),
    Key("compression", "table", None, "compressed uploads to the parameter server (paper 000): "
        "`{ budget, entry_bits, a_max, error_feedback }`, top-k of the one update row (see "
        "[Particles](particles.md#fedavg)); architecture server"),
)  # fmt: skip

#: compression keys that choose among patterns of several particles: none applies to one row
PARTICLE_SCHEME_KEYS = ("scheme", "alpha")


@dataclass(frozen=True)
class FedAvgSettings:
    """The settings of ``fedavg``; ``particles`` is 1 (the one point, recorded as a set of one)."""

    learning_rate: float = 0.1
    local_iterations: int = 1
    batch_size: int | None = None
    compression: Any = None  # CompressionSettings (protocols.compressed) or None
    particles: int = field(default=1, init=False)


class FedAvg(ProtocolKind):
    """FedAvg with local SGD steps, with the parameter server or on the walk."""

    name = "fedavg"
    description = (
        "frequentist FedAvg (the baseline of 000, Section IV): one point of weights, local SGD "
        "steps at the scheduled agent, its update added by the server (optionally top-k and "
        "quantized) or the weights passed on by the walk; unlearning by retraining only"
    )
    keys = FEDAVG_KEYS
    representation_name = "point"
    #: its requests are served by the retrain baseline alone: the main protocol never removes a
    #: node's contribution (the forgotten node stops contributing; what it taught stays)
    removes_at = "never"
    takes_back = True

    def settings(self, table: Mapping[str, Any], model: type) -> FedAvgSettings:
        own = {k: v for k, v in table.items() if k not in COMMON_KEYS}
        values = read_keys(self.keys, own, "protocol", also=COMMON_KEYS)
        compression = values["compression"]
        if compression is not None:
            from gossipsim.protocols.compressed import read_compression

            if table.get("architecture", "walk") != "server":
                raise ConfigError(
                    "protocol.compression",
                    'applies to architecture = "server" for fedavg (the upload is a delta, '
                    "which needs a reference both ends hold: the server's global weights)",
                )
            if isinstance(compression, Mapping):
                for key in PARTICLE_SCHEME_KEYS:
                    if key in compression:
                        raise ConfigError(
                            f"protocol.compression.{key}",
                            "does not apply to fedavg: its update is one row of d entries, "
                            "whose top-k is the only pattern (eq. 10 with N_p = 1)",
                        )
            values["compression"] = read_compression(compression, 1)
        return FedAvgSettings(**values)

    def check_model(self, model: type) -> None:
        capabilities: frozenset[str] = getattr(model, "capabilities", frozenset())
        if LOGLIK_GRADIENT not in capabilities:
            raise ConfigError(
                "protocol.kind",
                f"fedavg needs a model with log-likelihood gradients in its weights (capability "
                f"{LOGLIK_GRADIENT}); model.kind {getattr(model, 'kind', model)!r} has none: use "
                "logistic-regression or bnn",
            )

    def build(self, request: BuildRequest) -> Protocol:
        from gossipsim.protocols.fedavg import FederatedAveraging

        return FederatedAveraging(request)

    def unbatched(self, settings: Any) -> str | None:
        """Every fedavg run: it declares no vectorised kernel."""
        return "fedavg runs on the event engine only (no vectorised kernel)"

    def state_entries(self, settings: Any, model: Any) -> int:
        """One point: d numbers."""
        return int(model.particle_dimension)

    def message_entries(self, settings: Any, sizes: Any) -> int:
        """The weights, d numbers (``sizes.particle_entries``): the walk's token, the server's
        download and an uncompressed upload."""
        d = int(sizes.particle_entries)
        if settings.compression is not None:  # the budget must hold one entry (refused here,
            # where d first meets the settings: at validate)
            settings.compression.k(d, 1)
        return d

    def stochastic(self, settings: Any, model: type) -> bool:
        return settings.batch_size is not None

    def slot_local_iterations(self, settings: Any) -> int:
        """The agent's ``local_iterations`` SGD steps."""
        return int(settings.local_iterations)

    def slot_work(self, settings: Any) -> SlotWork:
        """A likelihood gradient over the agent's rows (or a mini-batch) per local step, no
        kernel."""
        return SlotWork(gradients=float(settings.local_iterations), pooled=False, kernel_steps=0.0)
