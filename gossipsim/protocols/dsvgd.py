"""Distributed SVGD with Forget-SVGD (``[protocol] kind = "dsvgd"``), in two variants.

``variant = "sound"`` (the default; :mod:`gossipsim.particles.aggregated`): the token carries the
global particles, the aggregate S of every node's last likelihood score at the particles and
AdaGrad's cumulative history; node k keeps its last score g_k. A visit takes ``local_iterations`` SVGD steps
(1 by default) towards the prior, the others' scores S − g_k and its own fresh score, then replaces
g_k. Forget-SVGD: at the forgotten node's next visit S loses g_k (its data leave the score the
particles move towards: the removal slot) and the step is taken without it; later visits move the
particles to the posterior without its data. A forgotten node's later visits step on the others'
scores.

``variant = "paper"`` (:mod:`gossipsim.particles.dsvgd`): each node keeps N local particles whose
KDE is t_k, starting as the prior-sampled global particles (as the reference code does); a visit
runs L SVGD steps towards q / t_k · exp((1/α)·Σ log p(x | θ)) (eq. 7 of 000) and L' steps fitting
t_k (eq. 14 of 003); Forget-SVGD runs L steps towards q / t_k · exp(−(β/α)·Σ log p(x | θ)) (eq. 8)
at the node's next visit (the removal slot), after which its visits pass the token on unchanged.

A node whose request arrives before its first visit has contributed nothing: its removal slot is
the slot before the request (nothing to remove).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gossipsim.network.messages import Message, Round
from gossipsim.particles.aggregated import AggregateState, aggregated_visit, forget, start_state
from gossipsim.particles.dsvgd import kde_score, paper_forget, paper_visit
from gossipsim.protocols.compressed import QuantizedState, Uploader
from gossipsim.protocols.particle_base import FloatArray, ParticleProtocol
from gossipsim.protocols.registry import BuildRequest
from gossipsim.protocols.selection import ClientSelection, WalkSelection
from gossipsim.protocols.server import server_round
from gossipsim.scheduling.base import NodeView


class DistributedSVGD(ParticleProtocol):
    """DSVGD on whatever schedule the engine runs (the token walk or the server's)."""

    def __init__(self, request: BuildRequest) -> None:
        super().__init__(request)
        s = self.settings
        self.sound = s.variant == "sound"
        self.state: AggregateState = start_state(self.particles)
        self.own: dict[int, FloatArray] = {}  # sound: each node's last score g_k
        self.local: dict[int, FloatArray] = {}  # paper: each node's local particles
        self.paper_settings = s.paper(float(self.model.temperature))
        self.start = self.particles.copy()  # the paper's local particles start here
        # what a scheduler may read (NodeView.scores): the root mean square of each node's last
        # likelihood score at the particles (the sound variant's g_k; the paper variant's at its
        # visit's last SVGD step; 0 before its first visit and once forgotten), changed in place
        self.scores = np.zeros(self.nodes)
        self.view = NodeView(scores=self.scores)
        self.pending: set[int] = set()
        self.visited: set[int] = set()
        # compressed updates (protocols.compressed): the server's uploads (both variants) and
        # download (paper variant), or the walk's quantized token (paper variant)
        self.uploader: Uploader | None = None
        self.token: QuantizedState | None = None
        self.downlink: QuantizedState | None = s.downlink_compression
        self.histories: dict[int, FloatArray | None] = {}  # sound, compressed: each agent's own
        compression = s.compression
        if compression is not None and compression.architecture == "server":
            particles, d = self.particles.shape
            share = 0.5 if self.sound else 1.0  # the sound variant uploads two arrays
            self.uploader = Uploader(compression, particles, d, self.rng, share)
        elif compression is not None:
            self.token = QuantizedState(compression.entry_bits, compression.a_max)
            self.message = Message(float(self.particles.size * compression.entry_bits))
        # 003's client selection (protocols.selection): with the server, every client's
        # indicators of the next slot's draw; on the walk, each node's own, refreshed when it holds
        # the token; published in the view the scheduler reads
        self.selection: ClientSelection | None = None
        self.walk_selection: WalkSelection | None = None
        chosen = request.selection
        fixed = None  # the indicators' kernel bandwidth: the scheduler's, else the SVGD steps'
        if chosen is not None:
            fixed = chosen.bandwidth if chosen.bandwidth is not None else s.fixed_bandwidth
        if chosen is not None and chosen.degrees is None:
            self.selection = ClientSelection(
                chosen, self.nodes, request.bits_per_entry, s.rule, fixed
            )
            self.view.weights = self.selection.weights
            self._refresh_selection()
        elif chosen is not None:
            self.walk_selection = WalkSelection(chosen, request.bits_per_entry, s.rule, fixed)
            self.view.weights = self.walk_selection.weights
            self.walk_selection.start(np.array([
                0.0 if k in self.forgotten else self._walk_indicator(k) for k in range(self.nodes)
            ]))  # fmt: skip

    def _indicator_base(self, particles: FloatArray) -> FloatArray | None:
        """What every client's indicator score shares at ``particles`` (:mod:`~.selection`):
        nothing for ``hip`` (a likelihood's score); for ``ksd`` the sound variant's prior and the
        scores' aggregate S, or the paper variant's global KDE score."""
        chosen = self.selection or self.walk_selection
        assert chosen is not None
        if chosen.settings.indicator == "hip":
            return None
        if self.sound:
            return np.asarray(self.state.aggregate + self.prior_score(particles))
        return np.asarray(kde_score(self.paper_settings, particles)(particles))

    def _indicator_scores(
        self, k: int, particles: FloatArray, base: FloatArray | None
    ) -> FloatArray:
        """Client k's score at ``particles`` for its indicator: its likelihood's (``hip``: no
        ``base``) or its tilted distribution's (``ksd``: the sound variant's prior, the others'
        aggregate S − g_k and its fresh score; the paper variant's KDE ratio q̂ / t̂_k and its
        score), ``base`` from :meth:`_indicator_base`."""
        fresh = np.asarray(self.likelihood_score(k)(particles))
        if base is None:
            return fresh
        if self.sound:
            own = self.own.get(k)
            return base - own + fresh if own is not None else base + fresh
        local = self.local.get(k, self.start)
        return base - kde_score(self.paper_settings, local)(particles) + fresh

    def _refresh_selection(self) -> None:
        """Every client's indicator at the current particles (:class:`~.selection.ClientSelection`)."""
        assert self.selection is not None
        particles = self.particles
        base = self._indicator_base(particles)

        def scores(k: int) -> FloatArray:
            return self._indicator_scores(k, particles, base)

        taking_part = np.ones(self.nodes, dtype=bool)
        taking_part[list(self.forgotten)] = False
        self.selection.refresh(particles, scores, taking_part, self.pending)

    def _walk_indicator(self, k: int) -> float:
        """Node k's own indicator at the particles it holds (:class:`~.selection.WalkSelection`):
        for ``hip`` against the average the token knows, (S − g_k + its fresh score) / K."""
        assert self.walk_selection is not None
        particles = self.particles
        scores = self._indicator_scores(k, particles, self._indicator_base(particles))
        average = None
        if self.walk_selection.settings.indicator == "hip":
            own = self.own.get(k)
            total = self.state.aggregate + scores - (own if own is not None else 0.0)
            average = total / max(self.nodes - len(self.forgotten), 1)
        return self.walk_selection.indicator(particles, scores, average)

    def on_token(self, holder: int, slot: int) -> Message | Round:
        if self.walk_selection is not None:
            message = self._visit(holder, slot)
            assert isinstance(message, Message)  # the walk's uncompressed token
            value = 0.0 if holder in self.forgotten else self._walk_indicator(holder)
            return self.walk_selection.shared(holder, slot, value, message)
        if self.selection is not None:
            self._visit(holder, slot)
            # the server's state: N d numbers (3 N d for the sound variant)
            state = self.message.bits
            needed = self.particles.size  # the indicator's: the particles (and S for sound KSD)
            if self.sound and self.selection.settings.indicator == "ksd":
                needed *= 2
            broadcast = self.selection.entry_bits * needed
            round_ = self.selection.round(
                holder, broadcast, state - broadcast, state, self.particles.size
            )
            if slot != self.last:
                self._refresh_selection()
            return round_
        return self._visit(holder, slot)

    def _visit(self, holder: int, slot: int) -> Message | Round:
        if self.uploader is not None and self.sound:
            return self._compressed_sound_visit(holder, slot)
        if self.uploader is not None or self.downlink is not None:
            return self._compressed_visit(holder, slot)
        if holder in self.pending:
            self._forget(holder, slot)
        elif self.sound:
            self._sound_visit(holder, holder not in self.forgotten)
        elif holder not in self.forgotten:
            self._paper_visit(holder)
        if self.token is not None:  # the walk's quantized token: what the next holder receives
            self.particles, _ = self.token.send(self.particles, self.rng)
        self.visited.add(holder)
        self.record(slot, force=holder in self._removals and self._removals[holder] == slot)
        return self.message

    def _compressed_visit(self, holder: int, slot: int) -> Round:
        """The paper variant's visit with the server, its download quantized
        (``downlink_compression``) and/or its upload compressed (``compression``): the agent's
        update relative to what it received, decoded and added to the server's particles
        (:mod:`~.compressed`)."""
        held = self.particles.copy()
        down_bits = self.message.bits
        if self.downlink is not None:
            self.particles, down_bits = self.downlink.send(held, self.rng)
        received = self.particles.copy()
        working = holder in self.pending or holder not in self.forgotten
        if holder in self.pending:
            self._forget(holder, slot)
        elif working:
            self._paper_visit(holder)
        up_bits = 0.0
        sent = np.zeros_like(held)
        if working:
            sent, up_bits = self.particles - received, self.message.bits
            if self.uploader is not None:
                sent, up_bits = self.uploader.upload(holder, sent)
        self.particles = held + sent
        self.visited.add(holder)
        self.record(slot, force=holder in self._removals and self._removals[holder] == slot)
        return server_round(holder, Message(down_bits), Message(up_bits))

    def _compressed_sound_visit(self, holder: int, slot: int) -> Round:
        """The sound variant's visit with the server and compressed uploads: the particles'
        update and the change of the agent's score contribution, each compressed in half the
        budget; the server adds both and keeps each agent's decoded contribution, which a
        removal subtracts exactly; each agent keeps its own AdaGrad history
        (:mod:`~.compressed`)."""
        assert self.uploader is not None
        held = self.state
        if holder in self.pending:  # the removal slot: the server drops ĝ_k it holds
            self.pending.discard(holder)
            self.forgotten.add(holder)
            self._removals[holder] = slot
            held = forget(held, self.own.pop(holder))
            self.histories.clear()  # the target changed: every agent's steps regain their size
        learns = holder not in self.forgotten
        own = self.own.get(holder, np.zeros_like(held.particles))
        local, mine = (
            AggregateState(held.particles, held.aggregate, self.histories.get(holder)),
            own,
        )
        score = self.likelihood_score(holder) if learns else None
        s = self.settings
        for _ in range(s.local_iterations):
            local, mine = aggregated_visit(
                local, mine, self.prior_score, score, s.sound_adagrad, rule=s.rule,
                bandwidth=s.fixed_bandwidth,
            )  # fmt: skip
        moved, bits = self.uploader.upload((holder, "particles"), local.particles - held.particles)
        # the agent's history grows where its steps reached the server: at the entries sent
        before = self.histories.get(holder)
        grown = local.history
        if before is not None and grown is not None:
            grown = np.where(self.uploader.kept, grown, before)
        elif grown is not None:
            grown = np.where(self.uploader.kept, grown, 0.0)
        self.histories[holder] = grown
        aggregate = held.aggregate
        if learns:
            # no error feedback: the difference to ĝ_k carries what earlier uploads left out
            change, score_bits = self.uploader.upload((holder, "scores"), mine - own, False)
            bits += score_bits
            self.own[holder] = own + change
            aggregate = aggregate + change
        self.state = AggregateState(held.particles + moved, aggregate, None)
        self.particles = self.state.particles
        self.scores[holder] = (
            float(np.sqrt(np.mean(np.square(self.own[holder])))) if learns else 0.0
        )
        self.visited.add(holder)
        self.record(slot, force=self._removals.get(holder) == slot)
        return server_round(holder, self.message, Message(bits))

    def _sound_visit(self, holder: int, learns: bool) -> None:
        s = self.settings
        own = self.own.get(holder, np.zeros_like(self.particles))
        score = self.likelihood_score(holder) if learns else None
        for _ in range(s.local_iterations):
            self.state, own = aggregated_visit(
                self.state, own, self.prior_score, score, s.sound_adagrad, rule=s.rule,
                bandwidth=s.fixed_bandwidth,
            )  # fmt: skip
        if learns:
            self.own[holder] = own
        self.scores[holder] = float(np.sqrt(np.mean(np.square(own)))) if learns else 0.0
        self.particles = self.state.particles

    def _paper_visit(self, holder: int) -> None:
        local = self.local.get(holder, self.start)
        score = self.likelihood_score(holder)
        last: list[FloatArray] = []

        def kept(theta: FloatArray) -> FloatArray:  # the visit's last score, for the view
            value = np.asarray(score(theta))
            last[:] = [value]
            return value

        self.particles, self.local[holder] = paper_visit(
            self.particles, local, kept, self.paper_settings
        )
        # the node's score RMS at the last step's particles (the sound variant's is at its g_k)
        self.scores[holder] = float(np.sqrt(np.mean(np.square(last[0])))) if last else 0.0

    def _forget(self, holder: int, slot: int) -> None:
        self.pending.discard(holder)
        self.forgotten.add(holder)
        self._removals[holder] = slot
        if self.sound:
            own = self.own.pop(holder)
            self.state = forget(self.state, own)
            self._sound_visit(holder, learns=False)
        else:
            local = self.local.pop(holder)
            self.particles = paper_forget(
                self.particles, local, self.likelihood_score(holder), self.paper_settings
            )
            self.scores[holder] = 0.0

    def checkpoint(self, holder: int) -> tuple[Any, ...]:
        """The global state, the holder's own (its score g_k and the server's copy ĝ_k, or its
        local particles; its AdaGrad history), its score for a scheduler, whether it was to be
        forgotten, visited or removed, every agent's history (a removal restarts them all) and
        error-feedback residual, and the trace's length: all that a visit changes."""
        residual = dict(self.uploader.residual) if self.uploader is not None else None
        return (
            holder, self.particles, self.state, self.own.get(holder), self.local.get(holder),
            float(self.scores[holder]), holder in self.pending, holder in self.visited,
            self._removals.get(holder), dict(self.histories), residual, len(self.trace),
        )  # fmt: skip

    def take_back(self, saved: tuple[Any, ...], slot: int) -> None:
        """The visit never happened: the particles (and the aggregate S and AdaGrad's history the
        server holds) as before, and the agent's own state with them: g_k (= ĝ_k, the copy the
        server holds, with compression) or its local particles t_k, its history and residual, so
        that S = Σ_k g_k still holds at both ends; a removal it made is still to come."""
        (holder, particles, state, own, local, score, pending, visited, removal, histories,
         residual, length) = saved  # fmt: skip
        self.particles, self.state = particles, state
        for kept, value in ((self.own, own), (self.local, local)):
            if value is None:
                kept.pop(holder, None)
            else:
                kept[holder] = value
        self.scores[holder] = score
        if pending:
            self.pending.add(holder)
            self.forgotten.discard(holder)
        if not visited:
            self.visited.discard(holder)
        if removal is None:
            self._removals.pop(holder, None)
        else:
            self._removals[holder] = removal
        self.histories = histories
        if self.uploader is not None:
            self.uploader.residual = residual
        self.rewind(length, slot)

    def on_request(self, node: int, slot: int) -> None:
        if node in self.forgotten or node in self.pending:
            return
        self.note_request(node, slot, self.visited, self.pending)
        if self.walk_selection is not None:  # the node tells its neighbours at once
            self.walk_selection.requested(node, node in self.pending)

    # ------------------------------------------------------------------ failures (engine.token)

    @property
    def recovers_token(self) -> bool:  # type: ignore[override]
        """The walk's uncompressed token (the server's rounds and compressed tokens: not yet)."""
        return self.uploader is None and self.downlink is None and self.token is None

    def hand_over(self, slot: int, holder: int) -> None:
        """The custodian's copy of the token (particles, aggregate, AdaGrad's history) and what
        ``holder`` keeps about its contribution (its score g_k or local particles t_k, its flags)."""
        h = holder
        self._kept = (
            h, self.state, self.particles, self.own.get(h), self.local.get(h), self.scores[h],
            h in self.visited, h in self.pending, h in self.forgotten, self._removals.get(h),
        )  # fmt: skip

    def on_holder_lost(self, holder: int, slot: int) -> None:
        """The token goes back to the custodian's copy; the holder's contribution goes back to
        what the copy holds of it (g_k in S, or the t_k its last visit fitted), as the regenerated
        token tells it at its next visit. A request that arrived meanwhile still stands: the node
        is forgotten at its next visit if the copy holds its data."""
        h, state, particles, own, local, score, visited, pending, forgotten, removal = self._kept
        assert h == holder, "only the holder's slots change the token between hand-overs"
        requested = h in self.pending or h in self.forgotten
        self.state, self.particles = state, particles
        for keep, value in ((self.own, own), (self.local, local)):
            if value is None:
                keep.pop(h, None)
            else:
                keep[h] = value
        self.scores[h] = score
        for flags, flag in ((self.visited, visited), (self.pending, pending),
                            (self.forgotten, forgotten)):  # fmt: skip
            if flag:
                flags.add(h)
            else:
                flags.discard(h)
        if removal is None:
            self._removals.pop(h, None)
        else:
            self._removals[h] = removal
        if requested and not (pending or forgotten):  # its request arrived during the lost slots
            if visited:
                self.pending.add(h)
            else:
                self.forgotten.add(h)
                self._removals[h] = slot
        self.record(slot, force=True)

    def serve_for(self, holder: int, node: int, slot: int) -> bool:
        """Sound variant: a delegate holding a copy of the down node's score g_k subtracts it from
        S (the removal slot); the particles move without the node's data at the next visits, as
        after the node's own removal. The paper variant's removal (Forget-SVGD's steps on the
        node's data and local particles) waits for the node itself."""
        if not (self.sound and node in self.pending and self.uploader is None):
            return False
        self.pending.discard(node)
        self.forgotten.add(node)
        self._removals[node] = slot
        self.state = forget(self.state, self.own.pop(node))
        self.scores[node] = 0.0
        return True

    def stats(self) -> dict[str, float]:
        out = {"forget_pending": float(len(self.pending))}
        chosen = self.selection or self.walk_selection
        if chosen is not None:
            out["selection_fallbacks"] = float(chosen.fallbacks)
        return out

    def series(self) -> dict[str, FloatArray]:
        """With client selection, per slot: the entropy of the distribution that selected the
        slot's client and the cumulative indicator bits (:mod:`~.selection`)."""
        chosen = self.selection or self.walk_selection
        return chosen.series() if chosen is not None else {}

    def node_view(self) -> NodeView:
        """The nodes' scores (:attr:`scores`), live, for a scheduler of one's own to read."""
        return self.view
