"""Particle methods as pure functions on arrays: the RBF kernel of SVGD and its bandwidths, the SVGD
direction, AdaGrad with momentum, a Gaussian kernel density estimate, the kernelized Stein
discrepancy and the maximum mean discrepancy.

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
from gossipsim.particles.mmd import gaussian_mmd, maximum_mean_discrepancy
from gossipsim.particles.stein import (
    gaussian_stein_discrepancy,
    gaussian_stein_inner_product,
    kernel_stein_discrepancy,
)
from gossipsim.particles.svgd import run_svgd, svgd_direction

__all__ = [
    "BANDWIDTH_RULES",
    "AdaGradSettings",
    "adagrad_step",
    "kde_log_density",
    "gaussian_mmd",
    "gaussian_stein_discrepancy",
    "gaussian_stein_inner_product",
    "kde_log_density_and_score",
    "kernel_stein_discrepancy",
    "maximum_mean_discrepancy",
    "median_bandwidth",
    "pairwise_squared_distances",
    "rbf_gram",
    "run_svgd",
    "svgd_direction",
]
