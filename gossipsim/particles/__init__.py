"""Particle methods as pure functions on arrays: the RBF kernel of SVGD and its bandwidths, the SVGD
direction, AdaGrad with momentum, and a Gaussian kernel density estimate.

Every function takes arrays whose leading axes are batch axes (``(..., N, d)`` particle sets), so
many runs, nodes or candidate sets are stepped at once; nothing here draws random numbers or keeps
state between calls.
"""

from gossipsim.particles.adagrad import AdaGradSettings, adagrad_step
from gossipsim.particles.kde import kde_log_density, kde_log_density_and_score
from gossipsim.particles.kernels import (
    BANDWIDTH_RULES,
    median_bandwidth,
    pairwise_squared_distances,
    rbf_gram,
)
from gossipsim.particles.svgd import run_svgd, svgd_direction

__all__ = [
    "BANDWIDTH_RULES",
    "AdaGradSettings",
    "adagrad_step",
    "kde_log_density",
    "kde_log_density_and_score",
    "median_bandwidth",
    "pairwise_squared_distances",
    "rbf_gram",
    "run_svgd",
    "svgd_direction",
]
