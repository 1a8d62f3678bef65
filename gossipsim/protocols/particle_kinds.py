"""``[protocol] kind = "svgd"`` and ``"dsvgd"``: particle protocols, their keys and their needs.

Both need a model with log-likelihood gradients at points (capability ``loglik-gradient``) and record
particle sets (the ``particles`` representation: divergence ``ksd``). ``svgd`` is centralised SVGD on
the pooled data of every node not forgotten (one SVGD step a slot at the centre): the reference the
distributed runs are compared with; it costs the one upload of every node's data at the start
(:mod:`~gossipsim.protocols.centre`). ``dsvgd`` is distributed SVGD on the token walk
(or the server's schedule), with Forget-SVGD serving unlearning requests, in two variants:
``sound`` (the default, :mod:`gossipsim.particles.aggregated`) and ``paper``
(:mod:`gossipsim.particles.dsvgd`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gossipsim.core.capabilities import LOGLIK_GRADIENT
from gossipsim.core.schema import Key, read_keys
from gossipsim.errors import ConfigError
from gossipsim.particles.adagrad import AdaGradSettings
from gossipsim.particles.dsvgd import PAPER_KDE_BANDWIDTH, PAPER_KDE_FLOOR, PaperSettings
from gossipsim.protocols.base import Protocol
from gossipsim.protocols.registry import COMMON_KEYS, BatchBuildRequest, BuildRequest, ProtocolKind
from gossipsim.study.budget import SlotWork

BANDWIDTH_WORDS = ("median", "median-svgd-code")

PARTICLE_KEYS: tuple[Key, ...] = (
    Key("particles", "integer", 20, "N, the number of particles (the papers use 20 for logistic "
        "regression and 40 for Fashion-MNIST)", minimum=2, maximum=100_000),
    Key("step_size", "number", 0.05, "AdaGrad's master step size (the DSVGD code's 0.05)",
        minimum=0, exclusive_minimum=True),
    Key("kernel_bandwidth", "number", "median", "h of the SVGD kernel exp(−‖θ − θ'‖²/h): `median` "
        "(med²/log N, as the papers write), `median-svgd-code` (med²/log(N + 1), as the original "
        "SVGD code computes), or a fixed number > 0", minimum=0, exclusive_minimum=True,
        words=BANDWIDTH_WORDS),
    Key("batch_size", "integer", None, "rows of a node's data per likelihood gradient (a "
        "mini-batch drawn without replacement, scaled to the node's size); absent: all rows",
        minimum=1),
)  # fmt: skip

PAPER_ONLY = ("fit_iterations", "kde_bandwidth", "kde_floor", "forget_tempering")

DSVGD_KEYS: tuple[Key, ...] = (
    *PARTICLE_KEYS,
    Key("variant", "choice", "sound", "`sound`: aggregated-score DSVGD, no density estimate (see "
        "[Particles](particles.md)); `paper`: the papers' KDE factors as written",
        choices=("sound", "paper")),
    Key("local_iterations", "integer", None, "L, SVGD steps on the global particles per visit "
        "(at most 10,000)", minimum=1, maximum=10_000, default_text="1 (sound), 200 (paper)"),
    Key("fit_iterations", "integer", 200, "L', SVGD steps fitting the node's local particles "
        "(paper variant)", minimum=0, maximum=10_000),
    Key("kde_bandwidth", "number", PAPER_KDE_BANDWIDTH, "λ, the KDEs' standard deviation (paper "
        "variant)", minimum=0, exclusive_minimum=True),
    Key("kde_floor", "number", PAPER_KDE_FLOOR, "added to every KDE component (paper variant, the "
        "reference code's 1e-9; 0: none)", minimum=0),
    Key("compression", "table", None, "compressed updates (paper 000, see [Particles]"
        "(particles.md)): with the server `{ scheme, budget, entry_bits, alpha, a_max, "
        "error_feedback }` (both variants); on the walk `{ entry_bits, a_max }`, the token "
        "quantized whole (paper variant)"),
    Key("downlink_compression", "table", None, "the server's download quantized whole: "
        "`{ entry_bits, a_max }` (paper variant with the server); absent: uncompressed"),
    Key("forget_tempering", "number", 1.0, "β of Forget-SVGD: the node's log-likelihoods weighted by −β/α (paper "
        "variant; the paper's 1 over-forgets)", minimum=0, exclusive_minimum=True),
)  # fmt: skip


@dataclass(frozen=True)
class ParticleSettings:
    """The settings of a particle protocol (``variant`` and after: ``dsvgd`` only)."""

    particles: int = 20
    step_size: float = 0.05
    kernel_bandwidth: float | str = "median"
    batch_size: int | None = None
    variant: str = "sound"
    local_iterations: int = 1
    fit_iterations: int = 200
    kde_bandwidth: float = PAPER_KDE_BANDWIDTH
    kde_floor: float = PAPER_KDE_FLOOR
    forget_tempering: float = 1.0
    compression: Any = None  # CompressionSettings (protocols.compressed) or None
    downlink_compression: Any = None  # QuantizedState (protocols.compressed) or None

    @property
    def rule(self) -> Any:
        """The median rule of the SVGD kernel (``median`` when the bandwidth is fixed)."""
        return self.kernel_bandwidth if isinstance(self.kernel_bandwidth, str) else "median"

    @property
    def fixed_bandwidth(self) -> float | None:
        return None if isinstance(self.kernel_bandwidth, str) else float(self.kernel_bandwidth)

    @property
    def adagrad(self) -> AdaGradSettings:
        """AdaGrad with momentum (the original SVGD code's; the paper variant with the reference
        code's fudge 1e-9); the sound variant sums its history (steps shrinking as 1/√t)."""
        fudge = 1e-9 if self.variant == "paper" else 1e-6
        return AdaGradSettings(step_size=self.step_size, fudge=fudge)

    @property
    def sound_adagrad(self) -> AdaGradSettings:
        return AdaGradSettings(step_size=self.step_size, cumulative=True)

    def paper(self, temperature: float) -> PaperSettings:
        return PaperSettings(
            local_iterations=self.local_iterations, fit_iterations=self.fit_iterations,
            adagrad=self.adagrad, kernel_rule=self.rule, kernel_bandwidth=self.fixed_bandwidth,
            kde_bandwidth=self.kde_bandwidth, kde_floor=self.kde_floor, temperature=temperature,
            forget_tempering=self.forget_tempering,
        )  # fmt: skip


def _check_particle_model(kind: str, model: type) -> None:
    capabilities: frozenset[str] = getattr(model, "capabilities", frozenset())
    if LOGLIK_GRADIENT not in capabilities:
        raise ConfigError(
            "protocol.kind",
            f"{kind} needs a model with log-likelihood gradients at points (capability "
            f"{LOGLIK_GRADIENT}); {getattr(model, 'kind', model)!r} has none: use "
            "logistic-regression, bnn or gaussian-mixture",
        )


class _ParticleKind(ProtocolKind):
    """What both particle kinds share: the model check, the representation, the message size."""

    representation_name = "particles"

    def check_model(self, model: type) -> None:
        _check_particle_model(self.name, model)

    def message_entries(self, settings: Any, sizes: Any) -> int:
        """N particles of d coordinates (``sizes.particle_entries``)."""
        return int(settings.particles) * int(sizes.particle_entries)

    def stochastic(self, settings: Any, model: type) -> bool:
        return settings.batch_size is not None

    def kernel(self, model: Any) -> str | None:
        """Many runs stepped at once (``batched-steps``) on any model with log-likelihood
        gradients at points: the particle functions take leading batch axes."""
        capabilities: frozenset[str] = getattr(model, "capabilities", frozenset())
        return "batched-steps" if LOGLIK_GRADIENT in capabilities else None

    def state_entries(self, settings: Any, model: Any) -> int:
        """A particle set: N × d numbers."""
        return int(settings.particles) * int(model.particle_dimension)

    def slot_work(self, settings: Any) -> SlotWork:
        """One SVGD step a slot on the pooled data (centralised SVGD's; DSVGD says its own)."""
        return SlotWork(gradients=1.0, pooled=True, kernel_steps=1.0)

    def _batch_args(self, request: BatchBuildRequest) -> tuple[Any, ...]:
        return (
            request.model, request.data, request.settings, request.rngs, request.nodes,
            request.record_every, request.iterations,
        )  # fmt: skip


class SVGD(_ParticleKind):
    """Centralised SVGD on the pooled data (the reference for the distributed runs)."""

    name = "svgd"
    description = (
        "centralised SVGD (eqs. 5-6 of 000) on the pooled data of every node not forgotten: one "
        "step a slot; a request drops the node's data at once (the reference for dsvgd); costs "
        "the one upload of every node's data at the start"
    )
    keys = PARTICLE_KEYS
    removes_at = "request"
    centralised = True

    def settings(self, table: Mapping[str, Any], model: type) -> ParticleSettings:
        own = {k: v for k, v in table.items() if k not in COMMON_KEYS}
        return ParticleSettings(**read_keys(self.keys, own, "protocol", also=COMMON_KEYS))

    def build(self, request: BuildRequest) -> Protocol:
        from gossipsim.protocols.svgd import CentralisedSVGD

        return CentralisedSVGD(request)

    def build_batch(self, request: BatchBuildRequest) -> Any:
        """Centralised SVGD for a batch of runs (:class:`~.particle_batch.SVGDBatch`)."""
        from gossipsim.protocols.particle_batch import SVGDBatch

        return SVGDBatch(*self._batch_args(request))


class DSVGD(_ParticleKind):
    """Distributed SVGD with Forget-SVGD, on the walk or with the server."""

    name = "dsvgd"
    description = (
        "distributed SVGD (eq. 7 of 000, eq. 14 of 003) with Forget-SVGD (eq. 8 of 000): variant "
        "sound (aggregated scores, the default) or paper (KDE factors as written)"
    )
    keys = DSVGD_KEYS
    takes_back = True
    selection_indicators = frozenset({"ksd", "hip"})

    def settings(self, table: Mapping[str, Any], model: type) -> ParticleSettings:
        own = {k: v for k, v in table.items() if k not in COMMON_KEYS}
        values = read_keys(self.keys, own, "protocol", also=COMMON_KEYS)
        if values["variant"] == "sound":
            for key in PAPER_ONLY:
                if key in own:
                    raise ConfigError(
                        f"protocol.{key}",
                        'applies to variant = "paper" only (the sound variant has no KDE '
                        "factors and forgets by subtracting the node's scores)",
                    )
        if values["local_iterations"] is None:
            values["local_iterations"] = 1 if values["variant"] == "sound" else 200
        architecture = str(table.get("architecture", "walk"))
        if values["compression"] is not None:
            from gossipsim.protocols.compressed import read_compression

            if values["variant"] == "sound" and architecture != "server":
                raise ConfigError(
                    "protocol.compression",
                    'on the walk quantizes the token of variant = "paper" only (the sound '
                    "variant's token also carries the scores' aggregate and AdaGrad's history, "
                    'whose ranges are not the particles\'); use architecture = "server"',
                )
            values["compression"] = read_compression(
                values["compression"], values["particles"], architecture
            )
        if values["downlink_compression"] is not None:
            from gossipsim.protocols.compressed import read_downlink

            if values["variant"] != "paper" or architecture != "server":
                raise ConfigError(
                    "protocol.downlink_compression",
                    'applies to variant = "paper" with architecture = "server" (the sound '
                    "variant's download also carries the scores' aggregate, whose range is not "
                    "the particles'; on the walk use compression)",
                )
            values["downlink_compression"] = read_downlink(values["downlink_compression"])
        return ParticleSettings(**values)

    def build(self, request: BuildRequest) -> Protocol:
        from gossipsim.protocols.dsvgd import DistributedSVGD

        return DistributedSVGD(request)

    def build_batch(self, request: BatchBuildRequest) -> Any:
        """DSVGD of either variant for a batch of runs on the walk (:mod:`~.dsvgd_batch`)."""
        from gossipsim.protocols.dsvgd_batch import PaperDSVGDBatch, SoundDSVGDBatch

        variant = SoundDSVGDBatch if request.settings.variant == "sound" else PaperDSVGDBatch
        return variant(*self._batch_args(request))

    def slot_work(self, settings: Any) -> SlotWork:
        """At the holder: the sound variant's L steps score its data twice each (before and after
        the move); the paper variant's L steps on the tilted target score it once each, with two
        density estimates, and its L' steps fitting the local particles three."""
        steps = float(settings.local_iterations)
        if settings.variant == "sound":
            return SlotWork(gradients=2.0 * steps, pooled=False, kernel_steps=steps)
        fits = float(settings.fit_iterations)
        return SlotWork(gradients=steps, pooled=False, kernel_steps=3.0 * steps + 4.0 * fits)

    def without_recovery(self, settings: Any, model: type) -> str | None:
        """The walk's uncompressed DSVGD recovers a lost token (:meth:`DistributedSVGD.on_holder_lost`)."""
        if settings.compression is None and settings.downlink_compression is None:
            return None
        return "compressed DSVGD does not recover a token lost to a failure yet"

    def slot_local_iterations(self, settings: Any) -> int:
        """L SVGD steps on the global particles (the steps of a forgetting visit too); the paper
        variant's L' steps fitting the node's local particles are local iterations as well."""
        fits = int(settings.fit_iterations) if settings.variant == "paper" else 0
        return int(settings.local_iterations) + fits

    def unbatched(self, settings: Any) -> str | None:
        """Compressed updates (:mod:`~.compressed`) run on the event engine only."""
        if settings.compression is None and settings.downlink_compression is None:
            return None
        return "compressed updates run on the event engine"

    def message_entries(self, settings: Any, sizes: Any) -> int:
        """N particles; the sound variant's token also carries the aggregate of the nodes' scores
        and AdaGrad's history (three N × d arrays; two with compressed uploads, where each agent
        keeps its own history: :mod:`~.compressed`)."""
        base = super().message_entries(settings, sizes)
        compression = settings.compression
        if compression is not None and compression.architecture == "server":
            # the budget must hold one entry (refused here, where the particles' dimension first
            # meets the settings: at validate); the sound variant's two arrays share it
            share = 0.5 if settings.variant == "sound" else 1.0
            compression.k(int(sizes.particle_entries), int(settings.particles), share)
            if settings.variant == "sound":
                return 2 * base
        return 3 * base if settings.variant == "sound" else base


PARALLEL_KEYS: tuple[Key, ...] = tuple(
    k for k in DSVGD_KEYS if k.name not in ("compression", "downlink_compression")
)


class ParallelDSVGD(_ParticleKind):
    """Parallel DSVGD (paper 003, Section IV-E): every client updates from the same global
    particles in every slot, the parameter server combines them (:mod:`~.parallel_dsvgd`)."""

    name = "parallel-dsvgd"
    description = (
        "parallel DSVGD (003, Sec. IV-E) with the parameter server: every client updates from the "
        "broadcast particles each slot, the server combines (sound: one SVGD step on the prior "
        "and every client's score; paper: q · Π q_k / q); K × 2 N·d entries a slot"
    )
    keys = PARALLEL_KEYS
    takes_back = True
    removes_at = "next-slot"
    every_client = True

    def settings(self, table: Mapping[str, Any], model: type) -> ParticleSettings:
        architecture = str(table.get("architecture", "walk"))
        if architecture != "server":
            raise ConfigError(
                "protocol.architecture",
                f"is {architecture!r}: parallel-dsvgd runs with a parameter server only (every "
                "client updates from the broadcast particles each slot); set "
                'architecture = "server"',
            )
        own = {k: v for k, v in table.items() if k not in COMMON_KEYS}
        values = read_keys(self.keys, own, "protocol", also=COMMON_KEYS)
        sound = values["variant"] == "sound"
        if sound:
            for key in PAPER_ONLY:
                if key in own:
                    raise ConfigError(
                        f"protocol.{key}",
                        'applies to variant = "paper" only (the sound variant has no KDE '
                        "factors and forgets by leaving the client's score out)",
                    )
            if values["local_iterations"] not in (None, 1):
                raise ConfigError(
                    "protocol.local_iterations",
                    f"is {values['local_iterations']}: the sound variant of parallel-dsvgd takes "
                    "one step a slot (the server has every client's score at the broadcast "
                    'particles only); give 1 or use variant = "paper"',
                )
        if values["local_iterations"] is None:
            values["local_iterations"] = 1 if sound else 200
        return ParticleSettings(**values)

    def build(self, request: BuildRequest) -> Protocol:
        from gossipsim.protocols.parallel_dsvgd import ParallelDistributedSVGD

        return ParallelDistributedSVGD(request)

    def kernel(self, model: Any) -> str | None:
        """The event engine only: no vectorised kernel."""
        return None

    def slot_work(self, settings: Any) -> SlotWork:
        """Every client's work, on the pooled data: the sound variant scores every client's data
        once and the server takes one step; the paper variant's clients each compute a DSVGD
        visit (its kernel steps counted once: a lower bound, K unknown here; the server's
        combination left out)."""
        if settings.variant == "sound":
            return SlotWork(gradients=1.0, pooled=True, kernel_steps=1.0)
        steps, fits = float(settings.local_iterations), float(settings.fit_iterations)
        return SlotWork(gradients=steps, pooled=True, kernel_steps=3.0 * steps + 4.0 * fits)

    def slot_local_iterations(self, settings: Any) -> int:
        """A client's local iterations (the clients compute in parallel): 1 (sound: its score
        at the particles), or L + L' (paper: DSVGD's visit)."""
        if settings.variant == "sound":
            return 1
        return int(settings.local_iterations) + int(settings.fit_iterations)
