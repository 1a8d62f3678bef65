"""Messages on channels: lost tokens, regenerated tokens and server rounds, with test-only channels
and protocols (the engine's mechanism; the user-facing network features come later)."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from gossipsim.engine.protocol_api import Protocol, Recovery, StateTrace
from gossipsim.engine.token import run_token
from gossipsim.network.channels import Channel, Delivery
from gossipsim.network.messages import CODECS, IdentityCodec, Message, Round, Transfer
from gossipsim.scheduling import IndexedGraph, Walker

RATE, LATENCY, TIMEOUT = 1000.0, 0.01, 0.5


class LossyLinks(Channel):
    """Test channel: each transmission is lost with probability ``p``; a loss is known after
    ``TIMEOUT`` seconds, a delivery takes bits / RATE + LATENCY."""

    lossy = True

    def __init__(self, p: float) -> None:
        self.p = p

    def delay(self, sender: int, receiver: int, bits: float) -> float:
        return bits / RATE + LATENCY

    def transmit(self, sender, receiver, message, rng):
        if rng.random() < self.p:
            return Delivery(TIMEOUT, lost=True)
        return Delivery(self.delay(sender, receiver, message.bits))


class Passer(Protocol):
    """Test protocol: passes a 100-bit message; ``recover`` decides what follows a loss."""

    def __init__(self, recover=None) -> None:
        self.message = Message(100.0)
        self.recover = recover
        self.losses: list[tuple[int, int, int]] = []

    def on_token(self, holder, slot):
        return self.message

    def on_request(self, node, slot):
        pass

    def done(self):
        return False

    def traces(self):
        return {"main": StateTrace()}

    def on_loss(self, sender, receiver, slot, message):
        self.losses.append((sender, receiver, slot))
        return self.recover(sender, receiver, slot) if self.recover else Recovery(sender)


def ring_walker(seed: int, n: int = 6) -> Walker:
    graph = IndexedGraph.from_networkx(nx.cycle_graph(n))
    return Walker(graph, "simple-random-walk", np.random.default_rng(seed))


def test_a_lost_token_stays_with_its_sender_and_costs_the_timeout():
    protocol = Passer()
    record = run_token(
        walker=ring_walker(1), protocol=protocol, start=0, iterations=4000,
        links=LossyLinks(0.2), channel_rng=np.random.default_rng(2),
    )  # fmt: skip
    lost = [e for e in record.events if e.kind == "lost"]
    assert len(lost) == len(protocol.losses)
    # every slot ends with a hop on the ring (SRW always moves): 3,999 transmissions, 20% lost
    n = record.slots - 1
    assert abs(len(lost) - 0.2 * n) < 4 * math.sqrt(0.2 * 0.8 * n)
    for event in lost:  # the sender holds the next slot again
        assert record.holders[event.slot] == event.sender
    # slot times: every gap is a delivery or a timeout
    gaps = np.diff(record.end_times)
    delivered = 100.0 / RATE + LATENCY
    assert np.allclose(np.sort(np.unique(np.round(gaps, 12))), sorted({delivered, TIMEOUT}))
    assert np.isclose(gaps.sum(), len(lost) * TIMEOUT + (n - len(lost)) * delivered)
    assert record.bits[-1] == 100.0 * n  # a lost message used the link too


def test_a_regenerated_token_moves_to_the_node_the_protocol_names():
    protocol = Passer(lambda sender, receiver, slot: Recovery(0, after=2.0))
    record = run_token(
        walker=ring_walker(3), protocol=protocol, start=3, iterations=500,
        links=LossyLinks(0.3), channel_rng=np.random.default_rng(4),
    )  # fmt: skip
    regenerated = [e for e in record.events if e.kind == "regenerated"]
    lost = [e for e in record.events if e.kind == "lost"]
    assert lost and len(regenerated) == sum(1 for e in lost if e.sender != 0)
    for event in regenerated:
        assert record.holders[event.slot] == 0
        assert np.isclose(record.end_times[event.slot] - record.end_times[event.slot - 1], 2.5)


def test_a_token_lost_for_good_ends_the_run():
    protocol = Passer(lambda sender, receiver, slot: Recovery(None))
    record = run_token(
        walker=ring_walker(5), protocol=protocol, start=0, iterations=10_000,
        links=LossyLinks(0.1), channel_rng=np.random.default_rng(6),
    )  # fmt: skip
    assert record.slots < 10_000
    assert [e.kind for e in record.events] == ["lost", "ended"]
    assert record.events[0].slot == record.slots


def test_the_channel_stream_changes_only_losses():
    """Same walk seed, two channel seeds: the holders differ only where losses differ, and with
    p = 0 the walk is exactly the lossless one."""
    lossless = run_token(walker=ring_walker(7), protocol=Passer(), start=0, iterations=300)
    never = run_token(
        walker=ring_walker(7), protocol=Passer(), start=0, iterations=300,
        links=LossyLinks(0.0), channel_rng=np.random.default_rng(1),
    )  # fmt: skip
    np.testing.assert_array_equal(lossless.holders, never.holders)
    assert not never.events


class Server(Protocol):
    """Test protocol for a parameter server (node 0): the scheduled client downloads and uploads
    (a round of two transfers, one after the other)."""

    def __init__(self) -> None:
        self.outcomes: list[list[bool]] = []

    def on_token(self, holder, slot):
        down = Transfer(0, holder, Message(64.0))
        up = Transfer(holder, 0, Message(32.0))
        return Round((down, up), sequential=True)

    def on_round(self, slot, delivered):
        self.outcomes.append(list(delivered))

    def on_request(self, node, slot):
        pass

    def done(self):
        return False

    def traces(self):
        return {"main": StateTrace()}


def test_a_server_round_costs_its_transfers_and_reports_their_outcome():
    graph = IndexedGraph.from_networkx(nx.complete_graph(5))
    walker = Walker(graph, "uniform", np.random.default_rng(0))
    protocol = Server()
    record = run_token(
        walker=walker, protocol=protocol, start=1, iterations=200, compute_seconds=0.1,
        links=LossyLinks(0.25), channel_rng=np.random.default_rng(9),
    )  # fmt: skip
    rounds = [e for e in record.events if e.kind == "round"]
    assert len(rounds) == 200 == len(protocol.outcomes)
    for event, outcome, t0, t1 in zip(
        rounds, protocol.outcomes, np.r_[0.0, record.end_times[:-1]], record.end_times, strict=True
    ):
        assert event.transfers == 2 and event.delivered == sum(outcome)
        # compute, then the download and the upload one after the other (a loss costs the timeout)
        spent = sum(
            (bits / RATE + LATENCY) if ok else TIMEOUT
            for bits, ok in zip((64.0, 32.0), outcome, strict=True)
        )
        assert np.isclose(t1 - t0, 0.1 + spent)
    assert record.bits[-1] == 200 * 96.0  # a round's transfers end within its slot
    delivered = np.array(protocol.outcomes)
    assert abs(delivered.mean() - 0.75) < 4 * math.sqrt(0.75 * 0.25 / delivered.size)


def test_codecs_wrap_messages_and_identity_is_registered():
    message = Message(128.0, payload=np.arange(2.0))
    assert CODECS["identity"].encode(message) is message
    assert isinstance(CODECS["identity"], IdentityCodec)
