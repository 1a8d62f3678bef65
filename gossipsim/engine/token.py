"""The discrete-event engine: a SimPy environment in which a token process moves over the graph.

Slot ``i`` (``i = 1, 2, ...``) is the holder's local computation followed, if the token moves, by the
hop to the next holder::

    slot i starts at s_i;  computation ends at t_i = s_i + compute_seconds   (or compute_seconds[k])
    next holder j = walker.next(k);  s_{i+1} = t_i + (links.delay(k, j, bits) if j != k else 0)

``t_i`` is the slot's recorded time (the moment q^{(i)} exists) and ``bits`` the payload bits sent
in hops before it (on a lossy channel every attempt's: :attr:`Delivery.bits
<gossipsim.network.channels.Delivery.bits>`; no hop follows the last slot), plus what holders sent
their neighbours beside the token up to slot i (:attr:`Message.side_bits
<gossipsim.network.messages.Message.side_bits>`, counted at their slot, not timed). Unlearning requests are SimPy events: a request at a simulated time is a process
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
without transfers (a centralised protocol's slot at the centre) costs the compute time only. On a
lossy channel a transfer lost for good costs its attempts' timeouts; in a chained round
(:attr:`Round.chained <gossipsim.network.messages.Round.chained>`, the parameter server's) the
transfers after it are not sent, and one lost before the computation means the slot computes
nothing (its compute time is not spent). Losses,
regenerations, rounds and an early end are listed in :attr:`RunRecord.events`. The token process advances slot after slot without returning to the SimPy
scheduler while no other event is due before the next slot starts; this is exact (no other process
can run in between) and keeps the per-hop cost close to that of a plain loop.

**Failures** (a :class:`~gossipsim.network.failures.Liveness`, ``[failures]``): its SimPy processes
take nodes and links down and up beside the token, and the walker reads which are up. The engine
catches the clock up to the end of each computation and to each hop's arrival event by event, so
it sees the holder go down at the moment it does. A holder that goes down during its slot or
while it sends loses the token (``holder-lost``): the token's custodian, the node that handed it
on, restarts it from its copy ``token_timeout_s`` later (:meth:`Protocol.on_holder_lost`, then
:meth:`Protocol.hand_over`). A hop whose receiver or link fails before it arrives is ``lost``:
the sender restarts it from its own copy ``token_timeout_s`` after sending (:meth:`Protocol.on_loss`).
A node that must restart the token while down does so when it is up again (the wait is
``token_wait_seconds``). A request from a node that is down reaches the protocol once the node is
up (``requests_from_down = "wait"``), or at once, and then a neighbour of the node holding the
token while the node is still down acts for it if the protocol can (:meth:`Protocol.serve_for`;
``"delegate"``).

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
from gossipsim.network.failures import Liveness
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
    liveness: Liveness | None = None,
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
    scheduled agent's). ``liveness`` (``[failures]``) makes nodes and links fail while the token
    moves: the walker must read its view (its sampler built with ``liveness.view``), and the
    protocol must recover a lost token (:attr:`Protocol.recovers_token`); see the module docstring.
    """
    links = links if links is not None else LinkModel()
    if links.lossy and channel_rng is None:
        raise ValueError("a lossy channel needs channel_rng")
    if liveness is not None and not protocol.recovers_token:
        raise ValueError(f"{type(protocol).__name__} cannot recover a lost token")
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
    state = {"stopped_early": False, "retransmissions": 0, "waited": 0.0}
    if liveness is not None:
        liveness.start(env)
    per_node: list[float] | None = None  # compute times per node index, or one for all
    if isinstance(compute_seconds, int | float):
        compute = compute_seconds
    else:
        compute, per_node = 0.0, [float(c) for c in compute_seconds]

    def advance(to: float) -> Generator[simpy.Event, None, None]:
        """Let every event due by time ``to`` happen (requests, failures), the clock then at ``to``."""
        yield env.timeout(to - env.now)
        rounds = 0
        while env.peek() <= to:  # floating-point catch-up (bounded: see above)
            if rounds == _CATCH_UP_ROUNDS:
                raise RuntimeError(f"the event clock did not reach {to!r} s")
            rounds += 1
            yield env.timeout(max(to - env.now, 0.0))

    def advance_while_up(to: float, node: int) -> Generator[simpy.Event, None, None]:
        """:func:`advance` to ``to``, or only to the moment ``node`` goes down if it does by then
        (known in advance: :meth:`Liveness.next_down`)."""
        assert liveness is not None
        yield from advance(min(to, liveness.next_down(node, env.now)))

    def restart(at: float, node: int) -> Generator[simpy.Event, None, float]:
        """The token lost, ``node`` restarts it from its copy at time ``at``, or when it is up
        again if it is down then: the time it does."""
        assert liveness is not None
        if at > env.now:
            yield from advance(at)
        if not liveness.node_up[node]:
            yield liveness.when_up(env, node)
            state["waited"] += env.now - at
            at = env.now
        return at

    def regenerate(
        slot: int, lost: int, node: int, at: float, hand_over: bool
    ) -> Generator[simpy.Event, None, float]:
        """:func:`restart`, listed as ``regenerated`` (the token ``lost`` had, now ``node``'s);
        with ``hand_over`` the copy ``node`` restarts from is the custodian's it keeps for the
        next slots (:meth:`Protocol.hand_over`)."""
        at = yield from restart(at, node)
        events.append(Event(slot, at, "regenerated", lost, node))
        if hand_over:
            protocol.hand_over(slot, node)
        return at

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
        churn = liveness is not None
        if liveness is not None:
            node_up, node_down_at = liveness.node_up, liveness.node_down_at
            edge_up, edge_down_at = liveness.edge_up, liveness.edge_down_at
            timeout_s = liveness.failures.token_timeout_s
            links_fail = liveness.failures.link_churn
            waits = liveness.failures.requests_from_down == "wait"
            skips = liveness.failures.down_clients == "skip"
            protocol.hand_over(0, start)
            hand_over = protocol.hand_over
        custodian = start  # who keeps the copy of the token the holder received (failures)
        delegated: list[int] = []  # down nodes whose requests a neighbour may serve (failures)
        for slot in range(1, iterations + 1):
            if pending or slot == next_at:
                for r in by_iteration.pop(slot, ()):
                    pending.append((r, s))
                next_at = min(by_iteration, default=0)
                pending.sort()
                held = []  # requests of nodes that are down, waiting for them (failures)
                for r, arrived in pending:
                    node = requests[r].node
                    if churn and waits and not node_up[node]:
                        held.append((r, arrived))
                        continue
                    protocol.on_request(node, slot)
                    arrivals.append(Arrival(r, node, slot, arrived))
                    if churn and not node_up[node]:
                        delegated.append(node)  # a neighbour of the node may serve it
                undelivered -= len(pending) - len(held)
                pending[:] = held
            if delegated:  # the holder acts for a down neighbour whose request it can serve
                for node in [n for n in delegated if node_up[n]]:
                    delegated.remove(node)  # back up: it serves its own request
                for node in delegated:
                    if liveness.adjacent(k, node) and protocol.serve_for(k, node, slot):  # type: ignore[union-attr]
                        delegated.remove(node)
                        events.append(Event(slot, s, "delegated", k, node))
                        break
            message = on_token(k, slot)
            if message.__class__ is not Round and message.side_bits:  # type: ignore[union-attr]
                total_bits += message.side_bits  # type: ignore[union-attr]
            lost_at = None  # when the holder went down with the token (failures)
            if message.__class__ is Round:  # a server round: no token moves
                fails_at = _INF
                if churn and not node_up[k]:  # the scheduled agent is down
                    if skips:  # the server hears nothing for token_timeout_s and moves on
                        fails_at = s
                    else:  # it waits for the agent
                        yield liveness.when_up(env, k)  # type: ignore[union-attr]
                        state["waited"] += env.now - s
                        s = env.now
                        due = env.peek()
                if churn and fails_at == _INF:
                    fails_at = liveness.next_down(k, s)  # type: ignore[union-attr]
                t, total_bits, resent = _round(
                    links, protocol, message, k, slot, s,
                    compute if per_node is None else per_node[k], total_bits, channel_rng, events,
                    fails_at, timeout_s if churn else 0.0,
                )  # fmt: skip
                if resent:
                    state["retransmissions"] += resent
            else:
                t = s + (compute if per_node is None else per_node[k])
                if churn:
                    if t >= due:
                        yield from advance_while_up(t, k)
                        due = env.peek()
                    if node_down_at[k] >= s:
                        lost_at = node_down_at[k]
            hold(k)
            mark(t if lost_at is None else lost_at)
            count(total_bits)
            if lost_at is not None:  # its copy is the custodian's, who restarts it
                protocol.on_holder_lost(k, slot)
                events.append(Event(slot, lost_at, "holder-lost", k, custodian))
            if stop_when_done and undelivered == 0 and done():
                state["stopped_early"] = slot < iterations
                return
            if budgeted and (total_bits >= bit_budget or time_budget <= t < _INF):
                return  # the run's budget is spent (an infinite clock is refused below)
            if slot == iterations:
                return  # no hop after the last slot: its losses and attempts would be in no table
            if lost_at is not None:
                j = custodian
                s = yield from regenerate(slot, k, j, lost_at + timeout_s, True)
                due = env.peek()
                k = j
                continue
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
                if churn and j != k:  # did the hop survive the failures during it?
                    if s_next >= due:
                        yield from advance_while_up(s_next, k)
                        due = env.peek()
                    # the link was up at t (the walk chose it); look it up only if one failed since
                    link_failed = links_fail and liveness.last_link_down >= t  # type: ignore[union-attr]
                    if link_failed:
                        e = liveness.edge_entry(k, j)  # type: ignore[union-attr]
                        link_failed = not edge_up[e] or edge_down_at[e] >= t
                    if node_down_at[k] >= t:  # the sender went down with the token
                        lost_at = node_down_at[k]
                        protocol.on_holder_lost(k, slot)
                        events.append(Event(slot, lost_at, "holder-lost", k, custodian))
                        j = custodian
                        s_next = yield from regenerate(slot, k, j, lost_at + timeout_s, True)
                        due = env.peek()
                    elif not node_up[j] or link_failed:
                        # no acknowledgement: the sender restarts the token from its copy
                        recovery = protocol.on_loss(k, j, slot, message)  # type: ignore[arg-type]
                        events.append(Event(slot, t, "lost", k, j))
                        if recovery.holder is None:
                            events.append(Event(slot, s_next, "ended", k, j))
                            return
                        j = recovery.holder
                        at = max(s_next, t + timeout_s) + recovery.after
                        s_next = yield from regenerate(slot, k, j, at, j != k)
                        due = env.peek()
                    else:
                        custodian = k
                        hand_over(slot, j)
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
                yield from advance(s_next)
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
        series=protocol.series(),
        retransmissions=int(state["retransmissions"]),
        token_wait_seconds=float(state["waited"]),
        all_down_seconds=(
            liveness.all_down_until(float(end_times[-1]))
            if liveness is not None and end_times
            else 0.0
        ),
    )


def _round(
    links: Channel,
    protocol: Protocol,
    round_: Round,
    holder: int,
    slot: int,
    s: float,
    compute: float,
    total_bits: float,
    rng: np.random.Generator | None,
    events: list[Event],
    fails_at: float = _INF,
    timeout_s: float = 0.0,
) -> tuple[float, float, int]:
    """Carry out a slot's round over the channel, the slot starting at ``s`` and computing for
    ``compute`` seconds: its end time, the bits sent by then and the retransmissions of its
    transfers. Its time is ``s + compute`` then the transfers' (:func:`round_seconds`), added in
    that order. On a lossy channel a transfer lost for good is listed as ``lost`` (at the moment
    its loss is known); in a chained round the transfers after it are not sent, and if it came
    before the computation (``Round.compute_after``) nothing is computed: the slot lasts ``s`` +
    the transfers sent. Under failures the agent ``holder`` goes down at ``fails_at``: if that is
    before the round ends, every transfer not finished by then is lost (one not yet begun is not
    sent), and the slot ends ``timeout_s`` after the failure (the server's wait for an answer)."""
    delays, delivered, sent_bits = [], [], []
    retransmissions = 0
    lost: list[int] = []
    phase_of = round_.phase_of() if links.lossy and round_.chained else ()
    for index, transfer in enumerate(round_.transfers):
        if not links.lossy:
            delays.append(links.delay(transfer.sender, transfer.receiver, transfer.message.bits))
            delivered.append(True)
            sent_bits.append(transfer.message.bits)
            continue
        if lost and round_.chained and phase_of[index] > phase_of[lost[0]]:
            delivered.append(False)  # depends on a transfer lost for good: not sent
            continue
        outcome = links.transmit(transfer.sender, transfer.receiver, transfer.message, rng)  # type: ignore[arg-type]
        if outcome.lost:
            lost.append(len(delays))
        delays.append(outcome.delay)
        delivered.append(not outcome.lost)
        sent_bits.append(transfer.message.bits if outcome.bits is None else outcome.bits)
        retransmissions += outcome.attempts - 1
    # a chained round that lost a transfer before its computation computed nothing
    start = s if lost and round_.chained and lost[0] < round_.compute_after else s + compute
    # the phases sent: in a chained round that lost a transfer, up to the phase of the loss
    sizes = round_.phase_sizes
    if len(delays) < len(round_.transfers):
        sizes = sizes[: phase_of[len(delays) - 1] + 1] if delays else ()
    spent = round_seconds(delays, sizes)
    if lost or fails_at < start + spent:
        offsets, begins = _phase_starts(delays, sizes, start)
    if fails_at < start + spent:  # the agent went down before the round ended
        for i, delay in enumerate(delays):
            sent = round_.transfers[i]
            if begins[i] > fails_at and sent.sender == holder:  # the agent was down: not sent
                sent_bits[i] = 0.0
                delivered[i] = False
            elif begins[i] + delay > fails_at and delivered[i]:  # under way when the agent failed
                delivered[i] = False
                events.append(Event(slot, fails_at, "lost", sent.sender, sent.receiver))
        delivered[len(delays) :] = [False] * (len(delivered) - len(delays))
        for bits in sent_bits:  # in order, as the bits of every slot are added
            total_bits += bits
        protocol.on_round(slot, delivered)
        end = max(fails_at, s) + timeout_s
        events.append(Event(slot, end, "round", holder, -1, len(delivered), sum(delivered)))
        return end, total_bits, retransmissions
    for bits in sent_bits:
        total_bits += bits
    for index in lost:  # each loss when it is known
        sent = round_.transfers[index]
        known = start + (offsets[index] + delays[index])
        events.append(Event(slot, known, "lost", sent.sender, sent.receiver))
    protocol.on_round(slot, delivered)
    if delivered:  # a round without transfers (a centralised protocol's slot) is no event
        events.append(Event(slot, start + spent, "round", holder, -1, len(delivered),
                            sum(delivered)))  # fmt: skip
    return start + spent, total_bits, retransmissions


def _phase_starts(
    delays: Sequence[float], sizes: Sequence[int], start: float
) -> tuple[list[float], list[float]]:
    """When each transfer's phase begins, after the phases before it: from the round's start, and
    on the clock from ``start``, each added up in the order the time is spent."""
    offsets: list[float] = []
    begins: list[float] = []
    offset, begun, first = 0.0, start, 0
    for size in sizes:
        offsets.extend([offset] * size)
        begins.extend([begun] * size)
        slowest = max(delays[first : first + size])
        offset += slowest
        begun += slowest
        first += size
    return offsets, begins


def _timed_request(
    env: simpy.Environment, index: int, at_time: float, pending: list[tuple[int, float]]
) -> Generator[simpy.Event, None, None]:
    if at_time > 0:
        yield env.timeout(at_time)
    pending.append((index, at_time))
