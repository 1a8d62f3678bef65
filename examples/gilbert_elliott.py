"""A channel of one's own, plugged into gossipsim without editing it (docs/extending.md).

Gilbert–Elliott bursty loss: every link is a two-state Markov chain, good or bad, and each attempt
to send a message over it is lost with the probability of the link's state, ``loss_good`` or
``loss_bad``. The chain takes one step per attempt on its link: a good link is bad at its next
attempt with probability ``p_gb``, a bad one good with probability ``p_bg``. Losses therefore come
in bursts (a bad link tends to stay bad), unlike the independent losses of ``[links] loss``.

The state belongs to an undirected edge: the hops u → v and v → u share it (fading and
interference hit a link both ways), and the chain of an edge moves only when that edge carries an
attempt, not with simulated time. A run starts every edge afresh: drawn from the chain's
stationary law at the edge's first attempt (``start = "stationary"``: bad with probability π_bad =
p_gb / (p_gb + p_bg)), or in the state ``start`` names.

Messages are sent by stop-and-wait ARQ as over the built-in lossy links
(:mod:`gossipsim.network.arq`): every attempt carries the whole message, a lost one costs
``timeout_s`` from its start, a delivered one ``bits / rate_bps + latency_s``, and after
``max_retries`` failed retries the message is lost for good (the sender keeps the token). The
stationary share of lost attempts is::

    ρ = π_bad · loss_bad + π_good · loss_good

so over a long run a delivered hop takes ``1 / (1 − ρ)`` attempts on average and
``bits / rate_bps + latency_s + timeout_s · ρ / (1 − ρ)`` seconds, as a Bernoulli link of loss ρ,
but with a larger spread.

The draws come from the run's channel stream, read in blocks (:class:`~gossipsim.network.arq.Uniforms`):
one uniform for an edge's first state (stationary start), then two per attempt, the loss and the
chain's step. In a state the chain never leaves (``p_gb = 0`` in the good state, ``p_bg = 0`` in
the bad one) the losses are independent, and the failed attempts are drawn at once as the built-in
links draw them (one uniform, :func:`~gossipsim.network.arq.failed_attempts`): with ``p_gb = 0`` and
``start = "good"`` the tables are exactly those of ``[links] loss = loss_good``.

Run it from the repository's top folder (the module must be importable, here from ``examples/``)::

    PYTHONPATH=examples gossipsim run examples/gilbert_elliott.toml
"""

from __future__ import annotations

import copy
import math

import numpy as np

from gossipsim.core.schema import Key
from gossipsim.errors import ConfigError
from gossipsim.network.arq import DEFAULT_MAX_RETRIES, Link, Uniforms, failed_attempts
from gossipsim.network.channels import Channel, ChannelRequest, Delivery
from gossipsim.network.messages import Message

GOOD, BAD = 0, 1
#: the values of ``[links] start``
STARTS = ("stationary", "good", "bad")


def _probability(name: str, default: float | None, doc: str) -> Key:
    return Key(name, "number", default, doc, minimum=0.0, maximum=1.0, required=default is None)


class GilbertElliott(Channel):
    """``[links] kind = "gilbert_elliott:GilbertElliott"``: bursty loss by a good/bad Markov chain
    per undirected edge, stop-and-wait ARQ over it (see the module)."""

    lossy = True  # the engine asks transmit() for every hop, with the run's channel stream
    link_keys = (
        Key("rate_bps", "number", math.inf, "link rate in bit/s (inf: no limit)", minimum=0.0,
            exclusive_minimum=True, finite=False),
        Key("latency_s", "number", 0.0, "one-way link latency (s)", minimum=0.0),
        _probability("p_gb", None, "probability that a good link is bad at its next attempt"),
        _probability("p_bg", None, "probability that a bad link is good at its next attempt"),
        _probability("loss_good", 0.0, "probability that an attempt over a good link is lost"),
        _probability("loss_bad", 1.0, "probability that an attempt over a bad link is lost"),
        Key("timeout_s", "number", None, "seconds from the start of a lost attempt until it is "
            "sent again", minimum=0.0, exclusive_minimum=True, required=True),
        Key("max_retries", "integer", DEFAULT_MAX_RETRIES, "retries of a lost message before it "
            "is lost for good (the sender keeps the token)", minimum=0),
        Key("start", "choice", "stationary", "each edge's state at its first attempt of a run: "
            "drawn from the stationary law, or good, or bad", choices=STARTS),
    )  # fmt: skip

    def __init__(self, good: Link, bad: Link, p_gb: float, p_bg: float, start: str) -> None:
        self.states = (good, bad)  # one arq.Link per state: the same times, each its own loss
        self.leave = (p_gb, p_bg)  # the probability of leaving each state at an attempt
        self.start = start
        self.pi_bad = p_gb / (p_gb + p_bg) if p_gb + p_bg > 0 else math.nan
        self._edges: dict[tuple[int, int], int] = {}  # each edge's state in the current run
        self._uniforms = Uniforms(np.random.default_rng(0))  # replaced by for_run

    @classmethod
    def from_settings(cls, request: ChannelRequest) -> GilbertElliott:
        """Built from its ``[links]`` keys (the chain needs nothing of the graph: an edge's state
        is made at its first attempt)."""
        s = request.settings
        if s["start"] == "stationary" and s["p_gb"] + s["p_bg"] == 0:
            raise ConfigError(
                "links.start",
                "is stationary, but with p_gb = p_bg = 0 the chain never changes state and has no "
                'single stationary law: give start = "good" or "bad"',
            )
        times = (s["rate_bps"], s["latency_s"])
        return cls(
            Link(*times, s["loss_good"], s["timeout_s"], s["max_retries"]),
            Link(*times, s["loss_bad"], s["timeout_s"], s["max_retries"]),
            s["p_gb"],
            s["p_bg"],
            s["start"],
        )

    def stationary_loss(self) -> float:
        """ρ = π_bad · loss_bad + π_good · loss_good, the long-run share of lost attempts."""
        good, bad = self.states
        return self.pi_bad * bad.loss + (1.0 - self.pi_bad) * good.loss

    def for_run(self, rng: np.random.Generator | None) -> GilbertElliott:
        """A copy with no edge's state drawn yet, reading the run's channel stream."""
        fresh = copy.copy(self)
        fresh._edges = {}
        fresh._uniforms = Uniforms(rng if rng is not None else np.random.default_rng(0))
        return fresh

    def delay(self, sender: int, receiver: int, bits: float) -> float:
        return self.states[GOOD].delay(bits)  # a delivered attempt: the same in either state

    def transmit(
        self, sender: int, receiver: int, message: Message, rng: np.random.Generator
    ) -> Delivery:
        """One message by stop-and-wait ARQ: attempt after attempt, each lost with its edge's
        state's probability, the chain stepping after each; in a state it never leaves, the
        failed attempts from one uniform (the built-in links' draw). The uniforms come from the
        run's channel stream, the ``rng`` :meth:`for_run` was given (this one)."""
        uniforms = self._uniforms
        edge = (sender, receiver) if sender < receiver else (receiver, sender)
        state = self._edges.get(edge)
        if state is None:  # the edge's first attempt of the run
            state = self._first_state(uniforms)
        link, failed = self.states[state], 0
        while True:
            leave = self.leave[state]
            if leave == 0.0:  # independent losses from here on
                if link.loss == 1.0:
                    failed = link.max_retries + 1
                elif link.loss > 0.0:
                    failed += failed_attempts(uniforms.next(), link.loss)
                break
            lost = uniforms.next() < link.loss
            if uniforms.next() < leave:  # the chain's step after this attempt
                state = BAD - state
                link = self.states[state]
            if not lost:
                break
            failed += 1
            if failed > link.max_retries:
                break
        self._edges[edge] = state
        return link.outcome(failed, message.bits)  # arq's times and bits for `failed` failures

    def _first_state(self, uniforms: Uniforms) -> int:
        if self.start == "stationary":
            return BAD if uniforms.next() < self.pi_bad else GOOD
        return BAD if self.start == "bad" else GOOD

    def worst_seconds(self, bits: float) -> float:
        """Every retry's timeout then a delivered attempt (arq's bound, the lossier state's)."""
        return max(link.worst_seconds(bits) for link in self.states)

    def why_event_engine(self) -> str:
        return (
            "Gilbert–Elliott links run on the event engine: each attempt's loss depends on its "
            "link's state"
        )
