"""The event engine: slot timing, payload bits, request delivery, early stop; no model inside."""

from __future__ import annotations

import threading

import networkx as nx
import numpy as np
import pytest

from gossipsim.engine.records import Request
from gossipsim.engine.token import run_token
from gossipsim.errors import ConfigError
from gossipsim.network.links import LinkModel
from gossipsim.network.messages import Message
from gossipsim.protocols.base import Protocol, StateTrace
from gossipsim.scheduling import IndexedGraph, Walker


class Recorder(Protocol):
    """A protocol that only records what the engine asks of it."""

    def __init__(self, bits: float = 128.0, done_after: int | None = None) -> None:
        self.calls: list[tuple[int, int]] = []
        self.requests: list[tuple[int, int]] = []
        self.bits = bits
        self.done_after = done_after
        self.trace = StateTrace()

    def on_token(self, holder: int, slot: int) -> Message:
        self.calls.append((holder, slot))
        return Message(self.bits)

    def on_request(self, node: int, slot: int) -> None:
        self.requests.append((node, slot))

    def done(self) -> bool:
        return self.done_after is not None and len(self.calls) >= self.done_after

    def traces(self) -> dict[str, StateTrace]:
        return {"main": self.trace}


def _two_nodes(seed: int = 0) -> Walker:
    # a simple random walk on two nodes always moves, so every slot ends with a hop
    return Walker(
        IndexedGraph.from_networkx(nx.path_graph(2)),
        "simple-random-walk",
        np.random.default_rng(seed),
    )


def test_slot_times_and_bits_are_exact():
    proto = Recorder(bits=128.0)
    rec = run_token(
        walker=_two_nodes(),
        protocol=proto,
        start=0,
        iterations=6,
        compute_seconds=0.5,
        links=LinkModel(
            rate_bps=128.0, latency_s=0.5
        ),  # 128 bits at 128 bit/s + 0.5 s = 1.5 s per hop
    )
    slots = np.arange(1, 7)
    np.testing.assert_array_equal(rec.holders, [0, 1, 0, 1, 0, 1])
    np.testing.assert_allclose(rec.end_times, 0.5 + 2.0 * (slots - 1))
    np.testing.assert_allclose(rec.bits, 128.0 * (slots - 1))
    assert proto.calls == [
        (h, s) for h, s in zip(rec.holders.tolist(), slots.tolist(), strict=True)
    ]


def test_rejections_cost_compute_but_no_link_time():
    # star under Metropolis-Hastings: leaves keep the token most of the time
    g = IndexedGraph.from_networkx(nx.star_graph(5))
    walker = Walker(g, "metropolis-hastings", np.random.default_rng(1))
    rec = run_token(
        walker=walker,
        protocol=Recorder(bits=64.0),
        start=1,
        iterations=500,
        compute_seconds=1.0,
        links=LinkModel(64.0, 1.0),
    )
    moves = np.count_nonzero(np.diff(rec.holders))
    assert rec.end_times[-1] == pytest.approx(500 * 1.0 + moves * 2.0)
    assert rec.bits[-1] == pytest.approx(64.0 * moves)


def test_requests_arrive_before_the_first_slot_starting_at_or_after_them():
    proto = Recorder()
    requests = [
        Request(node=1, at_time=4.0),  # slot 3 starts at exactly 4.0 s
        Request(node=0, at_time=4.1),  # slot 4 (starts at 6.0 s)
        Request(node=1, at_iteration=5),
        Request(node=0, at_time=0.0),  # before slot 1
        Request(node=1, at_time=1e9),  # never arrives within the run
    ]
    rec = run_token(
        walker=_two_nodes(),
        protocol=proto,
        start=0,
        iterations=8,
        compute_seconds=0.5,
        links=LinkModel(128.0, 0.5),
        requests=requests,
    )
    by_request = {a.request: (a.slot, a.time) for a in rec.arrivals}
    assert by_request == {0: (3, 4.0), 1: (4, 4.1), 2: (5, 8.0), 3: (1, 0.0)}
    assert proto.requests == [(0, 1), (1, 3), (0, 4), (1, 5)]


def test_stop_when_done_waits_for_pending_requests():
    proto = Recorder(done_after=3)
    rec = run_token(
        walker=_two_nodes(),
        protocol=proto,
        start=0,
        iterations=100,
        requests=[Request(0, at_iteration=10)],
        stop_when_done=True,
    )
    assert rec.slots == 10 and rec.stopped_early
    rec2 = run_token(
        walker=_two_nodes(),
        protocol=Recorder(done_after=3),
        start=0,
        iterations=100,
        stop_when_done=True,
    )
    assert rec2.slots == 3


def _finishes(call, seconds: float = 20.0) -> BaseException | None:
    """Run ``call`` in a daemon thread; fail the test if it has not returned or raised in time (the
    engine's catch-up loop used to spin forever once the simulated clock reached infinity)."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"run_token did not finish within {seconds} s"
    return outcome[0]


@pytest.mark.parametrize(
    ("compute", "links", "requests"),
    [
        (0.0, LinkModel(rate_bps=1e-320), ()),  # 128 bits / 1e-320 bit/s = inf at the first hop
        (1e308, LinkModel(), ()),  # the second slot ends at 2e308 = inf
        (0.0, LinkModel(latency_s=1e308), (Request(1, at_time=5.0),)),  # a pending timed request
    ],
)
def test_an_overflowing_clock_raises_instead_of_spinning(compute, links, requests):
    def run() -> None:
        run_token(
            walker=_two_nodes(),
            protocol=Recorder(bits=128.0),
            start=0,
            iterations=5,
            compute_seconds=compute,
            links=links,
            requests=requests,
        )

    error = _finishes(run)
    assert isinstance(error, ConfigError) and error.key == "links", error
    assert "the simulated time overflows at slot" in str(error)


def test_requests_due_exactly_at_a_slot_start_arrive_before_it():
    """The bounded catch-up still lets every event due by the next slot's start happen first."""
    proto = Recorder(bits=128.0)
    rec = run_token(
        walker=_two_nodes(),
        protocol=proto,
        start=0,
        iterations=6,
        compute_seconds=0.5,
        links=LinkModel(rate_bps=128.0, latency_s=0.5),  # slot i starts at 2(i − 1)
        requests=[Request(1, at_time=4.0), Request(0, at_time=4.0 + 1e-12)],
    )
    assert proto.requests == [(1, 3), (0, 4)]
    assert [(a.slot, a.time) for a in rec.arrivals] == [(3, 4.0), (4, 4.0 + 1e-12)]
