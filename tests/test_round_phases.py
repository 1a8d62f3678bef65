"""Rounds in phases: the transfers of a phase at once, the phases one after another.

Client selection's slot (003, Section III-A) is a broadcast to every client (at once), every
client's report (at once), then the selected client's upload; each phase lasts as long as its
slowest transfer. Times here are exact sums of link delays (bits / rate + latency).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from gossipsim.engine.protocol_api import Protocol, StateTrace
from gossipsim.engine.slottables import round_seconds
from gossipsim.engine.token import run_token
from gossipsim.network.channels import Channel, Delivery
from gossipsim.network.messages import SERVER, Message, Round, Transfer
from gossipsim.scheduling import IndexedGraph, Walker


class Rated(Channel):
    """Each node's link has its own rate: node k sends and receives at (k + 1) bits/s."""

    def delay(self, sender, receiver, bits):
        node = receiver if sender == SERVER else sender
        return bits / (node + 1)


class LosesReports(Rated):
    """As :class:`Rated`, but node 1's upload to the server is always lost (after 5 s)."""

    lossy = True

    def transmit(self, sender, receiver, message, rng):
        if sender == 1 and receiver == SERVER:
            return Delivery(5.0, lost=True)
        return Delivery(self.delay(sender, receiver, message.bits))


def selection_round(selected: int, clients: int = 3) -> Round:
    broadcast = [Transfer(SERVER, k, Message(12.0)) for k in range(clients)]
    reports = [Transfer(k, SERVER, Message(6.0)) for k in range(clients)]
    upload = [Transfer(selected, SERVER, Message(12.0))]
    return Round(
        (*broadcast, *reports, *upload), phases=(clients, clients, 1), chained=True,
        compute_after=2 * clients,
    )  # fmt: skip


class Selecting(Protocol):
    def __init__(self) -> None:
        self.outcomes: list[list[bool]] = []

    def on_token(self, holder, slot):
        return selection_round(holder)

    def on_round(self, slot, delivered):
        self.outcomes.append(list(delivered))

    def on_request(self, node, slot):
        pass

    def done(self):
        return False

    def traces(self):
        return {"main": StateTrace()}


def _walker() -> Walker:
    return Walker(IndexedGraph.from_networkx(nx.complete_graph(3)), "round-robin",
                  np.random.default_rng(0))  # fmt: skip


def test_a_phase_lasts_as_long_as_its_slowest_transfer():
    protocol = Selecting()
    record = run_token(walker=_walker(), protocol=protocol, start=0, iterations=3,
                       compute_seconds=0.5, links=Rated())  # fmt: skip
    # broadcast: 12 bits at 1, 2, 3 bits/s -> 12 s; reports: 6 bits -> 6 s; upload: 12/(k+1)
    slot_seconds = [0.5 + 12.0 + 6.0 + 12.0 / (k + 1) for k in (0, 1, 2)]
    np.testing.assert_allclose(np.diff(np.r_[0.0, record.end_times]), slot_seconds)
    assert record.bits[-1] == 3 * (3 * 12.0 + 3 * 6.0 + 12.0)
    assert protocol.outcomes == [[True] * 7] * 3


def test_a_lost_transfer_stops_the_phases_after_its_own_not_its_siblings():
    protocol = Selecting()
    record = run_token(walker=_walker(), protocol=protocol, start=0, iterations=1,
                       compute_seconds=0.5, links=LosesReports(),
                       channel_rng=np.random.default_rng(0))  # fmt: skip
    # the reports' phase: node 1's is lost; 0's and 2's are sent; the upload is not
    assert protocol.outcomes == [[True, True, True, True, False, True, False]]
    # nothing computed (the loss came before the computation): broadcast 12 s, reports 6 s (lost
    # at 5 s, node 0's 6 s the slowest)
    assert record.end_times[0] == pytest.approx(12.0 + 6.0)
    assert record.bits[0] == 3 * 12.0 + 3 * 6.0
    (lost,) = [e for e in record.events if e.kind == "lost"]
    assert lost.time == pytest.approx(12.0 + 5.0)


def test_sequential_and_parallel_rounds_are_phases_of_one_and_of_all():
    delays = [1.5, 0.25, 2.0]
    transfers = tuple(Transfer(SERVER, k, Message(1.0)) for k in range(3))
    assert Round(transfers, sequential=True).phase_sizes == (1, 1, 1)
    assert Round(transfers).phase_sizes == (3,)
    assert round_seconds(delays, True) == round_seconds(delays, (1, 1, 1)) == sum(delays)
    assert round_seconds(delays, False) == round_seconds(delays, (3,)) == 2.0
    assert round_seconds(delays, (2, 1)) == 1.5 + 2.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"phases": (2, 2)}, "adding up to the 3 transfers"),
        ({"phases": (3, 0)}, "positive sizes"),
        ({"phases": (1, 2), "sequential": True}, "not both"),
        ({"phases": (3,), "chained": True}, "one after another"),
        ({"phases": (1, 2), "compute_after": 2}, r"between phases \(\(0, 1, 3\)\)"),
    ],
)
def test_bad_phases_are_refused(kwargs, message):
    transfers = tuple(Transfer(SERVER, k, Message(1.0)) for k in range(3))
    with pytest.raises(ValueError, match=message):
        Round(transfers, **kwargs)
