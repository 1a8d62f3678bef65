"""State representations: what a protocol's recorded states are, and what is computed from them.

A protocol records its state in traces (:class:`~gossipsim.engine.protocol_api.StateTrace`); its
*representation* says what those states are and owns the computations on them: the divergence to a
:class:`Target` (the exact or best posterior the states are judged against) and the held-out
evaluation. G-FVL records natural parameters of an exponential family (:class:`NaturalParameters`:
divergence ``kl``); the particle protocols record particle sets
(:class:`gossipsim.states.particlestate.ParticleSets`: divergence ``ksd``, the kernelized Stein
discrepancy to the target's score). A protocol names its representation
(``Protocol.representation``): a registered name (:func:`register_representation`) or an import
path ``module:attribute`` of a plug-in's, found by :func:`representation` wherever the runs are
measured (workers and Dask included).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np


class Target:
    """What the states are judged against: the exact posterior of the data meant to be learned.

    A target offers what its representations' divergences need: :meth:`kl` for natural
    parameters, :meth:`score` (∇θ log p of the posterior, known up to its constant) for particle
    sets, and :meth:`sample` (exact draws) where the model has them. What a target cannot give
    raises :class:`NotImplementedError`."""

    #: min over the variational family of KL(member ‖ target); None when the target is in the family
    best_family_kl: float | None = None

    def kl(self, states: np.ndarray) -> np.ndarray:
        """KL(q ‖ target) for each row of ``states`` (natural parameters of q)."""
        raise NotImplementedError(f"{type(self).__name__} has no KL to natural parameters")

    def score(self, points: np.ndarray) -> np.ndarray:
        """∇θ log p(θ) of the target at ``points`` ``(..., d)``."""
        raise NotImplementedError(f"{type(self).__name__} has no score")

    def sample(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` exact draws from the target, ``(count, d)``."""
        raise NotImplementedError(f"{type(self).__name__} has no exact samples")

    @property
    def has_samples(self) -> bool:
        """Whether :meth:`sample` gives exact draws."""
        return False


class Representation(ABC):
    """What a protocol's states are, and the divergence and evaluation computed from them."""

    name: ClassVar[str] = ""
    #: the divergence's column in metrics.csv (and ``retrain_`` + it for the retrain baseline)
    divergence_name: ClassVar[str] = "kl"
    #: whether the retrain baseline's states are evaluated too (``retrain_`` + each column)
    evaluates_retrain: ClassVar[bool] = False
    #: whether the states are particle sets ``(N, d)``, which particles.csv can hold
    #: (``[metrics] particles``)
    particle_sets: ClassVar[bool] = False
    #: whether the divergence has a scale of its own (a KL, in nats: ``[metrics] tolerance =
    #: "auto"`` is then an absolute threshold) or not (a KSD, whose scale is the scores':
    #: ``"auto"`` then settles relatively to the run's own level)
    absolute_scale: ClassVar[bool] = True

    @abstractmethod
    def divergence(self, target: Target, states: np.ndarray) -> np.ndarray:
        """The divergence of each recorded state (first axis) from ``target``."""

    def target(self, model: Any, data: Any, forgotten: frozenset[int]) -> Target:
        """The target the states of a run on ``data`` are judged against without ``forgotten``."""
        return model.target(data, forgotten)

    def columns(self, model: Any, requested: frozenset[int]) -> tuple[str, ...]:
        """The held-out metrics' columns (``requested``: the nodes with unlearning requests)."""
        return tuple(model.evaluation_columns())

    def evaluate(
        self, model: Any, data: Any, states: np.ndarray, requested: frozenset[int] = frozenset()
    ) -> dict[str, np.ndarray]:
        """The model's held-out metrics of each state (columns of metrics.csv)."""
        return {}


class NaturalParameters(Representation):
    """States are natural parameters η of the model's exponential family: the divergence is
    KL(q_η ‖ target) and the evaluation is the model's (:meth:`gossipsim.models.Model.evaluate`)."""

    name = "natural-parameters"

    def divergence(self, target: Target, states: np.ndarray) -> np.ndarray:
        return target.kl(states)

    def evaluate(
        self, model: Any, data: Any, states: np.ndarray, requested: frozenset[int] = frozenset()
    ) -> dict[str, np.ndarray]:
        return dict(model.evaluate(data, states))


#: representations by name (``Protocol.representation``)
REPRESENTATIONS: dict[str, Representation] = {}
#: gossipsim's representations kept in modules of their own, imported on first use
BUILTIN_PATHS = {
    "particles": "gossipsim.states.particlestate:PARTICLE_SETS",
    "point": "gossipsim.states.pointstate:POINT_ESTIMATES",
}


def register_representation(representation: Representation) -> Representation:
    """Register ``representation`` under its name (the one line that adds one)."""
    REPRESENTATIONS[representation.name] = representation
    return representation


def representation(name: str) -> Representation:
    """The representation called ``name``: a registered one, or an import path ``module:attribute``
    naming a :class:`Representation` (class or instance) of a plug-in's."""
    if name in REPRESENTATIONS:
        return REPRESENTATIONS[name]
    name = BUILTIN_PATHS.get(name, name)
    if ":" in name:
        from gossipsim.core.registry import import_object

        found = import_object(name, "protocol.representation")
        found = found() if isinstance(found, type) else found
        if isinstance(found, Representation):
            return found
    raise KeyError(f"unknown representation {name!r}")


register_representation(NaturalParameters())
