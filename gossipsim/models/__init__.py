"""Models: the data, exact targets and evaluation of each ``[model] kind``, and their capabilities.

A new model is a :class:`Model` subclass registered with one :func:`register_model` line, or a
plug-in named by import path in the scenario (``[model] kind = "mypackage.module:MyModel"``), which
worker processes import again.
"""

from gossipsim.core.registry import MODEL_KINDS
from gossipsim.models.base import FamilyTarget, Model, Target
from gossipsim.models.beta_exponential import BetaExponential, ExactPosterior
from gossipsim.models.bnn import BayesianNeuralNetwork
from gossipsim.models.conjugate import (
    BetaBernoulliModel,
    ConjugateExpFam,
    DirichletCategoricalModel,
    GammaPoissonModel,
    NormalNormalModel,
)
from gossipsim.models.mixture import GaussianMixtureModel
from gossipsim.models.particlemodel import ParticleModel
from gossipsim.models.regression import LinearRegression, LogisticRegression


def register_model(model: type[Model]) -> type[Model]:
    """Register a model class under its ``kind`` (the one line that adds a model)."""
    if not model.kind:
        raise ValueError("a model class needs a kind")
    MODEL_KINDS.register(model.kind, model)
    return model


def model_class(name: str, key: str = "model.kind") -> type[Model]:
    """The model class called ``name``: a registered kind, or an import path ``module:Class`` naming
    a :class:`Model` subclass."""
    found: type[Model] = MODEL_KINDS.lookup(name, key)
    return found


__all__ = [
    "BayesianNeuralNetwork",
    "BetaBernoulliModel",
    "DirichletCategoricalModel",
    "GammaPoissonModel",
    "NormalNormalModel",
    "MODEL_KINDS",
    "model_class",
    "register_model",
    "BetaExponential",
    "ConjugateExpFam",
    "ExactPosterior",
    "FamilyTarget",
    "GaussianMixtureModel",
    "LinearRegression",
    "LogisticRegression",
    "Model",
    "ParticleModel",
    "Target",
]
