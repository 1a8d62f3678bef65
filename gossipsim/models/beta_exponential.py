"""The Beta–exponential model (Section V-B, eqs. 22-23): Beta(a, b) prior on θ ∈ (0, 1) and
exponential observations with mean θ, p(z|θ) = θ⁻¹ exp(−z/θ).

The prior and likelihood are not conjugate; q stays a Beta and is learned by natural-gradient G-FVL.
A node's local loss is the sum of its log-losses, L_k(θ) = N_k log θ + Z_k / θ (Z_k = Σ z).

**Exact target.** With temperature α the target posterior of the included nodes is

    p(θ) ∝ θ^(a₀−1−N/α) (1−θ)^(b₀−1) exp(−(Z/α)/θ),     N = Σ N_k, Z = Σ Z_k.

Its normaliser log 𝒵 is computed once per target by adaptive quadrature (``scipy.integrate.quad``
around the mode, relative accuracy about 1e-12); given it, KL(Beta(a, b) ‖ p) is closed form,

    KL = −H(q) − (a₀−1−N/α) E_q[log θ] − (b₀−1) E_q[log(1−θ)] + (Z/α) E_q[1/θ] + log 𝒵,

with E_q[log θ] = ψ(a) − ψ(a+b), E_q[log(1−θ)] = ψ(b) − ψ(a+b), E_q[1/θ] = (a+b−1)/(a−1) for
a > 1 (infinite otherwise: p vanishes faster than any power of θ at 0). The tests check it against a
brute-force integral on a fine grid. The **best-in-family KL** min_{a,b} KL(Beta(a, b) ‖ p) is found
as the stationary point of KL(q ‖ p) in the family by damped natural-gradient steps, accepted when
its estimated KL to the exact minimiser is at most 1e-11 (:mod:`gossipsim.families.optimum`); it is also the
fixed point of G-FVL, since the free energy (2) is α·KL(q ‖ p) up to a constant. The tests check it
against Nelder–Mead on (log a, log b) and a grid.

**Gradient estimators** of ∇_μ E_q[L_k] (eq. 17): ``reinforce`` (eqs. 18-20; S samples per data
point by default, as in the authors' code, or S in total), and ``exact``: the closed form above
differentiated in (a, b) and mapped by F⁻¹. There is no reparameterisation estimator for the Beta.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from scipy.special import betaln, digamma

from gossipsim.core.capabilities import (
    BATCHED_MEAN_GRADIENT,
    MEAN_GRADIENT,
    BatchedMeanGradient,
    EstimatorSettings,
    MeanGradient,
)
from gossipsim.core.schema import format_number
from gossipsim.data.observations import points_per_node, read_observations
from gossipsim.errors import ConfigError
from gossipsim.families import Beta, ModelParam
from gossipsim.families.drawn import Drawn, is_drawn, parse_drawn
from gossipsim.families.expfam import trigamma
from gossipsim.families.natgrad import reinforce_mean_gradient
from gossipsim.families.natgrad_batch import beta_reinforce, padded_rows
from gossipsim.families.optimum import OptimumError, variational_optimum
from gossipsim.models.base import (
    Model,
    Target,
    check_prior_numbers,
    total_points,
    warnings_only_on_success,
)
from gossipsim.scheduling import IndexedGraph
from gossipsim.study import budget

if TYPE_CHECKING:
    from gossipsim.study.settings import ModelSpec

_TINY = 1e-300


@dataclass(frozen=True)
class ExponentialData:
    """Observations per node, and their counts and sums."""

    observations: tuple[np.ndarray, ...]

    @property
    def counts(self) -> np.ndarray:
        return np.array([x.size for x in self.observations], dtype=float)

    @property
    def sums(self) -> np.ndarray:
        return np.array([float(x.sum()) for x in self.observations])


def expected_loss_terms(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """E_q[log θ], E_q[log(1−θ)], E_q[1/θ] under Beta(a, b) (the last is inf for a ≤ 1)."""
    psi_ab = digamma(a + b)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(a > 1, (a + b - 1) / np.where(a > 1, a - 1, 1.0), np.inf)
    return digamma(a) - psi_ab, digamma(b) - psi_ab, inv


def beta_entropy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return betaln(a, b) - (a - 1) * digamma(a) - (b - 1) * digamma(b) + (a + b - 2) * digamma(a + b)


class PosteriorError(ConfigError):
    """The exact posterior cannot be computed (a one-line message)."""


class ExactPosterior(Target):
    """p(θ) ∝ θ^(c₁) (1−θ)^(c₂) exp(−c₃/θ) on (0, 1): the exact Beta–exponential posterior.

    Its score is closed form (:meth:`score`); gossipsim has no exact sampler for it (``sample``
    raises NotImplementedError, ``has_samples`` is False)."""

    def __init__(self, log_theta: float, log_one_minus: float, inverse: float) -> None:
        self.c1, self.c2, self.c3 = float(log_theta), float(log_one_minus), float(inverse)
        #: relative stationarity residual of the best-in-family Beta where its search stopped
        self.best_family_residual = np.nan
        #: its estimated KL to the exact best-in-family Beta (≤ 1e-11, else an error;
        #: :mod:`gossipsim.families.optimum`)
        self.best_family_kl_to_optimum = np.nan
        self.log_normaliser = self._log_normaliser()
        if not np.isfinite(self.log_normaliser):  # every KL would be ±inf, and shown as 0
            raise PosteriorError(
                "exact posterior",
                f"its normaliser is {self.log_normaliser:g} in log, not a number: quadrature in "
                "float64 cannot integrate this posterior",
            )
        self.best_family_kl, self.best_family = self._best_in_family()

    def log_unnormalised(self, theta: np.ndarray | float) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        # with b = 1 (c₂ = 0) the density at θ = 1 is finite: (1 − θ)⁰ = 1, not 0·(−∞)
        second = self.c2 * np.log1p(-theta) if self.c2 != 0.0 else 0.0
        return self.c1 * np.log(theta) + second - self.c3 / theta

    def score(self, points: np.ndarray) -> np.ndarray:
        """d/dθ log p = c₁/θ − c₂/(1−θ) + c₃/θ² at ``points`` ``(..., 1)`` in (0, 1); NaN outside."""
        theta = np.asarray(points, dtype=float)
        if theta.ndim == 0 or theta.shape[-1] != 1:
            raise ValueError(f"points must be (..., 1) for a scalar θ, got {theta.shape}")
        with np.errstate(divide="ignore", invalid="ignore"):
            value = self.c1 / theta - self.c2 / (1.0 - theta) + self.c3 / theta**2
        return np.where((theta > 0.0) & (theta < 1.0), value, np.nan)

    def _mode(self) -> float:
        from scipy import optimize  # here: importing it costs every command a fifth of a second

        res = optimize.minimize_scalar(
            lambda u: -self.log_unnormalised(1 / (1 + np.exp(-u))),
            bounds=(-40, 40),
            method="bounded",
            options={"xatol": 1e-10},
        )
        return float(1 / (1 + np.exp(-res.x)))

    def _log_normaliser(self) -> float:
        from scipy import integrate

        mode = self._mode()
        peak = float(self.log_unnormalised(mode))

        def f(t: float) -> float:
            return float(np.exp(self.log_unnormalised(t) - peak))

        total = 0.0
        for lo, hi in ((0.0, mode), (mode, 1.0)):
            value, _ = integrate.quad(f, lo, hi, epsabs=0.0, epsrel=1e-12, limit=500, points=None)
            total += value
        return peak + float(np.log(total))

    def kl(self, states: np.ndarray) -> np.ndarray:
        a, b = Beta.conventional(np.asarray(states, dtype=float))
        e_log, e_log1m, e_inv = expected_loss_terms(a, b)
        with np.errstate(invalid="ignore"):
            value = (
                -beta_entropy(a, b)
                - self.c1 * e_log
                - self.c2 * e_log1m
                + self.c3 * e_inv
                + self.log_normaliser
            )
        return np.maximum(value, 0.0)

    def _best_in_family(self) -> tuple[float, np.ndarray]:
        """min over Beta(a, b) of KL(Beta ‖ p) and its minimiser: the stationary point of the free
        energy, found by damped natural-gradient steps (:func:`gossipsim.families.optimum.variational_optimum`)
        from the Beta with the target's mean and variance. KL(q ‖ p) = −H(q) − E_q[log p̃] + log 𝒵 with
        log p̃ = c₁ log θ + c₂ log(1−θ) − c₃/θ, so its natural gradient is η − (c₁, c₂) + c₃ F⁻¹ ∇_η
        E_q[1/θ]: the residual of G-FVL's fixed point (eq. 17) with all data at one node."""
        if self.c3 == 0.0 and self.c1 > -1.0 and self.c2 > -1.0:  # p is itself a Beta
            self.best_family_residual = 0.0
            self.best_family_kl_to_optimum = 0.0
            return 0.0, np.array([self.c1, self.c2])
        from scipy import integrate

        mode = self._mode()
        moments = []
        for power in (1, 2):
            v, _ = integrate.quad(
                lambda t, k=power: t**k * np.exp(self.log_unnormalised(t) - self.log_normaliser),
                0.0,
                1.0,
                points=[mode],
                limit=500,
                epsrel=1e-12,
            )
            moments.append(v)
        mean, var = moments[0], max(moments[1] - moments[0] ** 2, 1e-12)
        common = max(mean * (1 - mean) / var - 1, 1e-3)
        start = Beta.natural(max(mean * common, 1.01), max((1 - mean) * common, 1e-2))
        family = Beta()

        def mean_gradient(eta: np.ndarray) -> np.ndarray:
            a, b = Beta.conventional(eta)  # ∇_η E_q[1/θ] with E_q[1/θ] = (a+b−1)/(a−1)
            grad = self.c3 * np.array([-b / (a - 1) ** 2, 1.0 / (a - 1)])
            return np.linalg.solve(family.fisher(eta), grad)

        def in_domain(eta: np.ndarray) -> bool:
            a, b = Beta.conventional(eta)
            return bool(a > 1.0 and b > 0.0)  # E_q[1/θ] is finite only for a > 1

        found = variational_optimum(
            np.array([self.c1, self.c2]),
            mean_gradient,
            lambda eta: float(self.kl(eta)[()]),
            in_domain,
            fisher_norm=family.fisher_norm,
            start=start,
            what="best-in-family Beta",
        )
        self.best_family_residual = found.residual
        self.best_family_kl_to_optimum = found.kl_to_optimum
        return float(self.kl(found.eta)[()]), found.eta


class ExponentialObservations:
    """One observation of the Beta–exponential model, as :func:`gossipsim.data.observations.read_observations`
    checks it: a positive number z (the exponential density with mean θ)."""

    observation = "a positive number (an exponential observation z > 0)"

    def observation_error(self, x: float) -> str | None:
        return None if x > 0 else f"must be {self.observation}"

    def check_observations(self, x: np.ndarray, key: str) -> np.ndarray:
        return x.astype(float)


class BetaExponential(Model):
    kind = "beta-exponential"
    description = "exponential observations z ≥ 0 with mean θ ∈ (0, 1) (eqs. 22-23), Beta(a, b) prior; non-conjugate"
    capabilities: ClassVar[frozenset[str]] = frozenset({MEAN_GRADIENT, BATCHED_MEAN_GRADIENT})
    has_best_family: ClassVar[bool] = True
    reads_files: ClassVar[bool] = True
    prior_params = (
        ModelParam("a", "positive", "Beta prior a > 1 (E_q[1/θ] is infinite for a <= 1)", 2.0),
        ModelParam("b", "positive", "Beta prior b >= 1 (a bounded exact posterior)", 2.0),
    )
    data_params = (
        ModelParam(
            "theta",
            "unit-mean",
            "mean of the observations in (0, 1], or a distribution ({ beta = [a, b] }, { uniform = [low, high] }) to draw it per node with the data",
            0.5,
        ),
    )
    estimators: ClassVar[tuple[str, ...]] = ("reinforce", "exact")

    def __init__(self, spec: ModelSpec, graph: IndexedGraph, data_rng: np.random.Generator) -> None:
        self.spec = spec
        self.graph = graph
        self.family = Beta()
        prior = spec.model.prior
        self.a0, self.b0 = float(prior["a"]), float(prior["b"])
        self.prior = Beta.natural(self.a0, self.b0)
        self.temperature = spec.model.temperature
        self.check_budget(spec, graph)
        check_prior_numbers(self.family, self.prior)
        if spec.data.path is not None:
            self.fixed_data = self._read(spec, graph)
            self.points = [x.size for x in self.fixed_data.observations]
            self.node_params = []
            return
        self.points = points_per_node(spec.data.points_per_node, graph.size)
        self.node_params = check_theta(spec.data.params.get("theta", 0.5), graph.size)
        self.fixed_data = self.draw_data(data_rng) if spec.data.draw == "once" else None
        if self.fixed_data is None:  # data drawn per run: a target of one draw must be found
            with warnings_only_on_success():
                self.compute_target(self.draw_data(data_rng), frozenset())

    @staticmethod
    def _read(spec: ModelSpec, graph: IndexedGraph) -> ExponentialData:
        """Observations from ``[data] path`` (a node,x CSV file), positive numbers whose sums the
        model can compute with."""
        path = Path(str(spec.data.path))
        if not path.is_absolute():
            path = Path(spec.base_dir) / path
        data = ExponentialData(tuple(read_observations(path, graph, ExponentialObservations())))
        if not np.all(np.isfinite(data.sums)):
            raise ConfigError(
                "data.path", "the sums of the observations overflow; use smaller values"
            )
        return data

    @classmethod
    def prepare(
        cls, model: Mapping[str, Any], key: str = "model"
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The Beta prior, with a > 1: G-FVL starts from q = prior and takes its first step along
        ∇_μ E_q[L_k], which involves E_q[1/θ] = (a + b − 1)/(a − 1), infinite for a ≤ 1. The exact
        estimator could then take no step at all (every KL would stay infinite), and a REINFORCE
        estimate of an infinite gradient is an arbitrary step set by the smallest θ drawn (a prior
        a = 0.5 ends 50-100 times further from the target than a = 1.5). And b >= 1, so that the
        exact posterior's density is bounded (its normaliser is found by quadrature)."""
        prior, options = super().prepare(model, key)
        if not prior["a"] > 1:
            raise ConfigError(
                f"{key}.prior.a",
                f"must be > 1 for beta-exponential (got {format_number(prior['a'])}): learning starts from the "
                "prior, and for a <= 1 its expected loss E_q[z/θ] (E_q[1/θ] = (a+b-1)/(a-1)) and "
                "the natural gradient are infinite",
            )
        if not prior["b"] >= 1:
            raise ConfigError(
                f"{key}.prior.b",
                f"must be >= 1 for beta-exponential (got {format_number(prior['b'])}): for b < 1 the exact "
                "posterior's density is unbounded at θ = 1, and its normaliser (hence every KL) is "
                "computed by quadrature of a bounded density",
            )
        return prior, options

    @classmethod
    def sizes(cls, spec: ModelSpec, nodes: int) -> budget.ModelSizes:
        points = spec.data.points_per_node
        largest = max(points, default=0) if isinstance(points, tuple) else points
        options = spec.protocol.options
        samples = getattr(options, "samples", 0)
        # a REINFORCE step draws S samples per data point (or S in all), with a few arrays of them
        draws = samples * (largest if getattr(options, "samples_per", "point") == "point" else 1)
        total = 0 if spec.data.path is not None else total_points(spec, nodes)
        return budget.ModelSizes(
            state_entries=2,
            message_entries=2,
            data_values=float(total),
            data_what=f"{total} observations",
            every_slot=True,
            step_values=4.0 * draws,
        )

    def draw_data(self, rng: np.random.Generator) -> ExponentialData:
        out = []
        for n, theta in zip(self.points, self.node_params, strict=True):
            mean = theta.draw(rng) if isinstance(theta, Drawn) else theta
            out.append(rng.exponential(mean, size=n))
        return ExponentialData(tuple(out))

    def in_domain(self, eta: np.ndarray) -> bool:
        """E_q[L_k] is finite only for a > 1 (the likelihood vanishes like exp(−z/θ) at θ → 0)."""
        a, b = Beta.conventional(eta)
        return bool(a > 1.0 and b > 0.0)

    def mean_gradient(self, data: ExponentialData, estimation: EstimatorSettings) -> MeanGradient:
        """∇_μ E_q[L_k(θ)] for node k by the given estimator (capability ``mean-gradient``)."""
        p = estimation
        family = self.family
        samples, per_point, baseline = p.samples, p.samples_per == "point", p.baseline
        observations = data.observations
        counts, sums = data.counts, data.sums

        def reinforce(eta: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
            z = observations[k]
            if z.size == 0:
                return np.zeros(2)
            a, b = Beta.conventional(eta)
            if per_point:  # S draws for each data point (the authors' code)
                theta = np.clip(rng.beta(a, b, size=(z.size, samples)), _TINY, 1 - 1e-16)
                weights = np.log(theta) + z[:, None] / theta - baseline
            else:  # S draws in all (eq. 18 read literally)
                theta = np.clip(rng.beta(a, b, size=samples), _TINY, 1 - 1e-16)
                weights = counts[k] * np.log(theta) + sums[k] / theta - baseline
            return reinforce_mean_gradient(
                family, eta, theta.ravel(), weights.ravel(), scale=1.0 / samples
            )

        def exact(eta: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
            a, b = Beta.conventional(eta)
            t_ab = trigamma(a + b)
            grad_eta = counts[k] * np.array([trigamma(a) - t_ab, -t_ab]) + sums[k] * np.array(
                [-b / ((a - 1) * (a - 1)), 1.0 / (a - 1)]  # a product: the batched rows' bits
            )
            return np.linalg.solve(family.fisher(eta), grad_eta)

        return exact if p.estimator == "exact" else reinforce

    def in_domain_rows(self, etas: np.ndarray) -> np.ndarray:
        """:meth:`in_domain` of each row of ``etas`` (B, 2)."""
        a, b = Beta.conventional(etas)
        return (a > 1.0) & (b > 0.0)

    def batched_mean_gradient(
        self, data: ExponentialData, estimation: EstimatorSettings
    ) -> BatchedMeanGradient:
        """:meth:`mean_gradient` for a batch of runs (capability ``batched-mean-gradient``): row b
        is run b's member, holder and generator; its draws are the one-run estimator's calls."""
        p = estimation
        samples, per_point, baseline = p.samples, p.samples_per == "point", p.baseline
        observations, _ = padded_rows([z[:, None] for z in data.observations])
        observations = observations[..., 0]  # (K, max N_k), zero-padded
        counts, sums = data.counts, data.sums
        sizes = [z.size for z in data.observations]

        def reinforce(
            eta: np.ndarray, holders: np.ndarray, rngs: Sequence[np.random.Generator]
        ) -> np.ndarray:
            a, b = Beta.conventional(eta)
            batch = eta.shape[0]
            width = observations.shape[1] * samples if per_point else samples
            theta = np.full((batch, width), 0.5)
            for i, k in enumerate(holders.tolist()):
                if sizes[k]:  # the one-run estimator's draws, from the run's generator
                    shape = (sizes[k], samples) if per_point else samples
                    theta[i, : sizes[k] * samples if per_point else samples] = (
                        rngs[i].beta(a[i], b[i], size=shape).ravel()
                    )
            theta = np.clip(theta, _TINY, 1 - 1e-16)
            log_theta = np.log(theta)
            if per_point:  # S draws for each data point (the authors' code)
                z = np.repeat(observations[holders], samples, axis=1)
                weights = log_theta + z / theta - baseline
            else:  # S draws in all
                weights = (
                    counts[holders][:, None] * log_theta + sums[holders][:, None] / theta - baseline
                )
            return beta_reinforce(
                eta, log_theta, np.log1p(-theta), weights,
                [sizes[k] * samples if per_point else samples * bool(sizes[k]) for k in holders.tolist()],
                1.0 / samples,
            )  # fmt: skip

        def exact(
            eta: np.ndarray, holders: np.ndarray, rngs: Sequence[np.random.Generator]
        ) -> np.ndarray:
            a, b = Beta.conventional(eta)
            t_ab = trigamma(a + b)
            n, z = counts[holders][:, None], sums[holders][:, None]
            grad_eta = n * np.stack([trigamma(a) - t_ab, -t_ab], axis=1) + z * np.stack(
                [-b / ((a - 1) * (a - 1)), 1.0 / (a - 1)], axis=1
            )
            return np.linalg.solve(self.family.fisher(eta), grad_eta[:, :, None])[:, :, 0]

        return exact if p.estimator == "exact" else reinforce

    def compute_target(self, data: Any, forgotten: frozenset[int]) -> Target:
        """The exact posterior of the included nodes' data; where it cannot be computed at this
        temperature but can at temperature 1, an error naming ``model.temperature`` and the
        temperatures these data allow (:meth:`_temperature_error`)."""
        included = self.included(forgotten)
        n = float(data.counts[included].sum())
        z = float(data.sums[included].sum())
        try:
            return self._posterior(n, z, self.temperature)
        except (OptimumError, PosteriorError) as exc:
            raise self._named_error(exc, n, z) from None

    def _posterior(self, n: float, z: float, alpha: float) -> ExactPosterior:
        """The exact posterior of ``n`` observations summing to ``z`` at temperature ``alpha``."""
        return ExactPosterior(self.a0 - 1 - n / alpha, self.b0 - 1, z / alpha)

    def _named_error(self, exc: ConfigError, n: float, z: float) -> ConfigError:
        """``exc`` (a target that cannot be computed) as an error naming the key that causes it:
        ``model.temperature`` (:meth:`_temperature_error`), else ``model.prior`` when the prior alone
        (no data) has no target either, else the data."""
        named = self._temperature_error(exc, n, z)
        if named is not None:
            return named
        what = f"the exact posterior cannot be computed ({_reason(exc)})"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._posterior(0.0, 0.0, 1.0)
        except (OptimumError, PosteriorError):
            return ConfigError("model.prior", f"{what}, even without data; use values closer to 1")
        key = "data.path" if self.spec.data.path is not None else "data"
        return ConfigError(key, f"{what} with these observations; use other values")

    def _temperature_error(self, exc: ConfigError, n: float, z: float) -> ConfigError | None:
        """``model.temperature`` named as the cause of ``exc`` when the same data give a target at
        temperature 1 (None otherwise), with what is allowed: every power of ten from the smallest
        found to 1 gives one (tried from 1 down, until the first that does not; a smaller
        temperature weights the data by more than float64's quadrature and the best-in-family
        search can resolve)."""
        alpha = self.temperature
        if not alpha < 1.0:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the trials' quadrature warnings mean nothing here
            allowed = None
            exponent = 0
            while 10.0**-exponent > alpha:
                try:
                    self._posterior(n, z, 10.0**-exponent)
                except (OptimumError, PosteriorError):
                    break
                allowed = 10.0**-exponent
                exponent += 1
        if allowed is None:
            return None
        return ConfigError(
            "model.temperature",
            f"{alpha:g} is too small for these data ({n:g} observations weighted by 1/α = "
            f"{1 / alpha:.3g}): the exact posterior cannot be computed ({_reason(exc)}); allowed: "
            f"temperature >= {allowed:g} for these data (every power of ten from there to 1 gives "
            "one)",
        )

    def node_sizes(self, data: Any) -> list[int]:
        return list(self.points)


def _reason(exc: ConfigError) -> str:
    """Why a target could not be computed: the best-in-family search's error as it is (it names
    the search), the exact posterior's message alone."""
    return exc.message if isinstance(exc, PosteriorError) else str(exc)


def check_theta(value: Any, nodes: int, key: str = "data.theta") -> list[float | Drawn]:
    """Per-node means: a number in (0, 1], a distribution on (0, 1] drawn with the data (``{ beta =
    [a, b] }`` or ``{ uniform = [low, high] }``, :mod:`gossipsim.families.drawn`), or a list of
    these, one per node."""
    values = value if isinstance(value, list | tuple) else [value] * nodes
    if isinstance(value, list | tuple) and len(value) != nodes:
        raise ConfigError(
            key, f"a per-node list needs one value per node ({nodes}), got {len(value)}"
        )
    out: list[float | Drawn] = []
    for i, v in enumerate(values):
        where = f"{key}[{i}]" if isinstance(value, list | tuple) else key
        if is_drawn(v):
            out.append(parse_drawn(v, BetaExponential.data_params[0].domain, where))
        elif isinstance(v, int | float) and not isinstance(v, bool) and 0 < v <= 1:
            out.append(float(v))
        else:
            raise ConfigError(where, f"must be a mean in (0, 1] or {{ beta = [a, b] }} (got {v!r})")
    return out
