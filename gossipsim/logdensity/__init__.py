"""Log-densities and their gradients in θ for particle methods, as pure functions of arrays.

Each model gives its log-prior, its log-likelihood of a data set and both gradients (the scores
SVGD needs) at particle sets ``(..., N, D)`` whose leading axes are batch axes:

- :mod:`~gossipsim.logdensity.hierarchical` the Gaussian prior with a Gamma-distributed precision
  on the log scale, shared by the models below;
- :mod:`~gossipsim.logdensity.logistic` Bayesian logistic regression as in the DSVGD papers;
- :mod:`~gossipsim.logdensity.bnn` a Bayesian neural network of one hidden ReLU layer or several
  (classification and regression);
- :mod:`~gossipsim.logdensity.mixture` Gaussian mixtures, their products (exact posteriors of
  mixture likelihoods) and exact samples.
"""
