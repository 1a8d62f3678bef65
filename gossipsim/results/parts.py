"""The committed parts of a results folder, read and checked (:func:`scan_parts`): a part is merged
only if it is whole (its checksum and structure: :mod:`gossipsim.results.partformat`), its name,
header and runs agree and it holds every table its variant records (:func:`missing_tables`); of
parts holding the same runs the larger is merged. What ``--resume`` and ``gossipsim status`` read
of an interrupted sweep; parts of an older gossipsim (pickles) are refused unread
(:func:`refuse_pickled_parts`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gossipsim.errors import ConfigError
from gossipsim.execution.executors import Outcome, RunFailure, Task
from gossipsim.measurement.outputs import BatchOutput
from gossipsim.results.folderlock import META
from gossipsim.results.partformat import decoded, read_bytes
from gossipsim.study.scenario import records_particle_sets

if TYPE_CHECKING:
    from gossipsim.study.scenario import Scenario, Study

PART_SUFFIX = ".part"


@dataclass
class PartScan:
    """The committed parts of a folder, checked: those merged (``kept``: (variant, first run),
    path, header; no two share a run), those ``damaged`` (path, why) and those holding runs of
    kept parts (``duplicates``, from two commands writing one folder at once)."""

    kept: list[tuple[Task, Path, dict[str, Any]]] = field(default_factory=list)
    damaged: list[tuple[Path, str]] = field(default_factory=list)
    duplicates: list[Path] = field(default_factory=list)

    def runs(self, *, failed: bool | None = None) -> set[Task]:
        """The (variant, run) pairs of the kept parts (only failed or only done ones)."""
        return {
            (variant, r)
            for (variant, _), _, header in self.kept
            if failed is None or bool(header["failed"]) == failed
            for r in header["runs"]
        }


def scan_parts(parts: Path, study: Study | None = None) -> PartScan:
    """Every part of ``parts`` read whole, its checksum verified and its content checked (against
    ``study``'s variants and runs where given); of the parts sharing runs, the larger is kept."""
    scan = PartScan()
    good: list[tuple[Task, Path, dict[str, Any]]] = []
    for path in sorted(parts.glob(f"v*-r*{PART_SUFFIX}")) if parts.is_dir() else []:
        try:
            task = part_task(path)
            data = read_bytes(path)
            header, outcomes = decoded(data)
            check_part(task, header, outcomes, study)
        except (OSError, ValueError) as exc:
            scan.damaged.append((path, _reason(exc)))
            continue
        del outcomes, data
        good.append((task, path, header))
    taken: set[Task] = set()
    for task, path, header in sorted(good, key=lambda g: (-len(g[2]["runs"]), g[0])):
        mine = {(task[0], r) for r in header["runs"]}
        if mine & taken:
            scan.duplicates.append(path)
            continue
        taken |= mine
        scan.kept.append((task, path, header))
    scan.kept.sort(key=lambda g: g[0])
    return scan


def _listed(runs: list[int]) -> str:
    return ", ".join(map(str, runs[:3])) + (", ..." if len(runs) > 3 else "")


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def part_task(path: Path) -> Task:
    """(variant, first run) from a part's name ``vVVVV-rRRRRRR.part``."""
    v, _, r = path.stem[1:].partition("-r")
    if not (v.isdigit() and r.isdigit()):
        raise ValueError(f"{path.name!r} is not the name of a results part")
    return int(v), int(r)


def check_part(
    task: Task, header: dict[str, Any], outcomes: list[Outcome], study: Study | None
) -> None:
    """A part's name, header and outcomes agree (and fit ``study``)."""
    variant, first = task
    runs = header["runs"]
    if "variant" in header and header["variant"] != variant:
        raise ValueError(f"its name says variant {variant}, its header {header['variant']!r}")
    if runs and min(runs) != first:
        raise ValueError(f"its name says first run {first}, its header {min(runs)}")
    if study is not None:
        if variant >= len(study.variants):
            raise ValueError(f"variant {variant} is not in the scenario")
        total = study.variants[variant].scenario.run.runs
        if runs and max(runs) >= total:
            raise ValueError(f"run {max(runs)} is beyond the variant's {total} runs")
    if sorted(r for outcome in outcomes for r in outcome.runs) != sorted(runs):
        raise ValueError("its runs and its header's runs differ")
    if study is not None:
        for outcome in outcomes:
            why = missing_tables(study.variants[variant].scenario, outcome)
            if why is not None:
                raise ValueError(why)


def missing_tables(scenario: Scenario, outcome: Outcome) -> str | None:
    """Why a part's runs (``outcome``) do not hold every table their variant records (None if
    they do): metrics.csv rows for each run, requests.csv rows for each of the variant's
    requests in each run, and particles.csv rows (the ``particles.*`` arrays) for exactly the runs
    that keep their particle sets (``[metrics] particles``, ``particle_runs``). A part holding
    less would be merged into tables silently missing the rows of its runs."""
    if isinstance(outcome, RunFailure):
        return None
    runs = list(outcome.runs)
    if isinstance(outcome, BatchOutput):
        with_metrics = set(np.unique(outcome.metric_runs).tolist()) if outcome.metrics else set()
        if outcome.request_columns:
            asked = outcome.request_columns.get("run", np.zeros(0, dtype=np.int64))
            requested = Counter(np.asarray(asked).tolist())
        else:
            requested = Counter(row.get("run") for row in outcome.request_rows)
        particles = outcome.particles
        with_particles = set(np.unique(particles["run"]).tolist()) if particles else set()
    else:
        columns = list(outcome.metrics.values())
        with_metrics = {outcome.run} if columns and len(columns[0]) else set()
        requested = Counter({outcome.run: len(outcome.request_rows)})
        kept = outcome.particles
        with_particles = {outcome.run} if kept and len(kept.get("iteration", ())) else set()
    keeps = records_particle_sets(scenario)
    keeping = {r for r in runs if keeps and scenario.metrics.keeps_particles(r)}
    requests = len(scenario.unlearning)
    for table, missing in (
        ("metrics.csv rows (metrics.* arrays)", [r for r in runs if r not in with_metrics]),
        ("requests.csv rows", [r for r in runs if requested[r] != requests]),
        ("particles.csv rows (particles.* arrays)", sorted(keeping - with_particles)),
    ):
        if missing:
            return f"it holds no {table} for run(s) {_listed(missing)}, which its variant records"
    extra = sorted(with_particles - keeping)
    if extra:
        return f"it holds particle sets of run(s) {_listed(extra)}, which its variant does not keep"
    return None


def damaged_part(path: Path, exc: Exception) -> ConfigError:
    return ConfigError(
        "--resume",
        f"results part {str(path)!r} is damaged ({_reason(exc)}); continue with the same command "
        "and --resume, which sets it aside and runs its runs again",
    )


def refuse_pickled_parts(out_dir: Path, key: str) -> None:
    """Refuse a folder holding parts of an older gossipsim, which were pickles: unpickling a file
    from elsewhere can run any code, so they are never read."""
    parts = Path(out_dir) / META / "parts"
    if parts.is_dir() and any(parts.glob("*.pkl")):
        raise ConfigError(
            key,
            f"{str(out_dir)!r} holds runs saved by an older gossipsim as pickle files, which are not "
            "read (loading them could run code); run without --resume to start over",
        )
