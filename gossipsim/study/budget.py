"""What a scenario costs before anything is allocated: memory, and the simulated-time horizon.

Every estimate of the simulator's memory lives here: the models only say how many numbers they
hold and compute (:meth:`gossipsim.models.Model.sizes`, a :class:`ModelSizes`) and the topology how
many nodes and edges it will build (:func:`gossipsim.topology.planned_size`); this module turns them
into bytes. A scenario (or a ``covertime``/``hitting`` graph) whose estimate exceeds the machine's
memory is refused in one line naming the key that makes it big, e.g.
``topology.nodes: 1000000000 nodes need about 715 GiB (this machine has 24 GiB)``, instead of dying
in a ``MemoryError`` or at the hands of the kernel's OOM killer. It is checked twice: for the whole
study from its settings before anything is built (:func:`check_study`, at parse time), and for each
variant once its graph is built and before its data are drawn or read (:func:`check_world`).

The estimates are rough (within a factor of about 2, on the high side) and cover what lives at
once: every variant's graph, node data and per-node factors, and the largest run of one worker
(engine arrays, the protocol's state traces, the evaluation of the recorded states, one gradient
step). The simulated-time bound (:func:`gossipsim.network.links.check_horizon`) is checked at the same
points, with the model's real message size. The constants below were measured
with ``tracemalloc`` and the peak resident set size (``VmHWM``) of fresh processes on Python 3.11,
NumPy 2, NetworkX 3:

- a graph built with NetworkX and converted to CSR: ring and random regular graphs of 10⁶ nodes
  peak at 572 and 709 MiB above the interpreter, a complete graph of 3,000 nodes (4.5·10⁶ edges) at
  838 MiB: about 200 B per edge and 420-450 B per node;
- a graph drawn straight into CSR arrays (``erdos_renyi``, ``random_geometric``): 10⁶ nodes and
  10⁷ edges peak at 355-369 MiB: about 36 B per edge and 30 B per node (tracemalloc, which also
  counts freed arrays: 50-71 B per edge);
- one run: 84-108 B per slot for exact conjugate updates (engine arrays of holders, times and bits,
  KL segments, metric columns), about 150 B more with the parameter server (the engine's record
  of each round); natural-gradient protocols record their state at every slot:
  366-485 B per slot for the Beta (2 entries), 8.6 KiB for a 110-entry Gaussian and 72 KiB for a
  930-entry one with the retrain baseline (about 8 copies of each state while its KL is computed);
  evaluating a logistic-regression state costs about 0.8 KiB per test row (Gauss–Hermite
  projections) plus about 70 copies of the state;
- particle protocols: the N × N matrices of a set of N particles (squared distances, kernel, the
  KSD's pair terms) peak at 7.0 of them at once in one run (tracemalloc and the peak resident set
  size at N = 2,000-6,000, d = 2: the KSD of one set holds 6, the median's cached pair indices 1;
  counted 8), an SVGD step at 4 per set stepped (3 and the indices); the vectorized engine steps a
  batch of runs together, and sizes its batches with these (:func:`vectorized_batch_runs`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gossipsim.core.memory import (
    VALUE_BYTES,
    describe_graph,
    graph_bytes,
    ksd_sets_at_once,
    require_fits,
)
from gossipsim.errors import ConfigError
from gossipsim.network.links import check_horizon
from gossipsim.study.settings import Scenario

if TYPE_CHECKING:
    from gossipsim.scheduling import IndexedGraph

#: the vectorized engine's batches: runs stepped together at most (beyond this the per-slot Python
#: cost is already amortised), and the bytes a batch may hold (every run's protocol state, walk,
#: streamed segments, kept states and the N × N matrices of its particle sets)
VECTORIZED_MAX_RUNS = 256
VECTORIZED_BATCH_BYTES = 512 * 2**20
#: one run, per slot, whatever the model (measured 84-108)
SLOT_BYTES = 128
#: one run with the parameter server, per slot on top of :data:`SLOT_BYTES`: the engine lists every
#: round in ``RunRecord.events`` (measured 135-150 with tracemalloc over 20,000-200,000 rounds)
ROUND_BYTES = 192
#: one recorded state: list entry, array header, slot (the entries are counted by STATE_COPIES)
RECORD_BYTES = 200
#: copies of each recorded state alive while the KL trace is computed (measured about 8)
STATE_COPIES = 8
#: per node and run: visit counts, labels, walker arrays
RUN_NODE_BYTES = 64
#: node data hold about 2 copies while generated and while factors are computed
DATA_COPIES = 2
#: copies of a kept particle's numbers alive at once while particles.csv is assembled and written:
#: the runs' outputs, the table, its CSV text and its Parquet copy (an estimate on the high side)
PARTICLE_TABLE_COPIES = 4
#: numbers of a particle's row of particles.csv besides its coordinates (run, iteration, world,
#: particle)
PARTICLE_ROW_EXTRA = 4
#: N × N matrices alive at once for one particle set: the KSD of the set, with the median's
#: cached pair indices (measured 7.0: 6.0 and 1; counted 8, for the N × d arrays and the
#: allocator), and an SVGD step per set stepped together (measured 3, the indices besides)
KSD_MATRICES = 8
STEP_MATRICES = 3


# ------------------------------------------------------------------------------------- worlds


@dataclass(frozen=True)
class ModelSizes:
    """How big one variant's model is, in numbers (what :func:`shared_terms` and
    :func:`run_terms` turn into bytes).

    ``state_entries`` is the size of q's natural parameter (a trace row, a node's factor) and
    ``message_entries`` that of a message; ``data_values`` counts the numbers of the node data a
    variant holds (observations, or rows times columns, test split included). ``every_slot`` says
    whether the protocol records its state at every slot (natural gradients) rather than at each
    change; ``evaluation_values`` counts the numbers computed to evaluate one recorded state
    (held-out metrics) and ``step_values`` those of one gradient step (Monte Carlo draws). The
    ``*_key`` and ``*_what`` fields name the setting that makes a part big and say what it is, for
    the one-line refusal."""

    state_entries: int
    message_entries: int
    #: d, a particle's coordinates, for models of particle protocols (0: none)
    particle_entries: int = 0
    data_values: float = 0.0
    data_key: str = "data.points_per_node"
    data_what: str = ""
    state_key: str = "topology.nodes"
    state_what: str = ""
    every_slot: bool = False
    evaluation_values: float = 0.0
    evaluation_key: str = "metrics.record_every"
    evaluation_what: str = ""
    step_values: float = 0.0
    step_key: str = "protocol.samples"
    #: for particle protocols' time estimate (:func:`run_seconds`): floating-point operations of
    #: one particle's log-likelihood gradient per data row, the training rows of all nodes, the
    #: held-out rows evaluated per recorded set, and the setting that makes a row's gradient costly
    row_flops: float = 0.0
    rows: float = 0.0
    test_rows: float = 0.0
    flops_key: str = "model.kind"


@dataclass(frozen=True)
class SlotWork:
    """What one slot of a particle protocol computes, per particle (its kind's
    :meth:`~gossipsim.protocols.ProtocolKind.slot_work`): ``gradients`` log-likelihood gradients
    over the holder's rows (a mini-batch of them with ``batch_size``), or over every node's rows
    when ``pooled``; and ``kernel_steps`` N × N kernel computations (SVGD steps, density
    estimates)."""

    gradients: float
    pooled: bool
    kernel_steps: float


@dataclass(frozen=True)
class Term:
    """One part of a world's memory: the key that sets it, its bytes and what needs them."""

    key: str
    bytes: float
    what: str


@dataclass(frozen=True)
class RunShape:
    """The scenario settings one run's memory depends on."""

    iterations: int
    record_every: int
    requests: int
    retrain: bool
    rounds: bool = False  # every slot a server round (protocol.architecture = "server")
    #: particles kept for particles.csv over all the runs of a variant (``[metrics] particles``)
    kept_particles: float = 0.0
    kept_runs: int = 0
    #: N, the particles of a particle protocol (0: none)
    particles: int = 0
    #: runs of the variant (the vectorized engine steps up to a batch of them together)
    runs: int = 1


def shared_terms(shape: RunShape, sizes: ModelSizes, nodes: float) -> list[Term]:
    """What a variant holds for all its runs: the node data and the per-node factors (the data's,
    and each protocol's copy in a run)."""
    traces = 2 if shape.requests and shape.retrain else 1
    return [
        Term(
            sizes.data_key,
            sizes.data_values * VALUE_BYTES * DATA_COPIES,
            sizes.data_what or f"the data of {int(nodes)} nodes",
        ),
        Term(
            sizes.state_key,
            nodes * sizes.state_entries * VALUE_BYTES * (DATA_COPIES + traces),
            sizes.state_what or f"{int(nodes)} nodes with {sizes.state_entries}-entry factors",
        ),
        Term(
            "metrics.particle_runs",
            shape.kept_particles
            * (sizes.particle_entries + PARTICLE_ROW_EXTRA)
            * VALUE_BYTES
            * PARTICLE_TABLE_COPIES,
            f"the particle sets of {shape.kept_runs} runs (particles.csv)",
        ),
    ]


def run_terms(shape: RunShape, sizes: ModelSizes, nodes: float) -> list[Term]:
    """The peak of one run (one worker), part by part: engine arrays and state traces, the
    evaluation of the recorded states, one gradient step."""
    traces = 2 if shape.requests and shape.retrain else 1
    if sizes.every_slot:
        records = float(shape.iterations)
    else:  # exact updates record a state only when a factor is added or removed
        records = min(float(shape.iterations), nodes * (2 + 2 * shape.requests))
    state = RECORD_BYTES + STATE_COPIES * VALUE_BYTES * sizes.state_entries
    recorded = shape.iterations / shape.record_every + 2 * (1 + shape.requests)
    per_slot = SLOT_BYTES + (ROUND_BYTES if shape.rounds else 0)
    slots = shape.iterations * per_slot + traces * records * state + nodes * RUN_NODE_BYTES
    entries = f" with {sizes.state_entries}-entry states" if sizes.every_slot else ""
    return [
        Term("scenario.iterations", slots, f"runs of {shape.iterations} slots{entries}"),
        Term(
            sizes.evaluation_key,
            recorded * sizes.evaluation_values * VALUE_BYTES,
            sizes.evaluation_what or f"evaluating {int(recorded)} recorded slots",
        ),
        Term(sizes.step_key, sizes.step_values * VALUE_BYTES, "one gradient step's samples"),
        *particle_terms(shape, sizes, nodes),
    ]


# ------------------------------------------------------------------------------ particle sets


def step_kernel_values(particles: int) -> float:
    """Numbers the N × N matrices of one particle set hold during an SVGD step (each set of a
    vectorized batch holds its own)."""
    return STEP_MATRICES * float(particles) ** 2


def kernel_values(particles: int, sets_stepped: int = 1) -> float:
    """Numbers the N × N matrices of particle sets hold at once in one worker: the KSD of the sets
    judged together, or an SVGD step of ``sets_stepped`` sets (the runs of a vectorized batch),
    whichever is larger, and the median's cached pair indices (N(N − 1) integers)."""
    square = float(particles) ** 2
    ksd = (KSD_MATRICES - 1) * square * ksd_sets_at_once(particles)  # the indices apart
    return max(ksd, step_kernel_values(particles) * sets_stepped) + square


def vectorized_batch_runs(per_run_bytes: float, runs: int | None = None) -> int:
    """Runs the vectorized engine steps together (``batched-steps``): at most
    :data:`VECTORIZED_MAX_RUNS`, and as many as :data:`VECTORIZED_BATCH_BYTES` allow at
    ``per_run_bytes`` a run (at least one; at most ``runs`` when given)."""
    size = int(max(1, min(VECTORIZED_MAX_RUNS, VECTORIZED_BATCH_BYTES // max(per_run_bytes, 1))))
    return size if runs is None else max(1, min(size, runs))


def particle_terms(shape: RunShape, sizes: ModelSizes, nodes: float) -> list[Term]:
    """The N × N matrices of a particle protocol's sets, in one run on the event engine or a batch
    of runs stepped together on the vectorized engine (the larger: the engine is chosen later)."""
    count = shape.particles
    if count <= 0:
        return []
    batch = vectorized_batch_runs(VALUE_BYTES * step_kernel_values(count), shape.runs)
    what = f"{count} particles: their {count} × {count} kernel matrices"
    if batch > 1 and step_kernel_values(count) * batch > kernel_values(count) - count**2:
        what += f" ({batch} runs stepped together on the vectorized engine)"
    return [Term("protocol.particles", VALUE_BYTES * kernel_values(count, batch), what)]


def require_total_fits(terms: Iterable[Term], others: str = "") -> None:
    """Refuse terms that cannot fit in the machine's memory: the first that cannot fit alone (in
    the order given: what is allocated first), else all of them together, naming the largest
    (``others`` says what else counts, e.g. the other variants of a sweep)."""
    parts = [t for t in terms if t.bytes > 0]
    for term in parts:
        require_fits(term.key, term.bytes, term.what)
    if parts:
        largest = max(parts, key=lambda t: t.bytes)
        require_fits(largest.key, math.fsum(t.bytes for t in parts), largest.what + others)


# ------------------------------------------------------------------------------------- scenarios


def run_shape(scenario: Scenario) -> RunShape:
    """The settings of ``scenario`` that one run's memory depends on (and the particle sets its
    kept runs carry: ``[metrics] particles``, a particle protocol's ``particles``)."""
    requests = len(scenario.unlearning)
    retrain = scenario.protocol.retrain_baseline
    count = getattr(scenario.protocol.options, "particles", None)
    kept, runs = 0.0, 0
    if scenario.metrics.particles != "none" and isinstance(count, int):
        runs = min(scenario.metrics.particle_runs, scenario.run.runs)
        records = (
            1.0
            if scenario.metrics.particles == "final"
            else scenario.run.iterations / scenario.metrics.record_every + 3 * (1 + requests)
        )
        worlds = 2 if requests and retrain else 1
        kept = float(runs) * worlds * records * count
    return RunShape(
        iterations=scenario.run.iterations,
        record_every=scenario.metrics.record_every,
        requests=requests,
        retrain=retrain,
        rounds=scenario.protocol.architecture == "server",
        kept_particles=kept,
        kept_runs=runs,
        particles=count if isinstance(count, int) else 0,
        runs=scenario.run.runs,
    )


def graph_key(scenario: Scenario) -> str:
    """The setting that sets the graph's size: ``topology.nodes`` if given, else the file, the
    grid's rows, or the bundled graph's kind."""
    topo = scenario.topology
    if topo.nodes is not None:
        return "topology.nodes"
    if topo.path is not None or "path" in topo.params:
        return "topology.path"
    return "topology.rows" if "rows" in topo.params else "topology.kind"


def check_time(
    scenario: Scenario, sizes: ModelSizes, node_seconds: Sequence[float] | None = None
) -> None:
    """Refuse compute and link times whose sum over the run overflows the simulated clock
    (:func:`gossipsim.network.links.check_horizon`, with the model's real message size and the
    slowest node's compute time, and the slot's local iterations'). Compute times read from a
    node attribute are checked once read (``node_seconds``, one per node: a world's slot compute
    times, local iterations included), not before; a channel of one's own (``[links] kind``)
    once built for the graph (by the world)."""
    if scenario.links.kind is not None:
        return
    links = scenario.links.channel(scenario.protocol.architecture)
    bits = scenario.protocol.message_bits(sizes)
    if scenario.compute_attribute is None:
        check_horizon(
            scenario.run.iterations, scenario.compute_seconds, links, bits,
            local=(scenario.seconds_per_local_iteration, scenario.local_iterations_per_slot),
        )  # fmt: skip
    elif node_seconds is not None:
        check_horizon(scenario.run.iterations, node_seconds, links, bits, "compute.node_attribute")


def check_world(scenario: Scenario, sizes: ModelSizes, graph: IndexedGraph) -> None:
    """Refuse a variant whose built graph, data and runs cannot fit in memory together, or whose
    simulated time would overflow (called by the models before they draw or read data)."""
    from gossipsim.topology import ARRAY_KINDS

    check_time(scenario, sizes)
    nodes, edges = graph.size, graph.indices.size / 2
    networkx = scenario.topology.kind not in ARRAY_KINDS
    built = Term(
        graph_key(scenario),
        graph_bytes(nodes, edges, networkx=networkx),
        describe_graph(nodes, edges),
    )
    shape = run_shape(scenario)
    require_total_fits([built, *shared_terms(shape, sizes, nodes), *run_terms(shape, sizes, nodes)])


def planned_terms(scenario: Scenario) -> tuple[list[Term], list[Term]] | None:
    """The terms a variant holds for all its runs (graph, data, factors) and those of one run, when
    its node count is known from its settings (generated graphs); None for graph files and bundled
    graphs, or settings the build will reject (it reports them in its own words). Checks the
    simulated time on the way."""
    from gossipsim.core.registry import MODEL_KINDS
    from gossipsim.topology import planned_size

    topo = scenario.topology
    model = MODEL_KINDS.lookup(scenario.model.kind, "model.kind")
    try:
        check_time(scenario, model.sizes(scenario.model_spec, 0))
        planned = planned_size(topo.kind, topo.nodes, topo.params, topo.path)
        if planned is None:
            return None
        nodes, edges, networkx = planned
        sizes = model.sizes(scenario.model_spec, nodes)
    except ConfigError as exc:
        if exc.key.startswith(("compute.", "links.")):
            raise  # the time check itself
        return None
    graph = Term(
        graph_key(scenario),
        graph_bytes(nodes, edges, networkx=networkx),
        describe_graph(nodes, edges),
    )
    shape = run_shape(scenario)
    return [graph, *shared_terms(shape, sizes, nodes)], run_terms(shape, sizes, nodes)


def check_study(scenarios: Iterable[Scenario]) -> None:
    """Refuse, before anything is built, a study whose variants cannot fit in memory together:
    every variant's graph and data are held at once (``gossipsim validate`` and ``run`` build them
    all), and one run at a time per worker (the largest counts)."""
    shared: list[Term] = []
    runs: list[list[Term]] = []
    for scenario in scenarios:
        planned = planned_terms(scenario)
        if planned is not None:
            shared += planned[0]
            runs.append(planned[1])
    if runs:
        others = f" (with the other {len(runs) - 1} variants)" if len(runs) > 1 else ""
        largest_run = max(runs, key=lambda terms: math.fsum(t.bytes for t in terms))
        require_total_fits([*shared, *largest_run], others)


# ---------------------------------------------------------------------------------------- time

#: floating-point operations a second of a particle step, on one core of the 2-core machine the
#: estimate was measured on: the bnn's likelihood gradient alone runs at 2.1-5.3 GFLOP/s (N = 20-100,
#: H = 50-10,000, 45-455 rows), a whole DSVGD slot at 1.2 (H = 2,000: 0.6 s a slot; H = 10,000:
#: 3.0 s) and 0.5 under a load of 4 on 2 cores (7.7 s); so 1 GFLOP/s, rough to a factor of 2-3
PARTICLE_FLOPS_PER_SECOND = 1e9
#: seconds of one slot of one run beyond the arithmetic (the engine, the step's Python): measured
#: 50-570 µs per run-slot (benchmarks/batch_floor.py), about 2 ms for one event-engine DSVGD slot
SLOT_SECONDS = 5e-4
#: an N × N kernel computation: operations per pair of particles, and per pair and coordinate
#: (distances, the kernel, its two products with the particles and the scores, the median)
KERNEL_PAIR_FLOPS = 30
KERNEL_PAIR_COORDINATE_FLOPS = 6
#: ``gossipsim validate`` and ``run`` warn when the runs would compute longer than this
LONG_STUDY_SECONDS = 3600.0


@dataclass(frozen=True)
class TimeEstimate:
    """Seconds of computation of the runs (one worker), the setting that makes them long and what
    a slot costs, in words."""

    seconds: float
    key: str
    what: str


def run_seconds(scenario: Scenario, sizes: ModelSizes, nodes: float) -> TimeEstimate | None:
    """A rough estimate of the computation of all the runs of a particle protocol's variant on one
    worker: each slot's likelihood gradients (:class:`SlotWork`: N particles × rows ×
    ``sizes.row_flops``) and kernels (N² pairs), for the protocol and its retrain baseline after
    the first request, plus :data:`SLOT_SECONDS`; and each recorded set's evaluation (its KSD's
    target score over every row, the held-out rows). Flops are turned into seconds at
    :data:`PARTICLE_FLOPS_PER_SECOND`. None for other protocols, or a model that does not say what
    its gradients cost."""
    from gossipsim.core.registry import PROTOCOL_KINDS

    kind = PROTOCOL_KINDS.lookup(scenario.protocol.kind, "protocol.kind")
    options = scenario.protocol.options
    work = getattr(kind, "slot_work", lambda _: None)(options)
    count = getattr(options, "particles", None)
    if work is None or not isinstance(count, int) or sizes.row_flops <= 0 or nodes <= 0:
        return None
    node_rows = sizes.rows / nodes
    batch = getattr(options, "batch_size", None)
    if batch is not None:
        node_rows = min(node_rows, float(batch))
    rows = sizes.rows if work.pooled else node_rows
    coordinates = KERNEL_PAIR_COORDINATE_FLOPS * sizes.particle_entries
    pairs = float(count) ** 2 * (KERNEL_PAIR_FLOPS + coordinates)
    gradient = work.gradients * count * rows * sizes.row_flops / PARTICLE_FLOPS_PER_SECOND
    kernel = work.kernel_steps * pairs / PARTICLE_FLOPS_PER_SECOND
    iterations = scenario.run.iterations
    slots = float(iterations)
    requests = scenario.unlearning
    worlds = 1
    if requests and scenario.protocol.retrain_baseline:
        worlds = 2
        first = min((r.at_iteration for r in requests if r.at_iteration is not None), default=1)
        slots += iterations - first + 1
    recorded = worlds * (iterations / scenario.metrics.record_every + 3 * (1 + len(requests)))
    evaluation = (count * (sizes.rows + sizes.test_rows) * sizes.row_flops + pairs) / (
        PARTICLE_FLOPS_PER_SECOND
    )
    parts = {
        sizes.flops_key: slots * gradient,
        "protocol.particles": slots * kernel,
        "scenario.iterations": slots * SLOT_SECONDS,
        "metrics.record_every": recorded * evaluation,
    }
    runs = scenario.run.runs
    key = max(parts, key=lambda k: parts[k])
    slot = gradient + kernel + SLOT_SECONDS
    what = (
        f"{runs} runs of {iterations} slots, about {format_seconds(slot)} a slot for {count} "
        f"particles"
    )
    return TimeEstimate(runs * math.fsum(parts.values()), key, what)


def format_seconds(seconds: float) -> str:
    """``seconds`` in the largest fitting unit: ``0.4 ms``, ``12 s``, ``5.3 h``, ``40 days``."""
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0)):
        if seconds >= size:
            value = seconds / size
            return f"{value:.0f} {unit}" if value >= 10 else f"{value:.1f} {unit}"
    milliseconds = seconds * 1e3
    return f"{milliseconds:.0f} ms" if milliseconds >= 10 else f"{milliseconds:.1f} ms"


def long_study_warning(estimates: Iterable[TimeEstimate], workers: int = 1) -> str | None:
    """The warning for runs whose estimated computation (:func:`run_seconds`, summed over the
    variants, divided among ``workers``) exceeds :data:`LONG_STUDY_SECONDS`, naming the setting
    that makes the longest variant long; None otherwise."""
    found = [e for e in estimates if e is not None]
    if not found:
        return None
    total = math.fsum(e.seconds for e in found) / max(workers, 1)
    if total <= LONG_STUDY_SECONDS:
        return None
    longest = max(found, key=lambda e: e.seconds)
    on = "one worker" if workers <= 1 else f"{workers} workers"
    return (
        f"{longest.key}: the runs would compute for about {format_seconds(total)} on {on} "
        f"({longest.what}; a rough estimate at {PARTICLE_FLOPS_PER_SECOND / 1e9:g} GFLOP/s: "
        "docs/scenarios.md, Limits); fewer particles, slots, runs or a smaller model shorten it"
    )
