"""State representations: what a protocol's recorded states are, and what is computed from them.

A protocol records its state in traces (:class:`~gossipsim.protocol_api.StateTrace`); its
*representation* says what those states are and owns the computations on them: the divergence to a
:class:`Target` (the exact or best posterior the states are judged against) and the held-out
evaluation. Today every protocol records natural parameters of an exponential family
(:class:`NaturalParameters`); particle-based protocols will record particle sets and bring a
representation of their own, registered in one line (:func:`register_representation`) and named by
the protocol (``Protocol.representation``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np


class Target(ABC):
    """What the states are judged against: the exact posterior of the data meant to be learned."""

    #: min over the variational family of KL(member ‖ target); None when the target is in the family
    best_family_kl: float | None = None

    @abstractmethod
    def kl(self, states: np.ndarray) -> np.ndarray:
        """KL(q ‖ target) for each row of ``states`` (natural parameters of q)."""


class Representation(ABC):
    """What a protocol's states are, and the divergence and evaluation computed from them."""

    name: ClassVar[str] = ""

    @abstractmethod
    def divergence(self, target: Target, states: np.ndarray) -> np.ndarray:
        """The divergence of each recorded state (first axis) from ``target``."""

    def evaluate(self, model: Any, data: Any, states: np.ndarray) -> dict[str, np.ndarray]:
        """The model's held-out metrics of each state (columns of metrics.csv)."""
        return {}


class NaturalParameters(Representation):
    """States are natural parameters η of the model's exponential family: the divergence is
    KL(q_η ‖ target) and the evaluation is the model's (:meth:`gossipsim.models.Model.evaluate`)."""

    name = "natural-parameters"

    def divergence(self, target: Target, states: np.ndarray) -> np.ndarray:
        return target.kl(states)

    def evaluate(self, model: Any, data: Any, states: np.ndarray) -> dict[str, np.ndarray]:
        return dict(model.evaluate(data, states))


#: representations by name (``Protocol.representation``)
REPRESENTATIONS: dict[str, Representation] = {}


def register_representation(representation: Representation) -> Representation:
    """Register ``representation`` under its name (the one line that adds one)."""
    REPRESENTATIONS[representation.name] = representation
    return representation


register_representation(NaturalParameters())
