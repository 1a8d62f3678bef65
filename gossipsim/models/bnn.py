"""``[model] kind = "bnn"``: a Bayesian neural network (ReLU; one hidden layer, none, or several:
``[model] hidden``) on real data, for particle protocols (SVGD, DSVGD, Forget-SVGD).

The data set decides the task (issue 22, item 9): the classification sets (``breast_cancer``,
``wine``, ``digits``, ``iris``, and ``fashion_mnist`` on its PCA feature map,
:mod:`gossipsim.data.imagetask`) keep their *original* classes and the network ends in a softmax over
them; ``diabetes`` gives regression with a Gaussian likelihood of learned precision γ. The
network, its priors (weights N(0, λ⁻¹) with λ fixed at ``weight_precision`` = e by default, or
learned under λ ∼ Gamma(a, rate b) with ``weight_prior = "hierarchical"``; γ ∼ Gamma(a_γ, rate
b_γ); learned precisions on the log scale with their Jacobians) and its gradients are
:mod:`gossipsim.logdensity.bnn`'s. The
training rows are dealt to the nodes as for the regression models (``[data] partition``).

Metrics of the particle-averaged predictive on the held-out rows: classification ``accuracy``,
``nll``, ``ece`` (and ``accuracy_forgotten`` / ``accuracy_remaining`` with unlearning requests,
:class:`~.particle.ParticleClassifier`); regression ``rmse`` of the predictive mean and ``nll`` of
the predictive density (1/N) Σ_n N(y; f_n(x), γ_n⁻¹), in standardised target units; both
``particle_spread``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from gossipsim.core.schema import Key
from gossipsim.data.datasets import DATASETS, LabelMode, Task, TaskKind, load_task, table_task
from gossipsim.data.idx import FASHION_MNIST_CLASSES, FASHION_MNIST_FOLDER
from gossipsim.data.imagetask import PIXELS, fashion_mnist_task
from gossipsim.data.tables import Table
from gossipsim.errors import ConfigError
from gossipsim.families import ModelParam
from gossipsim.logdensity.bnn import (
    BnnLayout,
    BnnTask,
    FixedPrecision,
    WeightPrior,
    bnn_log_likelihood,
    bnn_log_prior,
    bnn_outputs,
    bnn_predictive_log_density,
    bnn_predictive_probabilities,
    sample_bnn_prior,
)
from gossipsim.logdensity.hierarchical import GammaPrior
from gossipsim.models.classification import particle_spread
from gossipsim.models.particle import ParticleClassifier
from gossipsim.models.particlemodel import CHUNK_VALUES, ParticleModel, in_chunks
from gossipsim.models.regression import DATA_KEYS as REGRESSION_DATA_KEYS
from gossipsim.models.regression import (
    RegressionData,
    _option,
    _test_fraction,
    data_file,
    data_table,
    partition_rows,
)
from gossipsim.scheduling import IndexedGraph
from gossipsim.study import budget

if TYPE_CHECKING:
    from gossipsim.study.settings import ModelSpec

FloatArray = NDArray[np.float64]

FASHION_MNIST = "fashion_mnist"
#: what :func:`_dataset` returns for a file of the user's (``[data] path``)
FILE = "file"
#: the sizes of Fashion-MNIST's original splits
FASHION_MNIST_ROWS = (60_000, 10_000)
TASKS = ("auto", "classification", "regression")
DEFAULT_HIDDEN = 50
WEIGHT_PRIORS = ("fixed", "hierarchical")
#: prior parameters that only one weight prior takes
_WEIGHT_PRIOR_PARAMS = {
    "fixed": ("weight_precision",),
    "hierarchical": ("weight_shape", "weight_rate"),
}
#: operations of one particle's log-likelihood gradient per weight and data row (the forward pass's
#: two products, the backward pass's four)
BNN_WEIGHT_ROW_FLOPS = 6.0


def _shared(name: str) -> Key:
    return next(key for key in REGRESSION_DATA_KEYS if key.name == name)


HIDDEN_KEY = Key("hidden", "integers", DEFAULT_HIDDEN, "ReLU units H of the hidden layer (50, as in "
        "the original SVGD code's network); 0: no hidden layer, a softmax (or linear) regression "
        "on the features (the papers' last layer on a feature map); a list of widths (each >= 1) "
        "is several hidden ReLU layers, e.g. `[50, 50]` (004's 784-50-50-10)", minimum=0,
        list_text="a non-empty list of integers >= 1 (one per hidden layer)", list_minimum=1)  # fmt: skip
BNN_MODEL_KEYS = (
    HIDDEN_KEY,
    Key("task", "choice", "auto", "`auto` takes the data set's task (classification over "
        "its original classes, or regression for `diabetes`); `classification` or `regression` "
        "insists on one (a data set of the other task is an error)", choices=TASKS),
    Key("weight_prior", "choice", "fixed", "`fixed`: every weight N(0, 1/λ) with λ = "
        "`prior.weight_precision` (e, as the DSVGD reference code and 003's BNN); "
        "`hierarchical`: λ learned under Gamma(`prior.weight_shape`, rate `prior.weight_rate`), "
        "as the original SVGD code, whose density peaks at W = 0 (a network with a hidden layer "
        "collapses to a constant predictor: docs/particles.md)", choices=WEIGHT_PRIORS),
)  # fmt: skip
DATASET_KEY = Key(
    "dataset", "choice", None, "a data set bundled with scikit-learn (classification sets keep "
    "their original classes), or `fashion_mnist` (Debian's dataset-fashion-mnist, on a PCA "
    "feature map); required unless `path` names a file of your own",
    choices=(*DATASETS, FASHION_MNIST), default_text="required without `path`",
)  # fmt: skip
COMPONENTS_KEY = Key(
    "components", "integer", 50, "`fashion_mnist`: principal components of the feature map "
    "(whitened; fitted on the training images)", minimum=1, maximum=PIXELS,
)  # fmt: skip
FOLDER_KEY = Key(
    "folder", "string", str(FASHION_MNIST_FOLDER), "`fashion_mnist`: the folder holding the "
    "four original .gz IDX files (relative to the scenario file's folder)",
)  # fmt: skip
BNN_DATA_KEYS = (
    DATASET_KEY,
    *(
        _shared(name)
        for name in (
            "partition", "concentration", "labels_per_node", "node_classes", "majority_share",
            "sizes", "label_column",
        )
    ),
    Key("test_fraction", "number", 0.2, "held-out fraction of a scikit-learn set (stratified by "
        "class for classification sets); `fashion_mnist` keeps its own 10,000 test images",
        minimum=0, exclusive_minimum=True, maximum=1, exclusive_maximum=True),
    Key("rows_per_node", "integer", None, "at most this many training rows at each node, drawn "
        "at random from those the partition deals it", minimum=1, default_text="all"),
    Key("test_rows", "integer", None, "at most this many held-out rows, drawn at random",
        minimum=1, default_text="all"),
    COMPONENTS_KEY,
    FOLDER_KEY,
)  # fmt: skip
_FASHION_ONLY = (COMPONENTS_KEY.name, FOLDER_KEY.name)


def _dataset(options: dict[str, Any], spec: ModelSpec | None = None) -> str:
    """``[data] dataset``: one of the bundled sets or ``fashion_mnist``, with the keys it takes;
    ``file`` for a table of the user's (``[data] path``, :func:`data_file`, or ``[data] table``)."""
    if spec is not None and (data_file(spec) is not None or spec.data.table is not None):
        for name in _FASHION_ONLY:
            if name in options:
                raise ConfigError(f"data.{name}", 'applies to dataset = "fashion_mnist" only')
        return FILE
    dataset = options.get("dataset")
    if dataset is None:
        raise ConfigError("data.dataset", f"is required for bnn: {DATASET_KEY.allowed()}")
    dataset = DATASET_KEY.check(dataset, "data.dataset")
    if dataset == FASHION_MNIST and "test_fraction" in options:
        raise ConfigError(
            "data.test_fraction",
            "fashion_mnist has its own test split (10,000 images): remove the key "
            "(data.test_rows draws fewer of them)",
        )
    for name in _FASHION_ONLY:
        if dataset != FASHION_MNIST and name in options:
            raise ConfigError(
                f"data.{name}", f'applies to dataset = "fashion_mnist" only, not {dataset!r}'
            )
    return str(dataset)


def _own_task(dataset: str, table: Table | None = None) -> BnnTask:
    """Regression for the regression sets, classification over the original classes otherwise;
    a file is classification when every label is a string or a whole number."""
    if table is not None:
        return "classification" if table.whole_labels() else "regression"
    regression = dataset != FASHION_MNIST and DATASETS[dataset].task == "regression"
    return "regression" if regression else "classification"


def _task(task: str, dataset: str, table: Table | None = None) -> BnnTask:
    """The network's task: the data set's, which ``[model] task`` may insist on (a file of whole
    labels may be regression; one of real labels cannot be classification)."""
    if table is not None:
        own = _own_task(dataset, table)
        if task == "regression" and table.numeric_labels:
            return "regression"
        if task not in ("auto", own):
            raise ConfigError(
                "model.task",
                f"the labels of {table.source} are not all whole numbers or strings: "
                "it is a regression set",
            )
        return own
    own = _own_task(dataset)
    if task not in ("auto", own):
        fitting = [name for name in (*DATASETS, FASHION_MNIST) if _own_task(name) == task]
        raise ConfigError(
            "data.dataset",
            f"{dataset!r} is a {own} set; model.task = {task!r} takes: {', '.join(fitting)}",
        )
    return own


def _hidden(value: Any, where: str = "model.hidden") -> int | tuple[int, ...]:
    """``[model] hidden``: an integer >= 0, or a non-empty list of widths >= 1 (one width is the
    integer)."""
    if isinstance(value, list | tuple) and not value:
        raise ConfigError(
            where, f"must be {HIDDEN_KEY.allowed()} (got an empty list): a list holds the "
            "widths of the hidden layers",
        )  # fmt: skip
    value = HIDDEN_KEY.check(list(value) if isinstance(value, tuple) else value, where)
    if isinstance(value, tuple):
        return value[0] if len(value) == 1 else value
    return int(value)


def _layout(spec: ModelSpec) -> BnnLayout:
    """The network of the settings: inputs, hidden units and outputs (classes, or 1)."""
    options = spec.data.options
    dataset = _dataset(dict(options), spec)
    table = data_table(spec)
    task = _task(spec.model.options.get("task", "auto"), dataset, table)
    if table is not None:
        features, classes = int(table.X.shape[1]), int(table.classes().size)
    elif dataset == FASHION_MNIST:
        features = int(_option(dict(options), "components", int, COMPONENTS_KEY.default))
        classes = len(FASHION_MNIST_CLASSES)
    else:
        features, classes = DATASETS[dataset].n_features, DATASETS[dataset].classes
    hidden = _hidden(spec.model.options.get("hidden", DEFAULT_HIDDEN))
    hierarchical = spec.model.options.get("weight_prior", "fixed") == "hierarchical"
    outputs = classes if task == "classification" else 1
    return BnnLayout(features, hidden, outputs, task, hierarchical=hierarchical)


class BayesianNeuralNetwork(ParticleClassifier, ParticleModel):
    """Hidden ReLU layers (one by default), softmax (classification) or Gaussian (regression)
    likelihood."""

    kind = "bnn"
    description = (
        "Bayesian neural network (ReLU, [model] hidden units, a list for several layers): softmax "
        "over a real set's original classes, or Gaussian regression with learned precision; particles only"
    )
    model_keys: ClassVar[tuple[Key, ...]] = BNN_MODEL_KEYS
    data_keys: ClassVar[tuple[Key, ...]] = BNN_DATA_KEYS
    reads_files: ClassVar[bool] = True
    reads_tables: ClassVar[bool] = True
    prior_params = (
        ModelParam("weight_precision", "positive", "the weights' fixed precision λ "
                   "(weight_prior = \"fixed\")", math.e),
        ModelParam("weight_shape", "positive", "shape a of the Gamma prior on the weights' "
                   "precision λ (weight_prior = \"hierarchical\")", 1.0),
        ModelParam("weight_rate", "positive", "rate b of the Gamma prior on λ (weight_prior = "
                   "\"hierarchical\")", 0.1),
        ModelParam("noise_shape", "positive", "regression: shape of the Gamma prior on the "
                   "noise precision γ", 1.0),
        ModelParam("noise_rate", "positive", "regression: rate of the Gamma prior on γ", 0.1),
    )  # fmt: skip

    def __init__(self, spec: ModelSpec, graph: IndexedGraph, data_rng: np.random.Generator) -> None:
        self.spec = spec
        self.graph = graph
        self.temperature = spec.model.temperature
        self.options = dict(spec.data.options)
        self.dataset = _dataset(self.options, spec)
        self.table = data_table(spec)
        self.layout = _layout(spec)
        self.task = self.layout.task
        prior = spec.model.prior
        self.weight_prior: WeightPrior = (
            GammaPrior(float(prior["weight_shape"]), float(prior["weight_rate"]))
            if self.layout.hierarchical
            else FixedPrecision(float(prior["weight_precision"]))
        )
        self.noise_prior = GammaPrior(float(prior["noise_shape"]), float(prior["noise_rate"]))
        self.check_budget(spec, graph)
        first = self.draw_data(data_rng)  # validates every data key once
        self.fixed_data = first if spec.data.draw == "once" else None

    @classmethod
    def prepare(
        cls, model: Mapping[str, Any], key: str = "model"
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """As for every particle model, and the prior keeps only the weight prior's own parameters:
        one of the other weight prior is an error naming it."""
        prior, options = super().prepare(model, key)
        options["hidden"] = _hidden(options["hidden"], f"{key}.hidden")
        chosen = options["weight_prior"]
        given = model.get("prior", {})
        for other, names in _WEIGHT_PRIOR_PARAMS.items():
            if other == chosen:
                continue
            for name in names:
                if name in given:
                    raise ConfigError(
                        f"{key}.prior.{name}",
                        f'applies to model.weight_prior = "{other}" only (this model\'s weight '
                        f'prior is "{chosen}"; its parameters: '
                        f"{', '.join(_WEIGHT_PRIOR_PARAMS[chosen])})",
                    )
                del prior[name]
        return prior, options

    # ----------------------------------------------------------------------------------- data

    def _load(self, rng: np.random.Generator) -> tuple[Task, FloatArray, FloatArray]:
        """The task, and its training and held-out features without the bias column (the network
        has its own biases)."""
        if self.dataset == FASHION_MNIST:
            folder = Path(str(_option(self.options, "folder", str, FOLDER_KEY.default)))
            if not folder.is_absolute():
                folder = Path(self.spec.base_dir) / folder
            components = int(_option(self.options, "components", int, COMPONENTS_KEY.default))
            task = fashion_mnist_task(folder.resolve(), components=components, key="data.folder")
            return task, task.X_train[:, :-1], task.X_test[:, :-1]
        if self.table is not None:
            kind: TaskKind = "multiclass" if self.task == "classification" else "regression"
            test_fraction = _test_fraction(self.options)
            task = table_task(self.table, kind, test_fraction=test_fraction, bias=False, rng=rng)
            return task, task.X_train, task.X_test
        labels: LabelMode = "classes" if self.task == "classification" else "binary"
        task = load_task(
            self.dataset,
            test_fraction=_test_fraction(self.options),
            bias=False,
            rng=rng,
            labels=labels,
        )
        return task, task.X_train, task.X_test

    def draw_data(self, rng: np.random.Generator) -> RegressionData:
        task, X_train, X_test = self._load(rng)
        parts = partition_rows(self.options, task.groups_train, self.graph.size, rng)
        cap = _option(self.options, "rows_per_node", int, None)
        if cap is not None:
            parts = [
                np.sort(rng.choice(p, size=cap, replace=False)) if p.size > cap else p
                for p in parts
            ]
        test = np.arange(task.y_test.size)
        kept = _option(self.options, "test_rows", int, None)
        if kept is not None and kept < test.size:
            test = np.sort(rng.choice(test, size=kept, replace=False))
        return RegressionData(
            tuple(X_train[p] for p in parts),
            tuple(task.y_train[p] for p in parts),
            X_test[test],
            task.y_test[test],
        )

    def node_sizes(self, data: Any) -> list[int]:
        return [int(y.size) for y in data.y] if data is not None else []

    def node_rows(self, data: Any, node: int) -> int:
        return int(data.y[node].size)

    @classmethod
    def sizes(cls, spec: ModelSpec, nodes: int) -> budget.ModelSizes:
        """Per particle: d numbers of state and message; the data's rows and columns (for
        Fashion-MNIST the images as loaded too); one gradient step's activations at the largest
        node and the held-out predictive of one recorded set."""
        layout = _layout(spec)
        options = dict(spec.data.options)
        dataset = _dataset(options, spec)
        table = data_table(spec)
        if table is not None:
            n = int(table.X.shape[0])
            test = round(_test_fraction(options) * n)
            train = n - test
            loaded = 3.0 * (train + test) * (layout.features + 1)
        elif dataset == FASHION_MNIST:
            train, test = FASHION_MNIST_ROWS
            loaded = (train + test) * (PIXELS + 2.0 * (layout.features + 1))
        else:
            n = DATASETS[dataset].n_samples
            test = round(_test_fraction(options) * n)
            train = n - test
            loaded = 3.0 * (train + test) * (layout.features + 1)
        cap = _option(options, "rows_per_node", int, None)
        largest = train if cap is None else min(cap, train)
        kept = _option(options, "test_rows", int, None)
        test = test if kept is None else min(kept, test)
        width = 2 * layout.units + 3 * layout.outputs
        return budget.ModelSizes(
            state_entries=layout.dimension,
            message_entries=layout.dimension,
            particle_entries=layout.dimension,
            data_values=loaded,
            data_key=table.key if table is not None else "data.dataset",
            data_what=f"{train + test} rows of {layout.features} features",
            state_key="model.hidden",
            state_what=f"{nodes} nodes with {layout.dimension}-entry particles",
            every_slot=True,
            evaluation_values=float(test * (layout.outputs + 2)),
            evaluation_key="data.test_rows",
            evaluation_what=f"the predictive of {test} held-out rows per recorded slot",
            step_values=float(min(largest * width, CHUNK_VALUES) + 4 * layout.dimension),
            step_key="model.hidden",
            # forward and backward passes: about 6 operations a weight a row
            row_flops=BNN_WEIGHT_ROW_FLOPS * layout.weight_count,
            rows=float(train if cap is None else min(train, cap * nodes)),
            test_rows=float(test),
            flops_key="model.hidden",
        )

    # --------------------------------------------------------------------- log-densities

    @property
    def particle_dimension(self) -> int:
        return self.layout.dimension

    def sample_prior(self, rng: np.random.Generator, count: int) -> FloatArray:
        return sample_bnn_prior(self.layout, rng, count, self.weight_prior, self.noise_prior)

    def log_prior(self, particles: FloatArray) -> tuple[FloatArray, FloatArray]:
        return bnn_log_prior(self.layout, particles, self.weight_prior, self.noise_prior)

    def log_likelihood(
        self, data: Any, node: int, particles: FloatArray, rows: NDArray[np.intp] | None = None
    ) -> tuple[FloatArray, FloatArray]:
        """Σ log p(y | x, θ) over the node's rows, or over ``rows`` scaled by n_node/|rows|.

        The rows are summed a block at a time, blocks of as many rows as keep one particle set's
        activations within :data:`CHUNK_VALUES`, and the sets of a batch ``(..., N, D)`` are taken a
        few at a time (as many as keep a block's activations within it): the blocks are those of
        a set alone, so a set's value and gradient are the same bits whether it is computed alone
        or with others (one run of the event engine, a batch of runs of the vectorized engine, the
        sets of a KSD call). Blocks sized by the whole batch summed its rows in other blocks, which
        changed the last bits of the ``bnn`` KSD between the engines."""
        X, y = data.X[node], data.y[node]
        scale = 1.0
        if rows is not None:
            rows = np.asarray(rows, dtype=np.intp)
            if rows.size == 0:
                raise ValueError("a mini-batch needs at least one row")
            scale = y.size / rows.size
            X, y = X[rows], y[rows]
        particles = np.asarray(particles, dtype=np.float64)
        count = particles.shape[-2] if particles.ndim >= 2 else 1  # particles of one set
        per_row = count * (2 * self.layout.units + 3 * self.layout.outputs)
        block = max(1, int(CHUNK_VALUES // max(per_row, 1)))  # rows: those of one set alone
        if particles.ndim <= 2:
            return self._summed_blocks(particles, X, y, scale, block)
        sets = particles.reshape(-1, *particles.shape[-2:])
        step = max(1, int(CHUNK_VALUES // max(per_row * min(block, y.size), 1)))
        parts = [
            self._summed_blocks(sets[begin : begin + step], X, y, scale, block)
            for begin in range(0, sets.shape[0], step)
        ]
        value = np.concatenate([v for v, _ in parts], axis=0)
        gradient = np.concatenate([g for _, g in parts], axis=0)
        lead = particles.shape[:-2]
        return value.reshape(*lead, *value.shape[1:]), gradient.reshape(particles.shape)

    def _summed_blocks(
        self, particles: FloatArray, X: FloatArray, y: FloatArray, scale: float, block: int
    ) -> tuple[FloatArray, FloatArray]:
        """:func:`bnn_log_likelihood` of ``particles`` summed over the rows, ``block`` at a time."""
        value, gradient = bnn_log_likelihood(
            self.layout, particles, X[:block], y[:block], scale=scale
        )
        for begin in range(block, y.size, block):
            more = bnn_log_likelihood(
                self.layout, particles, X[begin : begin + block], y[begin : begin + block],
                scale=scale,
            )  # fmt: skip
            value, gradient = value + more[0], gradient + more[1]
        return value, gradient

    # ----------------------------------------------------------------------------- metrics

    def _set_values(self, particles: FloatArray) -> float:
        """Temporaries of evaluating one particle set on the held-out rows."""
        return float(particles.shape[-2] * (2 * self.layout.units + 3 * self.layout.outputs))

    def predictive_probabilities(self, data: Any, particles: FloatArray) -> FloatArray:
        particles = np.asarray(particles, dtype=np.float64)
        return in_chunks(
            lambda sets: bnn_predictive_probabilities(self.layout, sets, data.X_test),
            particles,
            self._set_values(particles) * data.y_test.size,
        )

    def training_labels(self, data: Any, node: int) -> NDArray[np.int64]:
        return np.asarray(data.y[node]).astype(np.int64)

    def test_labels(self, data: Any) -> NDArray[np.int64]:
        return np.asarray(data.y_test).astype(np.int64)

    def particle_columns(self, requested: frozenset[int]) -> tuple[str, ...]:
        if self.task == "classification":
            return super().particle_columns(requested)
        return ("rmse", "nll", "particle_spread")

    def evaluate_particles(
        self, data: Any, particles: FloatArray, requested: frozenset[int]
    ) -> dict[str, FloatArray]:
        if self.task == "classification":
            return super().evaluate_particles(data, particles, requested)
        particles = np.asarray(particles, dtype=np.float64)

        def rmse_and_nll(sets: FloatArray) -> FloatArray:
            mean = bnn_outputs(self.layout, sets, data.X_test)[..., 0].mean(axis=-2)
            rmse = np.sqrt(np.mean((data.y_test - mean) ** 2, axis=-1))
            density = bnn_predictive_log_density(self.layout, sets, data.X_test, data.y_test)
            return np.stack([rmse, -density.mean(axis=-1)], axis=-1)

        both = in_chunks(rmse_and_nll, particles, self._set_values(particles) * data.y_test.size)
        return {
            "rmse": both[..., 0],
            "nll": both[..., 1],
            "particle_spread": particle_spread(particles),
        }
