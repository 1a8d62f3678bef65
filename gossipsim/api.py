"""The Python API in one place: load a scenario, run it, get pandas tables back."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from .errors import ConfigError
from .executors import Outcome, execute, units
from .results import Results, collect
from .runner import World, build_world
from .scenario import Study, load_scenario, parse_study
from .store import RunStore


def run(
    scenario: Study | str | os.PathLike[str] | dict,
    *,
    runs: int | None = None,
    seed: int | None = None,
    workers: int = 1,
    cluster: str | None = None,
    engine: str = "auto",
    out: str | os.PathLike[str] | None = None,
    resume: bool = False,
    make_plots: Callable[[Results, Path], None] | None = None,
    progress: bool | None = False,
) -> Results:
    """Run every variant of a scenario and return its :class:`~gossipsim.results.Results`.

    ``scenario`` is a loaded :class:`Study`, a path to a TOML file, or the scenario as nested dicts.
    ``runs`` and ``seed`` override the file's values. Runs execute in this process (``workers=1``),
    a local process pool (``workers=W``) or on a Dask cluster (``cluster="tcp://host:8786"`` or
    ``"local:N"``); the results are identical whatever the choice. ``engine`` is ``"auto"`` (the
    default, as in the CLI: vectorised wherever it applies; ``res.engines`` says which ran),
    ``"event"`` (the SimPy engine) or ``"vectorized"`` (many runs at once in NumPy, for exact
    conjugate scenarios with requests at iterations); the tables are the same.

    With ``out`` every finished run is committed to that folder as it completes and the tables (and
    the figures, with ``make_plots``) are written there at the end; ``resume=True`` continues an
    interrupted sweep in ``out``. ``progress`` shows a progress bar on stderr (runs done / total,
    rate, ETA; ``None``: only when stderr is a terminal).

    >>> import gossipsim as gs
    >>> res = gs.run("scenarios/fig3_beta_bernoulli.toml", runs=20)   # doctest: +SKIP
    >>> res.runs.groupby("variant").cover_iteration.mean()             # doctest: +SKIP
    """
    study = _as_study(scenario)
    if runs is not None or seed is not None:
        if runs is not None and (isinstance(runs, bool) or not isinstance(runs, int) or runs < 1):
            raise ConfigError("runs", f"must be an integer >= 1 (got {runs!r})")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ConfigError("seed", f"must be an integer >= 0 (got {seed!r})")
        study = study.with_overrides(runs=runs, seed=seed)
    if workers < 1:
        raise ConfigError("--workers", f"must be >= 1 (got {workers})")
    if resume and out is None:
        raise ConfigError("--resume", "needs --out, the folder of the interrupted sweep")
    worlds = check(study)
    engines, notes = choose_engines(study, worlds, engine)
    store = RunStore(out, study, resume=resume) if out is not None else None
    tasks = [
        (v, r)
        for v in range(len(study.variants))
        for r in range(study.variants[v].scenario.run.runs)
    ]
    done: set[tuple[int, int]] = store.finished() if store is not None else set()
    todo = [t for t in tasks if t not in done]
    outcomes: dict[tuple[int, int], Outcome] = {}
    bar = None
    if progress is not False:
        from tqdm import tqdm

        bar = tqdm(total=len(tasks), initial=len(tasks) - len(todo), unit="run", file=sys.stderr,
                   disable=None if progress is None else False, desc=study.name)  # fmt: skip
    try:
        work = units(todo, engines)
        for variant, outcome in execute(
            study, work, workers=workers, cluster=cluster, worlds=worlds
        ):
            if store is not None:
                store.save(variant, outcome)
            else:
                outcomes[(variant, outcome.run)] = outcome
            if bar is not None:
                bar.update(len(outcome.runs))
    finally:
        if bar is not None:
            bar.close()
    ordered = store.load() if store is not None else ((t[0], outcomes[t]) for t in sorted(outcomes))
    results = collect(study, ordered, node_labels=[w.indexed.labels for w in worlds])
    from .theory import theory_for

    results.theory = {v.label: theory_for(w) for v, w in zip(study.variants, worlds, strict=True)}
    results.engines = {v.label: note for v, note in zip(study.variants, notes, strict=True)}
    if store is not None:
        results.write(store.dir, make_plots=make_plots)
        store.finish()
    return results


def choose_engines(study: Study, worlds: list[World], engine: str) -> tuple[list[str], list[str]]:
    """The engine of each variant and a note saying why (for ``engine="auto"``)."""
    from .fastpath import ENGINES, MIN_VECTORIZED_RUNS, too_long, unavailable

    if engine not in ENGINES:
        raise ConfigError("--engine", f"unknown engine {engine!r}; allowed: {', '.join(ENGINES)}")
    chosen, notes = [], []
    for variant, world in zip(study.variants, worlds, strict=True):
        reason = unavailable(world) if engine != "event" else None
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
    """Build every variant's graph, data and requests once, raising the first user error."""
    return [build_world(variant.scenario) for variant in study.variants]


def _as_study(scenario: Study | str | os.PathLike[str] | dict) -> Study:
    if isinstance(scenario, Study):
        return scenario
    if isinstance(scenario, dict):
        return parse_study(scenario)
    return load_scenario(Path(scenario))
