"""A model of one's own, plugged into gossipsim without editing it (docs/extending.md).

Exponential waiting times x > 0 with an unknown rate θ and a Gamma(shape, rate) prior on θ: a
conjugate pair. The likelihood of one observation, θ·exp(−θx), adds [1, −x] to the prior's natural
parameters [shape − 1, −rate] (the coefficients of log θ and θ), so node k's exact factor is
s_k = [n_k, −Σ x] and the posterior is Gamma(shape + N, rate + Σ x) over all N observations.
G-FVL learns it exactly (eqs. 13-14) and unlearns a node by subtracting its factor (eq. 21).

    PYTHONPATH=examples gossipsim run examples/gamma_exponential.toml
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from gossipsim.errors import ConfigError
from gossipsim.families.conjugate import GammaPrior, ModelParam
from gossipsim.models.conjugate import ConjugateExpFam


class GammaExponentialMath(GammaPrior):
    """The conjugate pair itself: the Gamma prior (its keys, family and natural parameters come
    from :class:`GammaPrior`, as gamma–Poisson's do), sufficient statistics and a data generator."""

    description = "exponential waiting times x > 0, Gamma(shape, rate) prior on their rate θ"
    data_params = (ModelParam("rate", "positive", "rate θ of the synthetic waiting times", 1.0),)
    observation = "a waiting time x > 0"

    def statistics(self, x: np.ndarray) -> np.ndarray:
        return np.array([float(len(x)), -float(np.sum(x))])  # Σ [1, −x]

    def generate(self, n: int, params: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
        return rng.exponential(1.0 / params["rate"], size=n)

    def check_observations(self, x: np.ndarray, key: str) -> np.ndarray:
        if not np.all(np.isfinite(x) & (x > 0)):
            raise ConfigError(key, "gamma-exponential observations must be finite and > 0")
        return x

    def _in_support(self, x: float) -> bool:
        return bool(np.isfinite(x)) and x > 0


class GammaExponential(ConjugateExpFam):
    """``[model] kind = "gamma_exponential:GammaExponential"``: learned by exact G-FVL updates."""

    kind = "gamma_exponential:GammaExponential"
    math = GammaExponentialMath
