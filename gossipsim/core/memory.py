"""Memory in bytes, what this machine has, and the refusal of what cannot fit: the units every
estimate uses (:mod:`gossipsim.study.budget` turns a scenario into them; the topology checks a graph
and the particle states size their KSD calls with them before anything is allocated). The
constants were measured as :mod:`gossipsim.study.budget` describes."""

from __future__ import annotations

import os
from pathlib import Path

from gossipsim.errors import ConfigError

GIB = 2**30

#: NetworkX graph (and its CSR copy) per node / per edge, bytes (measured 420-450 / 195-200)
NX_NODE_BYTES = 512
NX_EDGE_BYTES = 256
#: graph drawn straight into CSR arrays, per node / per edge at the peak of the build (measured 30 /
#: 36 in the resident set size, 50-71 per edge with tracemalloc: the edge arrays of the draw, their
#: sorted keys and the deduplicated copy)
CSR_NODE_BYTES = 64
CSR_EDGE_BYTES = 80
#: observations and rows are float64 / int64; generation and factor computation hold about 2 copies
VALUE_BYTES = 8
#: particle sets whose KSD one call computes (:func:`gossipsim.states.particlestate.stein_discrepancy`):
#: at most this many, and their N × N matrices at most this many numbers each (2^22: 32 MiB)
#: unless one set's alone is larger
KSD_CHUNK = 64
KSD_CHUNK_VALUES = 2**22
#: one entry of a list of parameters kept as Python floats (a Dirichlet prior's concentrations):
#: the list, its array, the float objects and the resolved copy of the scenario
LIST_ENTRY_BYTES = 96


def machine_bytes() -> int | None:
    """Physical memory of this machine (the smaller of it and a cgroup v2 limit, as in a container);
    None where the operating system does not say (no check is made then)."""
    try:
        total = int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        return total
    return min(total, int(limit)) if limit.isdigit() else total


def format_bytes(n: float) -> str:
    """``n`` bytes with a binary unit, e.g. ``93 GiB``, ``1.5 TiB``, ``512 MiB``."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    value, unit = float(n), 0
    while value >= 1024 and unit < len(units) - 1:
        value /= 1024
        unit += 1
    if value >= 10**6:  # beyond exbibytes: keep one line short
        return f"{value:.1e} {units[unit]}"
    return f"{value:.0f} {units[unit]}" if value >= 10 else f"{value:.1f} {units[unit]}"


def require_fits(key: str, need: float, what: str) -> None:
    """Refuse (a :class:`ConfigError` naming ``key``) when ``need`` bytes exceed the machine's
    memory; ``what`` says what needs them, e.g. ``"1000000000 nodes"``."""
    have = machine_bytes()
    if have is not None and need > have:
        raise ConfigError(
            key, f"{what} need about {format_bytes(need)} (this machine has {format_bytes(have)})"
        )


# ------------------------------------------------------------------------------ Monte Carlo

#: the cover and hitting Monte Carlo (``gossipsim covertime``/``hitting``), per run: its first
#: holder, its result and the arrays of the runs stepping together (positions, counts, moves and
#: their masks: about 6 numbers of 8 bytes each at once)
MONTE_CARLO_RUN_BYTES = 64


def check_monte_carlo(runs: int, key: str = "--runs") -> None:
    """Refuse a number of Monte Carlo runs whose arrays cannot fit in this machine's memory (all
    runs step together; the cover's visited flags are held to 200 MB a chunk besides)."""
    require_fits(key, runs * MONTE_CARLO_RUN_BYTES + 200e6, f"{runs:,} Monte Carlo runs")


# ------------------------------------------------------------------------------------- graphs


def graph_bytes(nodes: float, edges: float, *, networkx: bool) -> float:
    """Peak bytes of building a graph of ``nodes`` nodes and ``edges`` undirected edges, through
    NetworkX or straight into CSR arrays."""
    if networkx:
        return nodes * NX_NODE_BYTES + edges * NX_EDGE_BYTES
    return nodes * CSR_NODE_BYTES + edges * CSR_EDGE_BYTES


def describe_graph(nodes: float, edges: float) -> str:
    """``"1000000000 nodes"``, or with the edges when they dominate the graph's memory."""
    text = f"{int(nodes)} nodes"
    if edges > 10 * nodes:
        text += f" and about {edges:.2g} edges"
    return text


def check_graph(nodes: float, edges: float, *, networkx: bool, key: str = "topology.nodes") -> None:
    """Refuse a graph that cannot be built in this machine's memory."""
    require_fits(key, graph_bytes(nodes, edges, networkx=networkx), describe_graph(nodes, edges))


def ksd_sets_at_once(particles: int) -> int:
    """Particle sets of N particles whose KSD is computed in one call
    (:func:`gossipsim.states.particlestate.stein_discrepancy`): at most :data:`KSD_CHUNK`, their N × N
    matrices at most :data:`KSD_CHUNK_VALUES` numbers each unless one set's alone is larger."""
    return max(1, min(KSD_CHUNK, KSD_CHUNK_VALUES // max(particles * particles, 1)))
