"""A multilayer perceptron under a mean-field Gaussian: Bayes by Backprop's loss and gradient
(paper 004, FedUAB, Section 4: eqs. 4–6, 9, 10; variance reduction of Section 4.5).

**The network.** Layer sizes ``(d_0, d_1, ..., d_L)``: d_0 inputs, L − 1 hidden ReLU layers, d_L
outputs (the classes C; 1 for regression). f(x) = a_L with a_l = h_{l−1}·W_l + b_l, h_0 = x and
h_l = relu(a_l) for l < L. Classification: softmax over C classes, labels 0..C−1,
−log p(y | x, w) = logsumexp f(x) − f_y(x). Regression: y ∼ N(f(x), τ⁻¹) with a fixed noise
precision τ (``noise_precision``).

**The flat vector** w of d numbers holds, layer after layer, W_l (d_{l−1} × d_l, row-major) then b_l
(d_l): ``[W_1, b_1, W_2, b_2, ..., W_L, b_L]``, the layout of :mod:`gossipsim.logdensity.bnn`
extended to any depth. :meth:`MlpLayout.unpack` gives per-layer views, :meth:`MlpLayout.pack` the
inverse. 784-50-50-10 has d = 42 310 (004, Table 4).

**The family.** Each weight w_m ∼ N(μ_m, σ_m²) independently, σ = softplus(ρ) = log(1 + e^ρ), the
paper's choice (Section 4.2): σ > 0 for every real ρ, and unlike σ = e^ρ its slope ≤ 1 keeps a large
gradient from blowing σ up. No floor is put on σ: softplus(ρ) > 0 in float64 down to ρ ≈ −745, and
the KL's −log σ term pushes σ up long before that. The prior is N(μ0, σ0²) per weight: in FedUAB the
previous global posterior (eq. 9), in the first round N(0, σ_init²) (the FedUAB code's layers).

**The loss of one mini-batch B** (eq. 10), with the Z reparameterised samples w_z = μ + σ⊙ε_z
(eq. 6's Monte Carlo):

    L^b = s · (1/Z) Σ_z Σ_{i∈B} −log p(y_i | x_i, w_z) + γ · KL(q ‖ prior),

s = ``likelihood_scale``, γ = ``kl_weight``. Two settings:

- the negative ELBO's unbiased estimate (the sound default): s = n/|B|, γ = 1; for a batch drawn
  uniformly its expectation is the full-data free energy of eq. 4 (n examples, one KL);
- FedUAB as published: "the likelihood loss L_E^b is the mean negative log probability of this batch"
  and γ^b = 10⁻⁴ (Section 4.4 and the experiments' settings; the FedUAB code: ``cross_entropy(...,
  reduction='mean') + kl_division·KL``), so s = 1/|B|, γ = 10⁻⁴. It is the ELBO's scaling divided by
  n with γ = n·10⁻⁴: for n = 600, a KL weighted 0.06 rather than 1 (a tempered posterior).

The gradient in (μ, ρ): the data part by the reparameterisation trick, ∂/∂μ = mean_z g_z,
∂/∂ρ = mean_z (g_z ⊙ ε_z) ⊙ sigmoid(ρ) with g_z the data term's gradient at w_z (backpropagation,
written out below, vectorised over the samples and the batch: one matmul per layer); the KL part
exactly, from its closed form. The FedUAB code samples the layers' outputs (the local
reparameterisation trick) by default; this module samples the weights, as eq. 6 states, and offers
the local trick as an option (:func:`local_bbb_loss_and_gradient`): other random numbers, one per
example and pre-activation, the same expected loss and gradient, a lower variance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit, log_softmax, softmax

FloatArray = NDArray[np.float64]
MlpTask = Literal["classification", "regression"]

LOG_2PI: Final = math.log(2.0 * math.pi)
#: FedUAB's KL weight per mini-batch, γ^b = 10⁻⁴ (004, Sections 4.4 and 5)
FEDUAB_KL_WEIGHT: Final = 1e-4
#: The FedUAB code's first-layer initial variance σ² = 0.01 (``init_sigma2``)
FEDUAB_INITIAL_VARIANCE: Final = 0.01
#: The FedUAB code's half-widths of the uniform initial means of 784-50-50-10 (``init_mu``)
FEDUAB_MNIST_MEAN_BOUNDS: Final = (0.25, 0.15, 0.1)
#: The FedUAB code's initial bias mean
FEDUAB_BIAS_MEAN: Final = 0.01


@dataclass(frozen=True)
class MlpLayout:
    """Where each layer's W and b sit in the flat vector of a ReLU network with layer sizes
    ``sizes = (d_0, ..., d_L)``, L ≥ 1 (``(p, C)`` is a softmax or linear regression)."""

    sizes: tuple[int, ...]
    task: MlpTask = "classification"

    def __post_init__(self) -> None:
        if len(self.sizes) < 2 or any(int(s) < 1 for s in self.sizes):
            raise ValueError(f"sizes must be at least two layer sizes >= 1, got {self.sizes!r}")
        if self.task not in ("classification", "regression"):
            raise ValueError(f"task must be 'classification' or 'regression', got {self.task!r}")
        if self.task == "regression" and self.sizes[-1] != 1:
            raise ValueError("a regression network has one output")
        if self.task == "classification" and self.sizes[-1] < 2:
            raise ValueError("a classification network needs at least 2 classes")

    @property
    def layers(self) -> int:
        """L, the number of weight layers."""
        return len(self.sizes) - 1

    @property
    def offsets(self) -> tuple[int, ...]:
        """Where layer l's W_l starts, for l = 0..L−1, then d."""
        at = [0]
        for fan_in, fan_out in zip(self.sizes[:-1], self.sizes[1:], strict=True):
            at.append(at[-1] + (fan_in + 1) * fan_out)
        return tuple(at)

    @property
    def dimension(self) -> int:
        """d, the number of weights and biases."""
        return self.offsets[-1]

    def layer_of(self) -> NDArray[np.intp]:
        """The layer index 0..L−1 of each of the d coordinates."""
        widths = np.diff(np.asarray(self.offsets))
        return np.repeat(np.arange(self.layers), widths)

    def unpack(self, flat: FloatArray) -> list[tuple[FloatArray, FloatArray]]:
        """Views (W_l ``(..., d_{l−1}, d_l)``, b_l ``(..., d_l)``) of ``flat`` ``(..., d)``."""
        lead = flat.shape[:-1]
        out = []
        for layer, start in enumerate(self.offsets[:-1]):
            fan_in, fan_out = self.sizes[layer], self.sizes[layer + 1]
            middle = start + fan_in * fan_out
            weights = flat[..., start:middle].reshape(*lead, fan_in, fan_out)
            out.append((weights, flat[..., middle : middle + fan_out]))
        return out

    def pack(self, layers: Sequence[tuple[FloatArray, FloatArray]]) -> FloatArray:
        """The flat vector ``(..., d)`` of per-layer (W_l, b_l), the inverse of :meth:`unpack`."""
        if len(layers) != self.layers:
            raise ValueError(f"expected {self.layers} layers, got {len(layers)}")
        parts = []
        for weights, bias in layers:
            weights = np.asarray(weights, dtype=np.float64)
            parts.append(weights.reshape(*weights.shape[:-2], -1))
            parts.append(np.asarray(bias, dtype=np.float64))
        return np.concatenate(parts, axis=-1)


def softplus(rho: FloatArray) -> FloatArray:
    """σ = log(1 + e^ρ) = max(ρ, 0) + log(1 + e^−|ρ|), without overflow (``np.logaddexp`` is
    five times slower)."""
    rho = np.asarray(rho, dtype=np.float64)
    out = np.log1p(np.exp(-np.abs(rho)))
    out += np.maximum(rho, 0.0)
    return out


def inverse_softplus(sigma: FloatArray) -> FloatArray:
    """ρ = log(e^σ − 1) for σ > 0, so that softplus(ρ) = σ."""
    sigma = np.asarray(sigma, dtype=np.float64)
    return np.asarray(sigma + np.log(-np.expm1(-sigma)))


def layer_variances(
    layout: MlpLayout,
    initial_variance: float = FEDUAB_INITIAL_VARIANCE,
    variance_reduction: float = 2.0,
) -> FloatArray:
    """Initial σ² of layer l = 0..L−1: σ_1²/H^l (Section 4.5: "we decrease the initial variance of
    the weights by 1/H each layer"; Fig. 5: 0.1², 0.1²/2, ...; the FedUAB code's ``init_sigma2 =
    0.01/variance_reduction**l``). H = ``variance_reduction``, 2 in the paper, 1 = no reduction."""
    if not (np.isfinite(variance_reduction) and variance_reduction > 0.0):
        raise ValueError(
            f"variance_reduction must be a finite number > 0, got {variance_reduction!r}"
        )
    if not (np.isfinite(initial_variance) and initial_variance > 0.0):
        raise ValueError(f"initial_variance must be a finite number > 0, got {initial_variance!r}")
    powers = np.arange(layout.layers, dtype=np.float64)
    return np.asarray(initial_variance / float(variance_reduction) ** powers, dtype=np.float64)


def initial_posterior(
    layout: MlpLayout,
    rng: np.random.Generator,
    *,
    initial_variance: float = FEDUAB_INITIAL_VARIANCE,
    variance_reduction: float = 2.0,
    mean_bounds: Sequence[float] | None = None,
    bias_mean: float = FEDUAB_BIAS_MEAN,
) -> tuple[FloatArray, FloatArray]:
    """(μ, ρ) of the first round, each ``(d,)``.

    μ of W_l ∼ Uniform(−a_l, a_l), a_l from ``mean_bounds`` (the FedUAB code's convention:
    :data:`FEDUAB_MNIST_MEAN_BOUNDS` for 784-50-50-10), by default Glorot's
    a_l = √(6/(d_{l−1} + d_l)); μ of b_l = ``bias_mean`` (0.01, the FedUAB code). σ of layer l from
    :func:`layer_variances` (Section 4.5), the same for W_l and b_l.
    """
    variances = layer_variances(layout, initial_variance, variance_reduction)
    if mean_bounds is None:
        mean_bounds = [
            math.sqrt(6.0 / (a + b))
            for a, b in zip(layout.sizes[:-1], layout.sizes[1:], strict=True)
        ]
    if len(mean_bounds) != layout.layers:
        raise ValueError(f"mean_bounds needs {layout.layers} numbers, got {len(mean_bounds)}")
    mu = np.empty(layout.dimension)
    for (weights, bias), bound in zip(layout.unpack(mu), mean_bounds, strict=True):
        weights[...] = rng.uniform(-bound, bound, size=weights.shape)
        bias[...] = bias_mean
    sigma = np.sqrt(variances)[layout.layer_of()]
    return mu, inverse_softplus(sigma)


def initial_prior(
    layout: MlpLayout,
    *,
    initial_variance: float = FEDUAB_INITIAL_VARIANCE,
    variance_reduction: float = 2.0,
) -> tuple[FloatArray, FloatArray]:
    """(μ0, σ0) of the first round's prior, N(0, σ_l²) with the layers' initial variances (the
    FedUAB code's ``prior_W_sigma``); later rounds use the previous global posterior (eq. 9)."""
    variances = layer_variances(layout, initial_variance, variance_reduction)
    return np.zeros(layout.dimension), np.sqrt(variances)[layout.layer_of()]


def gaussian_kl(
    mu: FloatArray, sigma: FloatArray, prior_mu: FloatArray, prior_sigma: FloatArray
) -> FloatArray:
    """Σ_m KL(N(μ_m, σ_m²) ‖ N(μ0_m, σ0_m²)) over the last axis (eqs. 5, 6's complexity loss):
    log(σ0/σ) + (σ² + (μ − μ0)²)/(2σ0²) − ½ per weight."""
    ratio = (sigma / prior_sigma) ** 2
    terms = -0.5 * np.log(ratio) + 0.5 * (ratio + ((mu - prior_mu) / prior_sigma) ** 2) - 0.5
    return np.asarray(terms.sum(axis=-1))


def negative_log_likelihood(
    layout: MlpLayout,
    weights: FloatArray,
    X: FloatArray,
    y: FloatArray,
    row_weights: FloatArray,
    *,
    noise_precision: float = 1.0,
) -> tuple[FloatArray, FloatArray]:
    """Σ_i r_i·(−log p(y_i | x_i, w)) and its gradient in w, by backpropagation.

    ``weights`` ``(..., d)``; ``X`` ``(..., n, d_0)``, ``y`` and ``row_weights`` r ``(..., n)``,
    broadcast against the weights' leading axes (a Monte Carlo axis of the weights takes the data
    with a length-1 axis in its place). A zero r_i is a padded row. Returns ``(...)`` and
    ``(..., d)``; one matmul per layer forward and two back.
    """
    return nll_into(layout, weights, X, y, row_weights, noise_precision, None)


def _head(
    layout: MlpLayout,
    outputs: FloatArray,
    y: FloatArray,
    row_weights: FloatArray,
    noise_precision: float,
) -> tuple[FloatArray, FloatArray]:
    """Σ_i r_i·(−log p(y_i | f(x_i))) ``(...)`` and its gradient in the outputs ``(..., n, C)``."""
    if layout.task == "classification":
        labels = np.broadcast_to(np.asarray(y).astype(np.intp), outputs.shape[:-1])
        log_p = log_softmax(outputs, axis=-1)
        picked = np.take_along_axis(log_p, labels[..., None], axis=-1)[..., 0]
        per_row = -picked
        delta = softmax(outputs, axis=-1)
        np.put_along_axis(
            delta,
            labels[..., None],
            np.take_along_axis(delta, labels[..., None], axis=-1) - 1.0,
            -1,
        )
    else:
        residual = outputs[..., 0] - np.asarray(y, dtype=np.float64)
        per_row = 0.5 * noise_precision * residual**2 + 0.5 * (LOG_2PI - math.log(noise_precision))
        delta = (noise_precision * residual)[..., None]
    value = np.einsum("...n,...n->...", per_row, np.broadcast_to(row_weights, per_row.shape))
    delta = delta * np.asarray(row_weights)[..., None]
    return value, delta


def nll_into(
    layout: MlpLayout,
    weights: FloatArray,
    X: FloatArray,
    y: FloatArray,
    row_weights: FloatArray,
    noise_precision: float,
    gradient: FloatArray | None,
) -> tuple[FloatArray, FloatArray]:
    """:func:`negative_log_likelihood` writing the gradient into ``gradient`` (every coordinate
    is written) when given, a preallocated ``(..., d)`` of the broadcast shape; the same numbers."""
    layers = layout.unpack(weights)
    hidden = [X]
    pre: list[FloatArray] = []
    for layer, (w, b) in enumerate(layers):
        a = hidden[-1] @ w + b[..., None, :]
        if layer < layout.layers - 1:
            pre.append(a)
            hidden.append(np.maximum(a, 0.0))
    value, delta = _head(layout, a, y, row_weights, noise_precision)
    if gradient is None:
        gradient = np.zeros(
            np.broadcast_shapes(weights.shape[:-1], delta.shape[:-2]) + weights.shape[-1:]
        )
    for layer in range(layout.layers - 1, -1, -1):
        gw, gb = layout.unpack(gradient)[layer]
        np.matmul(np.swapaxes(hidden[layer], -1, -2), delta, out=gw)
        np.sum(delta, axis=-2, out=gb)
        if layer > 0:
            delta = (delta @ np.swapaxes(layers[layer][0], -1, -2)) * (pre[layer - 1] > 0.0)
    return value, gradient


def local_draws(layout: MlpLayout) -> int:
    """How many standard normals the local reparameterisation draws per sample and example: one
    per pre-activation, Σ_l d_l."""
    return sum(layout.sizes[1:])


def local_data_gradient(
    layout: MlpLayout,
    mu: FloatArray,
    sigma: FloatArray,
    X: FloatArray,
    y: FloatArray,
    xi: FloatArray,
    row_weights: FloatArray,
    noise_precision: float,
    grad_mu: FloatArray,
    grad_sigma: FloatArray,
) -> FloatArray:
    """The data term under the local reparameterisation trick (Kingma, Salimans & Welling 2015):
    each example's pre-activations a_l = m_l + √v_l ⊙ ξ, m_l = h_{l−1}·M_l + m_b,
    v_l = h_{l−1}²·S_l² + s_b², with ξ ∼ N(0, I) per sample, example and unit instead of one weight
    draw shared by the batch. Given h_{l−1} this is the law of h_{l−1}·W_l + b_l with W ∼ q, so
    every example's (a_1, ..., a_L) has the law it has under eq. 6's weight sampling: the loss's
    expectation and its gradient in (μ, σ) are the same, the estimator's variance lower.

    ``mu``, ``sigma`` ``(..., d)``; ``X`` ``(..., |B|, d_0)``; ``y``, ``row_weights``
    ``(..., |B|)``; ``xi`` ``(..., Z, |B|, Σ_l d_l)``. Writes the Monte Carlo mean gradients in μ and
    in σ into ``grad_mu`` and ``grad_sigma`` (``(..., d)``, the broadcast leading shape) and
    returns the data term's Monte Carlo mean ``(...)``.
    """
    draws = xi.shape[-3]
    m_layers = layout.unpack(mu)
    s_layers = layout.unpack(sigma)
    variance = sigma * sigma
    v_layers = layout.unpack(variance)
    h = X[..., None, :, :]
    hidden, scales, noise, pre = [], [], [], []
    start = 0
    for layer in range(layout.layers):
        (mw, mb), (vw, vb) = m_layers[layer], v_layers[layer]
        width = layout.sizes[layer + 1]
        mean = h @ mw[..., None, :, :] + mb[..., None, None, :]
        var = (h * h) @ vw[..., None, :, :] + vb[..., None, None, :]
        sd = np.sqrt(var)
        z = xi[..., start : start + width]
        start += width
        a = mean + sd * z
        hidden.append(h)
        scales.append(sd)
        noise.append(z)
        if layer < layout.layers - 1:
            pre.append(a)
            h = np.maximum(a, 0.0)
    value, delta = _head(
        layout, a, np.asarray(y)[..., None, :], np.asarray(row_weights)[..., None, :],
        noise_precision,
    )  # fmt: skip
    for layer in range(layout.layers - 1, -1, -1):
        h = hidden[layer]
        gw_mu, gb_mu = layout.unpack(grad_mu)[layer]
        gw_s, gb_s = layout.unpack(grad_sigma)[layer]
        sw, sb = s_layers[layer]
        # ∂/∂v = δ⊙ξ/(2√v); ∂v/∂S = 2h²⊙S, ∂v/∂s_b = 2 s_b, ∂v/∂h = 2h⊙S²
        scaled = delta * noise[layer] / scales[layer]
        if h.shape[-3] == 1:  # the input layer: X is the same for every sample
            x = np.swapaxes(h[..., 0, :, :], -1, -2)
            gw_mu[...] = x @ delta.sum(axis=-3)
            gw_s[...] = (x * x) @ scaled.sum(axis=-3)
        else:
            hf = np.swapaxes(_fold(h), -1, -2)
            gw_mu[...] = hf @ _fold(delta)
            gw_s[...] = (hf * hf) @ _fold(scaled)
        gb_mu[...] = delta.sum(axis=(-3, -2))
        gb_s[...] = scaled.sum(axis=(-3, -2))
        gw_s *= sw
        gb_s *= sb
        if layer > 0:
            mw, vw = m_layers[layer][0], v_layers[layer][0]
            delta = delta @ np.swapaxes(mw, -1, -2)[..., None, :, :]
            delta += h * (scaled @ np.swapaxes(vw, -1, -2)[..., None, :, :])
            delta *= pre[layer - 1] > 0.0
    if draws > 1:
        grad_mu /= draws
        grad_sigma /= draws
    return np.asarray(value.mean(axis=-1))


def _fold(a: FloatArray) -> FloatArray:
    """``(..., Z, n, k)`` as ``(..., Z·n, k)``: the samples' rows stacked for one matmul."""
    return a.reshape(*a.shape[:-3], a.shape[-3] * a.shape[-2], a.shape[-1])


def local_bbb_loss_and_gradient(
    layout: MlpLayout,
    mu: FloatArray,
    rho: FloatArray,
    prior_mu: FloatArray,
    prior_sigma: FloatArray,
    X: FloatArray,
    y: FloatArray,
    xi: FloatArray,
    *,
    likelihood_scale: float | FloatArray,
    kl_weight: float = 1.0,
    noise_precision: float = 1.0,
    row_mask: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """:func:`bbb_loss_and_gradient` with the local reparameterisation trick
    (:func:`local_data_gradient`): ``xi`` ``(..., Z, |B|, Σ_l d_l)`` standard normals, one per
    sample, example and pre-activation, in place of eq. 6's ``eps`` ``(..., Z, d)``. Other random
    numbers, the same expectation (of the loss and of its gradient), a lower variance."""
    sigma = softplus(rho)
    scale = np.asarray(likelihood_scale, dtype=np.float64)[..., None]
    rows = np.broadcast_to(scale, np.shape(y)) if row_mask is None else scale * row_mask
    lead = np.broadcast_shapes(mu.shape[:-1], xi.shape[:-3], np.shape(X)[:-2], rows.shape[:-1])
    grad_mu = np.empty(lead + mu.shape[-1:])
    grad_sigma = np.empty(lead + mu.shape[-1:])
    data = local_data_gradient(
        layout, mu, sigma, X, y, xi, rows, noise_precision, grad_mu, grad_sigma
    )
    prior_precision = prior_sigma**-2.0
    grad_mu += kl_weight * prior_precision * (mu - prior_mu)
    grad_sigma += kl_weight * (sigma * prior_precision - 1.0 / sigma)
    grad_sigma *= expit(rho)
    return data + kl_weight * gaussian_kl(mu, sigma, prior_mu, prior_sigma), grad_mu, grad_sigma


def bbb_loss_and_gradient(
    layout: MlpLayout,
    mu: FloatArray,
    rho: FloatArray,
    prior_mu: FloatArray,
    prior_sigma: FloatArray,
    X: FloatArray,
    y: FloatArray,
    eps: FloatArray,
    *,
    likelihood_scale: float | FloatArray,
    kl_weight: float = 1.0,
    noise_precision: float = 1.0,
    row_mask: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Eq. 10's loss of one mini-batch and its gradient in μ and in ρ (module docstring).

    ``mu``, ``rho`` ``(..., d)`` (leading axes: clients, say); the prior ``(..., d)`` or ``(d,)``;
    ``X`` ``(..., |B|, d_0)``, ``y`` ``(..., |B|)``; ``eps`` ``(..., Z, d)``, the standard normal
    draws of w_z = μ + σ⊙ε_z. ``likelihood_scale`` s (a number or one per leading index),
    ``kl_weight`` γ; ``row_mask`` ``(..., |B|)`` zeroes padded rows. Returns the loss ``(...)`` and
    the gradients in μ and ρ, ``(..., d)`` each.
    """
    sigma = softplus(rho)
    data, grad_mu, grad_rho = _data_and_gradient(
        layout, mu, rho, sigma, prior_mu, prior_sigma, X, y, eps,
        likelihood_scale, kl_weight, noise_precision, row_mask,
    )  # fmt: skip
    return data + kl_weight * gaussian_kl(mu, sigma, prior_mu, prior_sigma), grad_mu, grad_rho


def bbb_gradient(
    layout: MlpLayout,
    mu: FloatArray,
    rho: FloatArray,
    prior_mu: FloatArray,
    prior_sigma: FloatArray,
    X: FloatArray,
    y: FloatArray,
    eps: FloatArray,
    *,
    likelihood_scale: float | FloatArray,
    kl_weight: float = 1.0,
    noise_precision: float = 1.0,
    row_mask: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray]:
    """The gradients of :func:`bbb_loss_and_gradient` alone (training needs no loss value, and
    the KL's value costs a logarithm per weight)."""
    sigma = softplus(rho)
    return _data_and_gradient(
        layout, mu, rho, sigma, prior_mu, prior_sigma, X, y, eps,
        likelihood_scale, kl_weight, noise_precision, row_mask,
    )[1:]  # fmt: skip


def _data_and_gradient(
    layout: MlpLayout,
    mu: FloatArray,
    rho: FloatArray,
    sigma: FloatArray,
    prior_mu: FloatArray,
    prior_sigma: FloatArray,
    X: FloatArray,
    y: FloatArray,
    eps: FloatArray,
    likelihood_scale: float | FloatArray,
    kl_weight: float,
    noise_precision: float,
    row_mask: FloatArray | None,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The data term's Monte Carlo mean ``(...)`` and the full gradients in μ and ρ."""
    samples = sigma[..., None, :] * eps  # (..., Z, d)
    samples += mu[..., None, :]
    scale = np.asarray(likelihood_scale, dtype=np.float64)[..., None]
    rows = np.broadcast_to(scale, np.shape(y)) if row_mask is None else scale * row_mask
    data, grad_w = negative_log_likelihood(
        layout,
        samples,
        X[..., None, :, :],
        np.asarray(y)[..., None, :],
        rows[..., None, :],
        noise_precision=noise_precision,
    )
    draws = eps.shape[-2]
    prior_precision = prior_sigma**-2.0
    if draws > 1:
        grad_mu = grad_w.sum(axis=-2)
        grad_sigma = np.einsum("...zd,...zd->...d", grad_w, eps)
    else:  # one draw: no sum, and grad_w's own memory serves for the gradient in μ
        grad_mu = grad_w[..., 0, :]
        grad_sigma = grad_mu * eps[..., 0, :]
    grad_mu /= draws
    grad_mu += kl_weight * prior_precision * (mu - prior_mu)
    grad_sigma /= draws
    # γ·∂KL/∂σ = γ·(σ/σ0² − 1/σ)
    grad_sigma += kl_weight * (sigma * prior_precision - 1.0 / sigma)
    grad_sigma *= expit(rho)
    return data.mean(axis=-1), grad_mu, grad_sigma
