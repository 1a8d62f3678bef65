"""One Bayes by Backprop epoch (FedUAB, paper 004, eq. 10 with Adam) for a client of 600 examples on
784-50-50-10, batch 10, Z = 1: gossipsim's vectorised loop against a straightforward NumPy
implementation written here (one mini-batch at a time, one Monte Carlo sample at a time, per-layer
Python loops, the layers' arrays kept apart); and 10 clients through ``train_clients`` against the
same 10 clients one at a time (``train_client``; issue target >= 3x, not reachable in NumPy: a
step's cost is per-client O(d) elementwise work and d draws, which no batching shares, so
``train_clients`` runs the clients one after the other and the ratio is ~1).
The local reparameterisation trick (``reparameterisation="local"``) is timed too.
PyTorch CPU is timed as a reference when ``import torch`` works (it is no dependency).
Synthetic data of MNIST's shape, no downloads. The straightforward loop and gossipsim's draw the
same stream and the script checks they end at the same numbers first.

    python benchmarks/bbb_epoch.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gossipsim.logdensity.bbb_training import train_client, train_clients
from gossipsim.logdensity.gaussian_mlp import MlpLayout, initial_posterior, initial_prior

SIZES = (784, 50, 50, 10)
N, BATCH, Z, CLIENTS = 600, 10, 1, 10
RATE, B1, B2, EPS = 1e-3, 0.9, 0.999, 1e-8


def straightforward_epoch(layout, mu, rho, prior_mu, prior_sigma, X, y, rng):
    """Eq. 10 with s = n/|B|, γ = 1, one batch, one sample, one layer at a time."""
    split = lambda flat: [(w.copy(), b.copy()) for w, b in layout.unpack(flat)]  # noqa: E731
    m_layers, r_layers = split(mu), split(rho)
    p_mu, p_sigma = split(prior_mu), split(prior_sigma)
    params = [a for pair in zip(m_layers, r_layers, strict=True) for w_b in pair for a in w_b]
    # params: for each layer [W_mu, b_mu, W_rho, b_rho]
    moments = [(np.zeros_like(a), np.zeros_like(a)) for a in params]
    order = rng.permutation(N)
    for t, start in enumerate(range(0, N, BATCH), start=1):
        rows = order[start : start + BATCH]
        xb, yb = X[rows], y[rows]
        grads = [np.zeros_like(a) for a in params]
        for _ in range(Z):
            eps = split(rng.standard_normal(layout.dimension))
            weights, sigmas = [], []
            for layer in range(layout.layers):
                wm, bm, wr, br = params[4 * layer : 4 * layer + 4]
                ws, bs = np.log1p(np.exp(wr)), np.log1p(np.exp(br))
                sigmas.append((ws, bs))
                weights.append((wm + ws * eps[layer][0], bm + bs * eps[layer][1]))
            acts = [xb]
            for layer, (w, b) in enumerate(weights):
                a = acts[-1] @ w + b
                acts.append(np.maximum(a, 0.0) if layer < layout.layers - 1 else a)
            logits = acts[-1]
            prob = np.exp(logits - logits.max(axis=1, keepdims=True))
            prob /= prob.sum(axis=1, keepdims=True)
            prob[np.arange(len(yb)), yb] -= 1.0
            delta = prob * (N / len(yb))
            for layer in range(layout.layers - 1, -1, -1):
                gw, gb = acts[layer].T @ delta, delta.sum(axis=0)
                ws, bs = sigmas[layer]
                ew, eb = eps[layer]
                grads[4 * layer] += gw / Z
                grads[4 * layer + 1] += gb / Z
                grads[4 * layer + 2] += gw * ew / Z
                grads[4 * layer + 3] += gb * eb / Z
                if layer > 0:
                    delta = (delta @ weights[layer][0].T) * (acts[layer] > 0.0)
        for layer in range(layout.layers):
            for part in range(2):
                mean, rho_ = params[4 * layer + part], params[4 * layer + 2 + part]
                sigma = np.log1p(np.exp(rho_))
                precision = p_sigma[layer][part] ** -2.0
                grads[4 * layer + part] += precision * (mean - p_mu[layer][part])
                # at σ = σ0 this is rounding noise, which Adam's first steps turn into ±α:
                # written as gossipsim writes it, so the two agree to rounding
                g_sigma = grads[4 * layer + 2 + part] + (sigma * precision - 1.0 / sigma)
                grads[4 * layer + 2 + part] = g_sigma / (1.0 + np.exp(-rho_))
        for i, (a, g) in enumerate(zip(params, grads, strict=True)):
            m, v = moments[i]
            m = B1 * m + (1 - B1) * g
            v = B2 * v + (1 - B2) * g**2
            moments[i] = (m, v)
            params[i] = a - RATE * (m / (1 - B1**t)) / (np.sqrt(v / (1 - B2**t)) + EPS)
    flat = lambda parts: layout.pack(list(zip(parts[0::2], parts[1::2], strict=True)))  # noqa: E731
    mus = [a for layer in range(layout.layers) for a in params[4 * layer : 4 * layer + 2]]
    rhos = [a for layer in range(layout.layers) for a in params[4 * layer + 2 : 4 * layer + 4]]
    return flat(mus), flat(rhos)


def timed(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def torch_epoch(torch, layout, mu, rho, prior_mu, prior_sigma, X, y):
    """The same epoch in PyTorch CPU autograd (float64), weight sampling, Adam."""
    f = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    m = [f(a).requires_grad_() for pair in layout.unpack(mu) for a in pair]
    r = [f(a).requires_grad_() for pair in layout.unpack(rho) for a in pair]
    pm = [f(a) for pair in layout.unpack(prior_mu) for a in pair]
    ps = [f(a) for pair in layout.unpack(prior_sigma) for a in pair]
    opt = torch.optim.Adam(m + r, lr=RATE, betas=(B1, B2), eps=EPS)
    Xt, yt = f(X), torch.tensor(y)
    order = torch.randperm(N)
    for start in range(0, N, BATCH):
        rows = order[start : start + BATCH]
        opt.zero_grad()
        sig = [torch.nn.functional.softplus(a) for a in r]
        w = [a + s * torch.randn_like(s) for a, s in zip(m, sig, strict=True)]
        h = Xt[rows]
        for layer in range(layout.layers):
            h = h @ w[2 * layer] + w[2 * layer + 1]
            if layer < layout.layers - 1:
                h = torch.relu(h)
        nll = torch.nn.functional.cross_entropy(h, yt[rows], reduction="sum") * (N / BATCH)
        kl = sum(
            (torch.log(s0 / s) + (s**2 + (a - a0) ** 2) / (2 * s0**2) - 0.5).sum()
            for a, s, a0, s0 in zip(m, sig, pm, ps, strict=True)
        )
        (nll + kl).backward()
        opt.step()


def breakdown(layout, mu, rho, prior_mu, prior_sigma, X, y, repeat):
    """Where one step's time goes (what batching clients could and could not share)."""
    from gossipsim.logdensity.bbb_training import _Stepper
    from gossipsim.logdensity.gaussian_mlp import nll_into

    stepper = _Stepper(
        layout, mu, rho, prior_mu, prior_sigma, samples=Z, kl_weight=1.0, noise_precision=1.0,
        learning_rate=RATE, betas=(B1, B2), adam_eps=EPS, reparameterisation="weights",
    )  # fmt: skip
    g = np.random.default_rng(0)
    eps = g.standard_normal((Z, layout.dimension))
    rows, weights = np.arange(BATCH), np.full(BATCH, N / BATCH)
    xb, yb = X[rows], y[rows]
    per = lambda fn: timed(lambda: [fn() for _ in range(100)], repeat) * 1e4  # noqa: E731
    step = per(lambda: stepper.step(xb, yb, weights, eps))
    draw = per(lambda: g.standard_normal((Z, layout.dimension)))
    nll = per(
        lambda: nll_into(
            layout, stepper.samples, xb[None], yb[None], weights[None], 1.0, stepper.grad_w
        )
    )
    adam = per(stepper._adam)
    total = step + draw
    print(
        f"one step, {total:5.0f} us: drawing eps {draw:4.0f} ({draw / total:4.0%}), Adam"
        f" {adam:4.0f} ({adam / total:4.0%}), other O(d) elementwise {step - nll - adam:4.0f}"
        f" ({(step - nll - adam) / total:4.0%}), forward and backward (matmuls and their overhead,"
        f" all batching could share) {nll:4.0f} ({nll / total:4.0%})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    layout = MlpLayout(SIZES)
    X = rng.uniform(0.0, 1.0, size=(CLIENTS, N, SIZES[0]))
    y = rng.integers(0, SIZES[-1], size=(CLIENTS, N))
    prior_mu, prior_sigma = initial_prior(layout)
    mu, rho = initial_posterior(layout, rng)

    def ours(k=0, seed=1, reparameterisation="weights"):
        return train_client(
            layout, mu, rho, prior_mu, prior_sigma, X[k], y[k], np.random.default_rng(seed),
            epochs=1, batch_size=BATCH, samples=Z, learning_rate=RATE,
            reparameterisation=reparameterisation,
        )  # fmt: skip

    def plain(k=0, seed=1):
        g = np.random.default_rng(seed)
        return straightforward_epoch(layout, mu, rho, prior_mu, prior_sigma, X[k], y[k], g)

    a, b = ours(), plain()
    gap = max(np.abs(a[0] - b[0]).max(), np.abs(a[1] - b[1]).max())
    print(f"d = {layout.dimension}; one epoch = {N // BATCH} steps; same stream, max gap {gap:.1e}")
    fast = timed(ours, args.repeat)
    slow = timed(plain, args.repeat)
    print(
        f"one client, one epoch: gossipsim {fast * 1e3:7.1f} ms, straightforward {slow * 1e3:7.1f} ms,"
        f" ratio {slow / fast:4.2f}x"
    )

    local = timed(lambda: ours(reparameterisation="local"), args.repeat)
    print(
        f"one client, one epoch, local reparameterisation (other draws, same expectation):"
        f" {local * 1e3:7.1f} ms, ratio to straightforward {slow / local:4.2f}x"
    )

    def batched():
        return train_clients(
            layout, np.tile(mu, (CLIENTS, 1)), np.tile(rho, (CLIENTS, 1)), prior_mu, prior_sigma,
            [(X[k], y[k]) for k in range(CLIENTS)],
            [np.random.default_rng(k) for k in range(CLIENTS)],
            epochs=1, batch_size=BATCH, samples=Z, learning_rate=RATE,
        )  # fmt: skip

    def one_at_a_time():
        return [ours(k, k) for k in range(CLIENTS)]

    def draws_only():
        g = np.random.default_rng(0)
        g.permutation(N)
        for _ in range(N // BATCH):
            g.standard_normal((Z, layout.dimension))

    floor = timed(draws_only, args.repeat)
    print(
        f"of which drawing one client's epoch of eps (the same in every implementation):"
        f" {floor * 1e3:6.1f} ms"
    )
    together = timed(batched, args.repeat)
    apart = timed(one_at_a_time, args.repeat)
    print(
        f"{CLIENTS} clients, one epoch: batched {together * 1e3:7.1f} ms, one at a time"
        f" {apart * 1e3:7.1f} ms, ratio {apart / together:4.2f}x (target >= 3x)"
    )
    breakdown(layout, mu, rho, prior_mu, prior_sigma, X[0], y[0], args.repeat)
    try:
        import torch  # type: ignore[import-not-found]
    except ImportError:
        print("PyTorch: not installed, no reference timing")
        return
    torch.manual_seed(0)
    torch.set_num_threads(1)
    ref = timed(lambda: torch_epoch(torch, layout, mu, rho, prior_mu, prior_sigma, X[0], y[0]), 3)
    print(f"PyTorch CPU (1 thread, float64), one client, one epoch: {ref * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
