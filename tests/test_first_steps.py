"""Smaller things a new user hit (issue 30, item 8): gs.load_scenario of a dict, a baseline case of
[[sweep.cases]], the figures of gs.run(..., out=DIR), what --engine auto does, and the docs' account
of the shipped Fashion-MNIST study."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.cli.parser import build_parser, main
from gossipsim.execution.vectorized.capability import MIN_VECTORIZED_RUNS
from tests.helpers import base_scenario, to_toml, validate_error

ROOT = Path(__file__).resolve().parents[1]


def test_load_scenario_takes_the_dicts_parse_study_takes():
    raw = base_scenario(sweep={"topology.nodes": [5, 8]})
    loaded, parsed = gs.load_scenario(raw), gs.parse_study(raw)
    assert [v.label for v in loaded.variants] == [v.label for v in parsed.variants] == ["5", "8"]
    assert [v.scenario for v in loaded.variants] == [v.scenario for v in parsed.variants]
    with pytest.raises(gs.ConfigError, match=r"^topology\.nodes: must be an integer >= 2"):
        gs.load_scenario(base_scenario(topology={"kind": "ring", "nodes": 1}))


def _baseline_sweep() -> dict:
    raw = base_scenario(scenario={"name": "cases", "seed": 2, "runs": 3, "iterations": 150})
    raw["sweep"] = {
        "cases": [
            {"label": "baseline"},
            {"label": "longer", "scenario.iterations": 300, "metrics.record_every": 10},
        ]
    }
    return raw


def test_a_sweep_case_with_only_a_label_is_the_scenario_as_it_is(tmp_path, capsys):
    """A baseline case: its variant is the scenario itself (the keys the other case sets missing
    in its rows), from Python and from a file, and a results folder reads back with it."""
    study = gs.parse_study(_baseline_sweep())
    assert [v.label for v in study.variants] == ["baseline", "longer"]
    assert study.variants[0].values == {}
    assert study.variants[0].scenario == gs.parse_study(base_scenario(
        scenario={"name": "cases", "seed": 2, "runs": 3, "iterations": 150})).variants[0].scenario  # fmt: skip
    assert [v.label for v in study.replace("scenario.runs", 2).variants] == ["baseline", "longer"]
    res = gs.run(study, out=tmp_path / "api", plots=False, progress=None)
    assert res.runs["scenario.iterations"].isna().tolist() == [True] * 3 + [False] * 3
    back = gs.load_results(tmp_path / "api")
    pd.testing.assert_frame_equal(back.runs, res.runs)
    file = tmp_path / "cases.toml"
    file.write_text(to_toml(_baseline_sweep()))
    assert main(["validate", str(file)]) == 0
    assert "baseline: 10 nodes" in capsys.readouterr().out


def test_a_sweep_case_with_neither_a_key_nor_a_label_is_one_line(tmp_path, capsys):
    raw = _baseline_sweep()
    raw["sweep"]["cases"].append({})
    err = validate_error(raw, tmp_path, capsys)
    assert err == (
        "gossipsim: error: sweep.cases[2]: sets no key and has no label; a baseline case (the "
        'scenario as it is) needs a label, e.g. label = "baseline"'
    )


def _small() -> dict:
    return base_scenario(
        scenario={"name": "figs", "seed": 4, "runs": 6, "iterations": 120},
        unlearning=[{"node": 2, "at_iteration": 60}],
    )


def test_gs_run_with_out_draws_the_figures_gossipsim_run_draws(tmp_path, capsys):
    """``gs.run(..., out=DIR)`` and ``gossipsim run --out DIR``: the same figures, byte for byte;
    ``plots=False`` and ``--no-plots`` the same folder without them."""
    file = tmp_path / "figs.toml"
    file.write_text(to_toml(_small()))
    assert main(["run", str(file), "--out", str(tmp_path / "cli"), "--progress", "off"]) == 0
    assert main(["run", str(file), "--out", str(tmp_path / "cli-np"), "--no-plots"]) == 0
    capsys.readouterr()
    gs.run(_small(), out=tmp_path / "api", progress=False)
    gs.run(_small(), out=tmp_path / "api-np", plots=False, progress=False)
    cli = {p.name: p.read_bytes() for p in (tmp_path / "cli" / "plots").iterdir()}
    api = {p.name: p.read_bytes() for p in (tmp_path / "api" / "plots").iterdir()}
    assert {"kl_vs_iteration.png", "latency.png", "visits.png"} <= set(cli)
    assert api == cli
    for folder in ("cli-np", "api-np"):
        assert not (tmp_path / folder / "plots").exists()
    names = {p.name for p in (tmp_path / "cli-np").iterdir()}
    assert {p.name for p in (tmp_path / "api-np").iterdir()} == names


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"plots": "no"}, "plots: must be True or False (got 'no')"),
        ({"plots": False, "make_plots": lambda r, f: None}, "plots: plots=False draws no figures"),
    ],
)
def test_bad_plots_arguments_are_one_line(tmp_path, kwargs, message):
    with pytest.raises(gs.ConfigError) as caught:
        gs.run(_small(), out=tmp_path / "o", progress=False, **kwargs)
    assert str(caught.value).startswith(message)
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_auto_engine_does_what_run_help_says():
    """``run --help``: auto is the vectorized engine for variants of at least 16 runs; fewer run on
    the event engine, a particle scenario as a conjugate one, and the note says why."""
    run = next(a for a in build_parser()._subparsers._group_actions[0].choices["run"]._actions
               if "--engine" in a.option_strings)  # fmt: skip
    assert f"at least {MIN_VECTORIZED_RUNS} runs" in run.help
    particles = base_scenario(
        scenario={"name": "p", "seed": 1, "runs": 2, "iterations": 40},
        topology={"kind": "ring", "nodes": 4},
        model={"kind": "gaussian-mixture"},
        data={"mmd_samples": 20},
        protocol={"kind": "dsvgd", "particles": 5},
        metrics={"record_every": 10},
    )
    for raw in (base_scenario(), particles):
        for runs, engine in (
            (MIN_VECTORIZED_RUNS - 1, "event"),
            (MIN_VECTORIZED_RUNS, "vectorized"),
        ):
            study = gs.parse_study(raw).with_overrides(runs=runs)
            _, notes = gs.api.choose_engines(study, gs.check(study), "auto")
            assert notes[0].startswith(engine), notes
            if engine == "event":
                assert f"fewer than {MIN_VECTORIZED_RUNS} runs" in notes[0]


def test_the_docs_describe_the_shipped_fashion_mnist_study_as_it_is():
    """docs/scenarios.md's account of the papers' unlearning study names the partition and the
    keys the shipped scenario uses."""
    shipped = tomllib.loads(
        (ROOT / "scenarios" / "dsvgd_fashion_mnist_unlearning.toml").read_text(encoding="utf-8")
    )["data"]
    doc = (ROOT / "docs" / "scenarios.md").read_text(encoding="utf-8")
    sentence = re.search(r"The papers' unlearning study.*?\)\.", doc, re.S)
    assert sentence is not None
    text = " ".join(sentence.group(0).split())
    assert f'is `partition = "{shipped["partition"]}"`' in text
    assert "`node_classes`" in text and f"`rows_per_node = {shipped['rows_per_node']}`" in text
