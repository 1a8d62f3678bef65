"""Conjugate exponential-family models learned by exact G-FVL updates (eqs. 13-14)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from decimal import ROUND_CEILING, Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from gossipsim.core import memory
from gossipsim.core.capabilities import EXACT_FACTORS
from gossipsim.core.schema import Key
from gossipsim.data.observations import points_per_node, read_observations, synthetic_observations
from gossipsim.errors import ConfigError
from gossipsim.families import CONJUGATE_MODELS, ConjugateModel
from gossipsim.families.exactsum import exact_sum, sum_bounds
from gossipsim.models.base import (
    SIGMA_KEY,
    FamilyTarget,
    Model,
    Target,
    check_prior_numbers,
    check_sigma,
    total_points,
)
from gossipsim.scheduling import IndexedGraph
from gossipsim.study import budget

if TYPE_CHECKING:
    from gossipsim.study.settings import ModelSpec


class ConjugateExpFam(Model):
    """A conjugate pair from :mod:`gossipsim.families.conjugate`: data are the exact local factors
    s_k = (1/α) Σ_{x ∈ D_k} [s_l(x); 1], one row per node.

    States and targets are correctly rounded sums of the prior and the factors they hold
    (``exact_sums``, :mod:`gossipsim.families.exactsum`), so a run holding every factor ends on
    its target bit for bit, KL 0, and an unlearned factor leaves no trace. What float64 cannot do
    exactly is refused when the model is built, in one line: a state the sums of the factors can
    reach that is beyond float64's range, or a target whose KL to itself, computed as the runs
    compute it, is not 0 (its log-partition or mean parameters overflow), or a target whose KL
    from the prior is not a number (:meth:`arithmetic_problem`). Where the temperature alone is
    the cause, the error names ``model.temperature`` and the smallest one these data allow."""

    capabilities: ClassVar[frozenset[str]] = frozenset({EXACT_FACTORS})
    reads_files: ClassVar[bool] = True
    exact_sums: ClassVar[bool] = True
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
        #: the key a refusal of the data names
        self.data_key = "data.path" if data.path is not None else "data"
        if data.path is not None:
            path = Path(data.path)
            if not path.is_absolute():
                path = Path(spec.base_dir) / path
            observations = read_observations(path, graph, self.impl)
            self.points = [len(x) for x in observations]
            self.fixed_data = self._factors(observations, "data.path")
            self.check_arithmetic(self.fixed_data)
        else:
            self.points = points_per_node(data.points_per_node, graph.size)
            self.node_params = self.impl.check_data_params(data.params, graph.size)
            # data drawn per run are checked on one draw here (its numbers are never used), so
            # that data a run cannot compute with fail validation rather than every run
            drawn = self.draw_data(data_rng)
            self.check_arithmetic(drawn)
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

    def target_eta(self, data: Any, forgotten: frozenset[int]) -> np.ndarray:
        """The target's natural parameters: the prior plus the included nodes' factors, correctly
        rounded (:func:`~gossipsim.families.exactsum.exact_sum`), as the runs' states are."""
        factors = np.asarray(data, dtype=float)
        return exact_sum(np.concatenate([self.prior[None, :], factors[self.included(forgotten)]]))

    def arithmetic_problem(
        self,
        factors: np.ndarray,
        forgotten: frozenset[int] = frozenset(),
        target: np.ndarray | None = None,
    ) -> str | None:
        """Why runs with these factors could not compute exactly in float64 (None if they can):
        a state the factors' sums reach beyond float64's range (checked with no node forgotten:
        the bounds hold every state), the target not finite, its KL to itself — computed as the
        runs compute it — not 0 (its log-partition or mean parameters overflow), or its KL from
        the prior (where learning starts, and the retrain baseline restarts) not a number."""
        family = self.family
        with np.errstate(all="ignore"):
            if not forgotten:
                low, high = sum_bounds(self.prior, factors)
                for bound in (low, high):
                    beyond = np.flatnonzero(~np.isfinite(bound))
                    if beyond.size:
                        return (
                            f"the nodes' factors add up beyond float64's range (±{_MAX:.3g}) in "
                            f"natural parameter {int(beyond[0])} of the posterior"
                        )
            if target is None:
                target = self.target_eta(factors, forgotten)
            if not np.all(np.isfinite(target)):
                return f"the target posterior's natural parameters {_show(target)} are not finite"
            itself = float(np.asarray(family.kl(target[None, :], target))[0])
            if itself != 0.0:
                return (
                    f"the target posterior (natural parameters {_show(target)}) is beyond float64's "
                    f"arithmetic: its log-partition or mean parameters overflow, and its KL to "
                    f"itself computes as {itself:g}, not 0"
                )
            start = float(np.asarray(family.kl(self.prior[None, :], target))[0])
            if not np.isfinite(start):
                return (
                    f"the KL from the prior to the target posterior (natural parameters "
                    f"{_show(target)}) computes as {start:g}, not a float64 number"
                )
        return None

    def check_arithmetic(
        self,
        factors: np.ndarray,
        forgotten: frozenset[int] = frozenset(),
        target: np.ndarray | None = None,
    ) -> None:
        """The one-line error of :meth:`arithmetic_problem`, if any: naming ``model.temperature``
        and the smallest temperature these data allow where the temperature alone is the cause
        (the same data at temperature 1 compute exactly), else the data's key."""
        problem = self.arithmetic_problem(factors, forgotten, target)
        if problem is None:
            return
        alpha = self.temperature
        statistics = np.asarray(factors, dtype=float) * alpha
        with np.errstate(all="ignore"):
            at_one = (
                alpha < 1.0
                and np.all(np.isfinite(statistics))
                and self.arithmetic_problem(statistics, forgotten) is None
            )
        if at_one:
            bound = smallest_temperature(
                lambda t: self.arithmetic_problem(statistics / t, forgotten) is None, alpha
            )
            raise ConfigError(
                "model.temperature",
                f"{alpha:g} is too small for these data: with the factors scaled by 1/α, {problem}; "
                f"allowed: temperature >= {bound} for these data",
            )
        raise ConfigError(
            self.data_key,
            f"{problem}: the prior and these observations are beyond float64's arithmetic; use "
            "smaller values",
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
        """The exact posterior (:meth:`target_eta`), or a one-line error if runs could not compute
        with it exactly (:meth:`check_arithmetic`)."""
        eta = self.target_eta(data, forgotten)
        self.check_arithmetic(data, forgotten, eta)
        return FamilyTarget(self.family, eta)

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
        memory.require_fits(
            f"{key}.categories", categories * memory.LIST_ENTRY_BYTES, f"{categories} categories"
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


_MAX = float(np.finfo(float).max)
#: relative precision of the smallest temperature a refusal reports
_TEMPERATURE_PRECISION = 1e-4


def _show(eta: np.ndarray) -> str:
    """Natural parameters for a message (the first four)."""
    flat = np.asarray(eta, dtype=float).ravel()
    return "(" + ", ".join(f"{x:.4g}" for x in flat[:4]) + (", ...)" if flat.size > 4 else ")")


def smallest_temperature(allowed: Callable[[float], bool], refused: float) -> str:
    """The smallest temperature ``allowed`` accepts, above ``refused`` (refused) and at most 1
    (accepted), by bisection in log α to a relative :data:`_TEMPERATURE_PRECISION`, written with
    four significant digits rounded up (so itself accepted; all 17 digits if it were not)."""
    low, high = math.log(refused), 0.0
    while high - low > _TEMPERATURE_PRECISION / 4:
        middle = 0.5 * (low + high)
        if allowed(math.exp(middle)):
            high = middle
        else:
            low = middle
    found = math.exp(high)
    exact = Decimal(found)
    up = exact.quantize(Decimal(1).scaleb(exact.adjusted() - 3), rounding=ROUND_CEILING)
    text = f"{float(up):.4g}"
    return text if allowed(float(text)) else f"{found:.17g}"
