"""What a scheduler kind supplies, the registry of kinds, and the uniform stream they all read.

A scheduler kind is one subclass of :class:`Scheduler`, registered with :func:`register`; it gives

* the rule as probabilities: :meth:`Scheduler.transition_matrix` (and, for a rule that moves only
  along edges, :meth:`Scheduler.edge_weights`, from which the matrix and the jump chain are built),
  :meth:`Scheduler.stationary`, used by the exact cover and hitting-time computations and by the
  stationary start;
* a one-step sampler :meth:`Scheduler.sampler` for the event engine (:class:`~.walker.Walker`): a
  closure over the CSR arrays, the fastest per-hop form in CPython;
* a batched sampler :meth:`Scheduler.step` (one move of many walks at once) for the vectorised engine;
* :meth:`Scheduler.jump_chain` for the cover-time Monte Carlo.

**The uniforms.** Every hop reads two uniforms ``u`` and ``v`` (whatever the kind; a kind may ignore
``v``). The one-step sampler draws them from the run's Generator in blocks of
:data:`UNIFORM_BLOCK`: 8,192 ``u`` then 8,192 ``v``; the batched sampler is given hop i's ``u[i]`` and ``v[i]``. Both must compute
the next holder from ``(k, u, v)`` with the same floating-point arithmetic, so that a seed realises the
same walk in both engines (tested for every registered kind).

**Node state.** Every sampler and matrix takes an optional :class:`NodeView`: what the scheduler may
see of the nodes (which are up; scores a server keeps). The view is *live*: its owner (a churn process,
a server) changes its arrays in place during a run and the sampler reads them at each hop.
``metropolis-hastings``, ``simple-random-walk`` and the importance-weighted walks read which nodes and
links are up (they propose live neighbours only; :mod:`.kinds`, :mod:`.weighted`); a kind that
cannot declares ``reads_liveness = False`` and a scenario with ``[failures]`` refuses it. The
importance-weighted walks (``ksd-walk``, ``hip-walk``) also read :attr:`NodeView.weights`, which
the protocol changes as the run goes on (``reads_state``).
"""

from __future__ import annotations

from abc import abstractmethod
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, TypeVar

import numpy as np

from gossipsim.core.contracts import check_complete
from gossipsim.errors import ConfigError
from gossipsim.scheduling.graph import CSR, IndexedGraph
from gossipsim.scheduling.jump import JumpChain

if TYPE_CHECKING:  # SciPy's sparse matrices are imported where they are built: reading a
    # scheduler (a scenario, a figure's stationary share) does not pay for them
    import scipy.sparse as sp

#: uniforms drawn per refill (:func:`uniform_blocks`, also in a scheduler of one's own); fixed so the
#: stream does not depend on the run length
UNIFORM_BLOCK = 8192

#: kind -> one line saying what it does (the allowed values of ``scheduler.kind``)
SCHEDULER_KINDS: dict[str, str] = {}
#: kind -> its :class:`Scheduler` subclass
SCHEDULERS: dict[str, type[Scheduler]] = {}


@dataclass(eq=False)
class NodeView:
    """What a scheduler may see of the nodes' state, indexed by node index 0..K-1.

    ``up``: a boolean array, True where the node is up (``None``: every node is up); ``scores``: a
    float array a server keeps about the nodes, e.g. for client selection (``None``: no scores);
    ``edge_up``: a boolean array per CSR entry of the graph, True where the link is up (``None``:
    every link is up); ``live_degree``: per node, the number of neighbours that are up over links
    that are up (with ``up``; :class:`~gossipsim.network.failures.Liveness` keeps all three);
    ``weights``: non-negative selection weights a protocol publishes, one per node (client
    selection: the server draws client k with probability ``weights[k] / Σ weights``; the
    importance-weighted walk's target distribution is proportional to them; ``None``: none).
    The owner changes the arrays *in place* while a run goes on; a sampler holds the arrays and reads
    them at every hop.
    """

    up: np.ndarray | None = None
    scores: np.ndarray | None = None
    edge_up: np.ndarray | None = None
    live_degree: np.ndarray | None = None
    weights: np.ndarray | None = None

    @property
    def has_failures(self) -> bool:
        """Whether this is a view of failing nodes and links, with the live degrees its owner keeps
        (:class:`~gossipsim.network.failures.Liveness`): the built-in walks then move over the
        live graph. A view with ``up`` alone (a scheduler of one's own reads it) is not."""
        return self.up is not None and self.live_degree is not None


class Scheduler:
    """One kind of next-holder rule (see the module docstring for the contract).

    Subclasses set ``kind`` and ``description`` and implement :meth:`sampler` and :meth:`step`, and
    either :meth:`edge_weights` (rules that move along edges or stay: the matrix, the stationary
    distribution and the jump chain follow) or :meth:`transition_matrix` and :meth:`jump_chain`.
    """

    kind: ClassVar[str]
    description: ClassVar[str]
    #: whether :meth:`step` reads ``v`` (the vectorised engine skips drawing it otherwise)
    reads_v: ClassVar[bool] = True
    #: whether the sampler and :meth:`edge_weights` read :attr:`NodeView.up` (walks under
    #: ``[failures]`` need it: the token must go to live nodes over live links)
    reads_liveness: ClassVar[bool] = False
    #: whether the transitions depend on the protocol's state as the run goes on (it reads
    #: :attr:`NodeView.weights` or ``scores``): no exact cover or hitting time applies to the run
    #: (the theory says so instead of computing one for a matrix the run does not follow)
    reads_state: ClassVar[bool] = False
    #: the client-selection indicator the protocol must publish in :attr:`NodeView.weights` for
    #: this kind (``"ksd"`` or ``"hip"``, :mod:`gossipsim.particles.selection`), or None
    indicator: ClassVar[str | None] = None
    #: whether the rule can keep the token at its holder (a diagonal in the transition matrix)
    may_stay: ClassVar[bool] = True
    #: whether the next holder may be any node (so the graph need not be connected)
    ignores_graph: ClassVar[bool] = False
    #: whether the stationary distribution is uniform whatever the graph (the Monte Carlo then
    #: draws a stationary start as a uniform integer)
    uniform_stationary: ClassVar[bool] = False
    #: the vectorised engine's kernel this kind declares, or None (then it never runs vectorised):
    #: ``"batched-step"`` promises that :meth:`step` moves a batch of walks exactly as
    #: :meth:`sampler` moves one, on the same uniforms, with no :class:`NodeView`
    kernel: ClassVar[str | None] = None
    #: how the vectorised engine may draw this kind's walks stay by stay (``[scheduler] stays =
    #: "drawn"``), or None: ``"jump-chain"`` promises that :meth:`jump_chain` is the walk's exact
    #: law (holder k keeps the token for Geometric(p_move(k)) slots, then moves to j ≠ k with
    #: probability P(k, j) / p_move(k)), with no :class:`NodeView`
    stay_kernel: ClassVar[str | None] = None

    # ------------------------------------------------------------------ the rule as probabilities

    def edge_weights(self, g: IndexedGraph, view: NodeView | None = None) -> np.ndarray:
        """``P(k, indices[e])`` for every CSR entry e of every row k: the move probabilities along
        the edges (what is left of each row stays at k)."""
        raise NotImplementedError(f"{type(self).__name__} gives no edge weights")

    def transition_matrix(self, g: IndexedGraph, view: NodeView | None = None) -> sp.csr_array:
        """Transition matrix ``P[k, j]`` of the walk, sparse CSR: the edge weights, plus the rest of
        each row on the diagonal (entries below 1e-15 dropped) when the rule may stay."""
        import scipy.sparse as sp

        n = g.size
        rows = np.repeat(np.arange(n), g.degree)
        cols = g.indices
        vals = self.edge_weights(g, view)
        if not self.may_stay:
            return sp.csr_array((vals, (rows, cols)), shape=(n, n))
        stay = 1.0 - np.bincount(rows, weights=vals, minlength=n)
        stay[np.abs(stay) < 1e-15] = 0.0
        mask = stay > 0
        all_rows = np.concatenate([rows, np.flatnonzero(mask)])
        all_cols = np.concatenate([cols, np.flatnonzero(mask)])
        all_vals = np.concatenate([vals, stay[mask]])
        return sp.csr_array((all_vals, (all_rows, all_cols)), shape=(n, n))

    def stationary(self, g: IndexedGraph, view: NodeView | None = None) -> np.ndarray:
        """Stationary distribution π (``π P = π``, ``Σ π = 1``), by a sparse solve of the transition
        matrix; kinds with a closed form override this. Assumes π is unique."""
        n = g.size
        if n == 1:
            return np.ones(1)
        import scipy.sparse as sp

        a = (sp.identity(n, format="csr") - self.transition_matrix(g, view)).T.tolil()
        a[n - 1, :] = np.ones(n)  # one balance equation is redundant: replace it by Σ π = 1
        b = np.zeros(n)
        b[n - 1] = 1.0
        import scipy.sparse.linalg as spla  # here: importing it costs every command 0.1 s

        pi = np.asarray(spla.spsolve(a.tocsc(), b), dtype=float)
        pi[pi < 0] = 0.0  # round-off of nodes the walk leaves for good
        return pi / pi.sum()

    # ------------------------------------------------------------------ samplers

    @abstractmethod
    def sampler(
        self, g: IndexedGraph, rng: np.random.Generator, view: NodeView | None = None
    ) -> Callable[[int], int]:
        """The one-step sampler ``next(k) -> j`` of one run: reads hop i's ``u`` and ``v`` from
        ``rng`` in blocks of 8,192 (u, then v), as :func:`uniform_blocks` draws them."""
        raise NotImplementedError

    def step(
        self,
        positions: np.ndarray,
        u: np.ndarray,
        v: np.ndarray,
        csr: CSR,
        view: NodeView | None = None,
    ) -> np.ndarray:
        """One move of every walk (batched sampler): the next holder of a walk at ``positions[b]``
        given its hop's uniforms ``u[b]``, ``v[b]``, with the same arithmetic as :meth:`sampler`."""
        raise NotImplementedError

    def jump_chain(self, g: IndexedGraph, view: NodeView | None = None) -> JumpChain:
        """The walk as its jump chain (holding slots and next distinct holder), for the Monte Carlo."""
        return JumpChain(g, self.edge_weights(g, view))

    @classmethod
    def unmet_needs(cls) -> list[str]:
        """What the kind's declarations need that it does not define, refused when the kind is
        loaded (:mod:`gossipsim.core.contracts`; :meth:`sampler` is abstract): :meth:`step` where it
        declares ``kernel = "batched-step"``; :meth:`edge_weights`, or else
        :meth:`transition_matrix` with :meth:`jump_chain`."""
        unmet = []
        if cls.kernel == "batched-step" and cls.step is Scheduler.step:
            unmet.append("step")
        if cls.edge_weights is Scheduler.edge_weights:
            if cls.transition_matrix is Scheduler.transition_matrix:
                unmet.append("edge_weights")
            elif cls.jump_chain is Scheduler.jump_chain:
                unmet.append("jump_chain")
        return unmet


_S = TypeVar("_S", bound=type[Scheduler])


def register(cls: _S) -> _S:
    """Class decorator: make ``cls`` the scheduler of kind ``cls.kind`` (a scenario's
    ``scheduler.kind``, the CLI's ``--scheduler``)."""
    kind = cls.kind
    if SCHEDULERS.get(kind, cls) is not cls:
        raise ValueError(f"scheduler kind {kind!r} is already registered")
    SCHEDULERS[kind] = cls
    SCHEDULER_KINDS[kind] = cls.description
    return cls


def unregister(kind: str) -> None:
    """Remove a registered kind (for tests of the extension point)."""
    SCHEDULERS.pop(kind, None)
    SCHEDULER_KINDS.pop(kind, None)


def check_scheduler(kind: str, key: str = "scheduler.kind") -> str:
    """``kind`` if it names a scheduler: a registered kind, or an import path ``module:Class`` to a
    :class:`Scheduler` subclass of one's own (imported and registered under that path on first use,
    in every process that reads it: worker processes and Dask workers import it again); else a
    one-line :class:`ConfigError` naming ``key``."""
    if kind not in SCHEDULER_KINDS and ":" in kind:
        _import_scheduler(kind, key)
    if kind not in SCHEDULER_KINDS:
        raise ConfigError(
            key,
            f"unknown scheduler {kind!r}; allowed: {', '.join(SCHEDULER_KINDS)}, "
            "or an import path module:Class",
        )
    check_complete(SCHEDULERS[kind], key, "scheduler", kind)  # one registered from Python
    return kind


def _import_scheduler(path: str, key: str) -> None:
    """Register the :class:`Scheduler` subclass at import path ``path`` under that path."""
    from gossipsim.core.registry import import_object

    cls = import_object(path, key)
    if not (isinstance(cls, type) and issubclass(cls, Scheduler)):
        raise ConfigError(key, f"{path!r} is not a gossipsim Scheduler subclass")
    if getattr(cls, "kind", None) != path:  # the theory looks the walk up again by its kind
        raise ConfigError(
            key, f"{path!r} must set kind = {path!r} (got {getattr(cls, 'kind', None)!r})"
        )
    check_complete(cls, key, "scheduler", path)  # before it is registered
    SCHEDULERS[path] = cls
    SCHEDULER_KINDS[path] = getattr(cls, "description", "")


def scheduler_for(kind: str, key: str = "scheduler.kind") -> Scheduler:
    """The scheduler of kind ``kind``; a :class:`ConfigError` naming ``key`` if there is none."""
    return SCHEDULERS[check_scheduler(kind, key)]()


# --------------------------------------------------------------------------- for the samplers

_INT_IS_32_BITS = array("i").itemsize == 4


def machine_ints(values: np.ndarray) -> array[int]:
    """A flat machine-integer copy of an integer array, made through the buffer (no Python ints):
    32-bit when the values fit (half the memory, about 10% faster per hop), else 64-bit."""
    small = values.size == 0 or (int(values.min()) >= -(2**31) and int(values.max()) < 2**31)
    dtype, code = (np.int32, "i") if small and _INT_IS_32_BITS else (np.int64, "q")
    out = array(code)
    out.frombytes(np.ascontiguousarray(values, dtype=dtype).data.cast("B"))
    return out


def machine_csr(g: IndexedGraph) -> tuple[array[int], array[int], array[int]]:
    """``indptr``, ``indices`` and ``degree`` as flat machine-integer arrays for a one-step sampler:
    one contiguous read per lookup, which keeps the per-hop cost low on graphs of millions of nodes
    (tuples of Python ints scatter in memory)."""
    return machine_ints(g.indptr), machine_ints(g.indices), machine_ints(g.degree)


def uniform_blocks(
    rng: np.random.Generator,
) -> tuple[list[list[float]], list[int], Callable[[], None]]:
    """The per-run uniform buffer of a one-step sampler: ``buf[0]`` (u) and ``buf[1]`` (v) hold the
    current block, ``pos[0]`` the next hop's index in it (:data:`UNIFORM_BLOCK` when a refill is
    due), and ``refill()`` draws the next block, 8,192 u then 8,192 v. A sampler's closure reads them as::

        if pos[0] >= UNIFORM_BLOCK:
            refill()
        i = pos[0]
        pos[0] = i + 1
        ...  # buf[0][i] is the hop's u, buf[1][i] its v
    """
    buf: list[list[float]] = [[], []]
    pos = [UNIFORM_BLOCK]

    def refill() -> None:
        buf[0] = rng.random(UNIFORM_BLOCK).tolist()
        buf[1] = rng.random(UNIFORM_BLOCK).tolist()
        pos[0] = 0

    return buf, pos, refill
