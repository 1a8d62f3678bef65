"""Posterior and factor representations: exponential families and the conjugate models built on them."""

from gossipsim.families.conjugate import (
    CONJUGATE_MODELS,
    BetaBernoulli,
    ConjugateModel,
    DirichletCategorical,
    GammaPoisson,
    ModelParam,
    NormalNormal,
)
from gossipsim.families.expfam import Beta, Dirichlet, ExponentialFamily, Gamma, Normal
from gossipsim.families.gaussian import GaussianDiagonal, GaussianFull

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
