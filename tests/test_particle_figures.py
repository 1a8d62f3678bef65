"""Figures, summaries and comparisons of folders whose divergence is the kernelized Stein
discrepancy (particle protocols, issue 22): what each figure holds (labels, lines, the data of a
line against the median of its column over runs), from small synthetic tables and from a tiny
DSVGD run; KL folders keep their figures (tests/test_plots.py)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from gossipsim.figures.axes import REQUEST_LABEL
from gossipsim.figures.divergence_curves import plot_kl_vs_iteration
from gossipsim.figures.evaluation import (
    EVALUATION_LABELS,
    REFERENCE_LABEL,
    RETRAIN_BESIDE,
    evaluation_columns,
    plot_evaluation,
)
from gossipsim.figures.latency import plot_latency
from gossipsim.figures.unlearning_accuracy import (
    ACCURACY_SPLIT,
    NO_FORGOTTEN,
    PROTOCOL_LINE,
    plot_unlearning_accuracy,
)
from gossipsim.figures.unlearning_kl import plot_unlearning_kl
from gossipsim.states.divergences import KL, KSD, divergence, divergences, joined_names

REQUEST_SLOT = 12


def _particle_metrics(
    variants: list[str], runs: int = 5, slots: int = 30, *, forgotten: bool = True
) -> pd.DataFrame:
    """A metrics table as particle protocols write it: ksd and the held-out metrics for every
    slot, the retrain baseline's copies from the request on (NaN before)."""
    rng = np.random.default_rng(3)
    rows = []
    for k, v in enumerate(variants):
        for r in range(runs):
            for i in range(1, slots + 1):
                row: dict[str, Any] = {"variant": v, "run": r, "iteration": i, "time": 0.0}
                row["ksd"] = 1e3 / i * rng.uniform(0.5, 2.0) + k
                for column in ("accuracy", "nll", "ece", "particle_spread", "accuracy_remaining"):
                    row[column] = rng.uniform(0.6, 1.0)
                row["accuracy_forgotten"] = rng.uniform(0.1, 1.0) if forgotten else np.nan
                for column in ("ksd", "accuracy", "nll", "ece", "particle_spread",
                               "accuracy_forgotten", "accuracy_remaining"):  # fmt: skip
                    late = i >= REQUEST_SLOT and not np.isnan(row[column])
                    row[f"retrain_{column}"] = rng.uniform(0.2, 0.9) if late else np.nan
                rows.append(row)
    return pd.DataFrame(rows)


def _requests(variants: list[str], runs: int = 5, slot: int = REQUEST_SLOT) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "variant": v,
                "run": r,
                "request": 0,
                "node": 0,
                "request_iteration": slot,
                "request_time": 0.0,
                "removal_latency": 1.0 + r,
                "latency": np.nan,
                "retrain_latency": np.nan,
            }  # fmt: skip
            for v in variants
            for r in range(runs)
        ]
    )


def _median(metrics: pd.DataFrame, variant: str, column: str) -> tuple[np.ndarray, np.ndarray]:
    """The median over runs of ``column`` at each slot some run recorded it (what a figure's centre
    line must hold), computed here from the table: a run's value at slot s is its last record at
    or before s (runs record extra slots of their own, e.g. a removal slot)."""
    part = metrics.loc[metrics["variant"] == variant].dropna(subset=[column])
    slots = np.unique(part["iteration"].to_numpy())
    values = []
    for _, run in part.groupby("run"):
        at = run["iteration"].to_numpy()
        last = [run[column].to_numpy()[at <= s][-1] if (at <= s).any() else np.nan for s in slots]
        values.append(last)
    return slots.astype(float), np.nanmedian(np.array(values), axis=0)


def _lines(ax: Axes, label: str) -> list[Line2D]:
    return [ln for ln in ax.get_lines() if ln.get_label() == label]


def _legend_texts(fig: Figure) -> list[str]:
    out = []
    for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]:
        out += [t.get_text() for t in legend.get_texts()]
    return out


def _by_ylabel(fig: Figure) -> dict[str, Axes]:
    return {ax.get_ylabel(): ax for ax in fig.axes if ax.get_ylabel()}


# ---------------------------------------------------------------------------------------------------
# which divergence a table holds


def test_a_table_says_which_divergence_each_variant_holds():
    kl = pd.DataFrame({"variant": ["a", "a"], "run": 0, "iteration": [1, 2], "kl": [1.0, 0.5]})
    assert divergences(kl) == {"a": KL}
    ksd = kl.rename(columns={"kl": "ksd"})
    assert divergences(ksd, ["a"]) == {"a": KSD}
    # a sweep over protocol.kind: G-FVL's rows hold kl, DSVGD's ksd, each empty in the other's
    mixed = pd.concat([kl.assign(ksd=np.nan), ksd.assign(variant="b", kl=np.nan)])
    mixed["variant"] = pd.Categorical(mixed["variant"], categories=["a", "b", "c"])
    assert divergences(mixed, ["a", "b", "c"]) == {"a": KL, "b": KSD, "c": KL}
    assert joined_names(divergences(mixed)) == "KL or KSD"
    # a representation of one's own names its own column
    assert divergence("mmd").name == "MMD" and divergence("mmd").retrain_column == "retrain_mmd"


def test_a_registered_representation_s_divergence_is_found():
    from gossipsim.states.representations import (
        REPRESENTATIONS,
        NaturalParameters,
        register_representation,
    )

    class Energy(NaturalParameters):
        name = "energy-test"
        divergence_name = "energy"

    register_representation(Energy())
    try:
        table = pd.DataFrame({"variant": "a", "run": 0, "iteration": [1], "energy": [0.3]})
        assert divergences(table)["a"].column == "energy"
    finally:
        del REPRESENTATIONS["energy-test"]


# ---------------------------------------------------------------------------------------------------
# the divergence figures


def test_a_ksd_figure_is_labelled_ksd_and_draws_the_median_of_the_column(drawn, tmp_path):
    metrics = _particle_metrics(["svgd", "dsvgd"])
    summary = {"sweep": {"protocol.kind": ["svgd", "dsvgd"]},
               "variants": {v: {"values": {"protocol.kind": v}} for v in ("svgd", "dsvgd")}}  # fmt: skip
    plot_kl_vs_iteration(metrics, ["svgd", "dsvgd"], tmp_path / "k.png", summary=summary,
                               requests=_requests(["svgd", "dsvgd"]))  # fmt: skip
    (fig,) = drawn
    (main,) = [ax for ax in fig.axes if ax.get_ylabel()]
    assert main.get_ylabel() == "KSD to the target\n(kernelized Stein discrepancy)"
    assert "Kernelized Stein discrepancy" in fig._suptitle.get_text()
    for v in ("svgd", "dsvgd"):
        (line,) = _lines(main, v)
        x, y = _median(metrics, v, "ksd")
        np.testing.assert_array_equal(line.get_xdata(), x)
        np.testing.assert_allclose(line.get_ydata(), y, rtol=1e-12)
    texts = [main.get_ylabel(), fig._suptitle.get_text(), *_legend_texts(fig)]
    assert not any("KL" in t for t in texts)


def test_a_tolerance_far_below_every_ksd_is_named_not_drawn(drawn, tmp_path):
    """The default tolerance 1e-9 (made for KL) under a KSD of order 10-1000 would stretch the
    axis over eleven empty decades; a KL figure keeps drawing it."""
    metrics = _particle_metrics(["v"])
    plot_kl_vs_iteration(metrics, ["v"], tmp_path / "k.png", tolerance=1e-9)
    kl = metrics.rename(columns={"ksd": "kl"})[["variant", "run", "iteration", "time", "kl"]]
    plot_kl_vs_iteration(kl, ["v"], tmp_path / "l.png", tolerance=1e-9)
    ksd_fig, kl_fig = drawn
    assert not [ln for ax in ksd_fig.axes for ln in _lines(ax, "tolerance 1e-09")]
    assert "tolerance 1e-09: far below every KSD value, not drawn" in _legend_texts(ksd_fig)
    assert [ln for ax in kl_fig.axes for ln in _lines(ax, "tolerance 1e-09")]
    near = _particle_metrics(["v"])  # a tolerance within reach is drawn for the KSD too
    plot_kl_vs_iteration(near, ["v"], tmp_path / "m.png", tolerance=5.0)
    assert [ln for ax in drawn[2].axes for ln in _lines(ax, "tolerance 5")]


def test_kl_and_ksd_variants_never_share_a_panel_or_a_scale(drawn, tmp_path):
    ksd = _particle_metrics(["dsvgd"])[["variant", "run", "iteration", "time", "ksd"]]
    kl = ksd.rename(columns={"ksd": "kl"}).assign(variant="gfvl")
    kl["kl"] = 1e-4 * kl["kl"]
    metrics = pd.concat([kl, ksd], ignore_index=True)
    plot_kl_vs_iteration(metrics, ["gfvl", "dsvgd"], tmp_path / "k.png", tolerance=1e-9)
    (fig,) = drawn
    panels = _by_ylabel(fig)
    assert set(panels) == {KL.axis, KSD.axis}
    assert [ln.get_label() for ln in panels[KL.axis].get_lines() if not ln.get_label().startswith("_")] == ["gfvl", "tolerance 1e-09"]  # fmt: skip
    assert _lines(panels[KSD.axis], "dsvgd") and not _lines(panels[KSD.axis], "gfvl")
    assert panels[KL.axis].get_ylim() != panels[KSD.axis].get_ylim()
    assert fig._suptitle.get_text() == "Divergence to the target (KL or KSD)"


def test_unlearning_of_particles_draws_the_ksd_against_retraining(drawn, tmp_path):
    metrics = _particle_metrics(["v"])
    plot_unlearning_kl(metrics, _requests(["v"]), ["v"], tmp_path / "u.png")
    (fig,) = drawn
    (ax,) = [a for a in fig.axes if a.get_ylabel()]
    assert ax.get_ylabel() == "KSD to the target without\nthe forgotten nodes"
    (retrain,) = _lines(ax, "retrain from scratch")
    x, y = _median(metrics, "v", "retrain_ksd")
    held = np.isfinite(retrain.get_ydata())  # the panel starts the slot before the request
    np.testing.assert_array_equal(retrain.get_xdata()[held], x)
    np.testing.assert_allclose(retrain.get_ydata()[held], y, rtol=1e-12)
    metrics["retrain_ksd"] = np.nan
    plot_unlearning_kl(metrics, _requests(["v"]), ["v"], tmp_path / "v.png")
    notes = [t.get_text() for a in drawn[1].axes for t in a.texts if t.get_gid() == "note"]
    assert notes == ["retrain baseline: no KSD recorded after the request"]


def test_latencies_of_particles_are_named_for_the_ksd(drawn, tmp_path):
    requests = _requests(["v"]).assign(latency=[3.0, 4.0, 5.0, 6.0, 7.0])
    plot_latency(requests, ["v"], tmp_path / "l.png", divergence={"v": KSD})
    plot_latency(requests, ["v"], tmp_path / "m.png")
    ksd_texts, kl_texts = (" ".join(_legend_texts(fig)).replace("\n", " ") for fig in drawn)
    assert "unlearning (KSD): 5/5 served" in ksd_texts and "KL" not in ksd_texts
    assert "KSD to the target without the node settled" in ksd_texts
    assert "unlearning (KL): 5/5 served" in kl_texts and "KSD" not in kl_texts


# ---------------------------------------------------------------------------------------------------
# held-out metrics


def test_particle_evaluation_draws_the_retrain_baseline_beside_and_the_spread(drawn, tmp_path):
    metrics = _particle_metrics(["svgd", "dsvgd"])
    # a folder of gossipsim 4cb3108 recorded the Gaussian optimum's metrics as the target's own:
    # another posterior than the particles', never drawn for them
    summary = {"variants": {v: {"theory": {"target": {"all": {"accuracy": 0.5}}}}
                            for v in ("svgd", "dsvgd")}}  # fmt: skip
    columns = [c for c in EVALUATION_LABELS if c in metrics.columns]
    plot_evaluation(metrics, ["svgd", "dsvgd"], columns, tmp_path / "e.png",
                          requests=_requests(["svgd", "dsvgd"]), summary=summary)  # fmt: skip
    (fig,) = drawn
    rows = _by_ylabel(fig)
    assert list(rows) == [EVALUATION_LABELS[c] for c in
                          ("accuracy", "nll", "ece", "particle_spread")] + [KSD.stacked]  # fmt: skip
    for column in ("accuracy", "nll", "ece", "particle_spread"):
        ax = rows[EVALUATION_LABELS[column]]
        retrain = [ln for ln in ax.get_lines() if ln.get_gid() == "retrain"]
        assert len(retrain) == 2, column  # one per variant, dashed, beside the protocol's line
        for v, line in zip(("svgd", "dsvgd"), retrain, strict=True):
            x, y = _median(metrics, v, f"retrain_{column}")
            assert x[0] == REQUEST_SLOT
            np.testing.assert_array_equal(line.get_xdata(), x)
            np.testing.assert_allclose(line.get_ydata(), y, rtol=1e-12)
            assert line.get_linestyle() == "--"
            (own,) = _lines(ax, v)
            assert own.get_linestyle() == "-" and own.get_color() == line.get_color()
            np.testing.assert_allclose(own.get_ydata(), _median(metrics, v, column)[1])
        assert not [p for p in ax.patches if p.get_label() == REFERENCE_LABEL]
    assert RETRAIN_BESIDE in _legend_texts(fig)
    assert fig._suptitle.get_text() == "Held-out metrics and KSD to the target"


def test_a_sweep_of_kl_and_ksd_has_a_row_for_each_and_x_labels_at_the_bottom(drawn, tmp_path):
    particle = _particle_metrics(["dsvgd"])
    gfvl = particle[["variant", "run", "iteration", "time", "accuracy"]].assign(
        variant="gfvl", kl=particle["ksd"] / 1e3
    )
    metrics = pd.concat([gfvl, particle], ignore_index=True)
    plot_evaluation(metrics, ["gfvl", "dsvgd"], ["accuracy", "particle_spread"],
                          tmp_path / "e.png")  # fmt: skip
    (fig,) = drawn
    rows = _by_ylabel(fig)
    assert list(rows)[-2:] == [KL.stacked, KSD.stacked]
    assert _lines(rows[KL.stacked], "gfvl") and not _lines(rows[KL.stacked], "dsvgd")
    assert _lines(rows[KSD.stacked], "dsvgd") and not _lines(rows[KSD.stacked], "gfvl")
    fig.draw_without_rendering()
    labelled = [ax for ax in fig.axes
                if any(t.get_visible() and t.get_text() for t in ax.get_xticklabels())]  # fmt: skip
    # the slots are numbered once, under the last row (the KL row is not the last)
    assert [ax.get_xlabel() for ax in labelled] == ["iteration (slot)"]


def test_the_evaluation_columns_are_every_metric_the_table_holds():
    """A plug-in model's own column (``brier``) and the mixture's MMD² are metrics; the slot, time,
    holder, bits, divergences, retrain copies, swept keys and the accuracy split are not."""
    metrics = _particle_metrics(["v"]).assign(
        brier=0.1, mmd=0.5, mmd_unlearned=0.4, retrain_mmd_unlearned=0.3, holder=2, bits=64.0,
        kl=np.nan, best_family_kl=np.nan, **{"topology.nodes": 5, "scenario.iterations": 30},
    )  # fmt: skip
    metrics["label"] = "text"  # not a number: not drawn
    assert evaluation_columns(metrics) == [
        "accuracy", "nll", "ece", "particle_spread", "brier", "mmd", "mmd_unlearned"
    ]  # fmt: skip


def _mixture_metrics() -> pd.DataFrame:
    """The columns of dsvgd_mixture_2d's table (MMD² from about 0.2 down to 1e-3), a plug-in
    column ``brier``, and a first KSD of 9e6 (the prior's particles far from the target)."""
    metrics = _particle_metrics(["svgd", "dsvgd"])
    rng = np.random.default_rng(5)
    late = metrics["iteration"] >= REQUEST_SLOT
    for column in ("mmd", "mmd_unlearned"):
        metrics[column] = 0.2 / metrics["iteration"] ** 1.5 * rng.uniform(0.8, 1.2, len(metrics))
        metrics[f"retrain_{column}"] = np.where(late, metrics[column] * 2.0, np.nan)
    metrics["brier"] = rng.uniform(0.05, 0.1, len(metrics))
    metrics["retrain_brier"] = np.where(late, metrics["brier"] + 0.05, np.nan)
    metrics.loc[metrics["iteration"] == 1, "ksd"] = 9e6
    return metrics


def test_evaluation_draws_every_metric_the_retrain_ksd_and_the_mixture_s_mmd(drawn, tmp_path):
    metrics = _mixture_metrics()
    variants = ["svgd", "dsvgd"]
    plot_evaluation(metrics, variants, evaluation_columns(metrics), tmp_path / "e.png",
                          requests=_requests(variants))  # fmt: skip
    (fig,) = drawn
    rows = _by_ylabel(fig)
    names = ["accuracy", "nll", "ece", "particle_spread", "mmd", "mmd_unlearned", "brier"]
    assert list(rows) == [EVALUATION_LABELS.get(c, c) for c in names] + [KSD.stacked]
    for column in ("mmd", "mmd_unlearned"):  # from 0.2 to 1e-3: a log axis
        assert rows[EVALUATION_LABELS[column]].get_yscale() == "log"
    assert rows[EVALUATION_LABELS["accuracy"]].get_yscale() == "linear"
    for column, label in (("mmd_unlearned", EVALUATION_LABELS["mmd_unlearned"]),
                          ("ksd", KSD.stacked), ("brier", "brier")):  # fmt: skip
        ax = rows[label]
        for v in variants:
            (own,) = _lines(ax, v)
            np.testing.assert_allclose(own.get_ydata(), _median(metrics, v, column)[1])
        retrain = [ln for ln in ax.get_lines() if ln.get_gid() == "retrain"]
        assert len(retrain) == 2, column  # the retrain baseline's centre line, each variant
        for v, line in zip(variants, retrain, strict=True):
            x, y = _median(metrics, v, f"retrain_{column}")
            np.testing.assert_array_equal(line.get_xdata(), x)
            np.testing.assert_allclose(line.get_ydata(), y, rtol=1e-12)
            assert line.get_linestyle() == "--"
    # the first KSD (9e6, every run at slot 1) lies inside its axis, with the smallest value
    ksd = rows[KSD.stacked]
    low, high = ksd.get_ylim()
    drawn_values = np.concatenate(
        [ln.get_ydata() for ln in ksd.get_lines() if ln.get_gid() != "request"]
    )
    assert high >= 9e6 and low <= drawn_values[np.isfinite(drawn_values)].min()
    assert RETRAIN_BESIDE in _legend_texts(fig)


def test_a_mixture_run_s_evaluation_figure_has_its_mmd_rows():
    """From the tables a run writes: ``mmd`` and ``mmd_unlearned`` rows, the retrain baseline's
    MMD² dashed beside the protocol's."""
    import gossipsim as gs

    res = gs.run(
        "scenarios/dsvgd_mixture_2d.toml",
        overrides={"scenario.iterations": 60, "unlearning": [{"node": 4, "at_iteration": 31}],
                   "metrics.record_every": 10, "metrics.particles": "final"},
        runs=2,
    )  # fmt: skip
    fig = res.plot(which=["evaluation"])["evaluation"]
    rows = _by_ylabel(fig)
    unlearned = rows[EVALUATION_LABELS["mmd_unlearned"]]
    assert EVALUATION_LABELS["mmd"] in rows
    assert len([ln for ln in unlearned.get_lines() if ln.get_gid() == "retrain"]) == 2
    assert len([ln for ln in rows[KSD.stacked].get_lines() if ln.get_gid() == "retrain"]) == 2


# ---------------------------------------------------------------------------------------------------
# accuracy on the forgotten and the remaining labels


def test_forgotten_and_remaining_accuracy_against_retraining(drawn, tmp_path):
    metrics = _particle_metrics(["v"])
    plot_unlearning_accuracy(metrics, _requests(["v"]), ["v"], tmp_path / "a.png")
    (fig,) = drawn
    rows = _by_ylabel(fig)
    assert list(rows) == ["accuracy on the\nforgotten labels", "accuracy on the\nremaining labels"]
    for (column, _), ax in zip(ACCURACY_SPLIT, rows.values(), strict=True):
        (own,) = _lines(ax, PROTOCOL_LINE)
        (retrain,) = _lines(ax, "retrain from scratch (same walk)")
        for line, name in ((own, column), (retrain, f"retrain_{column}")):
            x, y = _median(metrics, "v", name)
            np.testing.assert_array_equal(line.get_xdata(), x)
            np.testing.assert_allclose(line.get_ydata(), y, rtol=1e-12)
        assert own.get_linestyle() != retrain.get_linestyle()
        assert own.get_color() != retrain.get_color()
        marks = [ln for ln in ax.get_lines() if ln.get_gid() == "request"]
        assert [m.get_xdata()[0] for m in marks] == [REQUEST_SLOT]
    assert REQUEST_LABEL in _legend_texts(fig)
    assert fig._suptitle.get_text().startswith("Accuracy on the forgotten and the remaining")


def test_without_labels_only_forgotten_nodes_hold_the_figure_says_so(drawn, tmp_path):
    metrics = _particle_metrics(["v"], forgotten=False)
    plot_unlearning_accuracy(metrics, _requests(["v"]), ["v"], tmp_path / "a.png")
    (fig,) = drawn
    assert list(_by_ylabel(fig)) == ["accuracy (every\nlabel remains)"]
    assert NO_FORGOTTEN in fig._suptitle.get_text().replace("\n", " ")


def test_a_sweep_of_variants_puts_them_side_by_side(drawn, tmp_path):
    variants = ["sound", "paper"]
    summary = {"sweep": {"protocol.variant": variants},
               "variants": {v: {"values": {"protocol.variant": v}} for v in variants}}  # fmt: skip
    metrics = _particle_metrics(variants)
    plot_unlearning_accuracy(metrics, _requests(variants), variants, tmp_path / "a.png",
                                   summary=summary)  # fmt: skip
    (fig,) = drawn
    fig.draw_without_rendering()
    titled = {ax.get_title(): ax.get_position() for ax in fig.axes if ax.get_title()}
    assert set(titled) == set(variants)
    assert titled["sound"].x1 < titled["paper"].x0  # columns, not stacked
    assert abs(titled["sound"].y1 - titled["paper"].y1) < 0.01
    panels = [ax for ax in fig.axes if _lines(ax, PROTOCOL_LINE)]
    assert len(panels) == 4  # forgotten and remaining for each variant


# ---------------------------------------------------------------------------------------------------
# a tiny DSVGD run through the command line


PARTICLE_TOML = """
[scenario]
name = "tiny_dsvgd"
seed = 1
runs = 2
iterations = 30
[topology]
kind = "complete"
nodes = 3
[model]
kind = "logistic-regression"
[data]
dataset = "breast_cancer"
partition = "labels"
labels_per_node = 1
[protocol]
kind = "dsvgd"
particles = 6
[metrics]
record_every = 5
tolerance = 1e-9  # absolute, below any KSD: the figures name it instead of drawing it
[[unlearning]]
node = 0
at_iteration = 15
"""


def _cli(args: list[str]) -> tuple[int, str]:
    from gossipsim.cli.parser import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(args)
    return code, out.getvalue()


@pytest.fixture(scope="module")
def particle_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A DSVGD folder (label partition: node 0 alone holds a label, so accuracy_forgotten has
    values) and what ``gossipsim run`` printed."""
    base = tmp_path_factory.mktemp("particles")
    (base / "s.toml").write_text(PARTICLE_TOML)
    code, printed = _cli(["run", str(base / "s.toml"), "--out", str(base / "p"), "--no-plots",
                          "--progress", "off"])  # fmt: skip
    assert code == 0
    return base / "p", printed


def test_the_run_summary_names_the_divergence_the_requests_were_judged_on():
    from gossipsim.cli.run import _request_line

    entry = {"request_iteration": 20.0, "arrived": 2, "runs": 2, "node": 0}
    rows = pd.DataFrame({"settled_at_request": [False, True]})
    note = "note: in 1/2 runs the {} was not within the tolerance before the request; their"
    assert note.format("KL") in _request_line(entry, rows)  # as before, for KL folders
    assert note.format("KSD") in _request_line(entry, rows, "KSD")
    # a latency shorter than the removal latency: the divergence could not tell the posteriors apart
    rows = pd.DataFrame({"settled_at_request": [True, True], "latency": [1.0, 7.0],
                         "removal_latency": [6.0, 7.0]})  # fmt: skip
    early = "note: in 1/2 runs the KSD to the posterior without the node was within the tolerance"
    assert early in _request_line(entry, rows, "KSD")
    rows["latency"] = [6.0, 8.0]
    assert "without the node was within" not in _request_line(entry, rows, "KSD")


def test_a_particle_run_says_ksd_and_records_no_gaussian_target(particle_folder):
    folder, printed = particle_folder
    assert "the KSD was not within the tolerance" in printed and "KL" not in printed
    import gossipsim as gs

    res = gs.load_results(folder)
    assert res.divergences == {"tiny_dsvgd": KSD}
    assert res.metrics["accuracy_forgotten"].notna().any()
    # the Gaussian G-FVL optimum is not the particles' target: no metrics "of the target"
    theory = json.loads((folder / "summary.json").read_text())["variants"]["tiny_dsvgd"]["theory"]
    assert "target" not in theory


def test_gossipsim_plot_draws_every_particle_figure(particle_folder, drawn):
    folder, _ = particle_folder
    code, printed = _cli(["plot", str(folder)])
    assert code == 0
    names = {Path(line).stem for line in printed.split()}
    assert {"kl_vs_iteration", "unlearning_kl", "latency", "evaluation",
            "unlearning_accuracy"} <= names  # fmt: skip
    figures = dict(zip([Path(p).stem for p in printed.split()], drawn, strict=True))
    metrics = pd.read_csv(folder / "metrics.csv")
    rows = _by_ylabel(figures["evaluation"])
    (line,) = _lines(rows[KSD.stacked], "tiny_dsvgd")
    x, y = _median(metrics, "tiny_dsvgd", "ksd")
    np.testing.assert_array_equal(line.get_xdata(), x)
    np.testing.assert_allclose(line.get_ydata(), y, rtol=1e-12)
    (retrain,) = [ln for ln in rows[EVALUATION_LABELS["accuracy"]].get_lines()
                  if ln.get_gid() == "retrain"]  # fmt: skip
    np.testing.assert_allclose(retrain.get_ydata(), _median(metrics, "tiny_dsvgd",
                                                            "retrain_accuracy")[1])  # fmt: skip
    (retrain,) = [ln for ln in rows[KSD.stacked].get_lines() if ln.get_gid() == "retrain"]
    np.testing.assert_allclose(retrain.get_ydata(), _median(metrics, "tiny_dsvgd",
                                                            "retrain_ksd")[1])  # fmt: skip
    split = _by_ylabel(figures["unlearning_accuracy"])
    (forgotten,) = _lines(split["accuracy on the\nforgotten labels"], PROTOCOL_LINE)
    np.testing.assert_allclose(
        forgotten.get_ydata(), _median(metrics, "tiny_dsvgd", "accuracy_forgotten")[1]
    )


def test_compare_of_a_kl_and_a_ksd_folder_draws_a_panel_each(particle_folder, drawn, tmp_path):
    from tests.helpers import base_scenario, to_toml

    folder, _ = particle_folder
    raw = base_scenario(scenario={"name": "kl", "seed": 3, "runs": 3, "iterations": 40})
    (tmp_path / "k.toml").write_text(to_toml(raw))
    assert _cli(["run", str(tmp_path / "k.toml"), "--out", str(tmp_path / "kl"), "--no-plots",
                 "--progress", "off"])[0] == 0  # fmt: skip
    code, _ = _cli(["compare", str(tmp_path / "kl"), str(folder), "--out",
                    str(tmp_path / "c.png")])  # fmt: skip
    assert code == 0
    (fig,) = drawn
    panels = _by_ylabel(fig)
    assert set(panels) == {KL.axis, KSD.axis}
    assert _lines(panels[KL.axis], "kl") and not _lines(panels[KL.axis], "p")
    assert _lines(panels[KSD.axis], "p") and not _lines(panels[KSD.axis], "kl")
    # each folder's tolerance in its own panel only: 1e-10 of the KL folder is drawn there; the
    # particle folder's 1e-9 is far below its KSD and named instead
    assert _lines(panels[KL.axis], "tolerance 1e-10 (kl)")
    assert not _lines(panels[KSD.axis], "tolerance 1e-10 (kl)")
    assert fig._suptitle.get_text() == "KL or KSD vs iteration: kl, p"
