"""Models: the data, protocols, exact targets and evaluation of each ``[model] kind``."""

from .base import FamilyTarget, Model, Target
from .beta_exponential import BetaExponential, ExactPosterior
from .conjugate import (
    BetaBernoulliModel,
    ConjugateExpFam,
    DirichletCategoricalModel,
    GammaPoissonModel,
    NormalNormalModel,
)
from .regression import LinearRegression, LogisticRegression

MODEL_KINDS: dict[str, type[Model]] = {
    m.kind: m
    for m in (
        BetaBernoulliModel,
        GammaPoissonModel,
        NormalNormalModel,
        DirichletCategoricalModel,
        BetaExponential,
        LinearRegression,
        LogisticRegression,
    )
}

__all__ = [
    "MODEL_KINDS",
    "BetaExponential",
    "ConjugateExpFam",
    "ExactPosterior",
    "FamilyTarget",
    "LinearRegression",
    "LogisticRegression",
    "Model",
    "Target",
]
