"""Lossy links with the parameter server (issue 33): ``[links] downlink_loss``, ``uplink_loss`` and
their timeouts and retry limits, stop-and-wait ARQ per transfer.

The checks: every slot's time and bits exactly as the run's channel draws make them (a download
lost for good: its timeouts only, no computation, no upload; an upload lost for good: the whole
round); a lost transfer makes the slot an iteration without an update, for every protocol that
runs on the server (the server's state and every agent's own, residuals and histories included,
exactly as before the slot; the recorded state the previous slot's; the retrain world's too); a
conjugate G-FVL run with lost uploads ends at the closed-form posterior, with and without a
request; ``loss = 0`` gives the tables without the keys; 1 and 2 workers the same tables; the time
bound counts the retries; bad input is one line."""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.core.streams import CHANNEL, run_stream
from gossipsim.engine.protocol_api import Protocol
from gossipsim.engine.token import run_token
from gossipsim.network.arq import Link, LossyServerLinks
from gossipsim.network.links import check_horizon
from gossipsim.network.messages import SERVER
from gossipsim.protocols import ServerRounds, WithRetrainBaseline
from gossipsim.scheduling import Walker
from gossipsim.world.world import make_protocol
from tests.helpers import base_scenario, validate_error

PAYLOAD = 128.0  # beta-Bernoulli: 2 natural parameters × 64 bits
#: powers of two, so that every slot time below is an exact binary fraction
COMPUTE = 1.0
DOWN = {"rate": 256.0, "latency": 0.25, "loss": 0.3, "timeout": 0.5, "retries": 1}
UP = {"rate": 64.0, "latency": 0.125, "loss": 0.4, "timeout": 2.0, "retries": 2}


def _server(runs: int = 4, iterations: int = 150, **links: Any) -> dict[str, Any]:
    raw = base_scenario(
        protocol={"architecture": "server"},
        scheduler={"kind": "uniform"},
        compute={"seconds_per_iteration": COMPUTE},
        links=links,
    )
    raw["scenario"].update(runs=runs, iterations=iterations)
    return raw


def _lossy_links() -> dict[str, float]:
    return {
        "downlink_rate_bps": DOWN["rate"], "downlink_latency_s": DOWN["latency"],
        "downlink_loss": DOWN["loss"], "downlink_timeout_s": DOWN["timeout"],
        "downlink_max_retries": DOWN["retries"],
        "uplink_rate_bps": UP["rate"], "uplink_latency_s": UP["latency"],
        "uplink_loss": UP["loss"], "uplink_timeout_s": UP["timeout"],
        "uplink_max_retries": UP["retries"],
    }  # fmt: skip


def _failed(u: float, loss: float) -> int:
    """Failed attempts before a delivered one from the stream's uniform u (inverse CDF)."""
    return math.floor(math.log(1.0 - u) / math.log(loss))


def _slots_from_the_draws(seed: int, slots: int) -> dict[str, np.ndarray]:
    """Each slot's time and bits, its retransmissions and lost transfers, as the run's channel
    stream makes them (one uniform per transfer sent, in order)."""
    uniforms = iter(np.random.default_rng(run_stream(seed, CHANNEL)).random(2 * slots))
    out: dict[str, list[float]] = {k: [] for k in ("dt", "dbits", "resent", "lost", "kind")}
    for _ in range(slots):
        f = _failed(next(uniforms), DOWN["loss"])
        if f > DOWN["retries"]:  # the download is lost for good: no computation, no upload
            attempts = DOWN["retries"] + 1
            row = (attempts * DOWN["timeout"], attempts * PAYLOAD, attempts - 1, 1, 1)
        else:
            down = f * DOWN["timeout"] + PAYLOAD / DOWN["rate"] + DOWN["latency"]
            g = _failed(next(uniforms), UP["loss"])
            if g > UP["retries"]:  # the upload is lost for good: the whole round's time
                attempts = UP["retries"] + 1
                up, up_bits, lost, kind = attempts * UP["timeout"], attempts * PAYLOAD, 1, 2
                g = UP["retries"]
            else:
                up = g * UP["timeout"] + PAYLOAD / UP["rate"] + UP["latency"]
                up_bits, lost, kind = (g + 1) * PAYLOAD, 0, 0
            row = (COMPUTE + down + up, (f + 1) * PAYLOAD + up_bits, f + g, lost, kind)
        for key, value in zip(out, row, strict=True):
            out[key].append(value)
    return {k: np.asarray(v) for k, v in out.items()}


def test_every_slot_costs_exactly_what_the_channel_draws_make_it():
    res = gs.run(_server(**_lossy_links()), plots=False)
    assert "lossy server links" in res.engines["t"]
    kinds = np.zeros(3, dtype=int)
    for run, rows in res.metrics.groupby("run"):
        seed = int(res.runs.set_index("run").loc[run, "seed"])
        drawn = _slots_from_the_draws(seed, len(rows))
        np.testing.assert_array_equal(rows["time"], np.cumsum(drawn["dt"]))
        np.testing.assert_array_equal(rows["bits"], np.cumsum(drawn["dbits"]))
        row = res.runs.set_index("run").loc[run]
        assert row["retransmissions"] == drawn["resent"].sum()
        assert row["lost_messages"] == drawn["lost"].sum()
        # a slot that lost a transfer changed nothing: its KL is the slot before's
        kl = rows["kl"].to_numpy()
        lost = np.flatnonzero(drawn["kind"][1:] > 0) + 1
        np.testing.assert_array_equal(kl[lost], kl[lost - 1])
        kinds += np.bincount(drawn["kind"].astype(int), minlength=3)
    assert kinds.min() > 20, kinds  # delivered rounds, lost downloads and lost uploads, each


def _gfvl_world(iterations: int, requests: list[dict[str, Any]] | None = None) -> Any:
    raw = _server(
        runs=1,
        iterations=iterations,
        downlink_loss=0.3,
        uplink_loss=0.5,
        timeout_s=1.0,
        max_retries=0,  # every lost attempt is a transfer lost for good
    )
    if requests:
        raw["unlearning"] = requests
    return gs.build_world(gs.parse_study(raw).variants[0].scenario)


def _closed_form(world: Any, without: frozenset[int] = frozenset()) -> np.ndarray:
    """Beta(a + Σ x, b + Σ (1 − x)) over the agents' data, as natural parameters (a − 1, b − 1)."""
    counts = world.model.fixed_data  # each agent's (Σ x, Σ (1 − x))
    kept = [k for k in range(world.nodes) if k not in without]
    ones, zeros = counts[kept].sum(axis=0)
    return gs.families.Beta.natural(2.0 + ones, 2.0 + zeros)


def _run(world: Any, iterations: int, seed: int = 3) -> tuple[Protocol, Any]:
    protocol = make_protocol(world, world.model.fixed_data, np.random.SeedSequence(seed))
    assert isinstance(protocol, ServerRounds) and protocol.lossy
    walker = Walker(world.indexed, "uniform", np.random.default_rng(seed))
    record = run_token(
        walker=walker, protocol=protocol, start=0, iterations=iterations,
        links=world.links, requests=world.requests, channel_rng=np.random.default_rng(seed + 1),
    )  # fmt: skip
    return protocol, record


def _delivered(record: Any) -> np.ndarray:
    """Per slot, whether its round delivered both transfers."""
    rounds = [e for e in record.events if e.kind == "round"]
    assert [e.slot for e in rounds] == list(range(1, record.slots + 1))
    return np.array([e.delivered == 2 for e in rounds])


def test_conjugate_gfvl_with_lost_uploads_ends_at_the_closed_form_posterior():
    """q at the end of each slot is the prior plus the factor of every agent that has had a
    delivered round by then (its first one adds it; a lost one adds nothing and the agent keeps
    t_k = 0, so its next delivered round adds it): the closed-form posterior, exactly, from the
    slot at which the last agent's first round is delivered, and not before."""
    iterations = 200
    world = _gfvl_world(iterations)
    _, record = _run(world, iterations)
    delivered = _delivered(record)
    lost_downloads = sum(1 for e in record.events if e.kind == "lost" and e.sender == SERVER)
    lost_uploads = sum(1 for e in record.events if e.kind == "lost" and e.receiver == SERVER)
    assert lost_downloads > 30 and lost_uploads > 30
    trace = record.traces["main"]
    states = trace.states[trace.at(np.arange(1, iterations + 1))]
    factors, prior = world.model.fixed_data, world.model.prior
    contributed: set[int] = set()
    complete = None
    for slot in range(1, iterations + 1):
        if delivered[slot - 1]:
            contributed.add(int(record.holders[slot - 1]))
        expect = prior + factors[sorted(contributed)].sum(axis=0)
        np.testing.assert_array_equal(states[slot - 1], expect)
        if complete is None and len(contributed) == world.nodes:
            complete = slot
    assert complete is not None and complete > world.nodes  # some first rounds were lost
    # agents whose first rounds were lost and learnt later, after a delivered round
    np.testing.assert_array_equal(states[-1], _closed_form(world))
    assert not np.array_equal(states[complete - 2], _closed_form(world))
    res = gs.run(_server(runs=3, iterations=iterations, downlink_loss=0.3, uplink_loss=0.5,
                         timeout_s=1.0, max_retries=0), plots=False)  # fmt: skip
    assert (res.metrics.groupby("run")["kl"].last() == 0.0).all()  # the tables say so too


def test_a_request_with_lost_uploads_ends_at_the_posterior_without_the_node_in_both_worlds():
    """Node 3 asks to be forgotten at slot 60: the main world removes its factor at its first
    delivered round from then on (a lost one leaves the factor in and the removal to come), the
    retrain world restarts from the prior and loses the same transfers; both end at the
    closed-form posterior without node 3."""
    iterations = 300
    world = _gfvl_world(iterations, [{"node": 3, "at_iteration": 60}])
    protocol, record = _run(world, iterations)
    assert isinstance(protocol.protocol, WithRetrainBaseline)
    delivered = _delivered(record)
    holders = record.holders
    removal = protocol.removals()[3]
    after = np.flatnonzero((holders == 3) & (np.arange(1, iterations + 1) >= 60)) + 1
    assert removal == after[delivered[after - 1]][0]  # its first delivered round after the request
    assert not delivered[after[0] - 1]  # its first round after the request was lost: no removal
    target = _closed_form(world, frozenset({3}))
    for name in ("main", "retrain"):
        np.testing.assert_array_equal(record.traces[name].states[-1], target, err_msg=name)


# ---------------------------------------------------------------- every protocol takes a slot back

SKIP = {
    "model", "data", "rng", "settings", "trace", "view", "paper_settings", "kept", "fresh",
    "retrain_trace", "gradient", "family", "in_domain", "factors", "prior", "message", "start",
    "_add", "downlink", "token",
}  # fmt: skip


def _frozen(x: Any) -> Any:
    """Everything a protocol holds, as comparable values (arrays by their bytes)."""
    if isinstance(x, np.ndarray):
        return ("array", x.shape, x.tobytes())
    if isinstance(x, bytes | bytearray):
        return bytes(x)
    if isinstance(x, dict):
        return tuple(sorted((repr(k), _frozen(v)) for k, v in x.items()))
    if isinstance(x, set | frozenset):
        return tuple(sorted(map(repr, x)))
    if isinstance(x, list | tuple):
        return tuple(_frozen(v) for v in x)
    if x is None or isinstance(x, int | float | str | np.generic):
        return x
    if hasattr(x, "__dict__"):
        items = vars(x).items()
        return (type(x).__name__, tuple((k, _frozen(v)) for k, v in items if k not in SKIP))
    return type(x).__name__


class Probe(Protocol):
    """Runs a server's rounds and checks each one: a round that lost a transfer leaves every part
    of the protocols inside (both worlds) exactly as before the slot."""

    def __init__(self, server: ServerRounds, invariant: Any = None) -> None:
        self.server = server
        self.representation = server.representation
        self.invariant = invariant
        self.lost_slots: list[int] = []
        self.changed = 0
        self.before: Any = None

    def worlds(self) -> list[Any]:
        inner = self.server.protocol
        if isinstance(inner, WithRetrainBaseline):
            return [inner.main] + ([inner.retrain] if inner.retrain is not None else [])
        return [inner]

    def on_token(self, holder: int, slot: int) -> Any:
        self.before = [_frozen(w) for w in self.worlds()]
        return self.server.on_token(holder, slot)

    def on_round(self, slot: int, delivered: Any) -> None:
        self.server.on_round(slot, delivered)
        after = [_frozen(w) for w in self.worlds()]
        if not all(delivered):
            assert after == self.before, f"slot {slot} was not taken back"
            self.lost_slots.append(slot)
        else:
            self.changed += after != self.before
        if self.invariant is not None:
            for world in self.worlds():
                self.invariant(world)

    def on_request(self, node: int, slot: int) -> None:
        self.server.on_request(node, slot)

    def done(self) -> bool:
        return self.server.done()

    def traces(self) -> Any:
        return self.server.traces()

    def removals(self) -> dict[int, int]:
        return self.server.removals()


def _natural_sums(protocol: Any) -> None:
    """η = η₀ + Σ_k η_k: the server's q and the agents' factors agree."""
    np.testing.assert_allclose(
        protocol.eta, protocol.prior + protocol.local.sum(axis=0), rtol=1e-9, atol=1e-9
    )


def _factor_sums(protocol: Any) -> None:
    """q = prior + the factors of the agents whose t_k is theirs (conjugate G-FVL)."""
    held = np.flatnonzero(np.frombuffer(bytes(protocol.contributed), dtype=np.uint8))
    np.testing.assert_array_equal(protocol.eta, protocol.prior + protocol.factors[held].sum(axis=0))


def _score_sums(protocol: Any) -> None:
    """S = Σ_k g_k (sound DSVGD; with compression the ĝ_k both ends hold)."""
    if protocol.sound:
        total = sum(protocol.own.values(), np.zeros_like(protocol.state.aggregate))
        np.testing.assert_allclose(protocol.state.aggregate, total, rtol=1e-9, atol=1e-9)


LOGISTIC = {
    "topology": {"kind": "complete", "nodes": 4},
    "model": {"kind": "logistic-regression"},
    "data": {"dataset": "breast_cancer"},
}
COMPRESSED = {"scheme": "shared", "budget": "6d", "a_max": "max", "error_feedback": True}

CASES = {
    "conjugate": ({}, _factor_sums),
    "natural-gradient": (
        {"model": {"kind": "beta-exponential", "prior": {"a": 2, "b": 2}},
         "data": {"points_per_node": 10, "theta": 0.5},
         "protocol": {"learning_rate": 0.05, "samples": 10, "local_iterations": 2}},
        _natural_sums,
    ),
    "dsvgd-sound": (
        {**LOGISTIC, "protocol": {"kind": "dsvgd", "particles": 4}}, _score_sums,
    ),
    "dsvgd-paper": (
        {**LOGISTIC, "protocol": {"kind": "dsvgd", "variant": "paper", "particles": 4,
                                  "fit_iterations": 2}},
        None,
    ),
    "dsvgd-sound-compressed": (
        {**LOGISTIC, "protocol": {"kind": "dsvgd", "particles": 4, "compression": COMPRESSED}},
        _score_sums,
    ),
    "dsvgd-paper-compressed": (
        {**LOGISTIC, "protocol": {
            "kind": "dsvgd", "variant": "paper", "particles": 4, "fit_iterations": 2,
            "compression": {**COMPRESSED, "budget": "3d"},
            "downlink_compression": {"entry_bits": 8, "a_max": "max"}}},
        None,
    ),
    "fedavg": (
        {**LOGISTIC, "protocol": {"kind": "fedavg", "learning_rate": 0.1}}, None,
    ),
    "fedavg-compressed": (
        {**LOGISTIC, "protocol": {"kind": "fedavg", "learning_rate": 0.1,
                                  "compression": {"budget": "2d", "a_max": "max",
                                                  "error_feedback": True}}},
        None,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_a_lost_transfer_is_an_iteration_without_an_update(case):
    """Every protocol that runs on the server, with the retrain baseline: a slot whose download
    or upload is lost for good leaves the server's state and every agent's own (factors, scores
    and the server's copies, local particles, error-feedback residuals, AdaGrad histories,
    removals) exactly as they were, in both worlds, and its recorded state is the previous
    slot's; the invariants between the server's and the agents' states hold at every slot."""
    sections, invariant = CASES[case]
    iterations = 40
    raw = _server(runs=1, iterations=iterations, downlink_loss=0.3, uplink_loss=0.3,
                  timeout_s=1.0, max_retries=0)  # fmt: skip
    raw.update(copy.deepcopy(sections))
    raw["protocol"]["architecture"] = "server"
    raw["metrics"] = {"record_every": 1}
    raw["unlearning"] = [{"node": 1, "at_iteration": 15}]
    world = gs.build_world(gs.parse_study(raw).variants[0].scenario)
    server = make_protocol(world, world.model.fixed_data, np.random.SeedSequence(2))
    assert isinstance(server, ServerRounds) and server.lossy
    probe = Probe(server, invariant)
    walker = Walker(world.indexed, "uniform", np.random.default_rng(2))
    record = run_token(
        walker=walker, protocol=probe, start=0, iterations=iterations, links=world.links,
        requests=world.requests, channel_rng=np.random.default_rng(7),
    )  # fmt: skip
    lost = np.asarray(probe.lost_slots)
    assert lost.size > 8 and probe.changed > 8, (lost.size, probe.changed)
    assert (lost > 15).sum() > 3  # losses in both worlds
    for name, trace in record.traces.items():
        if len(trace) == 0:
            continue
        states = trace.states
        at = trace.at(np.arange(iterations + 1))
        for slot in lost:
            if at[slot - 1] >= 0:
                np.testing.assert_array_equal(states[at[slot]], states[at[slot - 1]], err_msg=name)


# ---------------------------------------------------------------- tables, workers, time, errors


def test_loss_zero_gives_the_tables_of_the_scenario_without_the_keys():
    plain = _server(runs=20, downlink_rate_bps=256.0, uplink_latency_s=0.125)
    plain["unlearning"] = [{"node": 3, "at_iteration": 50}]
    keyed = copy.deepcopy(plain)
    keyed["links"].update(downlink_loss=0.0, uplink_loss=0.0, timeout_s=2.0, uplink_max_retries=3)
    a, b = gs.run(plain, plots=False), gs.run(keyed, plots=False)
    assert a.engines == b.engines and a.engines["t"].startswith("vectorized")
    for name in ("metrics", "runs", "requests", "visits"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name))
    assert "retransmissions" not in b.runs.columns


def test_loss_applies_to_both_server_links_unless_each_says_otherwise():
    links = gs.parse_study(_server(loss=0.25, timeout_s=1.0, uplink_loss=0.0)).variants[0]
    channel = links.scenario.links.channel("server")
    assert isinstance(channel, LossyServerLinks)
    assert channel.downlink.loss == 0.25 and channel.uplink.loss == 0.0
    assert channel.downlink.timeout_s == 1.0 and channel.downlink.max_retries == 100


def test_lossy_server_runs_are_the_same_on_one_and_two_workers():
    raw = _server(runs=6, iterations=120, **_lossy_links())
    raw["unlearning"] = [{"node": 2, "at_time": 40.0}]
    one, two = gs.run(raw, plots=False), gs.run(raw, plots=False, workers=2)
    for name in ("metrics", "runs", "requests", "visits"):
        pd.testing.assert_frame_equal(getattr(one, name), getattr(two, name))
    assert one.runs["lost_messages"].sum() > 0


def test_the_time_bound_counts_every_retry():
    down = Link(256.0, 0.25, 0.3, 0.5, 1)
    up = Link(64.0, 0.125, 0.4, 2.0, 2)
    bound = check_horizon(10, 1.0, LossyServerLinks(down, up), PAYLOAD)
    worst = 1.0 + (2 * 0.5 + 0.5 + 0.25) + (3 * 2.0 + 2.0 + 0.125)
    assert bound == 10 * worst
    res = gs.run(_server(runs=3, iterations=200, **_lossy_links()), plots=False)
    steps = res.metrics.groupby("run")["time"].diff().dropna()
    assert steps.max() <= worst


@pytest.mark.parametrize(
    ("links", "key", "words"),
    [
        ({"downlink_loss": 1.0, "timeout_s": 1.0}, "links.downlink_loss", "< 1"),
        ({"uplink_loss": -0.1, "timeout_s": 1.0}, "links.uplink_loss", ">= 0"),
        ({"uplink_loss": 0.1}, "links.uplink_timeout_s", "is required with links.uplink_loss"),
        ({"downlink_loss": 0.1}, "links.downlink_timeout_s", "is required"),
        ({"loss": 0.1}, "links.timeout_s", "is required with links.loss = 0.1"),
        ({"uplink_loss": 0.1, "uplink_timeout_s": 0}, "links.uplink_timeout_s", "> 0"),
        ({"downlink_loss": 0.1, "downlink_timeout_s": -1.0}, "links.downlink_timeout_s", "> 0"),
        ({"uplink_max_retries": -1}, "links.uplink_max_retries", ">= 0"),
        ({"downlink_max_retries": 0.5}, "links.downlink_max_retries", "integer"),
        ({"uplink_loss": 0.1, "uplink_timeout_s": 1e300}, "links.uplink_timeout_s", "overflow"),
        ({"loss": 0.1, "timeout_s": 1e300}, "links.timeout_s", "overflow"),
    ],
)
def test_bad_server_links_are_one_line(tmp_path, capsys, links, key, words):
    err = validate_error(_server(**links), tmp_path, capsys)
    assert err.startswith(f"gossipsim: error: {key}: ") and words in err, err


def test_what_cannot_lose_a_transfer_is_refused_in_one_line(tmp_path, capsys):
    raw = _server(uplink_loss=0.1, uplink_timeout_s=1.0)
    raw["protocol"]["kind"] = "partial_participation:PartialGFVL"  # declares no takes_back
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    try:
        err = validate_error(raw, tmp_path, capsys)
    finally:
        sys.path.pop(0)
    assert "links.uplink_loss: " in err and "cannot take a slot back" in err, err
    centre = {
        **LOGISTIC, "scenario": {"name": "c", "seed": 1, "runs": 1, "iterations": 5},
        "protocol": {"kind": "svgd"}, "links": {"loss": 0.1, "timeout_s": 1.0},
    }  # fmt: skip
    err = validate_error(centre, tmp_path, capsys)
    assert "links.loss: " in err and "centralised" in err, err


def test_no_exact_removal_latency_is_claimed_over_lossy_server_links():
    """A removal waits for the node's first delivered round: the scheduler's hitting law is not
    the runs' latency, and summary.json does not claim it."""
    raw = _server(runs=2, iterations=100, uplink_loss=0.3, timeout_s=1.0)
    raw["unlearning"] = [{"node": 3, "at_iteration": 50}]
    theory = gs.run(raw, plots=False).theory["t"]
    entry = theory["removal_latency"][0]
    assert entry["expected"] is None and "lose transfers" in entry["method"], entry
    assert "exact_cover_moves" in theory  # the schedule itself loses nothing


def _expected_transfer(link: dict[str, float]) -> tuple[float, float, float]:
    """(P(delivered), E[seconds], E[attempts]) of one transfer of PAYLOAD bits by stop-and-wait
    ARQ: F failed attempts, P(F = f) = loss^f (1 − loss), lost for good when F > max_retries."""
    p, m, timeout = link["loss"], int(link["retries"]), link["timeout"]
    delivered = 1.0 - p ** (m + 1)
    attempt = PAYLOAD / link["rate"] + link["latency"]
    seconds = (1 - delivered) * (m + 1) * timeout
    attempts = (1 - delivered) * (m + 1)
    for f in range(m + 1):
        seconds += p**f * (1 - p) * (f * timeout + attempt)
        attempts += p**f * (1 - p) * (f + 1)
    return delivered, seconds, attempts


def test_the_mean_slot_time_bits_and_updates_are_the_arq_formulas():
    """Over many slots: the mean slot time, bits and share of slots with an update against their
    exact expectations (a download, then only if it arrived the computation and an upload)."""
    res = gs.run(_server(runs=2, iterations=4000, **_lossy_links()), plots=False)
    d_ok, d_seconds, d_attempts = _expected_transfer(DOWN)
    u_ok, u_seconds, u_attempts = _expected_transfer(UP)
    exact_time = d_seconds + d_ok * (COMPUTE + u_seconds)
    exact_bits = PAYLOAD * (d_attempts + d_ok * u_attempts)
    m = res.metrics.sort_values(["run", "iteration"])
    dt = m.groupby("run")["time"].diff().dropna()
    dbits = m.groupby("run")["bits"].diff().dropna()
    for measured, exact in ((dt, exact_time), (dbits, exact_bits)):
        se = measured.std(ddof=1) / math.sqrt(len(measured))
        assert abs(measured.mean() - exact) < 4 * se, (measured.mean(), exact, se)
    rounds = 2 * 4000
    lost = res.runs["lost_messages"].sum()  # a slot loses one transfer at most
    updated = 1 - lost / rounds
    se = math.sqrt(d_ok * u_ok * (1 - d_ok * u_ok) / rounds)
    assert abs(updated - d_ok * u_ok) < 4 * se, (updated, d_ok * u_ok)
