"""A client's local Bayes by Backprop training (paper 004, FedUAB, Section 4.2 and step ② of
Fig. 4): E epochs of shuffled mini-batches, Z weight samples per step, eq. 10's loss
(:func:`~gossipsim.logdensity.gaussian_mlp.bbb_loss_and_gradient`), Adam on (μ, ρ).

One client (:func:`train_client`), or several stepped together as one batched computation
(:func:`train_clients`): clients on a leading axis, each with its own generator drawn in the same
order as alone (its epoch's permutation, then one ``(Z, d)`` block of ε per step), so clients of
equal sizes get the numbers they get one at a time. Clients of unequal sizes: every client's batch
is padded to ``batch_size`` rows with a zero row mask, and a client with fewer batches than the
largest sits out the extra steps (its Adam state and step count do not move), so each client still
takes exactly its own ⌈n_k/|B|⌉ steps per epoch on its own batches.

The FedUAB paper and code train with SGD (learning rate 0.05); Adam is offered here as asked by
issue 35, in :func:`adam_step` (Kingma & Ba, 2015, Algorithm 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from gossipsim.logdensity.gaussian_mlp import FloatArray, MlpLayout, bbb_gradient

#: How the batch's negative log-likelihood is scaled: ``"elbo"`` n/|B| (the ELBO's unbiased
#: estimate), ``"mean"`` 1/|B| (FedUAB: "the mean negative log probability of this batch")
LikelihoodScaling = Literal["elbo", "mean"]


@dataclass(frozen=True)
class AdamState:
    """Adam's moving averages of the gradient and its square, ``(..., m)``, and the number of
    steps taken, ``(...)`` (one count per leading index, so a masked client keeps its own)."""

    first: FloatArray
    second: FloatArray
    steps: FloatArray


def adam_init(params: FloatArray) -> AdamState:
    """Zero moments and zero steps for ``params`` ``(..., m)``."""
    return AdamState(np.zeros_like(params), np.zeros_like(params), np.zeros(params.shape[:-1]))


def adam_step(
    params: FloatArray,
    gradient: FloatArray,
    state: AdamState,
    *,
    learning_rate: float,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    active: NDArray[np.bool_] | None = None,
) -> tuple[FloatArray, AdamState]:
    """One Adam step (Kingma & Ba, Algorithm 1): m ← β1 m + (1−β1) g, v ← β2 v + (1−β2) g²,
    θ ← θ − α·m̂/(√v̂ + ε) with m̂ = m/(1−β1^t), v̂ = v/(1−β2^t). ``active`` ``(...)``: the leading
    indices that step; the others keep their parameters and state."""
    first = gradient * (1.0 - beta1)
    first += beta1 * state.first
    second = np.square(gradient)
    second *= 1.0 - beta2
    second += beta2 * state.second
    steps = state.steps + 1.0
    # m̂/(√v̂ + ε) with the bias corrections, per leading index, folded into two scalars
    first_scale = (learning_rate / (1.0 - beta1**steps))[..., None]
    second_scale = (1.0 / np.sqrt(1.0 - beta2**steps))[..., None]
    update = np.sqrt(second)
    update *= second_scale
    update += eps
    np.divide(first, update, out=update)
    update *= first_scale
    moved = params - update
    if active is None:
        return moved, AdamState(first, second, steps)
    rows = np.asarray(active)[..., None]
    return np.where(rows, moved, params), AdamState(
        np.where(rows, first, state.first),
        np.where(rows, second, state.second),
        np.where(active, steps, state.steps),
    )


def _check(epochs: int, batch_size: int, samples: int) -> None:
    for name, value in (("epochs", epochs), ("batch_size", batch_size), ("samples", samples)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")


def train_client(
    layout: MlpLayout,
    mu: FloatArray,
    rho: FloatArray,
    prior_mu: FloatArray,
    prior_sigma: FloatArray,
    X: FloatArray,
    y: FloatArray,
    rng: np.random.Generator,
    *,
    epochs: int,
    batch_size: int,
    samples: int = 1,
    learning_rate: float = 1e-3,
    betas: tuple[float, float] = (0.9, 0.999),
    adam_eps: float = 1e-8,
    scaling: LikelihoodScaling = "elbo",
    kl_weight: float = 1.0,
    noise_precision: float = 1.0,
) -> tuple[FloatArray, FloatArray]:
    """One client's local training from (μ, ρ) ``(d,)``: ``epochs`` passes over (X, y) in
    mini-batches of ``batch_size`` (shuffled each epoch with ``rng``; the last batch may be
    smaller), ``samples`` = Z draws of ε per step, Adam. Returns the final (μ, ρ)."""
    _check(epochs, batch_size, samples)
    n, d = X.shape[0], layout.dimension
    params = np.concatenate([mu, rho])
    state = adam_init(params)
    for _ in range(epochs):
        order = rng.permutation(n)
        for start in range(0, n, batch_size):
            rows = order[start : start + batch_size]
            eps = rng.standard_normal((samples, d))
            scale = (n if scaling == "elbo" else 1.0) / rows.size
            grad_mu, grad_rho = bbb_gradient(
                layout,
                params[:d],
                params[d:],
                prior_mu,
                prior_sigma,
                X[rows],
                y[rows],
                eps,
                likelihood_scale=scale,
                kl_weight=kl_weight,
                noise_precision=noise_precision,
            )
            params, state = adam_step(
                params,
                np.concatenate([grad_mu, grad_rho]),
                state,
                learning_rate=learning_rate,
                beta1=betas[0],
                beta2=betas[1],
                eps=adam_eps,
            )
    return params[:d], params[d:]


def train_clients(
    layout: MlpLayout,
    mu: FloatArray,
    rho: FloatArray,
    prior_mu: FloatArray,
    prior_sigma: FloatArray,
    data: Sequence[tuple[FloatArray, FloatArray]],
    rngs: Sequence[np.random.Generator],
    *,
    epochs: int,
    batch_size: int,
    samples: int = 1,
    learning_rate: float = 1e-3,
    betas: tuple[float, float] = (0.9, 0.999),
    adam_eps: float = 1e-8,
    scaling: LikelihoodScaling = "elbo",
    kl_weight: float = 1.0,
    noise_precision: float = 1.0,
) -> tuple[FloatArray, FloatArray]:
    """K clients' local training stepped together: (μ, ρ) ``(K, d)``, the prior ``(d,)`` or
    ``(K, d)``, client k's data ``data[k]`` and generator ``rngs[k]``; the rest as
    :func:`train_client`, whose numbers each client gets (module docstring). Returns (μ, ρ)
    ``(K, d)``."""
    _check(epochs, batch_size, samples)
    clients, d = len(data), layout.dimension
    if len(rngs) != clients or mu.shape[0] != clients:
        raise ValueError("one generator and one (mu, rho) row per client")
    sizes = np.array([len(y) for _, y in data])
    batches = -(-sizes // batch_size)
    widest = int(sizes.max())
    X_all = np.zeros((clients, widest + 1, data[0][0].shape[-1]))  # the last row pads
    y_all = np.zeros((clients, widest + 1), dtype=np.asarray(data[0][1]).dtype)
    for k, (Xk, yk) in enumerate(data):
        X_all[k, : sizes[k]] = Xk
        y_all[k, : sizes[k]] = yk
    lanes = np.arange(clients)[:, None]
    steps = int(batches.max())
    params = np.concatenate([mu, rho], axis=-1)
    state = adam_init(params)
    numerator = sizes if scaling == "elbo" else np.ones(clients)
    for _ in range(epochs):
        flat = np.full((clients, steps * batch_size), widest)
        for k in range(clients):
            flat[k, : sizes[k]] = rngs[k].permutation(sizes[k])
        index = flat.reshape(clients, steps, batch_size)
        for step in range(steps):
            rows = index[:, step]
            mask = (rows < widest).astype(np.float64)
            active = step < batches
            eps = np.zeros((clients, samples, d))
            for lane in np.flatnonzero(active).tolist():
                eps[lane] = rngs[lane].standard_normal((samples, d))
            counts = mask.sum(axis=1)
            scale = np.where(active, numerator / np.maximum(counts, 1.0), 0.0)
            grad_mu, grad_rho = bbb_gradient(
                layout,
                params[:, :d],
                params[:, d:],
                prior_mu,
                prior_sigma,
                X_all[lanes, rows],
                y_all[lanes, rows],
                eps,
                likelihood_scale=scale,
                kl_weight=kl_weight,
                noise_precision=noise_precision,
                row_mask=mask,
            )
            params, state = adam_step(
                params,
                np.concatenate([grad_mu, grad_rho], axis=-1),
                state,
                learning_rate=learning_rate,
                beta1=betas[0],
                beta2=betas[1],
                eps=adam_eps,
                active=None if bool(active.all()) else active,
            )
    return params[:, :d], params[:, d:]
