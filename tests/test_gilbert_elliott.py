"""The Gilbert–Elliott bursty-loss channel of examples/gilbert_elliott.py, a channel of one's own
(``[links] kind = "gilbert_elliott:GilbertElliott"``), against its closed forms: the stationary
share of lost attempts (with the standard error of a Markov chain), the lag-one loss correlation,
the built-in Bernoulli and lossless links it reduces to, messages lost for good in runs.csv; the
same tables in one process, two workers and on Dask; bad settings in one line."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.cli.parser import main
from gossipsim.core.schema import read_keys
from gossipsim.execution import executors
from gossipsim.network.channels import ChannelRequest
from gossipsim.network.messages import Message
from gossipsim.scheduling import IndexedGraph
from tests.helpers import base_scenario, slot_hops, to_toml, validate_error

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
KIND = "gilbert_elliott:GilbertElliott"
PAYLOAD = 128.0  # beta-Bernoulli: 2 natural parameters × 64 bits
RATE, LATENCY, TIMEOUT = 1000.0, 0.01, 0.5
#: a bursty chain: bad 1/6 of the time, ρ = 0.7/6 + 0.02 · 5/6 = 2/15 of the attempts lost
BURSTY = {"p_gb": 0.05, "p_bg": 0.25, "loss_good": 0.02, "loss_bad": 0.7}


@pytest.fixture(autouse=True)
def _examples_importable(monkeypatch):
    """The example module importable, here and in worker processes (as PYTHONPATH=examples)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(EXAMPLES), str(ROOT)]))


def _closed_form(p_gb: float, p_bg: float, loss_good: float, loss_bad: float):
    """Of the loss indicators X_n of a stationary chain's attempts: ρ = E[X_n], the asymptotic
    variance σ² = lim n · Var(mean of n) = ρ(1 − ρ) + 2 (loss_bad − loss_good)² π_g π_b λ / (1 − λ)
    with λ = 1 − p_gb − p_bg (Cov(X_0, X_k) = (loss_bad − loss_good)² π_g π_b λ^k for k ≥ 1), and
    P(X_{n+1} = 1 | X_n = 1) = Σ_s π_s p_s Σ_t P(s, t) p_t / ρ."""
    pi_bad = p_gb / (p_gb + p_bg)
    pi = np.array([1 - pi_bad, pi_bad])
    p = np.array([loss_good, loss_bad])
    P = np.array([[1 - p_gb, p_gb], [p_bg, 1 - p_bg]])
    rho = float(pi @ p)
    lam = 1 - p_gb - p_bg
    sigma2 = rho * (1 - rho) + 2 * (loss_bad - loss_good) ** 2 * pi[0] * pi[1] * lam / (1 - lam)
    lag1 = float((pi * p) @ (P @ p)) / rho
    return rho, sigma2, lag1


def _ratio_se(numerators: np.ndarray, denominators: np.ndarray) -> tuple[float, float]:
    """Σ a / Σ d and its standard error from independent (or batch-mean) pairs (a_b, d_b)."""
    a, d = np.asarray(numerators, float), np.asarray(denominators, float)
    ratio = a.sum() / d.sum()
    b = a.size
    se = math.sqrt(np.sum((a - ratio * d) ** 2) / (b * (b - 1))) / d.mean()
    return ratio, se


def _channel(**settings):
    """The example channel built as a scenario builds it (its keys read, defaults filled in)."""
    from gilbert_elliott import GilbertElliott

    values = read_keys(GilbertElliott.link_keys, settings, "links")
    graph = IndexedGraph.from_networkx(nx.path_graph(2))
    return GilbertElliott.from_settings(
        ChannelRequest(values, graph, "walk", np.random.SeedSequence(0))
    )


def _attempts(deliveries) -> np.ndarray:
    """The loss indicator of every attempt, in order: a delivered message's failed attempts then
    its delivered one, a message lost for good's attempts."""
    out: list[int] = []
    for d in deliveries:
        out += [1] * d.attempts if d.lost else [1] * (d.attempts - 1) + [0]
    return np.array(out, dtype=np.int8)


def test_the_share_of_lost_attempts_and_their_bursts_are_the_chain_s():
    """One edge's attempts are the chain's steps: over 150,000 messages the share of lost attempts
    lies within 4 standard errors of ρ = π_bad · loss_bad + π_good · loss_good, the standard error
    of a Markov chain's mean (σ² above), which 50 batch means estimate within their own error and
    which is 1.9 times the independent draws' (the losses are correlated); and a lost attempt is
    followed by another with the closed-form probability P(X_{n+1} = 1 | X_n = 1), 3.5 times ρ."""
    rho, sigma2, lag1 = _closed_form(**BURSTY)
    channel = _channel(**BURSTY, timeout_s=TIMEOUT, rate_bps=RATE).for_run(
        np.random.default_rng(20240611)
    )
    message = Message(PAYLOAD)
    x = _attempts(channel.transmit(0, 1, message, None) for _ in range(150_000))
    n = x.size
    se = math.sqrt(sigma2 / n)
    assert abs(x.mean() - rho) <= 4 * se, (x.mean(), rho, se)
    assert math.sqrt(sigma2) > 1.8 * math.sqrt(rho * (1 - rho))  # not the iid error
    batches = x[: n - n % 50].reshape(50, -1)
    se_batches = batches.mean(axis=1).std(ddof=1) / math.sqrt(50)
    assert 0.6 <= se_batches / se <= 1.5, (se_batches, se)
    pairs = (x[:-1] * x[1:])[: n - 1 - (n - 1) % 50].reshape(50, -1)
    firsts = x[:-1][: n - 1 - (n - 1) % 50].reshape(50, -1)
    after_loss, se_lag = _ratio_se(pairs.sum(axis=1), firsts.sum(axis=1))
    assert abs(after_loss - lag1) <= 4 * se_lag, (after_loss, lag1, se_lag)
    assert lag1 > 3.4 * rho
    assert channel.stationary_loss() == pytest.approx(rho, rel=1e-12)


def _scenario(runs: int, iterations: int, nodes: int = 2, **links) -> dict:
    raw = base_scenario(
        topology={"kind": "complete", "nodes": nodes},
        links={"kind": KIND, "rate_bps": RATE, "latency_s": LATENCY, "timeout_s": TIMEOUT, **links},
    )
    raw["scenario"].update(runs=runs, iterations=iterations)
    return raw


def test_runs_lose_the_stationary_share_of_attempts_with_arq_s_hop_times():
    """Through the engine (two nodes: every hop crosses the one edge, every message moves the
    token): each hop takes its failed attempts' timeouts then a delivered attempt, and carries
    every attempt's bits; runs.csv's retransmissions and lost messages give the lost attempts,
    whose share over 40 independent runs (each starting its chain afresh from the stationary law)
    lies within 4 standard errors (runs as batches) of ρ, an error that matches the chain's σ."""
    rho, sigma2, _ = _closed_form(**BURSTY)
    res = gs.run(_scenario(40, 3000, **BURSTY), plots=False)
    assert "Gilbert–Elliott links run on the event engine" in res.engines["t"]
    hops = slot_hops(res)
    assert (hops["sender"] != hops["receiver"]).all()  # a retry limit of 100: none lost for good
    attempts = hops["dbits"] / PAYLOAD
    np.testing.assert_array_equal(attempts, np.round(attempts))
    np.testing.assert_allclose(
        hops["dt"], (attempts - 1) * TIMEOUT + PAYLOAD / RATE + LATENCY, rtol=1e-9
    )
    runs = res.runs.set_index("run")
    retransmitted = hops.groupby("run")["dbits"].sum() / PAYLOAD - (runs["iterations"] - 1)
    np.testing.assert_array_equal(runs["retransmissions"], retransmitted)
    assert (runs["lost_messages"] == 0).all()
    lost = runs["retransmissions"] + runs["lost_messages"]
    sent = runs["iterations"] - 1 + runs["retransmissions"]
    share, se = _ratio_se(lost.to_numpy(), sent.to_numpy())
    assert abs(share - rho) <= 4 * se, (share, rho, se)
    assert 0.55 <= se / math.sqrt(sigma2 / sent.sum()) <= 1.5


def test_a_chain_that_stays_good_is_the_built_in_bernoulli_links_draw_for_draw():
    """p_gb = 0 from the good state: independent losses of probability loss_good, drawn as the
    built-in links draw them, so every table equals that of ``[links] loss = loss_good`` value
    for value (requests at a slot and at a time included)."""
    requests = [{"node": 1, "at_iteration": 60}, {"node": 4, "at_time": 30.0}]
    ours = _scenario(12, 200, nodes=6, p_gb=0.0, p_bg=0.5, loss_good=0.3, start="good")
    ours["unlearning"] = requests
    theirs = base_scenario(
        topology={"kind": "complete", "nodes": 6},
        links={"rate_bps": RATE, "latency_s": LATENCY, "loss": 0.3, "timeout_s": TIMEOUT},
        unlearning=requests,
    )
    theirs["scenario"].update(runs=12, iterations=200)
    a, b = gs.run(ours, plots=False), gs.run(theirs, plots=False)
    assert a.runs["retransmissions"].sum() > 300  # losses there are
    for name in ("metrics", "runs", "requests", "visits"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name))


def test_a_chain_that_stays_lossless_is_the_built_in_lossless_links():
    """p_gb = 0 from a good state without loss: the tables of the same rate and latency without
    loss (on the event engine), runs.csv with its retransmissions and lost_messages, all zero."""
    ours = _scenario(10, 150, nodes=6, p_gb=0.0, p_bg=0.5, start="good")
    theirs = base_scenario(
        topology={"kind": "complete", "nodes": 6},
        links={"rate_bps": RATE, "latency_s": LATENCY},
    )
    theirs["scenario"].update(runs=10, iterations=150)
    a, b = gs.run(ours, plots=False), gs.run(theirs, plots=False, engine="event")
    assert (a.runs[["retransmissions", "lost_messages"]] == 0).all().all()
    pd.testing.assert_frame_equal(a.runs.drop(columns=["retransmissions", "lost_messages"]), b.runs)
    for name in ("metrics", "requests", "visits"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name))


def test_messages_lost_for_good_leave_the_token_and_reach_runs_csv():
    """Gilbert's channel (a bad link loses everything) with one retry: a message whose two attempts
    are lost leaves the token with its sender after two timeouts and both attempts' bits; runs.csv
    counts those messages and every retransmission."""
    res = gs.run(_scenario(4, 400, p_gb=0.1, p_bg=0.3, loss_bad=1.0, max_retries=1), plots=False)
    hops = slot_hops(res)
    stayed = hops["sender"] == hops["receiver"]
    assert stayed.sum() > 50
    np.testing.assert_allclose(hops.loc[stayed, "dt"], 2 * TIMEOUT)
    np.testing.assert_array_equal(hops.loc[stayed, "dbits"], 2 * PAYLOAD)
    runs = res.runs.set_index("run")
    np.testing.assert_array_equal(runs["lost_messages"], stayed.groupby(hops["run"]).sum())
    assert runs["retransmissions"].sum() == int((hops["dbits"] / PAYLOAD - 1).sum())


def test_the_same_tables_in_one_process_two_workers_and_on_dask(tmp_path):
    """The command line in this process, with 2 worker processes and on a 2-worker Dask cluster
    (each importing the channel again by its path, each run starting its chains afresh): the same
    tables (requests at a slot and at a time)."""
    raw = _scenario(8, 150, nodes=5, **BURSTY, max_retries=2)
    raw["unlearning"] = [{"node": 2, "at_time": 20.0}, {"node": 3, "at_iteration": 90}]
    path = tmp_path / "ge.toml"
    path.write_text(to_toml(raw))
    flags: list[list[str]] = [[], ["--workers", "2"]]
    try:
        import dask.distributed  # noqa: F401

        flags.append(["--cluster", "local:2"])
    except ImportError:  # pragma: no cover - dask is a dev dependency
        pass
    tables = []
    for extra in flags:
        out = tmp_path / f"out{len(tables)}"
        executors._CACHE.update(key=None, worlds={})  # no world left by the command before
        assert main(["run", str(path), "--out", str(out), "--no-plots", *extra]) == 0
        tables.append({n: pd.read_csv(out / f"{n}.csv") for n in ("runs", "metrics", "requests")})
    assert tables[0]["runs"]["lost_messages"].sum() > 0
    for other in tables[1:]:
        for name, table in tables[0].items():
            pd.testing.assert_frame_equal(table, other[name])
    summary = json.loads((tmp_path / "out0" / "summary.json").read_text(encoding="utf-8"))
    (variant,) = summary["variants"].values()
    links = variant["resolved"]["links"]  # every key's value, defaults filled in
    assert (
        links["kind"] == KIND and links["p_gb"] == BURSTY["p_gb"] and links["start"] == "stationary"
    )


def test_the_shipped_example_scenario():
    study = gs.load_scenario(EXAMPLES / "gilbert_elliott.toml")
    bursty, independent = (v.scenario.links for v in study.variants)
    assert bursty.kind == independent.kind == KIND
    assert (bursty.options["p_gb"], independent.options["p_gb"]) == (0.02, 0.0)
    assert independent.options["start"] == "good"
    for world in gs.check(study):  # the same stationary loss, 8%: in bursts, or independent
        assert world.links.stationary_loss() == pytest.approx(0.08, rel=1e-12)


@pytest.mark.parametrize(
    ("links", "protocol", "key", "words"),
    [
        ({"p_bg": 0.1, "timeout_s": 1.0}, {}, "links.p_gb", "is required"),
        ({"p_gb": 1.5, "p_bg": 0.1, "timeout_s": 1.0}, {}, "links.p_gb", "<= 1"),
        ({"p_gb": 0.1, "p_bg": 0.1}, {}, "links.timeout_s", "is required"),
        ({"p_gb": 0.1, "p_bg": 0.1, "timeout_s": 1.0, "start": "ugly"}, {}, "links.start",
         "allowed: stationary, good, bad"),
        ({"p_gb": 0.0, "p_bg": 0.0, "timeout_s": 1.0}, {}, "links.start",
         "no single stationary law"),
        ({"p_gb": 0.1, "p_bg": 0.1, "timeout_s": 1.0, "loss": 0.1}, {}, "links.loss",
         "unknown key; allowed: kind, latency_s, loss_bad, loss_good, max_retries, p_bg, p_gb, "
         "rate_bps, start, timeout_s"),
        ({"p_gb": 0.1, "p_bg": 0.1, "timeout_s": 1e300}, {}, "links.kind",
         "overflow the simulated clock"),
        ({"p_gb": 0.1, "p_bg": 0.1, "timeout_s": 1.0}, {"architecture": "server"}, "links.kind",
         "can lose messages, which applies to the walk"),
    ],
)  # fmt: skip
def test_bad_gilbert_elliott_settings_are_one_line(tmp_path, capsys, links, protocol, key, words):
    raw = base_scenario(links={"kind": KIND, **links}, protocol=protocol)
    err = validate_error(raw, tmp_path, capsys)
    assert err.startswith(f"gossipsim: error: {key}: ") and words in err, err


def test_a_request_after_the_longest_run_over_the_channel_is_refused(tmp_path, capsys):
    """200 slots of at most 3 timeouts of 1 s and a delivered attempt each (the example's
    worst_seconds, arq's bound): a request at 1000 s could never arrive."""
    raw = base_scenario(
        links={"kind": KIND, "p_gb": 0.1, "p_bg": 0.1, "timeout_s": 1.0, "max_retries": 2},
        unlearning=[{"node": 1, "at_time": 1000.0}],
    )
    err = validate_error(raw, tmp_path, capsys)
    assert "unlearning[0].at_time" in err and "(600 s: " in err and "worst_seconds" in err, err
