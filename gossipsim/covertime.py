"""Cover times and unlearning latencies of the token walk (kept for imports): the code lives in
:mod:`gossipsim.cover`, one module per job (exact values, closed forms, Monte Carlo, hitting times,
Matthews' bounds, the cover iteration of a recorded walk). A test that replaces a function patches
it in the module that uses it.
"""

from __future__ import annotations

from .cover import (
    EXACT_COVER_MAX_NODES,
    MATTHEWS_MAX_NODES,
    ExactCover,
    Graph,
    Start,
    TheoreticalCover,
    all_pairs_hitting_times,
    cover_iteration,
    exact_cover_moves,
    exact_cover_moves_with_method,
    expected_unlearning_latency,
    harmonic,
    hitting_times_to,
    matthews_bounds,
    monte_carlo_cover_moves,
    monte_carlo_unlearning_latency,
    node_index,
    star_cover_moves,
    summarize,
    theoretical_cover,
    theoretical_cover_moves,
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
    "expected_unlearning_latency",
    "harmonic",
    "hitting_times_to",
    "matthews_bounds",
    "monte_carlo_cover_moves",
    "monte_carlo_unlearning_latency",
    "node_index",
    "star_cover_moves",
    "summarize",
    "theoretical_cover",
    "theoretical_cover_moves",
]
