"""Protocol kinds: what ``[protocol] kind`` selects, each with its own settings and needs.

A :class:`ProtocolKind` owns

- its keys of the ``[protocol]`` section (:attr:`ProtocolKind.keys`, validated per kind with the
  usual one-line errors), read into a settings object by :meth:`ProtocolKind.settings`;
- the model capabilities it needs (:meth:`ProtocolKind.check_model`: e.g. exact conjugate factors,
  or expected log-likelihood gradients), so that a model never builds a protocol;
- how it builds the protocol of one run (:meth:`ProtocolKind.build`), including a fresh copy that
  learns without some nodes from a given slot (the retrain baseline, which the runner wraps around
  any protocol);
- whether it has a vectorised kernel for a given model (:meth:`ProtocolKind.kernel`): the fast path
  runs only what declares one.

Kinds are registered by name in :data:`PROTOCOL_KINDS` (one line: :func:`register_protocol`). A
protocol of one's own needs no edit to gossipsim: ``kind = "mypackage.module:MyKind"`` names a
:class:`ProtocolKind` subclass (or instance) by import path, which every worker process imports
again (process pools and Dask alike), so it holds wherever the runs execute.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from gossipsim.core.registry import PROTOCOL_KINDS
from gossipsim.core.schema import Key
from gossipsim.protocols.base import Protocol, StateTrace

if TYPE_CHECKING:
    from gossipsim.study.budget import SlotWork

#: keys of ``[protocol]`` that every kind has (read by the scenario, not by the kind)
COMMON_KEYS = ("kind", "retrain_baseline", "bits_per_entry", "architecture")


@dataclass(frozen=True)
class BuildRequest:
    """Everything a kind needs to build one protocol instance for one run.

    ``forgotten`` nodes are excluded from the start and the initial state is recorded at
    ``start_slot`` into ``trace`` (a fresh one when None): the retrain baseline restarts a kind this
    way at each request's slot."""

    model: Any
    data: Any
    rng: np.random.Generator
    settings: Any
    bits: float
    nodes: int
    forgotten: frozenset[int] = frozenset()
    trace: StateTrace | None = None
    start_slot: int = 0
    #: ``[metrics] record_every`` and ``[scenario] iterations``: a protocol whose states are large
    #: (particle sets) records them only at the slots written to metrics.csv
    record_every: int = 1
    iterations: int | None = None
    #: ``[protocol] bits_per_entry``: the bits of one number of a message
    bits_per_entry: int = 64
    #: 003's client selection the scheduler asks of the protocol
    #: (:class:`~gossipsim.protocols.selection.SelectionSettings`), or None
    selection: Any = None


@dataclass(frozen=True)
class BatchBuildRequest:
    """Everything a kind needs to build the protocols of a batch of runs for the vectorised engine's
    ``batched-steps`` kernel (:meth:`ProtocolKind.build_batch`): one data set for every run, one
    generator per run (row)."""

    model: Any
    data: Any
    rngs: tuple[np.random.Generator, ...]
    settings: Any
    nodes: int
    #: as in :class:`BuildRequest`: a protocol whose states are large records them only at the
    #: slots metrics.csv writes
    record_every: int = 1
    iterations: int | None = None


class ProtocolKind(ABC):
    """One ``[protocol] kind``: its keys, its needs, and how it builds a run's protocol."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: the kind's own keys of the ``[protocol]`` section
    keys: ClassVar[tuple[Key, ...]] = ()
    #: what its protocols record (:func:`gossipsim.states.representations.representation`)
    representation_name: ClassVar[str] = "natural-parameters"
    #: when a forgotten node's contribution leaves the state: at its next visit (the token's
    #: law gives the removal latency's expectation), at the request itself (removal latency 0),
    #: at the first slot after the request whoever is scheduled (``"next-slot"``: every client
    #: takes part in every slot, ``parallel-dsvgd``; removal latency 1), or ``"never"`` (no unlearning of its own, ``fedavg``: requests are served by the retrain
    #: baseline alone, which scenarios with requests must then keep)
    removes_at: ClassVar[str] = "next-visit"
    #: whether it learns at a centre holding every node's data, with no walk: the one upload of
    #: every node's data is charged in slot 1 and nothing afterwards, no cover time or visits are
    #: written (:mod:`gossipsim.protocols.centre`)
    centralised: ClassVar[bool] = False
    #: whether its protocols can take a slot back (:meth:`Protocol.checkpoint
    #: <gossipsim.protocols.base.Protocol.checkpoint>`, ``take_back``): what a parameter server on
    #: links that lose transfers needs (a scenario with such links and a kind without it is refused)
    takes_back: ClassVar[bool] = False
    #: the client-selection indicators of 003 its clients can compute and report for a scheduler
    #: that draws from them (``[scheduler] kind = "ksd"`` or ``"hip"``:
    #: :mod:`gossipsim.protocols.selection`); a protocol with none is refused with them
    selection_indicators: ClassVar[frozenset[str]] = frozenset()
    #: whether every slot's round is with every client at once (``parallel-dsvgd``): the
    #: scheduled agent is only a label, so what depends on it is refused when the scenario is
    #: read (compute times per node, ``[failures]``)
    every_client: ClassVar[bool] = False

    def settings(self, table: Mapping[str, Any], model: type) -> Any:
        """The validated settings of this kind for a model class, from the ``[protocol]`` table
        (common keys excluded). The default reads :attr:`keys` into a dict."""
        from gossipsim.core.schema import read_keys

        own = {k: v for k, v in table.items() if k not in COMMON_KEYS}
        return read_keys(self.keys, own, "protocol")

    @abstractmethod
    def check_model(self, model: type) -> None:
        """Raise :class:`~gossipsim.errors.ConfigError` (key ``protocol.kind``) when the model class
        lacks a capability this kind needs."""

    @abstractmethod
    def build(self, request: BuildRequest) -> Protocol:
        """The protocol of one run (see :class:`BuildRequest`)."""

    def kernel(self, model: Any) -> str | None:
        """The name of the vectorised kernel this kind declares for ``model``, or None (the fast
        path then never runs it: everything without a declaration runs on the event engine)."""
        return None

    def unbatched(self, settings: Any) -> str | None:
        """Why these ``settings`` keep the kind off the vectorised engine although :meth:`kernel`
        declares one for the model (None: they do not), e.g. ``dsvgd``'s compressed uploads."""
        return None

    def build_batch(self, request: BatchBuildRequest) -> Any:
        """The protocols of a batch of runs at once (one row per run), for a kind whose
        :meth:`kernel` is ``batched-steps``: an object with ``new_slot()``,
        ``start(rows, slot, forgotten)``, ``step(holders, slot, active)``,
        ``request(node, slot, rows)``, ``done()``, the state in force ``eta`` (B, ...) (what the
        run's trace would read after the slot: (B, D) natural parameters, (B, N, d) particle
        sets), ``recorded_now`` and ``removed_now`` (B,), ``removed`` and ``stats(row)``
        (:class:`~gossipsim.protocols.natgrad_batch.NaturalGradientBatch`,
        :mod:`~gossipsim.protocols.particle_batch`)."""
        raise NotImplementedError(f"protocol kind {self.name!r} declares no batched kernel")

    def idle_stays(self, model: Any) -> bool:
        """Whether, for ``model``, a slot whose holder also held the slot before changes nothing of
        the protocol's state unless a request arrives before it (a stay of the token at one node
        is one visit). The vectorised engine may then draw the length of each stay at once
        instead of stepping its slots (``[scheduler] stays = "drawn"``). False by default."""
        return False

    def state_entries(self, settings: Any, model: Any) -> int:
        """Numbers in one recorded state (the vectorised engine sizes its batches by it): the
        model's prior's by default."""
        return int(np.size(model.prior))

    def message_entries(self, settings: Any, sizes: Any) -> int:
        """Numbers one message carries for a model of ``sizes``
        (:class:`gossipsim.study.budget.ModelSizes`): the model's ``message_entries`` by default."""
        return int(sizes.message_entries)

    def slot_local_iterations(self, settings: Any) -> int:
        """Local iterations one slot computes with these ``settings`` (a visit's natural-gradient,
        SGD or SVGD steps): what ``[compute] seconds_per_local_iteration`` is charged for, once
        each. 1 by default: an exact update, or a protocol without local iterations."""
        return 1

    def slot_work(self, settings: Any) -> SlotWork | None:
        """What one slot computes per particle, for the time estimate of
        :func:`gossipsim.study.budget.run_seconds` (particle protocols); None: not estimated."""
        return None

    def without_recovery(self, settings: Any, model: type) -> str | None:
        """Why runs of this kind cannot recover a token lost to a failure (``[failures]``;
        :meth:`~gossipsim.engine.protocol_api.Protocol.on_holder_lost`), or None when they can.
        Not by default: a kind says it recovers by overriding this."""
        return f"protocol {self.name!r} does not recover a token lost to a failure"

    def stochastic(self, settings: Any, model: type) -> bool:
        """Whether its steps use Monte Carlo estimates (``[metrics] latency_window = "auto"``)."""
        return False

    def describe(self) -> str:
        return self.description


def register_protocol(kind: ProtocolKind) -> ProtocolKind:
    """Register ``kind`` under its name (the one line that adds a protocol kind)."""
    if not kind.name:
        raise ValueError("a protocol kind needs a name")
    PROTOCOL_KINDS.register(kind.name, kind)
    return kind


def protocol_kind(name: str, key: str = "protocol.kind") -> ProtocolKind:
    """The kind called ``name``: a registered name, or an import path ``module:attribute`` naming
    a :class:`ProtocolKind` subclass or instance."""
    found: ProtocolKind = PROTOCOL_KINDS.lookup(name, key)
    return found
