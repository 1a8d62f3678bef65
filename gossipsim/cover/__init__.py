"""Cover times and unlearning latencies of the token walk: exact values, bounds and Monte Carlo.

Time is counted in slots ``i = 1, 2, ...``; slot 1 is the first holder. A move to a neighbour and a
Metropolis-Hastings rejection (the holder keeps the token) both take one slot, and "moves" are slot
transitions, so the cover *iteration* (first slot at which every node has held the token) is the
cover *moves* plus one.

Cover time (moves)
    ``C = min{t : {X_0, ..., X_t} = V}`` for the walk ``X`` of :mod:`gossipsim.scheduling`
    (Lovász 1993, "Random walks on graphs: a survey", §2; Aldous & Fill, "Reversible Markov chains
    and random walks on graphs", ch. 6). The start ``X_0`` is uniform over the nodes by default, a
    given node, or the stationary distribution π.

Every computation reads the walk from the scheduler's object (:func:`~gossipsim.scheduling.scheduler_for`):
its transition matrix and stationary distribution (exact values, hitting times, bounds) or its jump
chain and one-step sampler (Monte Carlo). One module per job:

===================  ===========================================================================
:mod:`.exact`        exact expected cover moves: closed forms, else the subset chain
:mod:`.formulas`     closed forms that need no graph: the star, the value of a topology kind vs K
:mod:`.montecarlo`   Monte Carlo cover moves and unlearning latencies, vectorised across runs
:mod:`.hitting`      exact hitting times and expected removal latencies
:mod:`.bounds`       Matthews' bounds
:mod:`.iteration`    the cover iteration of one recorded walk
:mod:`.common`       argument checks, start distributions, harmonic numbers
===================  ===========================================================================

Every function takes a :class:`networkx.Graph` or an :class:`~gossipsim.scheduling.IndexedGraph`, a
scheduler name (see :data:`~gossipsim.scheduling.SCHEDULER_KINDS`), and nodes by their *labels*, as
scenario files and the CLI name them (``next_visit_latency(G, "Medici")``; on a graph whose
nodes are 0..K−1 the label is the index). Arrays over nodes (hitting times, visit counts) are in
``graph.nodes`` order; :func:`node_index` maps a label to its position. The closed forms of
:mod:`.formulas`, which have no graph, take node indices of the graph the topology kind builds. Randomness comes only from the
:class:`numpy.random.Generator` (or seed) passed in.

A scheduler whose transitions depend on the protocol's state (``Scheduler.reads_state``: the
importance-weighted walks ``ksd-walk`` and ``hip-walk``) has no exact value for a run. The exact
functions (:func:`exact_cover_moves`, :func:`hitting_times_to`, :func:`next_visit_latency`,
:func:`removal_latency_law`, :func:`all_pairs_hitting_times`, :func:`matthews_bounds`) give its
values for a state held fixed, ``view=NodeView(weights=w)``, and refuse it without one (a
:class:`~gossipsim.errors.ConfigError` naming ``scheduler``); so does the Monte Carlo, which takes
no view.
"""

from __future__ import annotations

from gossipsim.cover.bounds import matthews_bounds
from gossipsim.cover.common import Graph, Start, harmonic, node_index, state_dependent_note
from gossipsim.cover.exact import (
    EXACT_COVER_MAX_NODES,
    ExactCover,
    exact_cover_moves,
    exact_cover_moves_with_method,
)
from gossipsim.cover.formulas import (
    TheoreticalCover,
    star_cover_moves,
    theoretical_cover,
    theoretical_cover_moves,
)
from gossipsim.cover.hitting import (
    MATTHEWS_MAX_NODES,
    RemovalLatencyLaw,
    all_pairs_hitting_times,
    expected_removal_latency,
    expected_unlearning_latency,
    hitting_times_to,
    next_visit_latency,
    removal_latency_law,
)
from gossipsim.cover.iteration import cover_iteration
from gossipsim.cover.montecarlo import (
    monte_carlo_cover_moves,
    monte_carlo_removal_latency,
    monte_carlo_unlearning_latency,
    summarize,
)

__all__ = [
    "EXACT_COVER_MAX_NODES",
    "MATTHEWS_MAX_NODES",
    "ExactCover",
    "Graph",
    "Start",
    "TheoreticalCover",
    "all_pairs_hitting_times",
    "cover_iteration",
    "exact_cover_moves",
    "exact_cover_moves_with_method",
    "RemovalLatencyLaw",
    "expected_removal_latency",
    "expected_unlearning_latency",
    "harmonic",
    "hitting_times_to",
    "matthews_bounds",
    "monte_carlo_cover_moves",
    "monte_carlo_removal_latency",
    "monte_carlo_unlearning_latency",
    "next_visit_latency",
    "node_index",
    "removal_latency_law",
    "star_cover_moves",
    "state_dependent_note",
    "summarize",
    "theoretical_cover",
    "theoretical_cover_moves",
]
