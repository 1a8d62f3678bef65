"""The Python API in one place: load a scenario, run it, get pandas tables back."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .errors import ConfigError
from .results import Results, collect
from .runner import World, build_world, iterate_runs
from .scenario import Study, load_scenario, parse_study


def run(
    scenario: Study | str | os.PathLike[str] | dict,
    *,
    runs: int | None = None,
    seed: int | None = None,
    workers: int = 1,
    progress: bool | None = False,
) -> Results:
    """Run every variant of a scenario and return its :class:`~gossipsim.results.Results`.

    ``scenario`` is a loaded :class:`Study`, a path to a TOML file, or the scenario as nested dicts.
    ``runs`` and ``seed`` override the file's values. Results are identical for any ``workers``.
    ``progress`` shows a progress bar on stderr (``None``: only when stderr is a terminal).

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
    worlds = check(study)
    total = sum(v.scenario.run.runs for v in study.variants)
    bar = None
    if progress is not False:
        from tqdm import tqdm

        bar = tqdm(
            total=total,
            unit="run",
            file=sys.stderr,
            disable=None if progress is None else False,
            desc=study.name,
        )
    try:
        results = collect(
            study,
            iterate_runs(
                study,
                workers=workers,
                progress=(lambda n: bar.update(n)) if bar is not None else None,
                worlds=worlds,
            ),
            node_labels=[w.indexed.labels for w in worlds],
        )
    finally:
        if bar is not None:
            bar.close()
    from .theory import theory_for

    results.theory = {v.label: theory_for(w) for v, w in zip(study.variants, worlds, strict=True)}
    return results


def check(study: Study) -> list[World]:
    """Build every variant's graph, data and requests once, raising the first user error."""
    return [build_world(variant.scenario) for variant in study.variants]


def _as_study(scenario: Study | str | os.PathLike[str] | dict) -> Study:
    if isinstance(scenario, Study):
        return scenario
    if isinstance(scenario, dict):
        return parse_study(scenario)
    return load_scenario(Path(scenario))
