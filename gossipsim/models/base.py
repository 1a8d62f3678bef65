"""What the runner needs from a model: node data, capabilities, exact targets and evaluation.

A model turns its own settings (:class:`~gossipsim.study.settings.ModelSpec`: the ``[model]`` and
``[data]`` sections of one variant; never the whole scenario) into

- ``fixed_data`` (drawn once) or ``draw_data(rng)`` (a new data set per run),
- ``capabilities``: what it offers a protocol (:mod:`gossipsim.core.capabilities`: exact conjugate
  factors through ``factors(data)``, or expected log-likelihood gradients through
  ``mean_gradient(data, estimation)`` and ``in_domain``); the protocol kind chosen by the scenario
  builds itself from them, the model never builds a protocol,
- ``target(data, forgotten)``: the exact target posterior of the data meant to be learned, with
  ``kl(states)`` vectorised over a trace of posteriors, the best-in-family KL where the target is
  not in the variational family, its score ``score(points)`` and, where the model has them, exact
  draws ``sample(rng, count)`` (``has_samples``),
- ``evaluate(data, states)``: extra per-slot columns (held-out accuracy, NLL, ECE, ...),
- ``sizes(spec, nodes)``: how big the model is, in numbers, from the settings alone (the memory
  estimate of :mod:`gossipsim.study.budget`, checked by :meth:`Model.check_budget` before any data are
  drawn).

New models (particle posteriors, Bayesian neural networks) implement this interface; the engine and
the runner do not change. The abstract methods (and those a declared capability needs:
:data:`~gossipsim.core.capabilities.CAPABILITY_METHODS`) are what a model must define: a kind that lacks
one is refused when it is loaded, in one line naming it (:mod:`gossipsim.core.contracts`).
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from gossipsim.core.schema import Key, format_number
from gossipsim.errors import ConfigError
from gossipsim.families import ExponentialFamily, ModelParam
from gossipsim.scheduling import IndexedGraph
from gossipsim.states.representations import Target
from gossipsim.study import budget

if TYPE_CHECKING:
    from gossipsim.study.settings import ModelSpec


class FamilyTarget(Target):
    """A target in the variational family itself, given by its natural parameters: its KL, its
    score and exact draws (the family's ``score`` and ``sample_points``), both in the family's
    point coordinates (``(..., 1)`` for a scalar θ, the first C − 1 coordinates of a Dirichlet).

    For a non-conjugate model whose target is the variational optimum (logistic regression) these
    are the optimum's score and draws, not the exact posterior's."""

    def __init__(self, family: ExponentialFamily, eta: np.ndarray) -> None:
        self.family = family
        self.eta = np.asarray(eta, dtype=float)

    def kl(self, states: np.ndarray) -> np.ndarray:
        return self.family.kl(states, self.eta)

    def score(self, points: np.ndarray) -> np.ndarray:
        return self.family.score(self.eta, points)

    def sample(self, rng: np.random.Generator, count: int) -> np.ndarray:
        return self.family.sample_points(self.eta, count, rng)

    @property
    def has_samples(self) -> bool:
        return True


class Model(ABC):
    """One variant's model: family, prior, data and how to learn and judge it."""

    kind: ClassVar[str] = ""
    description: ClassVar[str] = ""
    prior_params: ClassVar[tuple[ModelParam, ...]] = ()
    data_params: ClassVar[tuple[ModelParam, ...]] = ()
    #: generator parameters that were renamed: old name -> the message naming the new one
    renamed_data_params: ClassVar[Mapping[str, str]] = MappingProxyType({})
    #: model-section keys beyond kind, prior and temperature (type, default, range, doc: checked
    #: when the scenario is read, documented from here; :meth:`prepare` checks what they imply)
    model_keys: ClassVar[tuple[Key, ...]] = ()
    #: data-section keys beyond points_per_node, path, draw and the generator parameters
    data_keys: ClassVar[tuple[Key, ...]] = ()
    #: what the model offers a protocol (:mod:`gossipsim.core.capabilities`)
    capabilities: ClassVar[frozenset[str]] = frozenset()
    #: whether ``[data] path`` (a node,x CSV file) is supported
    reads_files: ClassVar[bool] = False
    #: whether ``[data] table`` (a table given from Python: :meth:`given_table`) is supported
    reads_tables: ClassVar[bool] = False
    #: with exact factors: whether every state (and target) is the correctly rounded sum of the
    #: prior and the factors it holds, whatever the order they came and went in
    #: (:mod:`gossipsim.families.exactsum`), rather than float64's sums in update order
    exact_sums: ClassVar[bool] = False

    spec: ModelSpec
    family: ExponentialFamily
    prior: np.ndarray
    graph: IndexedGraph
    temperature: float
    fixed_data: Any | None = None

    #: whether targets may lie outside the family (a best-in-family KL is then defined)
    has_best_family: ClassVar[bool] = False

    @property
    def message_entries(self) -> int:
        """Numbers one message carries (64 bits each by default)."""
        return int(getattr(self.family, "message_entries", self.family.dim))

    @abstractmethod
    def draw_data(self, rng: np.random.Generator) -> Any:
        """A fresh data set for one run (``[data] draw = "per-run"``)."""

    def in_domain(self, eta: np.ndarray) -> bool:
        """Whether ``eta`` is a state the model can work with (a protocol keeps its state there):
        the family's natural-parameter domain unless the model needs more."""
        return bool(self.family.in_domain(eta))

    @classmethod
    @abstractmethod
    def sizes(cls, spec: ModelSpec, nodes: int) -> budget.ModelSizes:
        """How big the variant's model is on ``nodes`` nodes, in numbers, computed from the settings
        alone (before any data is drawn): what :mod:`gossipsim.study.budget` turns into bytes."""

    def check_budget(self, spec: ModelSpec, graph: IndexedGraph) -> None:
        """Refuse, before the data are drawn, a variant whose graph, data and runs cannot fit in
        memory or whose simulated time would overflow (``spec.check_budget``: the world binds
        :func:`gossipsim.study.budget.check_world` to the scenario; a model built alone skips it)."""
        if spec.check_budget is not None:
            spec.check_budget(type(self).sizes(spec, graph.size), graph)

    def target(self, data: Any, forgotten: frozenset[int]) -> Target:
        """The exact posterior of all data but the ``forgotten`` nodes' (cached for the data drawn
        once: every run of a variant shares its targets)."""
        cache: dict[frozenset[int], Target] = self.__dict__.setdefault("_target_cache", {})
        if data is self.fixed_data and forgotten in cache:
            return cache[forgotten]
        with warnings_only_on_success():
            target = self.compute_target(data, forgotten)
        if data is self.fixed_data:
            cache[forgotten] = target
        return target

    def known_targets(self) -> dict[frozenset[int], Target]:
        """The targets found so far for the data drawn once, by forgotten set: what another
        process building the same variant can :meth:`adopt_targets` instead of finding them again
        (a logistic-regression target is an optimisation of seconds)."""
        return dict(self.__dict__.get("_target_cache", {}))

    def adopt_targets(self, targets: Mapping[frozenset[int], Target]) -> None:
        """Take the targets another process found for this variant (:meth:`known_targets` of a
        model built from the same scenario, so of the same data drawn once)."""
        if self.fixed_data is not None:
            self.__dict__.setdefault("_target_cache", {}).update(targets)

    @abstractmethod
    def compute_target(self, data: Any, forgotten: frozenset[int]) -> Target:
        """The exact posterior of all data but the ``forgotten`` nodes' (uncached)."""

    def included(self, forgotten: frozenset[int]) -> np.ndarray:
        """Boolean mask of the nodes whose data the target includes."""
        mask = np.ones(self.nodes, dtype=bool)
        mask[list(forgotten)] = False
        return mask

    @property
    def nodes(self) -> int:
        return int(self.graph.size)

    def evaluation_columns(self) -> tuple[str, ...]:
        """Extra metrics.csv columns computed by :meth:`evaluate`."""
        return ()

    def evaluate(self, data: Any, states: np.ndarray) -> dict[str, np.ndarray]:
        """Extra per-slot metrics of the posteriors ``states`` (one row each)."""
        return {}

    @abstractmethod
    def node_sizes(self, data: Any) -> list[int]:
        """Number of observations at each node, one per node in graph order (the theory's removal
        latency is 0 for a node without any); ``[]`` where they are not known: ``data`` is None when
        the data are drawn per run (``[data] draw = "per-run"``)."""

    @classmethod
    def unmet_needs(cls) -> list[str]:
        """What the model's capabilities need (:data:`~gossipsim.core.capabilities.CAPABILITY_METHODS`)
        that it does not define: refused when its kind is loaded (:mod:`gossipsim.core.contracts`)."""
        from gossipsim.core.capabilities import CAPABILITY_METHODS
        from gossipsim.core.contracts import lacking

        needed = [m for c in sorted(cls.capabilities) for m in CAPABILITY_METHODS.get(c, ())]
        return lacking(cls, needed)

    def node_data_entries(self, data: Any, node: int) -> int:
        """How many numbers node ``node``'s data are, as a node would send them to a centre (what
        a centralised protocol charges: :mod:`gossipsim.protocols.centre`): its training rows'
        features and labels (``data.X[node]`` and ``data.y[node]``, as the model holds them,
        a bias column included) where the data have them, else one number per observation
        (:meth:`node_sizes`)."""
        X, y = getattr(data, "X", None), getattr(data, "y", None)
        if X is not None and y is not None:
            return int(np.size(X[node])) + int(np.size(y[node]))
        return int(self.node_sizes(data)[node])

    @classmethod
    def given_table(cls, value: Any, label_column: Any) -> Any:
        """``[data] table`` given from Python, ``(X, y)`` or a pandas DataFrame with the column
        ``label_column`` (None: the default), as a checked, read-only
        :class:`~gossipsim.data.tables.Table` (:func:`~gossipsim.data.tables.memory_table`); what
        :func:`~gossipsim.study.scenario.parse_study` calls for a model that :attr:`reads_tables`."""
        from gossipsim.data.tables import memory_table

        if label_column is not None and not isinstance(label_column, str):
            raise ConfigError("data.label_column", f"must be a string (got {label_column!r:.60})")
        return memory_table(value, label_column)

    @classmethod
    def prepare(
        cls, model: Mapping[str, Any], key: str = "model"
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Validated prior parameters (defaults filled in) and model options from ``[model]``."""
        from gossipsim.families.conjugate import _check_params

        prior = model.get("prior", {})
        if not isinstance(prior, dict):
            raise ConfigError(f"{key}.prior", "must be a table of prior parameters")
        checked = _check_params(prior, cls.prior_params, f"{key}.prior")
        return {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in checked.items()}, {}

    @classmethod
    def describe_prior(cls) -> str:
        return ", ".join(
            f"{p.name}" + ("" if p.default is None else f"={_fmt(p.default)}")
            for p in cls.prior_params
        )


def total_points(spec: ModelSpec, nodes: int) -> int:
    """Observations of all nodes together, as ``[data] points_per_node`` sets them."""
    points = spec.data.points_per_node
    return sum(points) if isinstance(points, tuple) else points * nodes


def check_prior_numbers(family: ExponentialFamily, prior: np.ndarray) -> None:
    """The prior must be a member the family can compute with: finite natural parameters and a
    finite KL to itself (a Beta with a = 1e-320 has ψ(a) = −inf, for instance)."""
    with np.errstate(all="ignore"):
        finite = bool(np.all(np.isfinite(prior))) and bool(
            np.all(np.isfinite(family.kl(prior[None, :], prior)))
        )
    if not finite:
        raise ConfigError(
            "model.prior",
            "its parameters are too extreme for the model's arithmetic (the prior's natural "
            "parameters or its KL are not finite); use values closer to 1",
        )


@contextmanager
def warnings_only_on_success() -> Iterator[None]:
    """Hold back the warnings of a computation (NumPy overflows, quadrature round-off): shown if it
    succeeds, dropped if it raises, whose one-line error then says what went wrong on its own."""
    with warnings.catch_warnings(record=True) as caught:
        yield
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


#: ``[model] sigma`` must lie here: σ² and 1/σ² (the precision every factor is scaled by) are then
#: finite, non-zero floats
SIGMA_RANGE = (1e-150, 1e150)


#: ``[model] sigma`` of the models with a known noise standard deviation
SIGMA_KEY = Key(
    "sigma", "number", 1.0, "known noise standard deviation σ", minimum=SIGMA_RANGE[0],
    maximum=SIGMA_RANGE[1], reason="the model divides by σ², which must be a finite, non-zero number",
)  # fmt: skip


def check_sigma(value: Any, key: str) -> float:
    """A known noise standard deviation σ (``[model] sigma``), within :data:`SIGMA_RANGE`."""
    low, high = SIGMA_RANGE
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ConfigError(
            key,
            f"must be a number in [{low:g}, {high:g}] (got {value!r}): the model divides by σ², "
            "which must be a finite, non-zero number",
        )
    return float(value)


def _fmt(x: Any) -> str:
    return format_number(x) if isinstance(x, float | int) else str(x)
