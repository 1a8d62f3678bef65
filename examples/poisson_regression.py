"""A particle model of one's own, plugged into gossipsim without editing it (docs/extending.md, "A
particle model of your own"): Bayesian Poisson regression, learned and unlearned by DSVGD.

Node k holds rows (x_i, y_i) of counts y_i ~ Poisson(exp(x_iᵀθ)), with covariates x = (1, z),
z ~ N(0, I) drawn with the counts (``[data] coefficients`` is the θ they are drawn with, the
intercept first; d is its length). The prior is θ ~ N(0, s²I) (``[model] prior = { scale = s }``).
The log-likelihood of a node's rows and its gradient are

    log p(D_k | θ) = Σ_i y_i x_iᵀθ − exp(x_iᵀθ) − log y_i!,    ∇θ = Σ_i (y_i − exp(x_iᵀθ)) x_i.

The posterior has no closed form: the particle protocols judge their particles against it through
its score (the kernelized Stein discrepancy ``ksd``), and the model adds the held-out ``nll`` of the
particles' predictive (1/N)·Σ_n Poisson(y; exp(xᵀθ_n)) on ``test_rows`` rows drawn alike.

    PYTHONPATH=examples gossipsim run examples/poisson_regression.toml
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import gammaln, logsumexp

from gossipsim.core.schema import Key
from gossipsim.errors import ConfigError
from gossipsim.families import ModelParam
from gossipsim.models.base import total_points
from gossipsim.models.classification import particle_spread
from gossipsim.models.particlemodel import CHUNK_VALUES, ParticleModel, in_chunks
from gossipsim.study import budget

FloatArray = NDArray[np.float64]

COEFFICIENTS = Key("coefficients", "numbers", [1.0, 0.5], "θ the counts are drawn with: d numbers, "
                   "the intercept first", minimum=-5.0, maximum=5.0)  # fmt: skip
TEST_ROWS = Key("test_rows", "integer", 500, "held-out rows of the nll column", minimum=1)


@dataclass(frozen=True)
class CountData:
    """Each node's covariates ``(n_k, d)`` and counts ``(n_k,)``, and the held-out rows."""

    X: tuple[FloatArray, ...]
    y: tuple[FloatArray, ...]
    X_test: FloatArray
    y_test: FloatArray


def _coefficients(spec: Any) -> FloatArray:
    """``[data] coefficients``: a list of d >= 1 numbers."""
    value = COEFFICIENTS.read(spec.data.options, "data")
    if not (
        isinstance(value, list | tuple) and value and all(isinstance(v, float | int) for v in value)
    ):
        raise ConfigError("data.coefficients", "must be a list of d numbers, the intercept first")
    return np.asarray(value, dtype=float)


class PoissonRegression(ParticleModel):
    """``[model] kind = "poisson_regression:PoissonRegression"``: for SVGD and DSVGD."""

    kind = "poisson_regression:PoissonRegression"
    description = "counts y ~ Poisson(exp(xᵀθ)), θ ~ N(0, s²I); particle protocols only"
    prior_params = (ModelParam("scale", "positive", "prior standard deviation s of each θ_j", 1.0),)
    data_keys = (COEFFICIENTS, TEST_ROWS)

    def __init__(self, spec: Any, graph: Any, data_rng: np.random.Generator) -> None:
        self.spec, self.graph = spec, graph
        self.temperature = spec.model.temperature
        self.scale = float(spec.model.prior["scale"])
        self.truth = _coefficients(spec)
        self.check_budget(spec, graph)  # before any data are drawn
        first = self.draw_data(data_rng)  # checks the data keys once
        self.fixed_data = first if spec.data.draw == "once" else None

    @classmethod
    def sizes(cls, spec: Any, nodes: int) -> budget.ModelSizes:
        """From the settings alone: d numbers per particle; every row's covariates and count; one
        likelihood gradient (N × n_k rates) and the predictive of the held-out rows."""
        d, test = _coefficients(spec).size, TEST_ROWS.read(spec.data.options, "data")
        rows, points = total_points(spec, nodes), spec.data.points_per_node
        largest = max(points, default=0) if isinstance(points, tuple) else points
        n = getattr(spec.protocol.options, "particles", 1)  # N of a particle protocol
        return budget.ModelSizes(
            state_entries=d, message_entries=d, particle_entries=d,
            data_values=float((rows + test) * (d + 1)), data_what=f"{rows + test} rows of counts",
            every_slot=True, evaluation_values=float(min(3 * n * test, CHUNK_VALUES)),
            evaluation_key="data.test_rows", step_values=float(2 * n * largest),
            step_key="data.points_per_node",
        )  # fmt: skip

    def draw_data(self, rng: np.random.Generator) -> CountData:
        points = self.spec.data.points_per_node
        sizes = list(points) if isinstance(points, tuple) else [points] * self.nodes
        if len(sizes) != self.nodes:
            raise ConfigError(
                "data.points_per_node", f"a list needs one value per node ({self.nodes})"
            )
        test = TEST_ROWS.read(self.spec.data.options, "data")
        X = np.ones((sum(sizes) + test, self.truth.size))
        X[:, 1:] = rng.standard_normal((X.shape[0], self.truth.size - 1))
        y = rng.poisson(np.exp(X @ self.truth)).astype(float)
        ends = np.cumsum(sizes)
        return CountData(
            tuple(np.split(X[: ends[-1]], ends[:-1])),
            tuple(np.split(y[: ends[-1]], ends[:-1])),
            X[ends[-1] :],
            y[ends[-1] :],
        )

    def node_rows(self, data: CountData, node: int) -> int:
        return int(data.y[node].size)

    # ------------------------------------------------------------------- log-densities

    @property
    def particle_dimension(self) -> int:
        return int(self.truth.size)

    def sample_prior(self, rng: np.random.Generator, count: int) -> FloatArray:
        return self.scale * rng.standard_normal((count, self.truth.size))

    def log_prior(self, particles: FloatArray) -> tuple[FloatArray, FloatArray]:
        """log N(θ; 0, s²I) and its gradient −θ/s², for particle sets ``(..., N, d)``."""
        d, s2 = particles.shape[-1], self.scale**2
        value = -0.5 * np.sum(particles**2, axis=-1) / s2 - 0.5 * d * np.log(2 * np.pi * s2)
        return value, -particles / s2

    def log_likelihood(
        self,
        data: CountData,
        node: int,
        particles: FloatArray,
        rows: NDArray[np.intp] | None = None,
    ) -> tuple[FloatArray, FloatArray]:
        """Σ_i log p(y_i | x_i, θ) over the node's rows (``rows`` only, scaled by n_k/|rows|) and
        its gradient: ``(..., N)`` and ``(..., N, d)``."""
        X, y, weight = data.X[node], data.y[node], 1.0
        if rows is not None:
            X, y, weight = X[rows], y[rows], X.shape[0] / max(len(rows), 1)
        eta = particles @ X.T  # (..., N, n): x_iᵀθ_n
        rate = np.exp(eta)
        value = eta @ y - rate.sum(axis=-1) - gammaln(y + 1.0).sum()
        return weight * value, weight * ((y - rate) @ X)

    # ------------------------------------------------------------------------ metrics

    def particle_columns(self, requested: frozenset[int]) -> tuple[str, ...]:
        return ("nll", "particle_spread")

    def evaluate_particles(
        self, data: CountData, particles: FloatArray, requested: frozenset[int]
    ) -> dict[str, FloatArray]:
        """Per particle set ``(R, N, d)``: the held-out predictive's mean negative log-likelihood
        (a few sets at a time: ``in_chunks``) and the particles' spread, ``(R,)`` each."""

        def nll(sets: FloatArray) -> FloatArray:
            eta = sets @ data.X_test.T  # (r, N, M)
            logp = data.y_test * eta - np.exp(eta) - gammaln(data.y_test + 1.0)
            predictive = logsumexp(logp, axis=-2) - np.log(sets.shape[-2])  # (r, M)
            return np.asarray(-predictive.mean(axis=-1))

        values = 3.0 * particles.shape[-2] * data.y_test.size
        return {
            "nll": in_chunks(nll, particles, values),
            "particle_spread": particle_spread(particles),
        }
