"""The Python API in one place: load a scenario, run it, get pandas tables back.

A run goes through four steps, in this order, so that nothing can lose finished work:

1. every argument is checked and every variant's graph and data built (user errors: ConfigError);
2. the executor is started (a Dask cluster created or reached) and only then the results folder
   opened (cleared, or cleaned up for ``--resume``);
3. the runs execute and are committed to the folder in batches as they finish (:mod:`.store`);
4. the tables, failures.csv and summary.json are committed, and only then the figures drawn; a
   failure there, or in the theory of a variant (recorded in summary.json), is a
   :class:`~gossipsim.results.results.PostProcessingError` raised once everything else is written.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gossipsim.core.textfiles import checked_path
from gossipsim.errors import ConfigError
from gossipsim.execution.executors import (
    Executor,
    Outcome,
    Task,
    capped,
    count_units,
    describe_error,
    start_executor,
    units,
)
from gossipsim.results.graphfiles import MAX_SAVED_NODES
from gossipsim.results.store import RunStore
from gossipsim.results.studyrecord import study_record
from gossipsim.study.scenario import Study, load_scenario, parse_study, raise_for_swept_base
from gossipsim.world.world import World, build_world

if TYPE_CHECKING:  # the tables need pandas: imported by run() alone, not by check() (validate)
    from gossipsim.results.results import Results

# Python objects collect() keeps per run besides its table cells (a row dict, a part entry): a rough
# lower bound, used only to refuse sweeps that cannot fit in memory
PER_RUN_OVERHEAD_BYTES = 512


def run(
    scenario: Study | str | os.PathLike[str] | Mapping[str, Any],
    *,
    runs: int | None = None,
    seed: int | None = None,
    overrides: Mapping[str, Any] | None = None,
    workers: int = 1,
    cluster: str | None = None,
    engine: str = "auto",
    out: str | os.PathLike[str] | None = None,
    resume: bool = False,
    make_plots: Callable[[Results, Path], None] | None = None,
    progress: bool | None = None,
    tables: str | None = None,
    allow_code_change: bool = False,
    plots: bool = True,
) -> Results:
    """Run every variant of a scenario and return its :class:`~gossipsim.results.results.Results`.

    ``scenario`` is a loaded :class:`Study`, a path to a TOML file, or the scenario as nested dicts.
    ``runs`` and ``seed`` override the file's values; ``overrides`` sets any dotted keys first
    (``{"topology.nodes": 50}``, validated as the file is: :meth:`Study.replace`). Runs execute in this process (``workers=1``),
    a local process pool (``workers=W``) or on a Dask cluster (``cluster="tcp://host:8786"`` or
    ``"local:N"``; not together with ``workers``); the results are identical whatever the choice.
    ``engine`` is ``"auto"`` (the default, as in the CLI: for each variant the vectorised engine
    when it can run the variant, the variant has at least 16 runs (fewer run faster one at a time)
    and its runs fit in memory 16 at a time, else the event engine; ``res.engines`` says which ran
    and why), ``"event"`` (the SimPy engine) or ``"vectorized"`` (many runs at once in NumPy; a
    variant it cannot run is a ConfigError); the tables are the same.

    With ``out`` finished runs are committed to that folder in batches as they complete (a kill
    loses at most about a second of finished runs, :mod:`gossipsim.results.store`) and the tables and the
    figures are written there at the end: the folder ``gossipsim run`` writes, its figures in
    ``out/plots`` (those of :func:`standard_figures`, PNG, medians) unless ``plots=False`` (as
    ``--no-plots``: the tables only) or ``make_plots`` (a function ``(results, folder) -> None``)
    draws others instead; ``resume=True`` continues an
    interrupted sweep in ``out`` (a finished one is read back: nothing is run, the figures are
    drawn again); it refuses a folder whose runs were made by other code (gossipsim's version or
    source, a plug-in's source: :mod:`gossipsim.results.provenance`) unless ``allow_code_change=True``.
    Damaged parts in ``out`` are reported (a warning) and their runs run again. The folder is
    locked for the whole call (:mod:`gossipsim.results.folderlock`): a folder another command is writing
    is refused with a one-line ConfigError naming its process. ``tables`` says which files hold the tables in ``out``: ``"auto"`` (the default:
    CSV, plus Parquet copies where pyarrow is installed), ``"csv"``, ``"parquet"`` (Parquet only)
    or ``"both"`` (:meth:`Results.write`). ``progress`` shows a progress bar (runs done / total,
    rate, ETA): ``True`` always, ``False`` never, ``None`` (the default) where a user is watching:
    in a Jupyter notebook or an IPython session (a widget where ipywidgets is installed, else
    text) and on a terminal, not in a script whose stderr goes to a file.

    Raises :class:`~gossipsim.errors.ConfigError` for bad input (before anything is written) and
    :class:`~gossipsim.results.results.PostProcessingError` (its ``results`` attribute holds the tables)
    when the runs are done but the theory of a variant, writing the tables or ``make_plots`` failed.

    >>> import gossipsim as gs
    >>> res = gs.run("scenarios/fig3_beta_bernoulli.toml", runs=20)   # doctest: +SKIP
    >>> res.runs.groupby("variant").cover_iteration.mean()             # doctest: +SKIP
    """
    study = _as_study(scenario)
    if overrides is not None:
        if not isinstance(overrides, Mapping):
            raise ConfigError("overrides", "must be a mapping of dotted keys to values")
        study = study.replace(overrides)
    study = _with_overrides(study, runs, seed)
    workers = _integer(workers, "workers")
    out = checked_path(out, "--out") if out is not None else None
    _check_flags(resume, progress, make_plots)
    if not isinstance(plots, bool | np.bool_):
        raise ConfigError("plots", f"must be True or False (got {plots!r:.80})")
    if make_plots is not None and not plots:
        raise ConfigError("plots", "plots=False draws no figures: give make_plots or plots=False")
    if make_plots is None and plots:
        make_plots = standard_figures()
    for name, text in (("tables", tables), ("--engine", engine), ("--cluster", cluster)):
        if text is not None and not isinstance(text, str):
            raise ConfigError(name, f"must be a string or None (got {type(text).__name__})")
    resume = bool(resume)
    if resume and out is None:
        raise ConfigError("--resume", "needs --out, the folder of the interrupted sweep")
    if not isinstance(allow_code_change, bool):
        raise ConfigError("allow_code_change", f"must be True or False (got {allow_code_change!r})")
    if allow_code_change and not resume:
        raise ConfigError("--allow-code-change", "applies only with --resume")
    from gossipsim.results.writing import table_formats

    formats = table_formats(tables)
    worlds = check(study)
    engines, notes = choose_engines(study, worlds, engine)
    check_memory(study, worlds, "--runs" if runs is not None else "scenario.runs")
    # the folder locked, then read-only checks of it (scenario, input files, code, its parts):
    # nothing is changed yet
    store = (
        RunStore(
            out, study, resume=resume, open=False, lock=True, allow_code_change=allow_code_change
        )
        if out is not None
        else None
    )
    try:
        if store is not None:
            _report_repairs(store)
        if store is not None and store.complete:  # a finished sweep: its tables are its runs
            return _finished(study, store, make_plots, formats)
        record = store.record if store is not None else study_record(study)
        done = store.finished() if store is not None and resume else set()
        finished = Counter(variant for variant, _ in done)
        todo = [v.scenario.run.runs - finished[i] for i, v in enumerate(study.variants)]
        workers, cluster, note = capped(workers, cluster, count_units(todo, engines))
        if note is not None:  # a fork storm of idle processes helps no one
            warnings.warn(note, UserWarning, stacklevel=2)
        warn_long_study(study, worlds, workers if cluster is None else 1)
        with start_executor(workers, cluster) as executor:
            if store is not None:
                store.open()  # the executor is running: only now is the folder touched
            outcomes = _execute(study, worlds, engines, executor, store, done, progress)
        return _finish(study, worlds, notes, store, outcomes, make_plots, formats, record)
    finally:
        if store is not None:
            store.close()  # the folder's lock released


def standard_figures(
    fmt: str = "png", statistic: str = "median"
) -> Callable[[Results, Path], None]:
    """What ``gossipsim run`` and ``gs.run(..., out=DIR)`` draw into ``DIR/plots``: every standard
    figure that applies (:func:`gossipsim.figures.standard.plot_results`), as ``<name>.<fmt>``, ``statistic``
    the line of the ``kl_vs_*`` figures; a ``make_plots`` for :func:`run` and
    :meth:`Results.write`."""

    def make_plots(res: Results, folder: Path) -> None:
        from gossipsim.figures.standard import plot_results

        plot_results(
            res.metrics, res.runs, res.requests, res.visits, res.summary(), folder, fmt=fmt,
            statistic=statistic, graphs=res.graphs, particles=res.particles,
        )  # fmt: skip

    return make_plots


def _report_repairs(store: RunStore) -> None:
    """Warn (one line each) of the damaged parts and duplicates a resume drops, and of a code
    change it was allowed across."""
    if store.damaged:
        shown = "; ".join(f"{path.name}: {why}" for path, why in store.damaged[:3])
        more = len(store.damaged) - 3
        warnings.warn(
            f"{len(store.damaged)} damaged results part(s) in {store.parts} set aside, never "
            f"merged ({shown}{f'; and {more} more' if more > 0 else ''}): their runs are run again",
            stacklevel=3,
        )
    if store.duplicates:
        warnings.warn(
            f"{len(store.duplicates)} results part(s) in {store.parts} hold runs committed in "
            "other parts too (two commands wrote the folder at once): each run is merged once",
            stacklevel=3,
        )
    if store.code_changes:
        warnings.warn(
            f"resuming across a change of code ({'; '.join(store.code_changes)}): the tables mix "
            "runs of both (recorded in .gossipsim/study.json)",
            stacklevel=3,
        )


def _with_overrides(study: Study, runs: int | None, seed: int | None) -> Study:
    """The study with ``runs`` / ``seed`` replaced, after checking them (NumPy integers are
    integers)."""
    if runs is None and seed is None:
        return study
    runs, seed = _integer(runs, "runs"), _integer(seed, "seed")
    if runs is not None and (isinstance(runs, bool) or not isinstance(runs, int) or runs < 1):
        raise ConfigError("runs", f"must be an integer >= 1 (got {runs!r})")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ConfigError("seed", f"must be an integer >= 0 (got {seed!r})")
    return study.with_overrides(runs=runs, seed=seed)


def _integer(value: Any, key: str) -> Any:
    """A NumPy integer (``np.int64(3)``) as the Python int it is; anything else unchanged (checked
    by the caller, whose message names ``key``)."""
    if isinstance(value, np.integer):
        return int(value)
    return value


def _check_flags(resume: Any, progress: Any, make_plots: Any) -> None:
    """``resume`` a bool, ``progress`` a bool or None, ``make_plots`` a callable or None."""
    if not isinstance(resume, bool | np.bool_):
        raise ConfigError("resume", f"must be True or False (got {resume!r:.80})")
    if progress is not None and not isinstance(progress, bool | np.bool_):
        raise ConfigError("progress", f"must be True, False or None (got {progress!r:.80})")
    if make_plots is not None and not callable(make_plots):
        raise ConfigError(
            "make_plots",
            "must be a function (results, folder) -> None, or None (got "
            f"{type(make_plots).__name__})",
        )


def _execute(
    study: Study,
    worlds: list[World],
    engines: list[str],
    executor: Executor,
    store: RunStore | None,
    done: set[Task],
    progress: bool | None,
) -> dict[Task, Outcome]:
    """Run every task not in ``done``; outcomes are committed to ``store`` as they come, in
    batches, the last of them when the work ends or is interrupted (and returned only without a
    store)."""
    total = sum(v.scenario.run.runs for v in study.variants)
    outcomes: dict[Task, Outcome] = {}
    bar = None
    if progress is None:
        progress = watched()
    if progress:
        bar = _progress_bar()(
            total=total, initial=len(done), unit="run", file=sys.stderr, desc=study.name
        )
    try:
        work = units(_todo(study, done), engines)  # lazy: no list of every task
        for variant, outcome in executor.map(study, work, worlds):
            if store is not None:
                store.save(variant, outcome)  # a batch at once, single runs held back a moment
            else:
                outcomes[(variant, outcome.run)] = outcome
            if bar is not None:
                bar.update(len(outcome.runs))
    except BaseException:
        if store is not None:  # interrupted, or an executor failed: keep the finished runs
            with contextlib.suppress(Exception):  # e.g. the full disk that stopped the sweep
                store.commit()
        raise
    finally:
        if bar is not None:
            bar.close()
    if store is not None:
        store.commit()
    return outcomes


def _progress_bar() -> Any:
    """tqdm's bar: a widget in a notebook where ipywidgets is installed (``tqdm.auto``), else text
    (``tqdm.auto`` without ipywidgets warns at every run that it has no widget)."""
    import importlib.util

    if importlib.util.find_spec("ipywidgets") is not None:
        import tqdm.auto

        return tqdm.auto.tqdm
    import tqdm

    return tqdm.tqdm


def watched() -> bool:
    """Whether a user is watching this process: an IPython shell or Jupyter kernel runs it (its
    ``get_ipython()`` is set), or stderr is a terminal."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    if callable(get) and get() is not None:
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


def _todo(study: Study, done: set[Task]) -> Iterator[Task]:
    """The (variant, run) pairs still to run, in order, one at a time."""
    for v, variant in enumerate(study.variants):
        for r in range(variant.scenario.run.runs):
            if (v, r) not in done:
                yield (v, r)


def _finish(
    study: Study,
    worlds: list[World],
    notes: list[str],
    store: RunStore | None,
    outcomes: dict[Task, Outcome],
    make_plots: Callable[[Results, Path], None] | None,
    formats: tuple[str, ...],
    record: dict[str, Any],
) -> Results:
    """Merge the outcomes into tables, commit them, then run the steps that may fail (theory is
    recorded per variant, figures drawn last); raise PostProcessingError if any did."""
    from gossipsim.results.assembly import collect
    from gossipsim.results.results import PostProcessingError

    ordered = store.load() if store is not None else ((t[0], outcomes[t]) for t in sorted(outcomes))
    results = collect(study, ordered, node_labels=[w.indexed.labels for w in worlds])
    results.run_record = record
    results.engines = {v.label: note for v, note in zip(study.variants, notes, strict=True)}
    results.graphs = {  # big graphs are built straight into arrays: not kept (nor saved); a
        # graph drawn per run is not the graph of any run
        v.label: w.graph for v, w in zip(study.variants, worlds, strict=True)
        if w.nodes <= MAX_SAVED_NODES and v.scenario.topology.draw != "per-run"
    }  # fmt: skip
    failures = _attach_theory(results, study, worlds)
    folder = store.dir if store is not None else None
    if store is not None:
        try:
            results.write_tables(store.dir, tables=_named(formats))
            store.finish(done=len(results.runs), failed=len(results.failures))
        except Exception as exc:  # e.g. the disk is full: the parts are kept for --resume
            raise PostProcessingError(
                results, folder, [*failures, f"writing the tables failed ({describe_error(exc)})"]
            ) from exc
        _plot(results, store.dir, make_plots, failures)
    if failures:
        raise PostProcessingError(results, folder, failures)
    return results


def _named(formats: tuple[str, ...]) -> str:
    """The ``tables=`` value that writes exactly ``formats``."""
    return "both" if len(formats) > 1 else formats[0]


def _plot(
    results: Results,
    folder: Path,
    make_plots: Callable[[Results, Path], None] | None,
    failures: list[str],
) -> None:
    """Draw the figures into ``folder`` (the tables are committed by now): a failure is added to
    ``failures``, an interrupt raised as a PostProcessingError."""
    from gossipsim.results.results import PostProcessingError

    if make_plots is None or not len(results.runs):  # nothing to draw if every run failed
        return
    try:
        results.write_plots(folder, make_plots)
    except KeyboardInterrupt:  # the sweep is complete: --resume draws them again
        failures.append("plotting was interrupted")
        raise PostProcessingError(results, folder, failures, interrupted=True) from None
    except Exception as exc:  # any bug or full disk while drawing: the tables stay
        failures.append(f"plotting failed ({describe_error(exc)})")


def _finished(
    study: Study,
    store: RunStore,
    make_plots: Callable[[Results, Path], None] | None,
    formats: tuple[str, ...],
) -> Results:
    """A finished sweep resumed: a damaged or missing table file rewritten from its intact copy
    in the other format, byte for byte the file written (:func:`~gossipsim.results.repair.repair_tables`;
    a warning says so), its tables read back (nothing is run), written again only in formats they
    do not have yet (``tables``), and the figures drawn again."""
    from gossipsim.results.manifest import TABLE_FILE_KINDS
    from gossipsim.results.repair import repair_tables
    from gossipsim.results.results import PostProcessingError, load_results

    store.open()  # only removes what a killed process left behind
    try:
        for line in repair_tables(store.dir, study):
            warnings.warn(f"{store.dir}/{line}, byte for byte the file written", stacklevel=3)
        results = load_results(store.dir)
    except ConfigError as exc:  # damaged tables: nothing to resume from
        raise ConfigError("--resume", exc.message) from None
    results.study = study  # the same scenario (the fingerprints agree), as the caller gave it
    results.run_record = store.record
    written = tuple(k for k in TABLE_FILE_KINDS if (store.dir / f"runs.{k}").is_file())
    failures: list[str] = []
    if written != formats:
        try:
            results.write_tables(store.dir, tables=_named(formats))
        except Exception as exc:  # the tables of the other formats are still there
            failures.append(f"writing the tables failed ({describe_error(exc)})")
            raise PostProcessingError(results, store.dir, failures) from exc
    _plot(results, store.dir, make_plots, failures)
    if failures:
        raise PostProcessingError(results, store.dir, failures)
    return results


def _attach_theory(results: Results, study: Study, worlds: list[World]) -> list[str]:
    """Each variant's theory block for summary.json; a variant whose theory raises gets its error
    recorded instead (summary.json ``theory_error``) and listed in the returned failures."""
    from gossipsim.measurement.theory import theory_for

    failures = []
    requests = results.requests
    for variant, world in zip(study.variants, worlds, strict=True):
        try:
            mine = requests.loc[requests["variant"] == variant.label]
            results.theory[variant.label] = theory_for(world, common_arrival_slots(mine))
        except Exception as exc:  # the runs are done: a theory bug must not lose them
            results.theory_errors[variant.label] = describe_error(exc)
            failures.append(
                f"the theory step failed for variant {variant.label!r} ({describe_error(exc)}), "
                "recorded in summary.json"
            )
    return failures


def common_arrival_slots(requests: Any) -> dict[int, int]:
    """Request index -> the slot it arrived before, for the requests of a variant (requests.csv
    rows) that arrived before the same slot in every run they arrived in."""
    slots: dict[int, int] = {}
    for request, rows in requests.groupby("request", sort=True):
        seen = rows["request_iteration"].dropna().unique()
        if len(seen) == 1:
            slots[int(request)] = int(seen[0])
    return slots


def warn_long_study(study: Study, worlds: list[World], workers: int = 1) -> str | None:
    """Warn (one line, naming the setting) when the particle runs of ``study`` would compute longer
    than :data:`gossipsim.study.budget.LONG_STUDY_SECONDS` on ``workers`` workers, by the rough estimate
    of :func:`gossipsim.study.budget.run_seconds`; the warning's text, or None."""
    from gossipsim.study.budget import long_study_warning, run_seconds

    estimates = [
        run_seconds(v.scenario, type(w.model).sizes(v.scenario.model_spec, w.nodes), w.nodes)
        for v, w in zip(study.variants, worlds, strict=True)
    ]
    text = long_study_warning([e for e in estimates if e is not None], workers)
    if text is not None:
        warnings.warn(text, UserWarning, stacklevel=2)
    return text


def check_memory(study: Study, worlds: list[World], key: str) -> None:
    """Refuse, in one line naming ``key``, a study whose tables cannot fit in this machine's
    memory: a lower bound (every run records at least its first and last slot, or every
    ``record_every``-th slot of a run that cannot stop early) of the cells of runs.csv and
    metrics.csv at 8 bytes each, plus a little per run."""
    memory = physical_memory()
    if memory is None:
        return
    need = sum(
        _table_bytes(world) * v.scenario.run.runs
        for v, world in zip(study.variants, worlds, strict=True)
    )
    if need > memory:
        runs = sum(v.scenario.run.runs for v in study.variants)
        raise ConfigError(
            key,
            f"{runs:,} runs would need at least {need / 2**30:,.1f} GiB of memory for their tables, "
            f"more than this machine's {memory / 2**30:,.1f} GiB; run fewer (or record fewer slots "
            "with metrics.record_every)",
        )


def _table_bytes(world: World) -> int:
    """A lower bound of the bytes one run of ``world`` adds to the tables held in memory."""
    from gossipsim.core.columns import METRIC_COLUMNS, RUN_COLUMNS

    sc = world.scenario
    slots = 2 if sc.run.stop_when_done else math.ceil(sc.run.iterations / sc.metrics.record_every)
    columns = len(METRIC_COLUMNS) - 2  # retrain_kl and best_family_kl only where they apply
    columns += bool(world.requests and sc.protocol.retrain_baseline) + world.model.has_best_family
    columns += len(world.model.evaluation_columns())
    return (
        8 * (len(RUN_COLUMNS) + max(min(slots, sc.run.iterations), 1) * columns)
        + PER_RUN_OVERHEAD_BYTES
    )


def physical_memory() -> int | None:
    """This machine's memory in bytes (``None`` where the system does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


def choose_engines(study: Study, worlds: list[World], engine: str) -> tuple[list[str], list[str]]:
    """The engine of each variant and a note saying why (for ``engine="auto"``)."""
    from gossipsim.execution.vectorized.capability import (
        ENGINES,
        MIN_VECTORIZED_RUNS,
        too_long,
        unavailable,
    )

    if engine not in ENGINES:
        raise ConfigError("--engine", f"unknown engine {engine!r}; allowed: {', '.join(ENGINES)}")
    chosen, notes = [], []
    for variant, world in zip(study.variants, worlds, strict=True):
        reason = unavailable(world) if engine != "event" else None
        if variant.scenario.scheduler.stays == "drawn":  # only the vectorized engine draws stays
            why = "--engine event steps every slot" if engine == "event" else reason
            if why is not None:
                raise ConfigError(
                    "scheduler.stays",
                    f"drawn stays need the vectorized engine, which cannot draw them for variant "
                    f'{variant.label!r}: {why}; use stays = "stepped"',
                )
            chosen.append("vectorized")
            notes.append("vectorized (drawn stays)")
            continue
        if engine == "auto" and reason is None and variant.scenario.run.runs < MIN_VECTORIZED_RUNS:
            reason = (
                f"fewer than {MIN_VECTORIZED_RUNS} runs: one run steps faster in the event engine"
            )
        if engine == "auto" and reason is None:
            reason = too_long(world)
        if engine == "vectorized" and reason is not None:
            raise ConfigError(
                "--engine",
                f"the vectorized engine cannot run variant {variant.label!r}: {reason}; use auto or event",
            )
        if engine == "event" or reason is not None:
            chosen.append("event")
            notes.append("event" + (f" ({reason})" if reason else ""))
        else:
            chosen.append("vectorized")
            notes.append("vectorized")
    return chosen, notes


def check(study: Study) -> list[World]:
    """Build every variant's graph, data and requests once, raising the first user error (which
    names the variant, in a sweep)."""
    worlds = []
    for variant in study.variants:
        try:
            worlds.append(build_world(variant.scenario))
        except ConfigError as exc:
            if len(study.variants) == 1:
                raise
            raise ConfigError(exc.key, f"{exc.message} (variant {variant.label!r})") from None
    for key, scenario in study.base_probes:  # a swept key's own value, checked by the model
        try:
            build_world(scenario)
        except ConfigError as exc:
            raise_for_swept_base(exc, key)
    return worlds


def _as_study(scenario: Study | str | os.PathLike[str] | Mapping[str, Any]) -> Study:
    if isinstance(scenario, Study):
        return scenario
    if isinstance(scenario, Mapping):
        return parse_study(scenario)
    if not isinstance(scenario, str | os.PathLike):
        raise ConfigError(
            "scenario",
            f"expected a Study, a scenario file's path (str or os.PathLike) or a mapping of "
            f"sections, got {type(scenario).__name__} {scenario!r:.60}",
        )
    return load_scenario(checked_path(scenario, "scenario"))
