"""The discrete-event engine: a SimPy environment in which a token process moves over the graph.

Slot ``i`` (``i = 1, 2, ...``) is the holder's local computation followed, if the token moves, by the
hop to the next holder::

    slot i starts at s_i;  computation ends at t_i = s_i + compute_seconds
    next holder j = walker.next(k);  s_{i+1} = t_i + (links.delay(k, j, bits) if j != k else 0)

``t_i`` is the slot's recorded time (the moment q^{(i)} exists) and ``bits`` the payload bits sent
in hops before it. Unlearning requests are SimPy events: a request at a simulated time is a process
that fires at that time; a request at an iteration is delivered when that slot starts. A request is
handed to the protocol before the computation of the first slot that starts at or after its arrival.

The engine knows nothing about models: the protocol does the work, reports the message size, and
records its own state. The token process advances slot after slot without returning to the SimPy
scheduler while no other event is due before the next slot starts; this is exact (no other process
can run in between) and keeps the per-hop cost close to that of a plain loop.

Simulated time must stay finite: a slot that would start at an infinite (or NaN) time is a
:class:`~gossipsim.errors.ConfigError` naming ``links`` (scenarios are checked beforehand by
:func:`gossipsim.links.check_horizon`), so the event clock never reaches infinity, where every event
would be due at once and the catch-up to a slot's start could not end.
"""

from __future__ import annotations

from array import array
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field

import numpy as np
import simpy

from .errors import ConfigError
from .links import LinkModel
from .protocols.base import Protocol, StateTrace
from .scheduling import Walker

_INF = float("inf")

#: yields that may follow the timeout to a slot's start s: with s finite, one brings the clock to s
#: (now + (s − now) lands on s or next to it, and the difference of two floats within a factor 2 is
#: exact) and one more lets the completions of requests due exactly at s run; more would mean the
#: clock cannot reach s, an error instead of a spin
_CATCH_UP_ROUNDS = 8


@dataclass(frozen=True)
class Request:
    """An unlearning request for node index ``node``, at an iteration (slot) or a simulated time."""

    node: int
    at_iteration: int | None = None
    at_time: float | None = None

    def __post_init__(self) -> None:
        if (self.at_iteration is None) == (self.at_time is None):
            raise ValueError("a request needs exactly one of at_iteration and at_time")


@dataclass(frozen=True)
class Arrival:
    """Request ``request`` (index into the run's requests) reached the protocol before ``slot``."""

    request: int
    node: int
    slot: int
    time: float


@dataclass
class RunRecord:
    """Raw record of one run: one entry per slot, plus request arrivals, the protocol's traces and
    its removal slots (:meth:`~gossipsim.protocols.base.Protocol.removals`)."""

    holders: np.ndarray
    end_times: np.ndarray
    bits: np.ndarray
    arrivals: list[Arrival]
    traces: dict[str, StateTrace]
    stopped_early: bool = False
    requests: Sequence[Request] = field(default_factory=tuple)
    removals: dict[int, int] = field(default_factory=dict)

    @property
    def slots(self) -> int:
        return int(self.holders.size)


def run_token(
    *,
    walker: Walker,
    protocol: Protocol,
    start: int,
    iterations: int,
    compute_seconds: float = 0.0,
    links: LinkModel | None = None,
    requests: Sequence[Request] = (),
    stop_when_done: bool = False,
) -> RunRecord:
    """Run one token walk for at most ``iterations`` slots and return its raw record.

    ``start`` is the index of the first holder. With ``stop_when_done`` the run ends after the first
    slot at whose end the protocol is done and no request is still to arrive.
    """
    links = links if links is not None else LinkModel()
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
    state = {"stopped_early": False}

    def token() -> Generator[simpy.Event, None, None]:
        on_token = protocol.on_token
        done = protocol.done
        step = walker.next
        delay = links.delay
        hold = holders.append
        mark = end_times.append
        count = bits_sent.append
        undelivered = len(requests)
        k = start
        s = 0.0  # start time of the current slot
        total_bits = 0.0
        due = env.peek()  # time of the next event of any other process
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
            bits = on_token(k, slot)
            t = s + compute_seconds
            hold(k)
            mark(t)
            count(total_bits)
            if stop_when_done and undelivered == 0 and done():
                state["stopped_early"] = slot < iterations
                return
            j = step(k)
            if j != k:
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
        stopped_early=state["stopped_early"],
        requests=tuple(requests),
        removals=protocol.removals(),
    )


def _timed_request(
    env: simpy.Environment, index: int, at_time: float, pending: list[tuple[int, float]]
) -> Generator[simpy.Event, None, None]:
    if at_time > 0:
        yield env.timeout(at_time)
    pending.append((index, at_time))
