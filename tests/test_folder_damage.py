"""A damaged table file is refused by every reader, whatever format it reads, and --resume rewrites
it from its intact copy; a part that lacks a table its variant records is never merged (issue 30,
item 9).

The readers: ``gs.load_results``, ``gossipsim plot``, ``gossipsim compare`` and ``--resume`` of a
finished folder. Each damage kind (truncated, edited in place, emptied, widened by a column, and
deleted) of a CSV file beside its intact Parquet copy, and of a Parquet copy beside its intact CSV
file, is refused in one line naming the file (exit 2) and reported by ``status``; ``--resume``
rewrites the file from its copy, byte for byte the file written, or refuses in one line where
there is no intact copy. Before, the CSV files were not checked when the Parquet copies were read:
every reader accepted them, and --resume said "wrote DIR/" leaving them damaged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.cli.parser import main
from gossipsim.errors import ConfigError
from gossipsim.results import repair, store
from gossipsim.results.status import status
from gossipsim.results.store import RunStore, decode_part, encode_part
from tests.folders import interrupted, parts_of
from tests.helpers import to_toml
from tests.test_folder_integrity import _one_line

TABLE_FILES = ("metrics", "runs", "requests", "visits", "failures", "particles")


def _raw(runs: int = 3) -> dict:
    """A particle scenario (DSVGD on a 2-d Gaussian mixture) that keeps its particle sets."""
    return {
        "scenario": {"name": "dmg", "seed": 4, "runs": runs, "iterations": 40},
        "topology": {"kind": "ring", "nodes": 4},
        "model": {"kind": "gaussian-mixture"},
        "protocol": {"kind": "dsvgd", "particles": 6, "step_size": 0.2},
        "metrics": {"record_every": 10, "particles": "recorded", "particle_runs": 2},
        "unlearning": [{"node": 2, "at_iteration": 20}],
    }


def _tables(folder: Path) -> dict[str, bytes]:
    """The bytes of the folder's table files and summary.json."""
    return {
        p.name: p.read_bytes()
        for p in sorted(folder.iterdir())
        if p.suffix in (".csv", ".parquet") or p.name == "summary.json"
    }


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[Path, Path]:
    """A finished folder with CSV files and Parquet copies, and its scenario file (the tables it
    holds: :func:`tables_read`)."""
    base = tmp_path_factory.mktemp("dmg")
    scenario = base / "s.toml"
    scenario.write_text(to_toml(_raw()))
    assert main(["run", str(scenario), "--out", str(base / "R"), "--no-plots"]) == 0
    assert {f"{t}.{k}" for t in TABLE_FILES for k in ("csv", "parquet")} <= set(_tables(base / "R"))
    return scenario, base / "R"


@pytest.fixture(scope="module")
def tables_read(template) -> gs.Results:
    return gs.load_results(template[1])


def _copy(template: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    scenario, folder = template
    out = tmp_path / "R"
    shutil.copytree(folder, out)
    return scenario, out


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 + 7])  # mid-row for a CSV file


def _edit(path: Path) -> None:
    """One digit of a CSV file changed in place (the same size), or one byte of a Parquet file's
    data pages."""
    data = bytearray(path.read_bytes())
    if path.suffix == ".csv":
        at = next(i for i in range(len(data) // 2, len(data)) if chr(data[i]).isdigit())
        data[at] = ord("7") if data[at] != ord("7") else ord("3")
    else:
        data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _widen(path: Path) -> None:
    """One more column, written as a valid file of its format."""
    if path.suffix == ".csv":
        table = pd.read_csv(path)
        table["extra"] = 0
        table.to_csv(path, index=False)
    else:
        table = pd.read_parquet(path)
        table["extra"] = 0
        table.to_parquet(path, index=False)


def _delete(path: Path) -> None:
    path.unlink()


DAMAGE = {
    "truncated": _truncate,
    "edited": _edit,
    "emptied": _empty,
    "widened": _widen,
    "deleted": _delete,
}
#: (damage, the file damaged, its intact copy): each damage kind of a CSV file beside its intact
#: Parquet copy and of a Parquet copy beside its intact CSV file, metrics and particles in turn
#: (Parquet copies beside CSV files may be deleted, the CSV files then read: that is no damage)
DAMAGED = [
    ("truncated", "metrics.csv", "metrics.parquet"),
    ("edited", "particles.csv", "particles.parquet"),
    ("emptied", "metrics.csv", "metrics.parquet"),
    ("widened", "particles.csv", "particles.parquet"),
    ("deleted", "metrics.csv", "metrics.parquet"),
    ("truncated", "particles.parquet", "particles.csv"),
    ("edited", "metrics.parquet", "metrics.csv"),
    ("emptied", "particles.parquet", "particles.csv"),
    ("widened", "metrics.parquet", "metrics.csv"),
]


def _refused_by_every_reader(
    out: Path, tmp_path: Path, capsys, name: str, repairable: bool = True
) -> str:
    """load_results, plot and compare refuse the folder in one line naming ``name`` (exit 2) and
    write nothing; status reports it (exit 1), and whether --resume can rewrite it. Returns
    load_results' line."""
    with pytest.raises(ConfigError, match=rf"^DIR: .*{name}") as caught:
        gs.load_results(out)
    line = str(caught.value)
    assert "\n" not in line
    capsys.readouterr()
    assert main(["plot", str(out)]) == 2
    assert name in _one_line(capsys.readouterr().err)
    assert not (out / "plots").exists()
    assert main(["compare", str(out), "--out", str(tmp_path / "c.png")]) == 2
    assert name in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "c.png").exists()
    info = status(out)
    assert [d.split(":")[0] for d in info["damaged"]] == [name], info
    assert info["repairable"] is repairable
    assert main(["status", str(out)]) == 1
    said = capsys.readouterr().out
    assert f"damaged: {name}" in said
    assert ("--resume rewrites them from their intact copies" in said) is repairable
    return line


@pytest.mark.parametrize(
    ("damage", "name", "copy"), DAMAGED, ids=[f"{d}-{n}" for d, n, _ in DAMAGED]
)
def test_a_damaged_table_file_is_refused_and_resume_rewrites_it(
    template, tables_read, tmp_path, capsys, damage, name, copy
):
    """Every reader refuses the damaged file, whichever format it reads, naming the file and its
    intact copy; --resume rewrites it from the copy: every table file and summary.json are then
    byte for byte those written, and the folder reads back as before."""
    scenario, out = _copy(template, tmp_path)
    written = _tables(out)
    DAMAGE[damage](out / name)
    line = _refused_by_every_reader(out, tmp_path, capsys, name)
    assert f"its copy {copy} is intact" in line and "--resume" in line, line
    assert main(["run", str(scenario), "--out", str(out), "--no-plots", "--resume"]) == 0
    warning = [ln for ln in capsys.readouterr().err.splitlines() if "warning" in ln]
    assert len(warning) == 1 and name in warning[0] and f"rewritten from {copy}" in warning[0]
    assert _tables(out) == written
    after = gs.load_results(out)
    for table in TABLE_FILES:
        pd.testing.assert_frame_equal(getattr(after, table), getattr(tables_read, table), obj=table)
    assert status(out)["damaged"] == []


def test_resume_from_python_warns_and_rewrites(template, tmp_path):
    scenario, out = _copy(template, tmp_path)
    written = _tables(out)
    _truncate(out / "particles.csv")
    with pytest.warns(UserWarning, match=r"particles\.csv was damaged .*rewritten from particles"):
        # no figures, as --no-plots above: a finished folder's resume redraws them from the tables
        # read back in tests/test_results_folder.py (..._runs_nothing_and_redraws_the_figures)
        gs.run(gs.load_scenario(scenario), out=out, resume=True, plots=False)
    assert _tables(out) == written


@pytest.mark.parametrize("tables", ["csv", "parquet"])
def test_resume_refuses_a_damaged_file_without_an_intact_copy(tmp_path, capsys, tables):
    """Tables written in one format only: nothing to rewrite the file from. --resume refuses in one
    line naming the file (exit 2) and changes nothing; so does a file whose copy is damaged too."""
    scenario = tmp_path / "s.toml"
    scenario.write_text(to_toml(_raw(runs=2)))
    out = tmp_path / tables
    assert main(["run", str(scenario), "--out", str(out), "--no-plots", "--tables", tables]) == 0
    _edit(out / f"metrics.{tables}")
    damaged = _tables(out)
    line = _refused_by_every_reader(out, tmp_path, capsys, f"metrics.{tables}", False)
    assert "its copy" not in line and line.endswith("run the scenario again")
    assert main(["run", str(scenario), "--out", str(out), "--no-plots", "--resume"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert (
        f"metrics.{tables}" in line
        and "no intact copy" in line
        and line.startswith("gossipsim: error: --resume: ")
    )
    assert _tables(out) == damaged


def test_both_copies_damaged_are_refused(template, tmp_path, capsys):
    scenario, out = _copy(template, tmp_path)
    _truncate(out / "runs.csv")
    _edit(out / "runs.parquet")
    damaged = _tables(out)
    with pytest.raises(ConfigError, match=r"runs\.csv.*\(and 1 more file\(s\)\); run the scenario"):
        gs.load_results(out)
    assert main(["run", str(scenario), "--out", str(out), "--no-plots", "--resume"]) == 2
    assert "no intact copy" in _one_line(capsys.readouterr().err)
    assert _tables(out) == damaged


def test_resume_refuses_a_rewrite_that_is_not_the_file_written(
    template, tmp_path, capsys, monkeypatch
):
    """The rewritten file must have the recorded checksum (a pandas or pyarrow that writes other
    bytes would not give it): otherwise one line, and nothing is changed."""
    scenario, out = _copy(template, tmp_path)
    _truncate(out / "metrics.csv")
    damaged = _tables(out)

    def other_bytes(table: pd.DataFrame, path: Path) -> None:
        table.to_csv(path, index=False, float_format="%.3g")

    monkeypatch.setattr(repair, "write_csv", other_bytes)
    assert main(["run", str(scenario), "--out", str(out), "--no-plots", "--resume"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "metrics.csv" in line and "would not be the file written" in line
    assert _tables(out) == damaged
    assert not list(out.glob(".staging-*"))


def test_a_summary_listing_a_file_elsewhere_is_refused_without_opening_it(template, tmp_path):
    """A summary.json re-sealed to list a file that is not a table file (a path elsewhere, a
    device that never ends) is damage: the file is never opened."""
    from gossipsim.results.manifest import summary_sha256

    _, out = _copy(template, tmp_path)
    summary = json.loads((out / "summary.json").read_text())
    summary["files"]["/dev/zero"] = {"rows": 0, "bytes": 0, "sha256": "0" * 64}
    summary["summary_sha256"] = summary_sha256(summary)
    (out / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ConfigError, match="/dev/zero.*not a table file"):
        gs.load_results(out)
    assert status(out)["damaged"] == ["/dev/zero: not a table file of a results folder"]


# --------------------------------------------------- a part must hold every table its variant records


def _without_particles(part: Path) -> None:
    """The part rewritten whole, with a valid checksum, but without its particles.* arrays."""
    outcomes = decode_part(bytearray(part.read_bytes()))
    header_variant = int(part.name[1:5])
    for outcome in outcomes:
        if hasattr(outcome, "particles"):
            outcome.particles = {} if isinstance(outcome.particles, dict) else None
    part.write_bytes(encode_part(outcomes, variant=header_variant))


def test_a_part_without_the_particle_sets_its_variant_keeps_is_never_merged(
    tmp_path, capsys, monkeypatch
):
    """A part of runs 0 and 1 (which keep their particle sets) without its particles.* arrays:
    status reports it and does not count its runs, merging it is refused naming the part and the
    table, and --resume sets it aside and runs its runs again: the tables of an uninterrupted
    sweep. (It used to be merged: particles.csv silently without the rows of runs 0 and 1.)"""
    study = gs.parse_study(_raw())
    whole = gs.run(study)
    assert sorted(whole.particles["run"].unique().tolist()) == [0, 1]
    out = tmp_path / "R"
    monkeypatch.setattr(store, "COMMIT_SECONDS", 600.0)  # runs 0 and 1 in one part, however slow
    interrupted(study, out, [(0, [0, 1]), (0, [2])])
    monkeypatch.undo()
    part = parts_of(out)[0]
    _without_particles(part)
    decode_part(bytearray(part.read_bytes()))  # whole and well-formed: only its content is short
    info = status(out)
    assert info["done"] == 1 and len(info["damaged"]) == 1, info
    assert info["damaged"][0].startswith(f"{part.name}: it holds no particles.csv rows")
    assert "run(s) 0, 1" in info["damaged"][0]
    with pytest.raises(ConfigError, match=rf"{part.name}.*particles\.csv") as caught:
        RunStore(out, study, resume=True, open=False).load()
    assert "\n" not in str(caught.value)
    scenario = tmp_path / "s.toml"
    scenario.write_text(to_toml(_raw()))
    capsys.readouterr()
    assert main(["run", str(scenario), "--out", str(out), "--no-plots", "--resume"]) == 0
    line = _one_line(capsys.readouterr().err)
    assert part.name in line and "particles.csv" in line and "run again" in line
    back = gs.load_results(out)
    for table in TABLE_FILES:
        pd.testing.assert_frame_equal(getattr(back, table), getattr(whole, table), obj=table)


def test_a_part_without_its_metrics_or_requests_rows_is_never_merged(tmp_path):
    """The other tables a variant records: every run's metrics.csv rows and a requests.csv row per
    request; a part of a run that does not keep particle sets holding some is refused too."""
    study = gs.parse_study(_raw())
    out = tmp_path / "R"
    interrupted(study, out, [(0, [0]), (0, [1]), (0, [2])])
    parts = parts_of(out)

    def change(part: Path, edit) -> None:
        outcomes = decode_part(bytearray(part.read_bytes()))
        edit(outcomes[0])
        part.write_bytes(encode_part(outcomes, variant=0))

    def drop_metrics(batch) -> None:
        keep = batch.metric_runs != batch.runs[0]
        batch.metric_runs = batch.metric_runs[keep]
        batch.metrics = {k: v[keep] for k, v in batch.metrics.items()}

    def drop_requests(batch) -> None:
        batch.request_rows = []

    def add_particles(batch) -> None:  # run 2 keeps none (particle_runs = 2)
        other = decode_part(bytearray(parts[0].read_bytes()))[0].particles
        batch.particles = {**other, "run": other["run"] * 0 + 2}

    change(parts[0], drop_metrics)
    change(parts[1], drop_requests)
    change(parts[2], add_particles)
    damaged = dict(d.split(": ", 1) for d in status(out)["damaged"])
    assert damaged[parts[0].name].startswith("it holds no metrics.csv rows (metrics.* arrays)")
    assert damaged[parts[1].name].startswith("it holds no requests.csv rows for run(s) 1")
    assert damaged[parts[2].name].startswith("it holds particle sets of run(s) 2, which")
