"""``[model] kind = "gaussian-mixture"``: a target in R^d (d = 2 by default) whose density is known
exactly, for pictures of the particles and exact checks of particle protocols.

The prior is N(m·1, v·I) (``[model] prior``: ``mean`` m, ``variance`` v). Node k's likelihood
factor is a Gaussian mixture in θ,

    f_k(θ) = Σ_c w_kc N(θ; μ_kc, s_k² I),

so the posterior p0(θ)·Π_k f_k(θ) of any set of nodes is a Gaussian mixture with one component per
choice of a component at each node (:func:`gossipsim.logdensity.mixture.product_of_mixtures`): its
density, score and samples are exact, with or without the forgotten nodes. The factors are the
nodes' "data" (``[data]`` keys): given explicitly (``means``, and ``weights`` and ``variance``), or
placed from the data seed: the C centres evenly spaced on the circle of radius ``radius`` about the
prior mean in the first two coordinates, starting at a random angle (for d = 1, from m − radius to
m + radius), and
node k's component c at centre c plus an offset N(0, ``jitter``² I) of its own.

Metrics: ``mmd``, the squared maximum mean discrepancy (V-statistic, RBF kernel) of the particles
to a fixed set of exact draws of the posterior of every node's data, with ``mmd_unlearned`` to the
posterior without the nodes that ask to be forgotten when there are requests; and
``particle_spread``. The exact draws (``mmd_samples`` of them) come from a seed drawn with the data,
so they are the same in every run, worker and process; the kernel's bandwidth h is the median
squared distance between the exact draws (fixed per target, so values at different slots compare).
A tempered factor f_k^(1/α) is no mixture: the model needs ``temperature = 1``. The exact density
(:meth:`GaussianMixtureModel.exact_density`) gives the contours of the ``particles`` figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from gossipsim.core.schema import Key
from gossipsim.errors import ConfigError
from gossipsim.families import ModelParam
from gossipsim.logdensity.densitygrid import ExactDensity
from gossipsim.logdensity.mixture import GaussianMixture, product_of_mixtures
from gossipsim.models.classification import particle_spread
from gossipsim.models.particlemodel import CHUNK_VALUES, PRIOR_RANGE, ParticleModel, in_chunks
from gossipsim.particles.kernels import pairwise_squared_distances
from gossipsim.particles.mmd import maximum_mean_discrepancy
from gossipsim.scheduling import IndexedGraph
from gossipsim.study import budget

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from gossipsim.study.settings import ModelSpec

FloatArray = NDArray[np.float64]

#: the exact posterior may hold at most this many numbers (its components' weights, means and
#: covariances): 2^22, 32 MiB (2 components at each of 19 nodes in 2-D)
MAX_POSTERIOR_NUMBERS = 2**22
#: the largest d whose one-component posterior fits in :data:`MAX_POSTERIOR_NUMBERS` (d² + d + 1)
MAX_MIXTURE_DIMENSION = math.isqrt(MAX_POSTERIOR_NUMBERS) - 1

#: the factors' means, radius and jitter lie within ± this (the prior mean's bound, PRIOR_RANGE)
MEAN_RANGE = PRIOR_RANGE[1]
_RANGE_REASON = (
    "the model squares distances between the components' means over their variances, which must "
    "stay finite floats (as for the prior's mean and variance)"
)

#: the box of the exact density (:meth:`GaussianMixtureModel.exact_density`): components of at
#: least this weight relative to the largest, each ± this many standard deviations
BOX_WEIGHT = 1e-4
BOX_DEVIATIONS = 4.0

MIXTURE_MODEL_KEYS = (
    Key("dimension", "integer", 2, "d, the coordinates of θ", minimum=1,
        maximum=MAX_MIXTURE_DIMENSION, reason=f"each component of the exact posterior holds a d × d "
        f"covariance, and the posterior at most {MAX_POSTERIOR_NUMBERS} (2^22) numbers"),
)  # fmt: skip
MIXTURE_DATA_KEYS = (
    Key("components", "integer", 2, "C, components of each node's factor (placed from the data "
        "seed)", minimum=1),
    Key("radius", "number", 2.0, "distance of the C centres from the prior mean (evenly spaced "
        "on a circle in the first two coordinates, from a random angle; on a line for d = 1)",
        minimum=0, maximum=MEAN_RANGE, reason=_RANGE_REASON),
    Key("jitter", "number", 0.5, "standard deviation of each node's offset of component c from "
        "centre c (each coordinate)", minimum=0, maximum=MEAN_RANGE, reason=_RANGE_REASON),
    Key("means", "numbers", None, "the component means instead: a list of C points (every node's "
        "factor), or one such list per node in graph order; a point is a list of d numbers",
        default_text="placed", minimum=-MEAN_RANGE, maximum=MEAN_RANGE, reason=_RANGE_REASON,
        list_only=True),
    Key("weights", "numbers", None, "component weights w_c > 0: a list of C numbers (every node), "
        "or one such list per node", minimum=0, exclusive_minimum=True, default_text="all 1"),
    Key("variance", "numbers", 1.0, "s², each component's variance (covariance s²·I): a number, "
        "or one per node", minimum=PRIOR_RANGE[0], maximum=PRIOR_RANGE[1], reason=_RANGE_REASON),
    Key("mmd_samples", "integer", 500, "exact posterior draws the `mmd` columns compare the "
        "particles with", minimum=2),
)  # fmt: skip
_KEYS = {key.name: key for key in MIXTURE_DATA_KEYS}


@dataclass(frozen=True, eq=False)
class MixtureData:
    """Each node's likelihood factor, and the seed of the exact draws; the exact posteriors and
    draws found so far are kept, by forgotten set."""

    factors: tuple[GaussianMixture, ...]
    sample_seed: int
    posteriors: dict[frozenset[int], GaussianMixture] = field(default_factory=dict, repr=False)
    samples: dict[frozenset[int], tuple[FloatArray, float]] = field(
        default_factory=dict, repr=False
    )


def _dimension(spec: ModelSpec) -> int:
    """d, ``[model] dimension``."""
    return int(spec.model.options.get("dimension", MIXTURE_MODEL_KEYS[0].default))


def _option(options: Mapping[str, Any], name: str) -> Any:
    """``[data] name`` checked by its key (the key's default when absent)."""
    key = _KEYS[name]
    return key.check(options[name], f"data.{name}") if name in options else key.default


def _depth(value: Any) -> int:
    """How deeply ``value`` nests lists (a number: 0), by its first entries."""
    return 1 + _depth(value[0]) if isinstance(value, list | tuple) and value else 0


def _array(value: Any, shape: tuple[int | None, ...], key: str, what: str) -> FloatArray:
    """``value`` as an array of ``shape`` (None: any length > 0); else an error naming ``key``."""
    try:
        array = np.asarray(value, dtype=float)
    except ValueError:  # a ragged list
        array = np.empty(0)
    if (
        array.ndim != len(shape)
        or array.size == 0
        or any(
            want is not None and have != want for have, want in zip(array.shape, shape, strict=True)
        )
    ):
        raise ConfigError(key, f"must be {what}")
    return array


def _per_node(
    value: Any, shape: tuple[int | None, ...], nodes: int, key: str, what: str
) -> list[FloatArray]:
    """One array of ``shape`` per node: ``value`` itself for every node, or a list with one per
    node in graph order (nested one level deeper)."""
    if _depth(value) == len(shape) + 1:
        if len(value) != nodes:
            raise ConfigError(
                key, f"a per-node list needs one entry per node ({nodes}), got {len(value)}"
            )
        return [_array(v, shape, f"{key}[{k}]", what) for k, v in enumerate(value)]
    return [_array(value, shape, key, what + ", or a list with one per node")] * nodes


def _log2_count(counts: list[int]) -> float:
    """log2 of the exact posterior's components (one per choice of a component at each node)."""
    return float(np.sum(np.log2(counts))) if counts else 0.0


class GaussianMixtureModel(ParticleModel):
    """Gaussian prior, Gaussian-mixture likelihood factors: an exact mixture posterior."""

    kind = "gaussian-mixture"
    description = (
        "θ in R^d (d = 2): Gaussian prior, each node's likelihood a Gaussian mixture in θ; the "
        "posterior is an exact Gaussian mixture (density, score, samples); particles only"
    )
    model_keys: ClassVar[tuple[Key, ...]] = MIXTURE_MODEL_KEYS
    data_keys: ClassVar[tuple[Key, ...]] = MIXTURE_DATA_KEYS
    prior_params = (
        ModelParam("mean", "real", "prior mean m of every coordinate", 0.0),
        ModelParam("variance", "positive", "prior variance v of every coordinate (isotropic)", 4.0),
    )

    def __init__(self, spec: ModelSpec, graph: IndexedGraph, data_rng: np.random.Generator) -> None:
        self.spec = spec
        self.graph = graph
        self.temperature = spec.model.temperature
        self.options = dict(spec.data.options)
        self.d = _dimension(spec)
        # sizes first: the prior's d × d covariance is the first array that grows with d
        self.check_posterior_size(spec, graph.size)
        self.check_budget(spec, graph)
        mean, variance = float(spec.model.prior["mean"]), float(spec.model.prior["variance"])
        self.prior_mixture = GaussianMixture(
            np.zeros(1), np.full((1, self.d), mean), (variance * np.eye(self.d))[None]
        )
        first = self.draw_data(data_rng)  # validates every data key once
        self.fixed_data = first if spec.data.draw == "once" else None

    @classmethod
    def prepare(
        cls, model: Mapping[str, Any], key: str = "model"
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """As for every particle model; and the temperature must be 1 (f_k^(1/α) is no mixture)."""
        temperature = model.get("temperature", 1.0)
        if temperature != 1:
            raise ConfigError(
                f"{key}.temperature",
                f"gaussian-mixture needs temperature = 1 (got {temperature!r}): a mixture factor "
                "raised to the power 1/α is not a mixture, and the exact posterior would be lost",
            )
        return super().prepare(model, key)

    # ----------------------------------------------------------------------------------- data

    @staticmethod
    def _means(options: Mapping[str, Any], nodes: int, d: int) -> list[FloatArray] | None:
        """``[data] means`` as one ``(C_k, d)`` array per node, or None (placed from the seed)."""
        if "means" not in options:
            return None
        for name in ("components", "radius", "jitter"):
            if name in options:
                raise ConfigError(
                    f"data.{name}", "places the factors from the data seed; data.means gives "
                    "them instead: remove one of the two",
                )  # fmt: skip
        what = f"a list of points of {d} numbers each (model.dimension = {d})"
        return _per_node(_option(options, "means"), (None, d), nodes, "data.means", what)

    @classmethod
    def _counts(cls, spec: ModelSpec, nodes: int) -> list[int]:
        """Components of each node's factor, from the settings alone."""
        means = cls._means(spec.data.options, nodes, _dimension(spec))
        if means is None:
            return [int(_option(spec.data.options, "components"))] * nodes
        return [m.shape[0] for m in means]

    @classmethod
    def check_posterior_size(cls, spec: ModelSpec, nodes: int) -> float:
        """The numbers the exact posterior of every node's data holds (weights, means and
        covariances of its components), refused beyond :data:`MAX_POSTERIOR_NUMBERS`."""
        d = _dimension(spec)
        log2 = _log2_count(cls._counts(spec, nodes)) + math.log2(d * d + d + 1)
        if log2 > math.log2(MAX_POSTERIOR_NUMBERS):
            raise ConfigError(
                "data.means" if "means" in spec.data.options else "data.components",
                f"the exact posterior would have one component per choice of a component at "
                f"each of {nodes} nodes, 2^{log2 - math.log2(d * d + d + 1):.1f} of them with "
                f"{d}-dimensional covariances: about 2^{log2:.1f} numbers, more than "
                f"{MAX_POSTERIOR_NUMBERS} (2^22); use fewer components or nodes",
            )
        return float(2.0**log2)

    def draw_data(self, rng: np.random.Generator) -> MixtureData:
        nodes, d, options = self.graph.size, self.d, self.options
        self.check_posterior_size(self.spec, nodes)
        means = self._means(options, nodes, d)
        if means is None:
            means = self._placed(rng, int(_option(options, "components")), nodes)
        counts = [m.shape[0] for m in means]
        weights = (
            [np.ones(c) for c in counts]
            if "weights" not in options
            else _per_node(
                _option(options, "weights"), (None,), nodes, "data.weights", "a list of numbers"
            )
        )
        for k, (w, c) in enumerate(zip(weights, counts, strict=True)):
            if w.size != c:
                raise ConfigError(
                    "data.weights",
                    f"node {self.graph.labels[k]!r} has {c} components but {w.size} weights",
                )
        variances = _per_node(_option(options, "variance"), (), nodes, "data.variance", "a number")
        factors = tuple(
            GaussianMixture(np.log(w), m, np.tile(float(v) * np.eye(d), (m.shape[0], 1, 1)))
            for w, m, v in zip(weights, means, variances, strict=True)
        )
        return MixtureData(factors, int(rng.integers(2**63)))

    def _placed(self, rng: np.random.Generator, count: int, nodes: int) -> list[FloatArray]:
        """The components' means placed from the data seed: C centres evenly spaced about the
        prior mean, each node's component c at centre c plus its own offset."""
        d = self.d
        radius, jitter = (
            float(_option(self.options, "radius")),
            float(_option(self.options, "jitter")),
        )
        angle = rng.uniform(0.0, 2.0 * np.pi)  # drawn for every d: the same stream either way
        centres = np.tile(self.prior_mixture.means, (count, 1))
        if d == 1:  # evenly spaced from m − radius to m + radius
            centres[:, 0] += radius * np.linspace(-1.0, 1.0, count)
        else:
            turns = angle + 2.0 * np.pi * np.arange(count) / count
            centres[:, 0] += radius * np.cos(turns)
            centres[:, 1] += radius * np.sin(turns)
        return [centres + jitter * rng.standard_normal((count, d)) for _ in range(nodes)]

    def node_sizes(self, data: Any) -> list[int]:
        return [1] * self.graph.size if data is not None else []

    def node_rows(self, data: Any, node: int) -> int:
        """One: a node's data is its likelihood factor."""
        return 1

    def node_data_entries(self, data: Any, node: int) -> int:
        """A node's likelihood factor as configured: C weights, C × d means and its variance."""
        means = data.factors[node].means
        return int(means.shape[0] + means.size + 1)

    @classmethod
    def sizes(cls, spec: ModelSpec, nodes: int) -> budget.ModelSizes:
        """Per particle: d numbers of state and message; the factors and the exact posteriors
        (one per forgotten set) with their draws; evaluating the MMD a few sets at a time."""
        d = _dimension(spec)
        numbers = cls.check_posterior_size(spec, nodes) if nodes else 0.0
        draws = int(_option(spec.data.options, "mmd_samples"))
        return budget.ModelSizes(
            state_entries=d,
            message_entries=d,
            particle_entries=d,
            data_values=3.0 * numbers + draws * d,
            data_key="data.means" if "means" in spec.data.options else "data.components",
            data_what=f"the exact posterior of {nodes} mixture factors",
            state_key="model.dimension",
            state_what=f"{nodes} nodes with {d}-entry particles",
            every_slot=True,
            evaluation_values=4.0,
            step_values=float(CHUNK_VALUES + 2 * draws * draws),
            step_key="data.mmd_samples",
            # a node's one "row", its factor: each component's offset, score (d × d), log-density
            # and responsibility
            row_flops=float(max(cls._counts(spec, nodes), default=1)) * (2 * d * d + 6 * d + 10),
            rows=float(nodes),
            test_rows=0.0,
            flops_key="data.means" if "means" in spec.data.options else "data.components",
        )

    # --------------------------------------------------------------------- log-densities

    @property
    def particle_dimension(self) -> int:
        return self.d

    def sample_prior(self, rng: np.random.Generator, count: int) -> FloatArray:
        return self.prior_mixture.sample(rng, count)

    def log_prior(self, particles: FloatArray) -> tuple[FloatArray, FloatArray]:
        return self.prior_mixture.log_density_and_score(particles)

    def log_likelihood(
        self, data: Any, node: int, particles: FloatArray, rows: NDArray[np.intp] | None = None
    ) -> tuple[FloatArray, FloatArray]:
        """log f_k(θ) and its score (``rows``, if given, can only be the node's one row)."""
        if rows is not None and not np.array_equal(np.asarray(rows), [0]):
            raise ValueError("a gaussian-mixture node has one row (its factor): rows must be [0]")
        factor = data.factors[node]
        return factor.log_density_and_score(particles)

    def posterior(self, data: MixtureData, forgotten: frozenset[int]) -> GaussianMixture:
        """The exact posterior of every node's factor but the ``forgotten`` nodes', normalised."""
        if forgotten not in data.posteriors:
            kept = [f for k, f in enumerate(data.factors) if k not in forgotten]
            data.posteriors[forgotten] = product_of_mixtures(
                [self.prior_mixture, *kept]
            ).normalised()
        return data.posteriors[forgotten]

    def exact_density(self, data: MixtureData, forgotten: frozenset[int]) -> ExactDensity:
        """The exact posterior's log-density, and the box of every component of weight at least
        :data:`BOX_WEIGHT` of the largest, each ± :data:`BOX_DEVIATIONS` standard deviations."""
        posterior = self.posterior(data, forgotten)
        weights = posterior.log_weights
        kept = weights >= weights.max() + math.log(BOX_WEIGHT)
        deviations = np.sqrt(np.diagonal(posterior.covariances[kept], axis1=1, axis2=2))
        means = posterior.means[kept]
        return ExactDensity(
            posterior.log_density,
            (means - BOX_DEVIATIONS * deviations).min(axis=0),
            (means + BOX_DEVIATIONS * deviations).max(axis=0),
        )

    def exact_sampler(
        self, data: Any, forgotten: frozenset[int]
    ) -> Callable[[np.random.Generator, int], FloatArray]:
        return self.posterior(data, forgotten).sample

    def exact_draws(self, data: MixtureData, forgotten: frozenset[int]) -> tuple[FloatArray, float]:
        """The ``mmd_samples`` exact draws the MMD compares with, and the kernel's bandwidth h
        (their median squared distance), from a seed of the data and the forgotten set."""
        if forgotten not in data.samples:
            rng = np.random.default_rng([data.sample_seed, len(forgotten), *sorted(forgotten)])
            draws = self.posterior(data, forgotten).sample(
                rng, int(_option(self.options, "mmd_samples"))
            )
            squared = pairwise_squared_distances(draws, draws)
            bandwidth = float(np.median(squared[np.triu_indices(draws.shape[0], k=1)]))
            data.samples[forgotten] = (draws, bandwidth if bandwidth > 0 else 1.0)
        return data.samples[forgotten]

    # ----------------------------------------------------------------------------- metrics

    def particle_columns(self, requested: frozenset[int]) -> tuple[str, ...]:
        return ("mmd", *(("mmd_unlearned",) if requested else ()), "particle_spread")

    def mmd(
        self, data: MixtureData, particles: FloatArray, forgotten: frozenset[int]
    ) -> FloatArray:
        """MMD² (V-statistic) of each particle set ``(..., N, d)`` to the exact draws of the
        posterior without the ``forgotten`` nodes."""
        draws, bandwidth = self.exact_draws(data, forgotten)
        particles = np.asarray(particles, dtype=np.float64)
        return in_chunks(
            lambda sets: maximum_mean_discrepancy(sets, draws, bandwidth),
            particles,
            3.0 * particles.shape[-2] * draws.shape[0],
        )

    def evaluate_particles(
        self, data: Any, particles: FloatArray, requested: frozenset[int]
    ) -> dict[str, FloatArray]:
        out = {"mmd": self.mmd(data, particles, frozenset())}
        if requested:
            out["mmd_unlearned"] = self.mmd(data, particles, requested)
        out["particle_spread"] = particle_spread(particles)
        return out
