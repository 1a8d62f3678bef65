"""Bits and seconds on every axis (issue 32, item 4): the slot figures against cumulative bits or
simulated time (``gossipsim plot --x``, ``Results.plot(x=...)``), and runs ended by a budget of
bits or seconds (``[scenario] max_bits``, ``max_time``)."""

from __future__ import annotations

import csv
import tomllib
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.cli.parser import main
from gossipsim.errors import ConfigError
from gossipsim.figures.costaxis import on_cost_axis
from gossipsim.figures.divergence_curves import plot_kl_vs_iteration
from tests.helpers import to_toml, validate_error

ROOT = Path(__file__).resolve().parent.parent
#: the Beta's two natural parameters at 64 bits each: one message of server_vs_walk
MESSAGE_BITS = 2 * 64


def _scenario(**scenario: Any) -> dict[str, Any]:
    """The shipped server_vs_walk's first two cases (the walk, and a server scheduling the agents
    by the same walk: the same holders, different bits and seconds per slot), made small: 3 runs
    of 120 slots, node 0 forgotten before slot 60."""
    raw = tomllib.loads((ROOT / "scenarios" / "server_vs_walk.toml").read_text())
    raw["scenario"].update({"runs": 3, "iterations": 120, "stop_when_done": False, **scenario})
    raw["unlearning"][0]["at_iteration"] = 60
    raw["sweep"]["cases"] = raw["sweep"]["cases"][:2]
    return raw


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("axes") / "svw"
    # the tables: the tests below draw what they check from them (and the default figures of
    # such a folder are drawn by test_a_budget_ends_each_run_at_the_first_slot_that_reaches_it)
    gs.run(_scenario(), out=out, progress=False, plots=False)
    return out


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _by_run(folder: Path) -> dict[tuple[str, int], list[dict[str, str]]]:
    """metrics.csv read with the csv module: each (variant, run)'s rows in slot order."""
    out: dict[tuple[str, int], list[dict[str, str]]] = defaultdict(list)
    for row in _rows(folder / "metrics.csv"):
        out[row["variant"], int(row["run"])].append(row)
    for rows in out.values():
        rows.sort(key=lambda r: int(r["iteration"]))
    return out


def _slot_bits(variant: str, holders: list[int]) -> list[float]:
    """Each slot's own bits, from the holders alone: on the walk the hop into the slot's holder
    (one message when the token moved), with the server the round of the slot (download and
    upload: two messages)."""
    if "architecture=server" in variant:
        return [2.0 * MESSAGE_BITS] * len(holders)
    return [0.0] + [
        MESSAGE_BITS * float(a != b) for a, b in zip(holders, holders[1:], strict=False)
    ]


def test_the_bits_column_is_the_cumulative_sum_of_every_slots_transfers(folder: Path) -> None:
    for (variant, _), rows in _by_run(folder).items():
        assert [int(r["iteration"]) for r in rows] == list(range(1, 121))  # every slot recorded
        slot_bits = _slot_bits(variant, [int(r["holder"]) for r in rows])
        assert [float(r["bits"]) for r in rows] == list(np.cumsum(slot_bits))


@pytest.mark.parametrize("x", ["bits", "time"])
def test_a_cost_axis_reads_each_run_at_its_own_cumulative_cost(folder: Path, x: str) -> None:
    """Each run's divergence at grid point g is its value at its last slot whose cumulative bits
    (the sum of its slot bits, computed from the holders) or end time is ≤ g; the grid runs from 0
    to the largest cost any run of the variant reached."""
    runs = _by_run(folder)
    res = gs.load_results(folder)
    variants = list(dict.fromkeys(str(v) for v in res.metrics["variant"]))
    cost = on_cost_axis(res.metrics, res.requests, variants, x).metrics
    for (variant, run), rows in runs.items():
        if x == "bits":
            slot_bits = _slot_bits(variant, [int(r["holder"]) for r in rows])
            xs = np.cumsum(slot_bits)
        else:
            xs = np.array([float(r["time"]) for r in rows])
        kl = np.array([float(r["kl"]) for r in rows])
        mine = cost.loc[(cost["variant"] == variant) & (cost["run"] == run)]
        grid = mine[x].to_numpy()
        ends = [
            (np.cumsum(_slot_bits(v, [int(r["holder"]) for r in rr]))[-1] if x == "bits"
             else float(rr[-1]["time"]))
            for (v, _), rr in runs.items() if v == variant
        ]  # fmt: skip
        assert grid[0] == 0 and grid[-1] == max(ends)
        at = np.searchsorted(xs, grid, side="right") - 1  # the last slot costing ≤ g
        expected = np.where(at >= 0, kl[np.clip(at, 0, None)], np.nan)
        np.testing.assert_array_equal(mine["kl"].to_numpy(), expected)


def test_the_figure_against_bits_ends_at_each_variants_largest_cumulative_bits(
    folder: Path,
) -> None:
    res = gs.load_results(folder)
    variants = list(res.summary()["variants"])
    fig = plot_kl_vs_iteration(res.metrics, variants, x="bits", requests=res.requests,
                               summary=res.summary())  # fmt: skip
    axes = fig.axes
    assert any(a.get_xlabel() == "cumulative bits" for a in axes)
    ends = {
        v: max(float(rows[-1]["bits"]) for (vv, _), rows in _by_run(folder).items() if vv == v)
        for v in variants
    }
    drawn = {float(np.max(line.get_xdata())) for a in axes for line in a.get_lines()
             if len(line.get_xdata()) > 2}  # fmt: skip
    assert set(ends.values()) <= drawn  # each variant's line ends at its largest final bits


def _metrics(folder: Path) -> pd.DataFrame:
    return pd.read_csv(folder / "metrics.csv")


@pytest.mark.parametrize(("key", "budget", "column"), [("max_bits", 5000.0, "bits"),
                                                       ("max_time", 0.9, "time")])  # fmt: skip
def test_a_budget_ends_each_run_at_the_first_slot_that_reaches_it(
    folder: Path, tmp_path: Path, key: str, budget: float, column: str
) -> None:
    """With the budget, each run is the prefix of the same run without it (same seed), ending at
    its first slot whose cumulative bits (or end time) reach the budget."""
    res = gs.run(_scenario(**{key: budget}), out=tmp_path / "b", progress=False)
    assert all(note.startswith("event") for note in res.engines.values())
    full, cut = _metrics(folder), _metrics(tmp_path / "b")
    columns = ["iteration", "time", "holder", "kl", "bits", "retrain_kl"]
    ended = 0
    for (variant, run), rows in cut.groupby(["variant", "run"], sort=False):
        whole = full.loc[(full["variant"] == variant) & (full["run"] == run)]
        reached = whole.loc[whole[column] >= budget, "iteration"]
        last = int(reached.min()) if len(reached) else 120
        assert int(rows["iteration"].max()) == last
        ended += last < 120
        pd.testing.assert_frame_equal(
            rows[columns].reset_index(drop=True),
            whole.loc[whole["iteration"] <= last, columns].reset_index(drop=True),
        )
    assert ended > 0  # the budget ended runs
    runs = pd.read_csv(tmp_path / "b" / "runs.csv")
    assert runs["iterations"].min() < 120


def test_a_budget_gives_the_same_tables_with_one_or_two_workers(tmp_path: Path) -> None:
    raw = _scenario(max_bits=4000.0)  # the tables only: a budget's figures are drawn above
    gs.run(raw, out=tmp_path / "one", progress=False, workers=1, plots=False)
    gs.run(raw, out=tmp_path / "two", progress=False, workers=2, plots=False)
    for table in ("metrics.csv", "runs.csv", "requests.csv"):
        assert (tmp_path / "one" / table).read_bytes() == (tmp_path / "two" / table).read_bytes()


def test_the_vectorized_engine_refuses_a_budget_and_auto_says_why(tmp_path: Path) -> None:
    raw = _scenario(max_bits=4000.0, runs=16)
    with pytest.raises(ConfigError, match=r"scenario\.max_bits"):
        gs.run(raw, out=tmp_path / "v", progress=False, engine="vectorized")
    res = gs.run(raw, out=tmp_path / "a", progress=False, engine="auto", plots=False)
    assert all("scenario.max_bits" in note for note in res.engines.values())


@pytest.mark.parametrize("value", [0, -1.0, float("inf"), "lots"])
@pytest.mark.parametrize("key", ["max_bits", "max_time"])
def test_a_bad_budget_is_one_line_naming_the_key(tmp_path: Path, capsys, key, value) -> None:
    raw = _scenario(**{key: value})
    assert f"scenario.{key}" in validate_error(raw, tmp_path, capsys)


def test_plot_x_writes_the_figures_against_bits_and_time(folder: Path, capsys) -> None:
    assert main(["plot", str(folder), "--x", "bits"]) == 0
    written = capsys.readouterr().out.split()
    assert sorted(Path(p).name for p in written) == ["kl_vs_bits.png", "unlearning_kl_vs_bits.png"]
    assert all(Path(p).stat().st_size > 0 for p in written)
    assert main(["plot", str(folder), "--x", "time", "--figure", "unlearning_kl"]) == 0
    assert [Path(p).name for p in capsys.readouterr().out.split()] == ["unlearning_kl_vs_time.png"]


@pytest.mark.parametrize(
    ("args", "words"),
    [(["--x", "seconds"], "--x"), (["--x", "bits", "--figure", "cover_time"], "--x")],
)
def test_a_bad_x_is_one_line_and_exit_2(folder: Path, capsys, args, words) -> None:
    assert main(["plot", str(folder), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and words in err


def test_results_plot_x_from_python(folder: Path) -> None:
    res = gs.load_results(folder)
    assert set(res.plot(x="bits", which="kl_vs_iteration")) == {"kl_vs_bits"}
    assert set(res.plot(x="time", which="kl_vs_iteration")) == {"kl_vs_time"}
    with pytest.raises(ConfigError, match="x"):
        res.plot(x="bits", which="latency")
    with pytest.raises(ConfigError, match="x"):
        res.plot(x="slots")


def test_the_budget_is_read_from_a_scenario_file(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(to_toml(_scenario(max_bits=4096.0, max_time=2.5)))
    run = gs.load_scenario(path).variants[0].scenario.run
    assert (run.max_bits, run.max_time) == (4096.0, 2.5)
    assert gs.load_scenario(_scenario()).variants[0].scenario.run.max_bits is None


def test_compare_x_bits_draws_the_folders_against_bits(
    folder: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "c.png"
    assert main(["compare", str(folder), "--x", "bits", "--out", str(out)]) == 0
    assert out.stat().st_size > 0
    capsys.readouterr()
    assert main(["compare", str(folder), "--x", "seconds", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


def test_a_request_is_placed_at_the_bits_sent_by_the_slot_before_it(folder: Path) -> None:
    runs = _by_run(folder)
    res = gs.load_results(folder)
    placed = on_cost_axis(res.metrics, res.requests, list(res.summary()["variants"]), "bits")
    assert placed.requests is not None
    for row in placed.requests.itertuples():
        rows = runs[str(row.variant), int(row.run)]
        sent = np.cumsum(_slot_bits(str(row.variant), [int(r["holder"]) for r in rows]))
        assert row.request_bits == sent[int(row.request_iteration) - 2]  # slot r - 1's bits
