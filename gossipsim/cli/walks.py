"""The walk commands, on a graph given by options rather than a scenario file: ``gossipsim
covertime`` (the token walk's cover time) and ``gossipsim hitting`` (one node's unlearning
latency), by Monte Carlo runs and, asked for, their exact expectations."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, TypeVar

from gossipsim.errors import ConfigError


def _graph_from_args(args: argparse.Namespace) -> Any:
    """The graph of --topology/--nodes/--param/--path/--seed in CSR form (as the simulator builds
    it: Erdős–Rényi and random geometric graphs of millions of nodes without NetworkX), drawn from
    the same seed stream as a scenario's graph, so ``--seed S`` gives the graph of a scenario with
    ``seed = S`` (or ``[topology] seed = S``)."""
    import numpy as np

    from gossipsim.core.streams import TOPOLOGY_TAG
    from gossipsim.topology import build_indexed

    if args.topology in ("ring", "path") and not args.param and args.path is None:
        return _line_graph(args.topology, args.nodes)
    seed = np.random.SeedSequence([args.seed, TOPOLOGY_TAG])
    indexed, _ = build_indexed(
        args.topology, args.nodes, dict(args.param), path=args.path, seed=seed
    )
    return indexed


def _line_graph(kind: str, nodes: int | None) -> Any:
    """A ring or a path of ``nodes`` nodes straight into CSR arrays: the CSR of NetworkX's
    ``cycle_graph`` / ``path_graph`` (tested), without building it (NetworkX took 25 s for a ring
    of 5,000,000 nodes, before ``hitting`` could refuse its walks as too long)."""
    import numpy as np

    from gossipsim.core.memory import check_graph
    from gossipsim.scheduling import IndexedGraph
    from gossipsim.topology.registry import validate

    _, n, _ = validate(kind, nodes, {}, None)
    assert n is not None  # ring and path need nodes (validate says so)
    edges = n if kind == "ring" else n - 1
    check_graph(n, float(edges), networkx=False)  # key topology.nodes, as for the other kinds
    first = np.arange(edges, dtype=np.int64)
    return IndexedGraph.from_edges(n, first, (first + 1) % n)


_T = TypeVar("_T")


def _sized(
    compute: Callable[[Any, str], _T], graph: Any, args: argparse.Namespace, flag: str
) -> _T:
    """``compute(graph, scheduler)`` for the option ``flag``; a graph too large for it is refused
    as that option's error (the library names ``nodes`` and suggests what a Python user can do)."""
    try:
        return compute(graph, args.scheduler)
    except ConfigError as exc:
        if exc.key != "nodes":
            raise
        limit = exc.message.split("; ")[0]
        raise ConfigError(
            flag, f"{limit}; drop {flag} (the Monte Carlo runs still apply)"
        ) from None


def _walk_alone(scheduler: str) -> None:
    """Refuse, in one line naming ``--scheduler``, a scheduler whose transitions depend on a
    protocol's state (``ksd-walk``, ``hip-walk``): these commands run the walk alone, with no
    protocol to publish the weights, and no exact value applies to it."""
    from gossipsim.cover import state_dependent_note
    from gossipsim.scheduling import scheduler_for

    if scheduler_for(scheduler, "--scheduler").reads_state:
        raise ConfigError(
            "--scheduler",
            f"{scheduler!r} moves by the weights a protocol publishes while it runs, and this "
            f"command runs the walk alone: {state_dependent_note(scheduler)}; run it in a scenario",
        )


#: what --json says instead of a 95% interval of fewer than two finished runs
UNDEFINED_INTERVAL = "undefined: fewer than two finished runs, whose spread is unknown"


def covertime_command(args: argparse.Namespace) -> int:
    import numpy as np

    import gossipsim.cover as ct
    from gossipsim.core.memory import check_monte_carlo
    from gossipsim.scheduling import check_scheduler

    check_scheduler(args.scheduler, "--scheduler")
    _walk_alone(args.scheduler)
    check_monte_carlo(args.runs)
    graph = _graph_from_args(args)
    # the exact value and the bounds first: a graph too large for them is refused before the runs
    exact = _sized(ct.exact_cover_moves_with_method, graph, args, "--exact") if args.exact else None
    bounds = _sized(ct.matthews_bounds, graph, args, "--bounds") if args.bounds else None
    rng = np.random.default_rng(args.seed)
    samples = ct.monte_carlo_cover_moves(graph, args.scheduler, runs=args.runs, rng=rng)
    stats = ct.summarize(samples)
    out: dict[str, Any] = {
        "topology": args.topology,
        "nodes": graph.size,
        "scheduler": args.scheduler,
        "mean_moves": stats["mean"],
        "ci95_moves": list(stats["ci95"]) if stats["ci95"] is not None else None,
        "runs": stats["runs"],
    }
    if stats["ci95"] is None:
        out["ci95_note"] = UNDEFINED_INTERVAL
    if exact is not None:
        out["exact_moves"] = exact.moves
        out["exact_method"] = exact.method
    if bounds is not None:
        out["matthews_moves"] = list(bounds)
    if args.json:
        print(json.dumps(out))
    else:
        ci = out["ci95_moves"]
        interval = f"95% CI {ci[0]:.4g} to {ci[1]:.4g}" if ci else "95% CI undefined for one run"
        print(
            f"{args.topology}, K = {out['nodes']}, {args.scheduler}: mean cover time "
            f"{out['mean_moves']:.4g} moves ({interval}, {out['runs']} run"
            f"{'s' if out['runs'] != 1 else ''}; cover iteration = moves + 1)"
        )
        if "exact_moves" in out:
            print(f"  exact expectation: {out['exact_moves']:.6g} moves ({out['exact_method']})")
        if "matthews_moves" in out:
            print(
                f"  Matthews' bounds: {out['matthews_moves'][0]:.4g} to {out['matthews_moves'][1]:.4g} moves"
            )
    return 0


def hitting_command(args: argparse.Namespace) -> int:
    import numpy as np

    import gossipsim.cover as ct
    from gossipsim.core.memory import check_monte_carlo
    from gossipsim.scheduling import check_scheduler
    from gossipsim.topology import parse_label

    check_scheduler(args.scheduler, "--scheduler")
    _walk_alone(args.scheduler)
    check_monte_carlo(args.runs)
    indexed = _graph_from_args(args)
    label = parse_label(args.node)
    if label not in indexed.index_of and str(args.node) in indexed.index_of:
        label = str(args.node)
    node = indexed.index(label, "--node")
    rng = np.random.default_rng(args.seed)
    start: Any = args.start
    if args.at_slot is not None and start not in ("uniform", "stationary"):
        start = parse_label(start)
        if start not in indexed.index_of and str(args.start) in indexed.index_of:
            start = str(args.start)
        indexed.index(start, "--start")
    label = indexed.labels[node]
    # walks whose length is known to be too long are refused before the exact value is computed
    ct.montecarlo.check_hitting_work(indexed, label, args.scheduler, args.runs, "--runs")
    exact = None
    if args.exact:  # first: a slot too late for the exact law is refused before the runs
        try:
            exact = (
                ct.next_visit_latency(indexed, label, args.scheduler)
                if args.at_slot is None
                else ct.expected_removal_latency(
                    indexed, label, args.at_slot, args.scheduler, start
                )
            )
        except ConfigError as exc:
            if exc.key != "at_slot":
                raise
            raise ConfigError("--at-slot", f"{exc.message}; drop --exact") from None
    if args.at_slot is None:
        samples = ct.monte_carlo_unlearning_latency(
            indexed, label, args.scheduler, runs=args.runs, rng=rng
        )
        what = "request arriving at a stationary holder, the node's factor present"
    else:
        samples = ct.monte_carlo_removal_latency(
            indexed, label, args.at_slot, args.scheduler, runs=args.runs, rng=rng, start=start
        )
        what = f"request before slot {args.at_slot:,} of a walk from {args.start}; 0 if unseen"
    stats = ct.summarize(samples)
    out: dict[str, Any] = {
        "topology": args.topology,
        "nodes": indexed.size,
        "node": label,
        "scheduler": args.scheduler,
        "at_slot": args.at_slot,
        "start": args.start if args.at_slot is not None else "stationary",
        "mean_latency": stats["mean"],
        "ci95_latency": list(stats["ci95"]) if stats["ci95"] is not None else None,
        "runs": stats["runs"],
    }
    if stats["ci95"] is None:
        out["ci95_note"] = UNDEFINED_INTERVAL
    if exact is not None:
        out["exact_latency"] = exact
    if args.json:
        print(json.dumps(out, default=str))
    else:
        ci = out["ci95_latency"]
        interval = f"95% CI {ci[0]:.4g} to {ci[1]:.4g}" if ci else "95% CI undefined for one run"
        print(
            f"{args.topology}, K = {out['nodes']}, node {out['node']!r}, {args.scheduler}: mean "
            f"removal latency {out['mean_latency']:.4g} slots ({interval}, {out['runs']} run"
            f"{'s' if out['runs'] != 1 else ''}; {what})"
        )
        if "exact_latency" in out:
            print(f"  exact expectation: {out['exact_latency']:.6g} slots")
    return 0
