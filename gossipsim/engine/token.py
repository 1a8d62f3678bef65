"""The discrete-event engine: a SimPy environment in which a token process moves over the graph.

Slot ``i`` (``i = 1, 2, ...``) is the holder's local computation followed, if the token moves, by the
hop to the next holder::

    slot i starts at s_i;  computation ends at t_i = s_i + compute_seconds   (or compute_seconds[k])
    next holder j = walker.next(k);  s_{i+1} = t_i + (links.delay(k, j, bits) if j != k else 0)

``t_i`` is the slot's recorded time (the moment q^{(i)} exists) and ``bits`` the payload bits sent
in hops before it (on a lossy channel every attempt's: :attr:`Delivery.bits
<gossipsim.network.channels.Delivery.bits>`; no hop follows the last slot). Unlearning requests are SimPy events: a request at a simulated time is a process
that fires at that time; a request at an iteration is delivered when that slot starts. A request is
handed to the protocol before the computation of the first slot that starts at or after its arrival.

The engine knows nothing about models: the protocol does the work, returns the message it sends (a
:class:`~gossipsim.network.messages.Message` that knows its size in bits) and records its own state. The hop
goes over the run's :class:`~gossipsim.network.channels.Channel`; a channel that can lose a transmission is
asked for each one (:meth:`~gossipsim.network.channels.Channel.transmit`, with the run's channel stream) and,
when the token is lost, the protocol says who holds it next (:meth:`Protocol.on_loss`: the sender
trying again, another node regenerating it, or no one: the run ends). A protocol may instead spend a
slot on a :class:`~gossipsim.network.messages.Round` of transfers between a server and clients: the slot
then lasts the compute time plus the transfers' time (the slowest, or their sum when sequential), no
token moves, and the protocol learns which transfers arrived (:meth:`Protocol.on_round`); a round
without transfers (a centralised protocol's slot at the centre) costs the compute time only. Losses,
regenerations, rounds and an early end are listed in :attr:`RunRecord.events`. The token process advances slot after slot without returning to the SimPy
scheduler while no other event is due before the next slot starts; this is exact (no other process
can run in between) and keeps the per-hop cost close to that of a plain loop.

Simulated time must stay finite: a slot that would start at an infinite (or NaN) time is a
:class:`~gossipsim.errors.ConfigError` naming ``links`` (scenarios are checked beforehand by
:func:`gossipsim.network.links.check_horizon`), so the event clock never reaches infinity, where every event
would be due at once and the catch-up to a slot's start could not end.
"""

from __future__ import annotations

from array import array
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from gossipsim.engine.protocol_api import Protocol
from gossipsim.engine.records import Arrival, Event, Request, RunRecord
from gossipsim.engine.slottables import round_seconds
from gossipsim.errors import ConfigError
from gossipsim.network.channels import Channel
from gossipsim.network.links import LinkModel
from gossipsim.network.messages import Round
from gossipsim.scheduling import Walker

if TYPE_CHECKING:
    import simpy

_INF = float("inf")

#: yields that may follow the timeout to a slot's start s: with s finite, one brings the clock to s
#: (now + (s − now) lands on s or next to it, and the difference of two floats within a factor 2 is
#: exact) and one more lets the completions of requests due exactly at s run; more would mean the
#: clock cannot reach s, an error instead of a spin
_CATCH_UP_ROUNDS = 8


def run_token(
    *,
    walker: Walker,
    protocol: Protocol,
    start: int,
    iterations: int,
    compute_seconds: float | Sequence[float] = 0.0,
    links: Channel | None = None,
    requests: Sequence[Request] = (),
    stop_when_done: bool = False,
    channel_rng: np.random.Generator | None = None,
    max_bits: float | None = None,
    max_time: float | None = None,
) -> RunRecord:
    """Run one token walk for at most ``iterations`` slots and return its raw record.

    ``start`` is the index of the first holder. With ``stop_when_done`` the run ends after the first
    slot at whose end the protocol is done and no request is still to arrive. A budget ends it
    after the first slot whose recorded bits (sent by its end) reach ``max_bits``, or whose end
    time reaches ``max_time``: a cut like ``iterations`` (the record is the prefix of the run
    without it; not ``stopped_early``). ``links`` is the channel (homogeneous links by default;
    the run uses its :meth:`~gossipsim.network.channels.Channel.for_run`); a lossy one draws
    from ``channel_rng``. ``compute_seconds`` is each slot's computation: one
    number, or one per node index (the holder k's, ``compute_seconds[k]``; with a server, the
    scheduled agent's).
    """
    links = links if links is not None else LinkModel()
    if links.lossy and channel_rng is None:
        raise ValueError("a lossy channel needs channel_rng")
    links = links.for_run(channel_rng)  # a channel with state starts the run afresh
    events: list[Event] = []
    import simpy  # here: the vectorised engine and the other commands do without it

    env = simpy.Environment()
    holders = array("q")
    end_times = array("d")
    bits_sent = array("d")
    arrivals: list[Arrival] = []
    pending: list[tuple[int, float]] = []  # (request index, arrival time) awaiting the next slot
    by_iteration: dict[int, list[int]] = {}
    for r, req in enumerate(requests):
        if req.at_iteration is not None:
            by_iteration.setdefault(req.at_iteration, []).append(r)
        else:
            env.process(_timed_request(env, r, float(req.at_time or 0.0), pending))
    state = {"stopped_early": False, "retransmissions": 0}
    per_node: list[float] | None = None  # compute times per node index, or one for all
    if isinstance(compute_seconds, int | float):
        compute = compute_seconds
    else:
        compute, per_node = 0.0, [float(c) for c in compute_seconds]

    def token() -> Generator[simpy.Event, None, None]:
        on_token = protocol.on_token
        done = protocol.done
        step = walker.next
        delay = links.delay
        lossy = links.lossy
        hold = holders.append
        mark = end_times.append
        count = bits_sent.append
        undelivered = len(requests)
        k = start
        s = 0.0  # start time of the current slot
        total_bits = 0.0
        due = env.peek()  # time of the next event of any other process
        bit_budget = _INF if max_bits is None else max_bits
        time_budget = _INF if max_time is None else max_time
        budgeted = max_bits is not None or max_time is not None
        next_at = min(by_iteration, default=0)  # next slot with a per-iteration request
        for slot in range(1, iterations + 1):
            if pending or slot == next_at:
                for r in by_iteration.pop(slot, ()):
                    pending.append((r, s))
                next_at = min(by_iteration, default=0)
                pending.sort()
                for r, arrived in pending:
                    protocol.on_request(requests[r].node, slot)
                    arrivals.append(Arrival(r, requests[r].node, slot, arrived))
                undelivered -= len(pending)
                pending.clear()
            message = on_token(k, slot)
            t = s + (compute if per_node is None else per_node[k])
            if message.__class__ is Round:  # a server round: no token moves
                t, total_bits = _round(links, protocol, message, k, slot, t, total_bits,
                                       channel_rng, events)  # fmt: skip
            hold(k)
            mark(t)
            count(total_bits)
            if stop_when_done and undelivered == 0 and done():
                state["stopped_early"] = slot < iterations
                return
            if budgeted and (total_bits >= bit_budget or time_budget <= t < _INF):
                return  # the run's budget is spent (an infinite clock is refused below)
            if slot == iterations:
                return  # no hop after the last slot: its losses and attempts would be in no table
            j = step(k)
            if message.__class__ is Round:
                s_next = t
            elif j != k:
                bits = message.bits
                if lossy:
                    delivery = links.transmit(k, j, message, channel_rng)  # type: ignore[arg-type]
                    # every attempt's bits (an ARQ channel's retransmissions included)
                    total_bits += bits if delivery.bits is None else delivery.bits
                    state["retransmissions"] += delivery.attempts - 1
                    s_next = t + delivery.delay
                    if delivery.lost:
                        recovery = protocol.on_loss(k, j, slot, message)  # type: ignore[arg-type]
                        events.append(Event(slot, t, "lost", k, j))
                        if recovery.holder is None:
                            events.append(Event(slot, s_next, "ended", k, j))
                            return
                        j = recovery.holder
                        s_next += recovery.after
                        if j != k:
                            events.append(Event(slot, s_next, "regenerated", k, j))
                else:
                    total_bits += bits
                    s_next = t + delay(k, j, bits)
            else:
                s_next = t
            if not s_next < _INF:  # also NaN: an infinite clock would make every event "due"
                raise ConfigError(
                    "links",
                    f"the simulated time overflows at slot {slot} (the next slot would start at "
                    f"{s_next!r} s); use smaller compute or link times",
                )
            if s_next >= due:
                # Let every event due by the next slot's start happen first (requests included).
                yield env.timeout(s_next - env.now)
                rounds = 0
                while env.peek() <= s_next:  # floating-point catch-up (bounded: see above)
                    if rounds == _CATCH_UP_ROUNDS:
                        raise RuntimeError(f"the event clock did not reach {s_next!r} s")
                    rounds += 1
                    yield env.timeout(max(s_next - env.now, 0.0))
                due = env.peek()
            s = s_next
            k = j

    process = env.process(token())
    env.run(until=process)
    return RunRecord(
        holders=np.frombuffer(holders, dtype=np.int64).copy(),
        end_times=np.frombuffer(end_times, dtype=np.float64).copy(),
        bits=np.frombuffer(bits_sent, dtype=np.float64).copy(),
        arrivals=arrivals,
        traces=protocol.traces(),
        stopped_early=bool(state["stopped_early"]),
        requests=tuple(requests),
        removals=protocol.removals(),
        events=events,
        representation=protocol.representation,
        retransmissions=int(state["retransmissions"]),
    )


def _round(
    links: Channel,
    protocol: Protocol,
    round_: Round,
    holder: int,
    slot: int,
    t: float,
    total_bits: float,
    rng: np.random.Generator | None,
    events: list[Event],
) -> tuple[float, float]:
    """Carry out a slot's round over the channel: its end time and the bits sent by then."""
    delays, delivered = [], []
    for transfer in round_.transfers:
        if links.lossy:
            outcome = links.transmit(transfer.sender, transfer.receiver, transfer.message, rng)  # type: ignore[arg-type]
            delays.append(outcome.delay)
            delivered.append(not outcome.lost)
            total_bits += transfer.message.bits if outcome.bits is None else outcome.bits
        else:
            delays.append(links.delay(transfer.sender, transfer.receiver, transfer.message.bits))
            delivered.append(True)
            total_bits += transfer.message.bits
    spent = round_seconds(delays, round_.sequential)
    protocol.on_round(slot, delivered)
    if delivered:  # a round without transfers (a centralised protocol's slot) is no event
        events.append(Event(slot, t + spent, "round", holder, -1, len(delivered), sum(delivered)))
    return t + spent, total_bits


def _timed_request(
    env: simpy.Environment, index: int, at_time: float, pending: list[tuple[int, float]]
) -> Generator[simpy.Event, None, None]:
    if at_time > 0:
        yield env.timeout(at_time)
    pending.append((index, at_time))
