"""A finished folder's damaged table files rewritten from their intact copies in the other format
(``metrics.csv`` from ``metrics.parquet`` or the other way round), each byte for byte the file
written (:func:`repair_tables`): what ``--resume`` of a finished folder does first."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from gossipsim.errors import ConfigError
from gossipsim.results.fastcsv import write_csv
from gossipsim.results.manifest import (
    PARQUET_HINT,
    file_sha256,
    intact_copy,
    parquet_available,
    recorded,
    table_damage,
)
from gossipsim.results.reading import (
    read_graphs,
    read_summary,
    read_tables,
    rebuilt_study,
    restore_node_labels,
)
from gossipsim.results.writing import staging_folder, write_parquet

if TYPE_CHECKING:
    from gossipsim.study.scenario import Study


def repair_tables(
    out_dir: str | os.PathLike[str], study: Study | None = None, key: str = "--resume"
) -> list[str]:
    """Rewrite each table file of a finished folder that is not what was written (truncated,
    edited, emptied, widened or missing: :func:`gossipsim.results.manifest.table_damage`) from its copy
    in the other format (``metrics.csv`` from ``metrics.parquet`` or the other way round), where
    that copy is intact, and only if the file rewritten is byte for byte the one written (the
    SHA-256 summary.json records): the folder is then exactly as it was written. What ``--resume``
    of a finished folder does first. ``study``: the folder's (else rebuilt from summary.json).

    Returns one ``name was damaged (why): rewritten from copy`` per file rewritten (none for a
    whole folder). A damaged summary.json, a damaged file without an intact copy, or a copy that
    does not give the file written back, is a one-line ConfigError for ``key`` naming the file;
    nothing is then changed. The caller holds the folder's lock (``--resume`` does)."""
    d = Path(out_dir)
    try:
        summary = read_summary(d)
        damage = table_damage(d, summary)
        plan: dict[str, str] = {}
        state = {
            name: "missing" if why == "missing" else f"damaged ({why})" for name, why in damage
        }
        for name, _ in damage:
            copy = intact_copy(d, name, summary, damage)
            if copy is None:
                raise ConfigError(
                    key,
                    f"{str(d / name)!r} is {state[name]} and has no intact copy to rewrite it from; run "
                    "without --resume to start over",
                )
            if "parquet" in (name.rpartition(".")[2], copy.rpartition(".")[2]) and (
                not parquet_available()
            ):
                raise ConfigError(
                    key, f"rewriting {str(d / name)!r} from {copy} needs pyarrow: {PARQUET_HINT}"
                )
            plan[name] = copy
        if not plan:
            return []
        study = rebuilt_study(summary, d) if study is None else study
        labels = [v.label for v in study.variants]
        values = [v.values for v in study.variants]
        sources = {name.rpartition(".")[0]: copy.rpartition(".")[2] for name, copy in plan.items()}
        tables = read_tables(d, summary, labels, values, sources=sources)
        entries = summary.get("variants", {})
        graphs = read_graphs(d, {label: entries.get(label) for label in labels})
        restore_node_labels(tables, graphs.values())
    except ConfigError as exc:
        raise ConfigError(key, exc.message) from None
    done = []
    with staging_folder(d) as staging:
        for name, copy in plan.items():
            stem, _, kind = name.rpartition(".")
            if kind == "csv":
                write_csv(tables[stem], staging / name)
            else:
                write_parquet({stem: tables[stem]}, staging)
            if file_sha256(staging / name) != (recorded(summary, name) or {}).get("sha256"):
                raise ConfigError(
                    key,
                    f"{str(d / name)!r} is {state[name]}, and rewritten from {copy} it would "
                    "not be the file written (another pyarrow or pandas?); run without --resume "
                    "to start over",
                )
        for name, copy in plan.items():
            os.replace(staging / name, d / name)
            done.append(f"{name} was {state[name]}: rewritten from {copy}")
    return done
