"""``gossipsim plot`` of a folder this gossipsim wrote: its tables and summary.json read without
rebuilding its study (:func:`gossipsim.results.figuretables.load_figure_tables`), the same figures as from
:func:`gossipsim.load_results`, neither SciPy nor a model imported for the graphs of Fig. 3; a
folder of other code read with its study; the cover figure's interval recorded in summary.json."""

from __future__ import annotations

import gc
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.cli import folders
from gossipsim.cli.parser import main
from gossipsim.figures import stats
from gossipsim.results import results
from gossipsim.results.figuretables import UNDRAWN_COLUMNS, load_figure_tables
from tests.helpers import base_scenario

#: Fig. 3's sweep, small: beta-Bernoulli on a star, a ring and a complete graph of 10 nodes
FIG3 = base_scenario(
    scenario={"name": "f3", "seed": 5, "runs": 30, "iterations": 150},
    sweep={"topology.kind": ["star", "ring", "complete"]},
    compute={"seconds_per_iteration": 0.001},
    links={"rate_bps": 1e6, "latency_s": 0.005},
)
#: a sweep with a request (the latency and unlearning figures), CSV tables only
REQUESTS = base_scenario(
    scenario={"name": "r", "seed": 3, "runs": 4, "iterations": 80},
    topology={"kind": "ring", "nodes": 6},
    unlearning=[{"node": 2, "at_iteration": 30}],
    sweep={"topology.nodes": [8, 6]},
)


def _folder(root: Path, raw: dict) -> Path:
    out = root / "out"
    gs.run(raw, out=out, progress=False, make_plots=lambda *_: None)  # no figures: no layouts
    return out


@pytest.fixture(scope="module")
def fig3(tmp_path_factory):
    return _folder(tmp_path_factory.mktemp("fig3"), FIG3)


@pytest.fixture(scope="module")
def requests_folder(tmp_path_factory):
    out = _folder(tmp_path_factory.mktemp("requests"), REQUESTS)
    for path in out.glob("*.parquet"):  # the CSV files are read
        path.unlink()
    return out


def _copy(folder: Path, dest: Path) -> Path:
    shutil.copytree(folder, dest)
    return dest


@pytest.mark.parametrize("name", ["fig3", "requests_folder"])
def test_the_figure_tables_are_what_load_results_gives_the_figures(name, request):
    """The summary is ``Results.figure_summary()`` of the folder (as JSON holds it), the tables
    are load_results' without the swept keys' columns and the columns no figure draws, the
    graphs are the same."""
    folder = request.getfixturevalue(name)
    drawn = load_figure_tables(folder)
    assert drawn is not None
    res = gs.load_results(folder)
    assert drawn.summary == json.loads(json.dumps(res.figure_summary()))
    swept = set(res.study.sweep)
    for stem in ("metrics", "runs", "requests", "visits", "particles"):
        mine, theirs = getattr(drawn, stem), getattr(res, stem)
        left_out = set(theirs.columns) - set(mine.columns)
        assert left_out == (swept | set(UNDRAWN_COLUMNS.get(stem, ()))) & set(theirs.columns)
        pd.testing.assert_frame_equal(mine, theirs[list(mine.columns)], obj=stem)
    assert list(drawn.graphs) == list(res.graphs)
    for label, graph in res.graphs.items():
        assert list(drawn.graphs[label].nodes) == list(graph.nodes)
        assert set(drawn.graphs[label].edges) == set(graph.edges)


def _pixels(path: Path) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(path))


def test_the_plot_command_draws_the_figures_load_results_draws(requests_folder, tmp_path):
    lean = _copy(requests_folder, tmp_path / "lean")
    full = _copy(requests_folder, tmp_path / "full")
    assert main(["plot", str(lean)]) == 0
    written = gs.load_results(full).plot(full / "plots")
    names = sorted(p.name for p in (lean / "plots").iterdir())
    assert names == sorted(p.name for p in written.values())
    assert {"kl_vs_iteration.png", "latency.png", "unlearning_kl.png", "visits.png"} <= set(names)
    for name in names:
        np.testing.assert_array_equal(
            _pixels(lean / "plots" / name), _pixels(full / "plots" / name), err_msg=name
        )


def test_a_folder_of_other_code_is_read_with_its_study(fig3, tmp_path, monkeypatch):
    """A folder whose record names other code (a source file's hash, or another version) is read
    by load_results: its summary.json may not be what this gossipsim computes."""
    folder = _copy(fig3, tmp_path / "other")
    record_path = folder / ".gossipsim" / "study.json"
    record = json.loads(record_path.read_text())
    assert load_figure_tables(folder) is not None
    record["code"]["source"]["gossipsim/results/results.py"] = "0" * 16
    record_path.write_text(json.dumps(record))
    assert load_figure_tables(folder) is None
    calls = []
    load = results.load_results
    monkeypatch.setattr(results, "load_results", lambda d: calls.append(d) or load(d))
    assert main(["plot", str(folder), "--figure", "cover_time"]) == 0
    assert calls and (folder / "plots" / "cover_time.png").is_file()
    record["code"]["source"]["gossipsim/results/results.py"] = json.loads(
        (fig3 / ".gossipsim" / "study.json").read_text()
    )["code"]["source"]["gossipsim/results/results.py"]
    record["code"]["gossipsim"] = "0.0.0"
    record_path.write_text(json.dumps(record))
    assert load_figure_tables(folder) is None


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_a_damaged_table_is_the_same_one_line_error(fig3, tmp_path, kind):
    folder = _copy(fig3, tmp_path / "damaged")
    if kind == "csv":
        for path in folder.glob("*.parquet"):
            path.unlink()
    path = folder / f"runs.{kind}"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))
    errors = []
    for read in (load_figure_tables, gs.load_results):
        with pytest.raises(gs.ConfigError, match=rf"runs\.{kind}") as caught:
            read(folder)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and "\n" not in errors[0]


def test_the_plot_command_of_fig3_imports_neither_scipy_nor_a_model(fig3, tmp_path):
    """Fig. 3's figures from its folder: no study rebuilt (no scenario or model module), the
    cover figure's interval from summary.json and the graphs' layouts in closed form (no SciPy)."""
    folder = _copy(fig3, tmp_path / "imports")
    code = (
        "import sys; from gossipsim.cli.parser import main; assert main(['plot', sys.argv[1]]) == 0; "
        "print(sorted({m.split('.')[0] if m.startswith('scipy') else m for m in sys.modules "
        "if m.startswith(('scipy', 'gossipsim.models', 'gossipsim.families', "
        "'gossipsim.study.scenario'))}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(folder)], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"
    names = {p.name for p in (folder / "plots").iterdir()}
    assert {"kl_vs_iteration.png", "kl_vs_time.png", "cover_time.png", "visits.png"} <= names


# ------------------------------------------------------------------------------ cover interval


def test_summary_json_records_the_cover_figure_s_interval(fig3):
    summary = json.loads((fig3 / "summary.json").read_text())
    res = gs.load_results(fig3)
    for label in res.variants:
        moves, total = stats.cover_moves(res.runs.loc[res.runs["variant"] == label])
        assert 0 < moves.size <= total
        recorded = summary["variants"][label]["cover_mean"]
        assert recorded == json.loads(json.dumps(stats.interval_record(moves)))
        mean, half = stats.mean_and_half_width(moves)  # computed, with SciPy's t quantile
        assert (recorded["samples"], recorded["mean"], recorded["half_width"]) == (
            moves.size,
            mean,
            half,
        )


def test_the_cover_figure_takes_the_recorded_interval_only_for_its_own_runs(monkeypatch):
    """The recorded interval is used when its count, mean (to the bit) and level are the
    samples'; otherwise the interval is computed again (mean_ci: SciPy's t quantile)."""
    moves = np.array([3.0, 8.0, 5.0, 11.0, np.nan, 6.0])
    record = stats.interval_record(moves)
    assert record["samples"] == 5 and record["level"] == stats.CONFIDENCE
    expected = stats.mean_and_half_width(moves)
    computed = []
    mean_ci = stats.mean_ci
    monkeypatch.setattr(stats, "mean_ci", lambda *a, **k: computed.append(1) or mean_ci(*a, **k))
    assert stats.mean_and_half_width(moves, recorded=record) == expected
    assert computed == []
    for change in (
        {"samples": 4},
        {"mean": record["mean"] + 1e-12},
        {"level": 0.9},
        {"half_width": "1.0"},
    ):
        assert stats.mean_and_half_width(moves, recorded={**record, **change}) == expected
    assert len(computed) == 4
    one = stats.interval_record(np.array([7.0]))
    assert one["half_width"] is None  # one sample: no interval, recorded as such
    m, h = stats.mean_and_half_width(np.array([7.0]), recorded=one)
    assert m == 7.0 and np.isnan(h) and len(computed) == 5  # the recorded one: not computed


# ------------------------------------------------------------------------- garbage collector


def test_the_collector_is_paused_only_in_a_process_that_is_the_command():
    before = gc.get_freeze_count()
    with folders._collector_paused(False):
        assert gc.isenabled()
    assert gc.get_freeze_count() == before
    try:
        with folders._collector_paused(True):
            assert not gc.isenabled()
            kept = [object() for _ in range(1000)]
        assert gc.isenabled() and gc.get_freeze_count() >= before + len(kept)
    finally:
        gc.unfreeze()
        if before:
            gc.freeze()


def test_plot_called_from_python_leaves_the_collector_alone(fig3, tmp_path):
    folder = _copy(fig3, tmp_path / "python")
    before = gc.get_freeze_count()
    assert main(["plot", str(folder), "--figure", "cover_time"]) == 0
    assert gc.isenabled() and gc.get_freeze_count() == before
