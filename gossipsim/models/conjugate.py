"""Conjugate exponential-family models learned by exact G-FVL updates (eqs. 13-14)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..data import points_per_node, read_observations, synthetic_observations
from ..errors import ConfigError
from ..families import CONJUGATE_MODELS, ConjugateModel
from ..protocols import Protocol, StateTrace
from ..scheduling import IndexedGraph
from .base import FamilyTarget, Model, Target

if TYPE_CHECKING:
    from ..scenario import Scenario


class ConjugateExpFam(Model):
    """A conjugate pair from :mod:`gossipsim.families.conjugate`: data are the exact local factors
    s_k = (1/α) Σ_{x ∈ D_k} [s_l(x); 1], one row per node."""

    conjugate: ClassVar[bool] = True
    reads_files: ClassVar[bool] = True
    math: ClassVar[type[ConjugateModel]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # a model's description and parameters are those of its math
        cls.description = cls.math.description
        cls.prior_params = cls.math.prior_params
        cls.data_params = cls.math.data_params

    def __init__(
        self, scenario: Scenario, graph: IndexedGraph, data_rng: np.random.Generator
    ) -> None:
        self.scenario = scenario
        self.graph = graph
        self.impl = self.math(scenario.model.options)
        self.family = self.impl.family
        self.prior = self.impl.prior_natural(self.impl.check_prior(scenario.model.prior))
        self.temperature = scenario.model.temperature
        data = scenario.data
        self.points: list[int] = []
        self.node_params: list[dict[str, Any]] = []
        self.fixed_data = None
        if data.path is not None:
            path = Path(data.path)
            if not path.is_absolute():
                path = Path(scenario.base_dir) / path
            observations = read_observations(path, graph, self.impl)
            self.points = [len(x) for x in observations]
            self.fixed_data = self._factors(observations)
        else:
            self.points = points_per_node(data.points_per_node, graph.size)
            self.node_params = self.impl.check_data_params(data.params, graph.size)
            if data.draw == "once":
                self.fixed_data = self.draw_data(data_rng)

    def _factors(self, observations: list[np.ndarray]) -> np.ndarray:
        return np.stack([self.impl.statistics(x) for x in observations]) / self.temperature

    def draw_data(self, rng: np.random.Generator) -> np.ndarray:
        return self._factors(synthetic_observations(self.impl, self.points, self.node_params, rng))

    def make_protocol(
        self,
        data: Any,
        rng: np.random.Generator,
        *,
        bits: float,
        forgotten: frozenset[int] = frozenset(),
        trace: StateTrace | None = None,
        start_slot: int = 0,
    ) -> Protocol:
        return self._conjugate_protocol(
            data, bits=bits, forgotten=forgotten, trace=trace, start_slot=start_slot
        )

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


def _positive_number(value: Any, key: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not value > 0
        or not np.isfinite(value)
    ):
        raise ConfigError(key, f"must be a number > 0 (got {value!r})")
    return float(value)


class BetaBernoulliModel(ConjugateExpFam):
    kind = "beta-bernoulli"
    math = CONJUGATE_MODELS["beta-bernoulli"]


class GammaPoissonModel(ConjugateExpFam):
    kind = "gamma-poisson"
    math = CONJUGATE_MODELS["gamma-poisson"]


class NormalNormalModel(ConjugateExpFam):
    kind = "normal-normal"
    math = CONJUGATE_MODELS["normal-normal"]
    model_keys = ("sigma",)

    @classmethod
    def prepare_options(
        cls, model: Mapping[str, Any], prior: dict[str, Any], key: str
    ) -> dict[str, Any]:
        return {"sigma": _positive_number(model.get("sigma", 1.0), f"{key}.sigma")}


class DirichletCategoricalModel(ConjugateExpFam):
    kind = "dirichlet-categorical"
    math = CONJUGATE_MODELS["dirichlet-categorical"]
    model_keys = ("categories",)

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
        return {"categories": categories}
