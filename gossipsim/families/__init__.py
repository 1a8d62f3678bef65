"""Posterior and factor representations: exponential families and the conjugate models built on them."""

from .conjugate import (
    CONJUGATE_MODELS,
    BetaBernoulli,
    ConjugateModel,
    DirichletCategorical,
    GammaPoisson,
    ModelParam,
    NormalNormal,
)
from .expfam import Beta, Dirichlet, ExponentialFamily, Gamma, Normal
from .gaussian import GaussianDiagonal, GaussianFull

__all__ = [
    "CONJUGATE_MODELS",
    "Beta",
    "BetaBernoulli",
    "ConjugateModel",
    "Dirichlet",
    "DirichletCategorical",
    "ExponentialFamily",
    "Gamma",
    "GaussianDiagonal",
    "GaussianFull",
    "GammaPoisson",
    "ModelParam",
    "Normal",
    "NormalNormal",
]
