"""Conjugate prior–likelihood pairs (Section III-B of the core paper).

Each model maps a node's observations to the increment of the posterior's natural parameter,

    η_k = (1/α) · Σ_{x ∈ D_k} [s_l(x); 1]   (eq. 13, with temperature α of eq. 2),

written in the prior family's own coordinates (for beta–Bernoulli, Σx and Σ(1 − x): the paper's
augmented ``[s_l(x); 1]`` expressed against the Beta's statistics (log θ, log(1 − θ))). The local
loss is the *sum* of the node's log-losses, so with α = 1 the fixed point is the ordinary posterior
p(θ | D) (eqs. 3-4).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from gossipsim.core.schema import format_number
from gossipsim.errors import ConfigError
from gossipsim.families.drawn import Drawn, is_drawn, parse_drawn, resolve
from gossipsim.families.expfam import Beta, Dirichlet, ExponentialFamily, Gamma, Normal

#: largest count a gamma-poisson file may hold: integers up to 2^53 are exact in float64
MAX_COUNT = 2**53
#: largest Poisson mean drawn synthetically (NumPy's sampler refuses means above about 9.2e18)
MAX_POISSON_RATE = 1e18


@dataclass(frozen=True)
class ModelParam:
    """One prior or data-generator parameter: its domain (``positive``, ``real``, ``probability``,
    ``simplex``, ``positive-vector``, ``poisson-rate``, ``unit-mean``: (0, 1]) and default
    (``None`` = required)."""

    name: str
    domain: str
    description: str
    default: Any = None


def _check_data_value(value: Any, param: ModelParam, key: str) -> Any:
    """A generator parameter: a value as :func:`_check_value` checks it, or a distribution
    (:mod:`.drawn`) to draw it from."""
    if is_drawn(value):
        upper = MAX_POISSON_RATE if param.domain == "poisson-rate" else math.inf
        return parse_drawn(value, param.domain, key, upper)
    return _check_value(value, param, key)


def _check_value(value: Any, param: ModelParam, key: str) -> Any:
    domain = param.domain
    if domain in ("simplex", "positive-vector"):
        if not isinstance(value, list | tuple) or len(value) < 2:
            raise ConfigError(key, f"must be a list of at least 2 numbers ({param.description})")
        arr = _numbers(value, key)
        if domain == "simplex":
            if np.any(arr < 0) or np.any(arr > 1) or abs(arr.sum() - 1.0) > 1e-9:
                raise ConfigError(key, "must be probabilities in [0, 1] that sum to 1")
        elif np.any(arr <= 0):
            raise ConfigError(key, "every entry must be > 0")
        return arr
    x = _number(value, key)
    if domain == "positive" and not x > 0:
        raise ConfigError(key, f"must be > 0 (got {format_number(x)})")
    if domain == "poisson-rate" and not 0 < x <= MAX_POISSON_RATE:
        # NumPy's Poisson sampler takes means up to about 9.2e18
        raise ConfigError(
            key, f"must be a Poisson mean in (0, {MAX_POISSON_RATE:g}] (got {format_number(x)})"
        )
    if domain == "probability" and not 0.0 <= x <= 1.0:
        raise ConfigError(key, f"must be a probability in [0, 1] (got {format_number(x)})")
    if domain == "real" and not np.isfinite(x):
        raise ConfigError(key, "must be a finite number")
    return x


def count_sum(x: np.ndarray) -> float:
    """Σx of non-negative integer counts, correctly rounded to float64: summed exactly (as int64
    where that cannot overflow, else as Python integers: 30 counts near 10^18 pass 2^63, where an
    int64 sum wraps round to a wrong, even negative, total) and rounded once."""
    counts = np.asarray(x, dtype=np.int64)
    if counts.size == 0:
        return 0.0
    if counts.size * int(counts.max()) < 2**63:
        return float(counts.sum())
    return float(sum(counts.tolist()))


def _numbers(values: list[Any] | tuple[Any, ...], key: str) -> np.ndarray:
    """:func:`_number` of every entry, vectorised (a Dirichlet prior may list millions)."""
    if not all(type(v) is float or type(v) is int for v in values):
        for v in values:
            _number(v, key)  # the first entry that is not a number (or a finite one) raises
    arr = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ConfigError(key, "must be a finite number")
    return arr


def _number(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(key, f"must be a number (got {value!r})")
    if not np.isfinite(value):
        raise ConfigError(key, "must be a finite number")
    return float(value)


class ConjugateModel(ABC):
    """A conjugate exponential-family model: prior family, data statistics and a data generator."""

    kind: str = ""
    description: str = ""
    prior_params: tuple[ModelParam, ...] = ()
    data_params: tuple[ModelParam, ...] = ()
    #: data parameters that were renamed: old name -> the message naming the new one
    renamed_data_params: Mapping[str, str] = MappingProxyType({})
    observation: str = ""  # what one observation is, for the CSV reader's messages

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.options = dict(options or {})

    @property
    @abstractmethod
    def family(self) -> ExponentialFamily:
        """The prior's (and posterior's) exponential family."""

    @abstractmethod
    def prior_natural(self, prior: Mapping[str, Any]) -> np.ndarray:
        """Natural parameters η₀ of the prior."""

    @abstractmethod
    def statistics(self, x: np.ndarray) -> np.ndarray:
        """Σ_x [s_l(x); 1] in the prior's natural coordinates (eq. 13), before the temperature."""

    @abstractmethod
    def generate(self, n: int, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
        """``n`` synthetic observations with generator parameters ``params``."""

    @abstractmethod
    def check_observations(self, x: np.ndarray, key: str) -> np.ndarray:
        """Validate observations read from a file; returns them in the dtype the model uses."""

    def observation_error(self, x: float) -> str | None:
        """Why ``x`` is not one observation of the model (None if it is), for messages that name the
        file, row and column: the model's support (:attr:`observation`), finite numbers only."""
        return None if self._in_support(x) else f"must be {self.observation}"

    @abstractmethod
    def _in_support(self, x: float) -> bool:
        """Whether ``x`` (a finite float) is in the support of one observation."""

    def check_prior(self, prior: Mapping[str, Any], key: str = "model.prior") -> dict[str, Any]:
        """Validated prior parameters with defaults filled in."""
        return _check_params(prior, self.prior_params, key)

    def check_data_params(
        self, params: Mapping[str, Any], nodes: int, key: str = "data"
    ) -> list[dict[str, Any]]:
        """Per-node generator parameters: each value a scalar (all nodes), a list of one per node,
        or a distribution ``{ gamma = [2, 1] }`` (:mod:`.drawn`) drawn per node with the data (also
        inside a per-node list); a drawn value is a :class:`~.drawn.Drawn` until then."""
        allowed = {p.name: p for p in self.data_params}
        for name in params:
            if name in self.renamed_data_params:
                raise ConfigError(f"{key}.{name}", self.renamed_data_params[name])
            if name not in allowed:
                raise ConfigError(
                    f"{key}.{name}",
                    f"unknown data parameter for model {self.kind!r}; allowed: {', '.join(allowed) or 'none'}",
                )
        per_node: list[dict[str, Any]] = [{} for _ in range(nodes)]
        for p in self.data_params:
            value = params.get(p.name, self.default_data_param(p))
            if value is None:
                raise ConfigError(
                    f"{key}.{p.name}", f"is required for model {self.kind!r} ({p.description})"
                )
            vector_valued = p.domain in ("simplex", "positive-vector")
            is_per_node = isinstance(value, list | tuple) and (
                (
                    vector_valued
                    and len(value) > 0
                    and (isinstance(value[0], list | tuple) or is_drawn(value[0]))
                )
                or (not vector_valued)
            )
            if is_per_node:
                if len(value) != nodes:
                    raise ConfigError(
                        f"{key}.{p.name}",
                        f"a per-node list needs one value per node ({nodes}), got {len(value)}",
                    )
                for i, v in enumerate(value):
                    per_node[i][p.name] = _check_data_value(v, p, f"{key}.{p.name}[{i}]")
            else:
                checked = _check_data_value(value, p, f"{key}.{p.name}")
                for d in per_node:
                    d[p.name] = checked
        return per_node

    def draw_node(self, n: int, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
        """One node's ``n`` observations: its drawn parameters first (in parameter order), then
        :meth:`generate` with them, all from ``rng``."""
        return self.generate(n, resolve(params, rng), rng)

    def default_data_param(self, param: ModelParam) -> Any:
        return param.default


def _check_params(
    values: Mapping[str, Any], specs: tuple[ModelParam, ...], key: str
) -> dict[str, Any]:
    allowed = {p.name: p for p in specs}
    for name in values:
        if name not in allowed:
            raise ConfigError(f"{key}.{name}", f"unknown parameter; allowed: {', '.join(allowed)}")
    out: dict[str, Any] = {}
    for p in specs:
        value = values.get(p.name, p.default)
        if value is None:
            raise ConfigError(f"{key}.{p.name}", f"is required ({p.description})")
        out[p.name] = _check_value(value, p, f"{key}.{p.name}")
    return out


class BetaBernoulli(ConjugateModel):
    kind = "beta-bernoulli"
    description = "Bernoulli observations x ∈ {0, 1}, Beta(a, b) prior on the success probability θ"
    prior_params = (
        ModelParam("a", "positive", "Beta prior a > 0", 1.0),
        ModelParam("b", "positive", "Beta prior b > 0", 1.0),
    )
    data_params = (ModelParam("theta", "probability", "success probability in [0, 1]", 0.5),)
    observation = "0 or 1"

    @property
    def family(self) -> ExponentialFamily:
        return Beta()

    def prior_natural(self, prior: Mapping[str, Any]) -> np.ndarray:
        return Beta.natural(prior["a"], prior["b"])

    def statistics(self, x: np.ndarray) -> np.ndarray:
        ones = float(np.sum(x))
        return np.array([ones, float(len(x)) - ones])

    def generate(self, n: int, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
        return (rng.random(n) < params["theta"]).astype(np.int64)

    def check_observations(self, x: np.ndarray, key: str) -> np.ndarray:
        if not np.all((x == 0) | (x == 1)):
            raise ConfigError(key, "beta-bernoulli observations must be 0 or 1")
        return x.astype(np.int64)

    def _in_support(self, x: float) -> bool:
        return x in (0.0, 1.0)


class GammaPrior(ConjugateModel):
    """A conjugate model whose prior on a positive θ is Gamma(shape, rate): natural parameters
    [shape − 1, −rate], the coefficients of log θ and θ. A likelihood in θ adds its own
    coefficients of log θ and θ (:meth:`statistics`)."""

    prior_params = (
        ModelParam("shape", "positive", "Gamma prior shape > 0", 1.0),
        ModelParam("rate", "positive", "Gamma prior rate > 0", 1.0),
    )

    @property
    def family(self) -> ExponentialFamily:
        return Gamma()

    def prior_natural(self, prior: Mapping[str, Any]) -> np.ndarray:
        return Gamma.natural(prior["shape"], prior["rate"])


class GammaPoisson(GammaPrior):
    kind = "gamma-poisson"
    description = "Poisson counts x ∈ {0, 1, ...}, Gamma(shape, rate) prior on the Poisson mean θ"
    data_params = (
        ModelParam("mean", "poisson-rate", f"Poisson mean λ in (0, {MAX_POISSON_RATE:g}]", 1.0),
    )
    renamed_data_params = MappingProxyType(
        {
            "rate": "is now data.mean (the Poisson mean λ of the observations; model.prior.rate "
            "is the Gamma prior's rate)"
        }
    )
    observation = f"a count: an integer 0 <= x <= 2^53 ({MAX_COUNT})"

    def statistics(self, x: np.ndarray) -> np.ndarray:
        return np.array([count_sum(x), -float(len(x))])

    def generate(self, n: int, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
        return rng.poisson(params["mean"], size=n).astype(np.int64)

    def check_observations(self, x: np.ndarray, key: str) -> np.ndarray:
        if not np.all((x >= 0) & (x <= MAX_COUNT) & (x == np.round(x))):
            raise ConfigError(
                key, f"gamma-poisson observations must be integers 0 <= x <= 2^53 ({MAX_COUNT})"
            )
        return x.astype(np.int64)

    def _in_support(self, x: float) -> bool:
        return 0 <= x <= MAX_COUNT and x == round(x)


class NormalNormal(ConjugateModel):
    """Normal observations with known standard deviation ``[model] sigma``; Normal prior on the mean."""

    kind = "normal-normal"
    description = "real observations x ~ Normal(θ, sigma²) with known sigma ([model] sigma), Normal(mean, variance) prior on θ"
    prior_params = (
        ModelParam("mean", "real", "prior mean", 0.0),
        ModelParam("variance", "positive", "prior variance > 0", 1.0),
    )
    data_params = (
        ModelParam("mean", "real", "mean of the observations", 0.0),
        ModelParam(
            "sigma", "positive", "standard deviation of the observations (default: [model] sigma)"
        ),
    )
    observation = "a real number"

    @property
    def sigma(self) -> float:
        return float(self.options.get("sigma", 1.0))

    @property
    def family(self) -> ExponentialFamily:
        return Normal()

    def prior_natural(self, prior: Mapping[str, Any]) -> np.ndarray:
        return Normal.natural(prior["mean"], prior["variance"])

    def statistics(self, x: np.ndarray) -> np.ndarray:
        s2 = self.sigma**2
        return np.array([float(np.sum(x)) / s2, -0.5 * len(x) / s2])

    def generate(self, n: int, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
        return rng.normal(params["mean"], params["sigma"], size=n)

    def check_observations(self, x: np.ndarray, key: str) -> np.ndarray:
        if not np.all(np.isfinite(x)):
            raise ConfigError(key, "normal-normal observations must be finite numbers")
        return x.astype(float)

    def _in_support(self, x: float) -> bool:
        return math.isfinite(x)

    def default_data_param(self, param: ModelParam) -> Any:
        if param.name == "sigma":
            return self.sigma
        return param.default


class DirichletCategorical(ConjugateModel):
    """Categorical observations (category index 0..C-1), Dirichlet prior on the probabilities."""

    kind = "dirichlet-categorical"
    description = (
        "category indices x ∈ {0, ..., C-1}, Dirichlet(alpha) prior on the category probabilities"
    )
    prior_params = (
        ModelParam("alpha", "positive-vector", "Dirichlet concentrations, one per category (> 0)"),
    )
    data_params = (ModelParam("probs", "simplex", "category probabilities (sum to 1)"),)
    observation = "a category index 0..C-1"

    @property
    def categories(self) -> int:
        return int(self.options["categories"])

    @property
    def family(self) -> ExponentialFamily:
        return Dirichlet(self.categories)

    def check_prior(self, prior: Mapping[str, Any], key: str = "model.prior") -> dict[str, Any]:
        out = _check_params(prior, self.prior_params, key)
        if len(out["alpha"]) != self.categories:
            raise ConfigError(
                f"{key}.alpha",
                f"needs one entry per category ({self.categories}), got {len(out['alpha'])}",
            )
        return out

    def prior_natural(self, prior: Mapping[str, Any]) -> np.ndarray:
        return Dirichlet.natural(prior["alpha"])

    def statistics(self, x: np.ndarray) -> np.ndarray:
        return np.bincount(np.asarray(x, dtype=np.int64), minlength=self.categories).astype(float)

    def generate(self, n: int, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
        probs = np.asarray(params["probs"], dtype=float)
        if len(probs) != self.categories:
            raise ConfigError(
                "data.probs", f"needs one probability per category ({self.categories})"
            )
        return rng.choice(self.categories, size=n, p=probs).astype(np.int64)

    def check_data_params(
        self, params: Mapping[str, Any], nodes: int, key: str = "data"
    ) -> list[dict[str, Any]]:
        """As for every model, and each node's ``probs`` has one entry per category (checked here,
        not at the first draw: with ``draw = "per-run"`` that would fail every run)."""
        per_node = super().check_data_params(params, nodes, key)
        probs = params.get("probs")
        per_node_list = (
            isinstance(probs, list | tuple)
            and bool(probs)
            and (isinstance(probs[0], list | tuple) or is_drawn(probs[0]))
        )
        for i, values in enumerate(per_node):
            value = values["probs"]
            size = len(value.params) if isinstance(value, Drawn) else len(value)
            if size != self.categories:
                where = f"{key}.probs[{i}]" if per_node_list else f"{key}.probs"
                what = "concentration" if isinstance(value, Drawn) else "probability"
                raise ConfigError(
                    where, f"needs one {what} per category ({self.categories}), got {size}"
                )
            if not per_node_list:
                break  # the same list for every node
        return per_node

    def _in_support(self, x: float) -> bool:
        return 0 <= x < self.categories and x == round(x)

    def observation_error(self, x: float) -> str | None:
        if self._in_support(x):
            return None
        return f"must be a category index 0..{self.categories - 1} (an integer)"

    def check_observations(self, x: np.ndarray, key: str) -> np.ndarray:
        ok = (x >= 0) & (x < self.categories) & (x == np.round(x))
        if not np.all(ok):
            raise ConfigError(
                key,
                f"dirichlet-categorical observations must be category indices 0..{self.categories - 1}",
            )
        return x.astype(np.int64)


CONJUGATE_MODELS: dict[str, type[ConjugateModel]] = {
    m.kind: m for m in (BetaBernoulli, GammaPoisson, NormalNormal, DirichletCategorical)
}
