"""Channels: what a transmission between two nodes costs, or whether it is lost.

The engine asks the channel of every hop (and of every transfer of a server round) for a
:class:`Delivery`: the seconds until the message arrives, or, for a lost message, until the loss is
known (a timeout), with ``lost`` set. :class:`~gossipsim.network.links.LinkModel` (homogeneous
links: rate and latency, never lost) is the default channel; per-edge rates, losses and ARQ are
further :class:`Channel` subclasses (lossy and per-edge links: :mod:`gossipsim.network.arq`). A
channel that never loses anything says so (``lossy = False``) and gives its delay as a plain
number, which keeps the engine's per-hop work small. The fast path runs a channel only if it
declares a kernel (``kernel``).

A channel of one's own is a :class:`Channel` subclass named by import path in the scenario,
``[links] kind = "module:Class"`` (:func:`channel_class`; worker processes and Dask workers import
it again by that path when they build the variant). It states the ``[links]`` keys it reads
(:attr:`Channel.link_keys`, checked like every key when the scenario is read) and is built from
them once per variant by :meth:`Channel.from_settings`, which receives a :class:`ChannelRequest`:
the keys' values, the graph, the architecture and a seed for values drawn once per variant. Each
run then uses :meth:`Channel.for_run` of it (the channel itself, or a fresh copy for a channel
whose state evolves over a run), and a lossy one draws from the run's channel stream. The
simulated-time bound asks it for :meth:`Channel.worst_seconds`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np

from gossipsim.errors import ConfigError
from gossipsim.network.messages import Message

if TYPE_CHECKING:
    import networkx as nx

    from gossipsim.core.schema import Key
    from gossipsim.scheduling import IndexedGraph

#: the setting that names a channel of one's own
KIND_KEY = "links.kind"


class Delivery(NamedTuple):
    """The outcome of one transmission: its ``delay`` in seconds (until it arrived, or until its
    loss is known), whether it was ``lost``, the ``bits`` actually sent (every attempt's: None, the
    message's bits once) and the number of ``attempts`` (1 + the retransmissions of an ARQ
    channel). A named tuple: made once per hop of a lossy channel, where a frozen dataclass's
    construction cost a third of the hop."""

    delay: float
    lost: bool = False
    bits: float | None = None
    attempts: int = 1


@dataclass(frozen=True)
class ChannelRequest:
    """What :meth:`Channel.from_settings` builds a channel of one's own from, once per variant (and
    once per run with ``[topology] draw = "per-run"``, on the run's graph).

    ``settings``: the values of the channel's :attr:`~Channel.link_keys` read from ``[links]``
    (defaults filled in), by key name. ``graph``: the variant's indexed graph (node indices
    0..K-1, ``graph.edges()``, ``graph.labels``). ``architecture``: ``"walk"`` (hops between
    neighbours) or ``"server"`` (transfers between :data:`~gossipsim.network.messages.SERVER` and
    the agents; also a centralised protocol's upload). ``seed``: a seed for values a channel draws
    once per variant (per-edge parameters), ``SeedSequence([scenario.seed, LINKS_TAG])``, the same
    in every process. ``networkx``: the NetworkX graph when the topology built one (a graph file,
    a graph given from Python: its edge attributes), else None."""

    settings: Mapping[str, Any]
    graph: IndexedGraph
    architecture: str
    seed: np.random.SeedSequence
    networkx: nx.Graph | None = None


class Channel(ABC):
    """The links of a run."""

    #: whether a transmission can be lost (then the engine calls :meth:`transmit`)
    lossy: ClassVar[bool] = False
    #: the fast path's kernel for this channel, or None (never vectorised)
    kernel: ClassVar[str | None] = None
    #: a channel named by ``[links] kind``: the other ``[links]`` keys it reads (type, default,
    #: range and doc line of each), checked when the scenario is read; any other key is refused
    link_keys: ClassVar[tuple[Key, ...]] = ()

    @classmethod
    def from_settings(cls, request: ChannelRequest) -> Channel:
        """A channel named by ``[links] kind``, built from its keys' values (``request.settings``)
        and, where it needs them, the graph and the seed of :class:`ChannelRequest`. By default
        ``cls(**request.settings)``: the keys are the constructor's keyword arguments. Errors in
        the values are :class:`~gossipsim.errors.ConfigError` naming ``links.<key>``."""
        try:
            return cls(**request.settings)
        except TypeError as exc:  # a constructor that does not take the keys it declares
            raise ConfigError(
                KIND_KEY,
                f"{cls.__module__}:{cls.__qualname__} cannot be built from its keys "
                f"({', '.join(request.settings) or 'none'}): {exc}; define from_settings",
            ) from None

    def for_run(self, rng: np.random.Generator | None) -> Channel:
        """The channel one run uses, given the run's channel stream (None for a channel that is
        not lossy): the channel itself by default. A channel whose state evolves over a run (a
        Markov chain per link) returns a fresh copy, so that every run starts alike whatever
        ran before it in the same process (runs of a worker share the variant's channel)."""
        return self

    def worst_seconds(self, bits: float) -> float | None:
        """The longest one transmission of ``bits`` can take between any two nodes, every
        attempt, timeout and wait included, for the simulated-time bound
        (:func:`~gossipsim.network.links.check_horizon`); None (the default) when no bound is
        known: then neither the clock's overflow nor requests after a run's end are refused in
        advance (the engine still stops a run whose clock overflows, in one line naming
        ``links``)."""
        return None

    @abstractmethod
    def delay(self, sender: int, receiver: int, bits: float) -> float:
        """Seconds for a delivered transmission of ``bits`` from ``sender`` to ``receiver``."""

    def transmit(
        self, sender: int, receiver: int, message: Message, rng: np.random.Generator
    ) -> Delivery:
        """One transmission of ``message``; lossless by default."""
        return Delivery(self.delay(sender, receiver, message.bits))

    @property
    def takes_no_time(self) -> bool:
        """Whether every transmission is instantaneous (then a slot's start cannot depend on the
        walk); False unless a channel knows better."""
        return False

    def why_event_engine(self) -> str:
        """Why the vectorised engine cannot run this channel (it declares no kernel it has), in
        words for ``engine = "auto"``."""
        return f"the channel {type(self).__name__} declares no vectorised kernel"


def channel_class(path: str, key: str = KIND_KEY) -> type[Channel]:
    """The :class:`Channel` subclass at import path ``module:Class`` (``[links] kind``); a one-line
    :class:`~gossipsim.errors.ConfigError` naming ``key`` when it cannot be imported, is not a
    Channel subclass, or lacks a method a channel must define."""
    from gossipsim.core.contracts import check_complete
    from gossipsim.core.registry import import_object

    allowed = (
        "an import path module:Class to a gossipsim Channel subclass (without kind: the built-in "
        "links of rate_bps, latency_s, loss, ...)"
    )
    if not isinstance(path, str) or ":" not in path:
        raise ConfigError(key, f"{path!r} is not an import path; allowed: {allowed}")
    cls = import_object(path, key)
    if not (isinstance(cls, type) and issubclass(cls, Channel)):
        raise ConfigError(key, f"{path!r} is not a gossipsim Channel subclass; allowed: {allowed}")
    check_complete(cls, key, "channel", path)
    return cls
