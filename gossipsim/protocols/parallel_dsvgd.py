"""Parallel DSVGD (``[protocol] kind = "parallel-dsvgd"``, paper 003, Section IV-E): every client
updates from the same global particles in every slot and the parameter server combines them.

Each slot is one synchronous iteration with every client that takes part (not forgotten): the
server broadcasts the global particles θ (N × d numbers) to each (one phase, all at once), each
computes (the slot's computation, at the phase boundary: ``compute_after``), each uploads N × d
numbers (the second phase, all at once); the round is chained (an upload is sent only if the
downloads arrived). With K clients taking part a slot sends

    K × (N·d·b) + K × (N·d·b) bits        (b = ``[protocol] bits_per_entry``)

and lasts compute + the slowest download + the slowest upload. The scheduler's agent of the slot
is only a label (every client works); the slot is charged one computation, the clients running in
parallel (compute times per node are refused: the engine charges the scheduled agent's). The
server's own arithmetic costs no simulated time, as with :class:`~.server.ServerRounds`.

**Sound variant** (the default): client k uploads its likelihood score g_k at θ; the server takes
one SVGD step towards ∇log p0 + Σ_k g_k (:func:`~gossipsim.particles.parallel.parallel_sound_step`,
``local_iterations`` is 1). A request of client k removes it at the next slot: its g_k is no longer
asked for nor added (exact: no factor of k remains anywhere), AdaGrad's history restarted as
DSVGD's Forget-SVGD does.

**Paper variant**: client k runs DSVGD's visit from θ (:func:`~gossipsim.particles.dsvgd.paper_visit`:
L steps towards q / t_k · l_k, L' steps refitting its local particles t_k, which it keeps) and
uploads its new global particles q_k; the server combines q_new ∝ q · Π_k (q_k / q)
(:func:`~gossipsim.particles.parallel.combine_paper`). Paper 003 says the clients upload their local
particles t_k: the same N × d numbers; q_k is uploaded here because the product needs it, and so
that one client's slot is DSVGD's visit exactly (with t_k the server would combine
q · Π (t̂_k^new / t̂_k^old), adding eq. 14's fitting error). A request of client k: at the next slot
it runs Forget-SVGD (:func:`~gossipsim.particles.dsvgd.paper_forget`) from θ and uploads that, the
server combines it with the others' updates, and k takes no part afterwards.

With one client (the others forgotten before they contributed) a slot is exactly DSVGD's slot with
that client as the agent: the same particles bit for bit (the sound variant without mini-batches:
DSVGD draws a second mini-batch after each step to refresh g_k, which this protocol never needs).

A client whose request arrives before slot 1 has contributed nothing: its removal slot is the slot
before the request, as for DSVGD. Lossy server links: a slot whose round loses any transfer is
taken back whole (:meth:`checkpoint`, :meth:`take_back`): the server waits for every client.
"""

from __future__ import annotations

from typing import Any

from gossipsim.network.messages import SERVER, Message, Round, Transfer
from gossipsim.particles.dsvgd import paper_forget, paper_visit
from gossipsim.particles.parallel import combine_paper, parallel_sound_step
from gossipsim.protocols.particle_base import FloatArray, ParticleProtocol
from gossipsim.protocols.registry import BuildRequest


def parallel_round(clients: tuple[int, ...], download: Message, upload: Message) -> Round:
    """The slot's round with ``clients``: the ``download`` to each at once, their computation,
    then each one's ``upload`` at once; chained (no upload if a download is lost). No client:
    an empty round (the slot costs its compute time only)."""
    if not clients:
        return Round(())
    down = tuple(Transfer(SERVER, k, download) for k in clients)
    up = tuple(Transfer(k, SERVER, upload) for k in clients)
    count = len(clients)
    return Round(down + up, chained=True, compute_after=count, phases=(count, count))


class ParallelDistributedSVGD(ParticleProtocol):
    """Parallel DSVGD with the parameter server (see the module docstring)."""

    def __init__(self, request: BuildRequest) -> None:
        super().__init__(request)
        s = self.settings
        self.sound = s.variant == "sound"
        self.history: FloatArray | None = None  # sound: AdaGrad's cumulative history
        self.local: dict[int, FloatArray] = {}  # paper: each client's local particles t_k
        self.paper_settings = s.paper(float(self.model.temperature))
        self.start = self.particles.copy()  # the paper's local particles start here
        self.pending: set[int] = set()
        self.visited: set[int] = set()  # clients that have contributed
        self._rounds: dict[tuple[int, ...], Round] = {}

    def on_token(self, holder: int, slot: int) -> Round:
        """A slot with every client taking part (``holder``, the scheduled agent, is a label)."""
        removed = sorted(self.pending)
        for node in removed:
            self.forgotten.add(node)
            self._removals[node] = slot
        self.pending.clear()
        learners = tuple(k for k in range(self.nodes) if k not in self.forgotten)
        if self.sound:
            if removed:
                self.history = None  # the target changed: the steps regain their size
            clients = learners
            self._sound_step(clients)
        else:
            clients = tuple(sorted((*learners, *removed)))
            self._paper_step(clients, frozenset(removed))
        self.visited.update(clients)
        self.record(slot, force=bool(removed))
        found = self._rounds.get(clients)
        if found is None:
            found = self._rounds[clients] = parallel_round(clients, self.message, self.message)
        return found

    def _sound_step(self, clients: tuple[int, ...]) -> None:
        s = self.settings
        theta = self.particles
        scores = [self.likelihood_score(k)(theta) for k in clients]
        self.particles, self.history = parallel_sound_step(
            theta, self.history, self.prior_score, scores, s.sound_adagrad, rule=s.rule,
            bandwidth=s.fixed_bandwidth,
        )  # fmt: skip

    def _paper_step(self, clients: tuple[int, ...], removed: frozenset[int]) -> None:
        theta, settings = self.particles, self.paper_settings
        moved = []
        for k in clients:
            local = self.local.pop(k, self.start) if k in removed else self.local.get(k, self.start)
            if k in removed:  # Forget-SVGD (eq. 8 of 000); k keeps no local particles
                moved.append(paper_forget(theta, local, self.likelihood_score(k), settings))
            else:
                q_k, self.local[k] = paper_visit(theta, local, self.likelihood_score(k), settings)
                moved.append(q_k)
        self.particles = combine_paper(theta, moved, settings)

    def on_request(self, node: int, slot: int) -> None:
        self.note_request(node, slot, self.visited, self.pending)

    def checkpoint(self, holder: int) -> tuple[Any, ...]:
        """Everything a slot changes: the particles, AdaGrad's history, every client's local
        particles, the requests to serve, forgotten and contributing clients, removals, and the
        trace's length."""
        return (
            self.particles, self.history, dict(self.local), set(self.pending),
            set(self.forgotten), set(self.visited), dict(self._removals), len(self.trace),
        )  # fmt: skip

    def take_back(self, saved: tuple[Any, ...], slot: int) -> None:
        """The slot never happened (a transfer of its round was lost): the server and every client
        as before it, a removal it made still to come; its random draws stay spent."""
        particles, history, local, pending, forgotten, visited, removals, length = saved
        self.particles, self.history, self.local = particles, history, dict(local)
        self.pending, self.forgotten, self.visited = set(pending), set(forgotten), set(visited)
        self._removals = dict(removals)
        self.rewind(length, slot)

    def stats(self) -> dict[str, float]:
        return {"forget_pending": float(len(self.pending))}
