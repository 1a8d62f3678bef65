"""Conjugate exponential-family models learned by exact G-FVL updates (eqs. 13-14)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .. import budget
from ..capabilities import EXACT_FACTORS
from ..data import points_per_node, read_observations, synthetic_observations
from ..errors import ConfigError
from ..families import CONJUGATE_MODELS, ConjugateModel
from ..scheduling import IndexedGraph
from ..schema import Key
from .base import (
    SIGMA_KEY,
    FamilyTarget,
    Model,
    Target,
    check_prior_numbers,
    check_sigma,
    total_points,
)

if TYPE_CHECKING:
    from ..settings import ModelSpec


class ConjugateExpFam(Model):
    """A conjugate pair from :mod:`gossipsim.families.conjugate`: data are the exact local factors
    s_k = (1/α) Σ_{x ∈ D_k} [s_l(x); 1], one row per node."""

    capabilities: ClassVar[frozenset[str]] = frozenset({EXACT_FACTORS})
    reads_files: ClassVar[bool] = True
    math: ClassVar[type[ConjugateModel]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # a model's description and parameters are those of its math
        cls.description = cls.math.description
        cls.prior_params = cls.math.prior_params
        cls.data_params = cls.math.data_params
        cls.renamed_data_params = cls.math.renamed_data_params

    def __init__(self, spec: ModelSpec, graph: IndexedGraph, data_rng: np.random.Generator) -> None:
        self.spec = spec
        self.graph = graph
        self.impl = self.math(spec.model.options)
        self.family = self.impl.family
        self.prior = self.impl.prior_natural(self.impl.check_prior(spec.model.prior))
        self.temperature = spec.model.temperature
        data = spec.data
        self.points: list[int] = []
        self.node_params: list[dict[str, Any]] = []
        self.fixed_data = None
        self.check_budget(spec, graph)
        check_prior_numbers(self.family, self.prior)
        if data.path is not None:
            path = Path(data.path)
            if not path.is_absolute():
                path = Path(spec.base_dir) / path
            observations = read_observations(path, graph, self.impl)
            self.points = [len(x) for x in observations]
            self.fixed_data = self._factors(observations, "data.path")
            self._check_posterior(self.fixed_data, "data.path")
        else:
            self.points = points_per_node(data.points_per_node, graph.size)
            self.node_params = self.impl.check_data_params(data.params, graph.size)
            # data drawn per run are checked on one draw here (its numbers are never used), so
            # that data a run cannot compute with fail validation rather than every run
            drawn = self.draw_data(data_rng)
            self._check_posterior(drawn, "data")
            if data.draw == "once":
                self.fixed_data = drawn

    def _factors(self, observations: list[np.ndarray], key: str = "data") -> np.ndarray:
        """The local factors (1/α) Σ s(x), one row per node; an error naming ``key`` or
        ``model.temperature`` when they overflow."""
        with np.errstate(all="ignore"):  # overflows are reported below, in one line
            statistics = np.stack([self.impl.statistics(x) for x in observations])
            factors = statistics / self.temperature
        if not np.all(np.isfinite(statistics)):
            raise ConfigError(
                key, "the observations' sufficient statistics overflow; use smaller values"
            )
        if not np.all(np.isfinite(factors)):
            raise ConfigError(
                "model.temperature",
                f"{self.temperature:g} is too small: the scaled local factors (1/α) Σ s(x) "
                "overflow; use a larger temperature",
            )
        return factors

    def _check_posterior(self, factors: np.ndarray, key: str) -> None:
        """The exact posterior of these factors must be computable: a finite KL from the prior to
        it (the first number every run reports)."""
        with np.errstate(all="ignore"):
            target = self.prior + factors.sum(axis=0)
            kl = self.family.kl(self.prior[None, :], target)
        if not (np.all(np.isfinite(target)) and np.all(np.isfinite(kl))):
            raise ConfigError(
                key,
                "the data give a posterior whose KL from the prior is not finite (the "
                "observations are too large for the model's arithmetic); use smaller values",
            )

    @classmethod
    def sizes(cls, spec: ModelSpec, nodes: int) -> budget.ModelSizes:
        family = cls.math(spec.model.options).family
        points = 0 if spec.data.path is not None else total_points(spec, nodes)
        return budget.ModelSizes(
            state_entries=family.dim,
            message_entries=int(getattr(family, "message_entries", family.dim)),
            data_values=float(points),
            data_what=f"{points} observations",
        )

    def draw_data(self, rng: np.random.Generator) -> np.ndarray:
        return self._factors(synthetic_observations(self.impl, self.points, self.node_params, rng))

    def factors(self, data: Any) -> np.ndarray:
        """Each node's exact local factor (capability ``exact-factors``): the data themselves."""
        return np.asarray(data, dtype=float)

    def compute_target(self, data: Any, forgotten: frozenset[int]) -> Target:
        return FamilyTarget(self.family, self.prior + data[self.included(forgotten)].sum(axis=0))

    def node_sizes(self, data: Any) -> list[int]:
        return list(self.points)

    @classmethod
    def prepare(
        cls, model: Mapping[str, Any], key: str = "model"
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Validated prior and options from the ``[model]`` table (kind already checked)."""
        prior = model.get("prior", {})
        if not isinstance(prior, dict):
            raise ConfigError(f"{key}.prior", "must be a table such as { a = 2, b = 2 }")
        options = cls.prepare_options(model, prior, key)
        if "categories" in options and "alpha" not in prior:
            prior = {**prior, "alpha": [1.0] * options["categories"]}
        checked = cls.math(options).check_prior(prior, f"{key}.prior")
        return {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in checked.items()}, options

    @classmethod
    def prepare_options(
        cls, model: Mapping[str, Any], prior: dict[str, Any], key: str
    ) -> dict[str, Any]:
        return {}


class BetaBernoulliModel(ConjugateExpFam):
    kind = "beta-bernoulli"
    math = CONJUGATE_MODELS["beta-bernoulli"]


class GammaPoissonModel(ConjugateExpFam):
    kind = "gamma-poisson"
    math = CONJUGATE_MODELS["gamma-poisson"]


class NormalNormalModel(ConjugateExpFam):
    kind = "normal-normal"
    math = CONJUGATE_MODELS["normal-normal"]
    model_keys = (SIGMA_KEY,)

    @classmethod
    def prepare_options(
        cls, model: Mapping[str, Any], prior: dict[str, Any], key: str
    ) -> dict[str, Any]:
        return {"sigma": check_sigma(model.get("sigma", SIGMA_KEY.default), f"{key}.sigma")}


class DirichletCategoricalModel(ConjugateExpFam):
    kind = "dirichlet-categorical"
    math = CONJUGATE_MODELS["dirichlet-categorical"]
    model_keys = (
        Key("categories", "integer", None, "number of categories C", minimum=2,
            default_text="length of `prior.alpha`"),
    )  # fmt: skip

    @classmethod
    def prepare_options(
        cls, model: Mapping[str, Any], prior: dict[str, Any], key: str
    ) -> dict[str, Any]:
        alpha = prior.get("alpha")
        categories = model.get("categories", len(alpha) if isinstance(alpha, list) else None)
        if categories is None:
            raise ConfigError(
                f"{key}.categories",
                "is required for dirichlet-categorical unless prior.alpha is given",
            )
        if isinstance(categories, bool) or not isinstance(categories, int) or categories < 2:
            raise ConfigError(f"{key}.categories", f"must be an integer >= 2 (got {categories!r})")
        # the prior's concentrations are listed here, before any graph exists: refuse what cannot fit
        budget.require_fits(
            f"{key}.categories", categories * budget.LIST_ENTRY_BYTES, f"{categories} categories"
        )
        return {"categories": categories}

    @classmethod
    def sizes(cls, spec: ModelSpec, nodes: int) -> budget.ModelSizes:
        """As for every conjugate model; the per-node factors (C numbers a node) are set by
        ``model.categories``."""
        categories = int(spec.model.options["categories"])
        return replace(
            super().sizes(spec, nodes),
            state_key="model.categories",
            state_what=f"{categories} categories on {nodes} nodes",
        )
