"""The README's gallery: which scenario draws each figure, and the numbers each caption states,
recomputed from the results folders (issue 30, item 7).

    python tools/gallery.py run [--only NAME ...] [--results DIR] [--rerun]
    python tools/gallery.py check [--results DIR] [--readme FILE]
    python tools/gallery.py numbers [--only NAME ...] [--results DIR]

``run`` runs every gallery scenario as shipped (``gossipsim run FILE --out DIR/<name>``, with
``PYTHONPATH=examples`` for the examples; a folder already there and complete is reused unless
``--rerun``), copies the figures to ``plots/`` and prints each caption's numbers. ``check``
recomputes the numbers from the folders (nothing is run) and prints one line per number that its
README caption does not state (the figure, the expected text, the caption), and one per gallery row
without an entry here or entry without a row; it exits 1 if there is any. ``numbers`` prints them.
NAME is a results folder's name (the scenario's ``[scenario] name``: ``fig3``, ``ba_sweep``, ...)
or a figure's image (``fig3_cover_time``). DIR defaults to ``results/``.

Each caption has a function that returns the texts it must contain, formatted as it writes them
("median 6 [6, 7]", "44.9 ± 1.6", ...): every number the caption states that a results folder
holds. The few it quotes from elsewhere (a reference computed once, the authors' own code) are
listed in :data:`QUOTED` and only checked to be there.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gossipsim.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
README = ROOT / "README.md"
PLOTS = ROOT / "plots"


# ---------------------------------------------------------------------------------- formatting


def num(x: float, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits, never fewer than units (14,311 stays 14,311), with
    thousands separators: 9.116 -> "9.12", 25.697 -> "25.7", 0.00310 -> "0.00310"."""
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    out = f"{x:,.{decimals}f}"
    # rounding up can add a digit (9.996 -> "10.00"): keep the significant count
    if (
        decimals
        and len(out.replace(",", "").replace("-", "").replace(".", "").lstrip("0")) > digits
    ):
        out = f"{x:,.{decimals - 1}f}"
    return out


def short(x: float, digits: int = 2) -> str:
    """An interval's bound: ``digits`` significant digits, trailing zeros dropped (7.0 -> "7")."""
    out = num(x, digits)
    return out.rstrip("0").rstrip(".") if "." in out else out


def interval(lo: float, hi: float) -> str:
    """``[lo, hi]`` with two significant digits a bound: "[8.6, 9.7]", "[2,274, 2,524]"."""
    return f"[{short(lo)}, {short(hi)}]"


def pm(mean: float, half_width: float) -> str:
    """ "mean ± half-width": the half-width to two significant digits (units at least), the mean to
    as many decimals: 44.87, 1.63 -> "44.9 ± 1.6"; 14311.2, 480.3 -> "14,311 ± 480"."""
    hw = num(half_width, 2)
    decimals = len(hw.split(".")[1]) if "." in hw else 0
    return f"{mean:,.{decimals}f} ± {hw}"


def dec(x: float, decimals: int = 1) -> str:
    """``x`` with ``decimals`` decimals and thousands separators: an exact expectation "152.3"."""
    return f"{x:,.{decimals}f}"


def pct(x: float) -> str:
    """A share in percent to two significant digits, as the visits figure titles write it: "3%",
    "0.96%", "1.2%"."""
    return f"{short(100 * x)}%"


def count(n: float) -> str:
    return f"{int(n):,}"


# ------------------------------------------------------------------------------- the folders


@dataclass(frozen=True)
class Scenario:
    """A gallery scenario: its file, its results folder's name, whether it needs ``examples/`` on
    PYTHONPATH (a plug-in of the examples)."""

    file: str
    name: str
    examples: bool = False


SCENARIOS = [
    Scenario("scenarios/fig3_beta_bernoulli.toml", "fig3"),
    Scenario("scenarios/cover_time_vs_nodes.toml", "cover_time_vs_nodes"),
    Scenario("scenarios/unlearning_complete.toml", "unlearning_complete"),
    Scenario("scenarios/unlearning_karate.toml", "unlearning_karate"),
    Scenario("scenarios/fig4_beta_exponential.toml", "fig4"),
    Scenario("scenarios/fig5_beta_exponential_unlearning.toml", "fig5"),
    Scenario("scenarios/logistic_breast_cancer_karate.toml", "logistic_karate"),
    Scenario("scenarios/unlearning_ba_sweep.toml", "ba_sweep"),
    Scenario("scenarios/server_vs_walk.toml", "server_vs_walk"),
    Scenario("scenarios/dsvgd_breast_cancer.toml", "dsvgd_breast_cancer"),
    Scenario("scenarios/dsvgd_fashion_mnist_unlearning.toml", "fmnist_forget_sound"),
    Scenario("scenarios/dsvgd_fashion_mnist_unlearning_paper.toml", "fmnist_forget_paper"),
    Scenario("examples/partial_participation.toml", "partial_participation", examples=True),
    Scenario("examples/lazy_walk.toml", "lazy_walk", examples=True),
    Scenario("examples/poisson_regression.toml", "poisson_regression", examples=True),
    Scenario("scenarios/dsvgd_mixture_2d.toml", "dsvgd_mixture_2d"),
    Scenario("scenarios/compressed_fmnist_schemes.toml", "compressed_fmnist_schemes"),
    Scenario("scenarios/compressed_fmnist_equal_time.toml", "compressed_fmnist_equal_time"),
    Scenario("scenarios/compressed_fmnist_tradeoff.toml", "compressed_fmnist_tradeoff"),
    Scenario("scenarios/compressed_fmnist_forget.toml", "compressed_fmnist_forget"),
    Scenario("scenarios/fig4_wall_clock.toml", "fig4_wall_clock"),
    Scenario("scenarios/karate_slow_links.toml", "karate_slow_links"),
    Scenario("scenarios/churn_karate_gfvl.toml", "churn_karate_gfvl"),
    Scenario("scenarios/churn_karate_dsvgd.toml", "churn_karate_dsvgd"),
    Scenario("scenarios/selection_blr.toml", "selection_blr"),
    Scenario("scenarios/selection_bnn.toml", "selection_bnn"),
    Scenario("scenarios/selection_walk_karate.toml", "selection_walk_karate"),
]
BY_NAME = {s.name: s for s in SCENARIOS}


class Folders:
    """The results folders under ``results`` (``<results>/<name>``), each loaded once."""

    def __init__(self, results: Path) -> None:
        self.results = results

    def path(self, name: str) -> Path:
        return self.results / name

    @cache  # noqa: B019 (one Folders per command)
    def __call__(self, name: str) -> Any:
        import gossipsim as gs

        if BY_NAME[name].examples and str(EXAMPLES) not in sys.path:
            sys.path.insert(0, str(EXAMPLES))  # the plug-ins the scenario names
        return gs.load_results(self.path(name))


Load = Callable[[str], Any]


# ---------------------------------------------------------------------------- shared helpers


def summary(res: Any) -> dict[str, Any]:
    """summary.json's variants as :meth:`Results.summary` gives them (with the estimates)."""
    out: dict[str, Any] = res.summary()["variants"]
    return out


def request(res: Any, variant: str | None = None, index: int = 0) -> dict[str, Any]:
    """``per_request[index]`` of a variant (the first if None)."""
    entries = summary(res)
    entry = entries[variant if variant is not None else next(iter(entries))]
    out: dict[str, Any] = entry["per_request"][index]
    return out


def median_ci(lat: dict[str, Any]) -> str:
    """A latency's Kaplan–Meier median with its 95% interval: "median 6 [6, 7]"."""
    return (
        f"median {short(lat['km_median'], 3)} {interval(lat['km_median_lo'], lat['km_median_hi'])}"
    )


def mean_ci(lat: dict[str, Any]) -> str:
    """A latency's (restricted) mean with its 95% interval: "mean 9.12 [8.6, 9.7]"."""
    return f"mean {num(lat['restricted_mean'])} {interval(lat['restricted_mean_lo'], lat['restricted_mean_hi'])}"


def expected(req: dict[str, Any]) -> float:
    """The removal latency's exact expectation at the request's slot."""
    return float(req["expected_removal_latency"]["value"])


def runs_of(res: Any, variant: str | None = None) -> int:
    runs = res.runs if variant is None else res.runs[res.runs["variant"] == variant]
    return int(runs["run"].nunique())


def column(table: pd.DataFrame, variant: str, name: str) -> pd.Series:
    return table.loc[table["variant"] == variant, name]


def at_slot(res: Any, variant: str, name: str, slot: int, stat: str = "median") -> float:
    """A metrics column at ``slot`` over the runs that recorded it: median (or min / max)."""
    m = res.metrics
    values = m.loc[(m["variant"] == variant) & (m["iteration"] == slot), name].astype(float)
    if not len(values):
        raise ValueError(f"{variant}: no {name} recorded at slot {slot}")
    return float(getattr(values, stat)())


def scenario_of(res: Any, variant: str | None = None) -> Any:
    variants = res.study.variants
    return (variants[0] if variant is None else variants[res.variants.index(variant)]).scenario


def setting(res: Any, key: str, variant: str | None = None) -> Any:
    """A resolved setting of a variant by its dotted key: ``protocol.particles``."""
    section, name = key.split(".", 1)
    return scenario_of(res, variant).resolved()[section][name]


def bits_at_convergence(res: Any, variant: str) -> float:
    """Mean over the runs of the bits sent up to each run's convergence slot."""
    runs = res.runs.loc[res.runs["variant"] == variant, ["run", "convergence_iteration"]]
    m = res.metrics.loc[res.metrics["variant"] == variant, ["run", "iteration", "bits"]]
    both = m.merge(runs, left_on=["run", "iteration"], right_on=["run", "convergence_iteration"])
    return float(both["bits"].mean())


def worst_visit_deviation(res: Any, variant: str) -> float:
    """max over nodes of |share / stationary share − 1| (what the visits figure draws)."""
    from gossipsim.figures.visits import visit_deviation

    kind = scenario_of(res, variant).scheduler.kind
    _, deviation = visit_deviation(res.visits, res.graphs[variant], variant, kind)
    return float(np.nanmax(np.abs(deviation)))


def cover_mean(res: Any, variant: str) -> tuple[float, float]:
    entry = summary(res)[variant]["cover_mean"]
    return float(entry["mean"]), float(entry["half_width"])


def last_time(res: Any, variant: str) -> float:
    return float(column(res.runs, variant, "time").max())


def mean_of(res: Any, variant: str, name: str, table: str = "runs") -> float:
    return float(column(getattr(res, table), variant, name).astype(float).mean())


def seconds(x: float) -> str:
    return f"{num(x)} s"


def slash(values: Sequence[str]) -> str:
    return " / ".join(values)


# ------------------------------------------------------------------------------------ captions


def fig3_kl(load: Load) -> list[str]:
    res = load("fig3")
    sc = scenario_of(res)
    return [f"K = {sc.topology.nodes}", f"{count(runs_of(res, 'star'))} runs"]


def fig3_time(load: Load) -> list[str]:
    res = load("fig3")
    sc = scenario_of(res)
    return [
        f"{num(sc.compute_seconds * 1e3, 1)} ms compute per slot",
        f"{num(sc.links.rate_bps / 1e6, 1)} Mbit/s links with {num(sc.links.latency_s * 1e3, 1)} ms latency",
        f"the star's {count(sc.run.iterations)} slots end by {num(last_time(res, 'star'), 2)} s",
        f"go on to {num(max(last_time(res, v) for v in ('ring', 'complete')))} s",
    ]


def fig3_cover(load: Load) -> list[str]:
    res = load("fig3")
    entries = summary(res)
    out = []
    for v in ("ring", "complete"):
        mean, hw = cover_mean(res, v)
        exact = entries[v]["theory"]["exact_cover_moves"]
        out.append(f"{v} {pm(mean, hw)}")
        out.append(f"exact {short(exact, 3)}")
    star = entries["star"]["cover"]
    mean, _ = cover_mean(res, "star")
    out += [
        f"{100 * (1 - star['observed'] / star['total']):.1f}% of runs are not covered within {count(star['restricted_to'] - 1)} slots",
        f"the mean of the covered runs, {num(mean, 4)}",
        f"the exact {num(entries['star']['theory']['exact_cover_moves'], 4)}",
    ]
    return out


def fig3_visits(load: Load) -> list[str]:
    res = load("fig3")
    star, ring, complete = (
        pct(worst_visit_deviation(res, v)) for v in ("star", "ring", "complete")
    )
    return [f"within {star} on the star, {ring} on the ring and {complete} on the complete graph"]


def cover_vs_nodes(load: Load) -> list[str]:
    res = load("cover_time_vs_nodes")
    sizes = sorted({int(setting(res, "topology.nodes", v)) for v in res.variants})
    big = next(v for v in res.variants if "regular" in v and v.endswith(f"nodes={sizes[-1]}"))
    lo, hi = summary(res)[big]["theory"]["matthews_cover_moves"]
    k = sizes[-1]
    return [
        f"K = {count(sizes[0])} to {count(k)}, {count(runs_of(res, big))} runs each",
        f"[{count(round(lo))}, {count(round(hi))}] at K = {count(k)} around the simulated {pm(*cover_mean(res, big))}",
        f"2·K·ln K (dashed, {count(round(2 * k * math.log(k)))})",
    ]


def unlearning_complete_kl(load: Load) -> list[str]:
    res = load("unlearning_complete")
    sc = scenario_of(res)
    req = request(res)
    return [
        f"K = {sc.topology.nodes}",
        f"node {req['node']} forgotten at slot {count(req['request_iteration'])}",
        f"{count(runs_of(res))} runs",
    ]


def unlearning_complete_latency(load: Load) -> list[str]:
    res = load("unlearning_complete")
    req = request(res)
    removal, retrain = req["removal_latency"], req["retrain_latency"]
    served = (
        "all served" if removal["observed"] == removal["total"] else f"{removal['observed']} served"
    )
    same = req["latency"] == removal
    return [
        f"over the {count(req['arrived'])} requests, {served}",
        f"{median_ci(removal)} and {mean_ci(removal)} slots",
        "equals the KL-based unlearning latency"
        if same
        else "differs from the KL-based unlearning latency",
        f"at the request's slot, {num(expected(req), 2)}",
        f"retraining takes a median of {median_ci(retrain).removeprefix('median ')}, {mean_ci(retrain)}",
    ]


def karate_kl(load: Load) -> list[str]:
    res = load("unlearning_karate")
    reqs = summary(res)[res.variants[0]]["per_request"]
    out = [f"{count(runs_of(res))} runs"]
    for i, req in enumerate(reqs):
        out.append(
            f"node {req['node']} forgotten at slot {count(req['request_iteration'])}"
            if i == 0
            else f"node {req['node']} at slot {count(req['request_iteration'])}"
        )
    return out


def karate_latency(load: Load) -> list[str]:
    res = load("unlearning_karate")
    reqs = summary(res)[res.variants[0]]["per_request"]
    a, b = reqs
    out = [
        f"removal latency {median_ci(a['removal_latency'])} and {mean_ci(a['removal_latency'])} slots (node {a['node']})",
        f"{median_ci(b['removal_latency'])} and {mean_ci(b['removal_latency'])} (node {b['node']})",
        f"{num(expected(a))} and {num(expected(b), 4)}",
        f"retraining takes a {mean_ci(a['retrain_latency']).replace('mean', 'mean of', 1)} and {mean_ci(b['retrain_latency']).removeprefix('mean ')}",
    ]
    return out


def karate_visits(load: Load) -> list[str]:
    res = load("unlearning_karate")
    v = res.variants[0]
    return [
        f"uniform (1/{res.graphs[v].number_of_nodes()})",
        f"every node is within {pct(worst_visit_deviation(res, v))} of it",
    ]


def ba_kl(load: Load) -> list[str]:
    res = load("ba_sweep")
    sizes = sorted({scenario_of(res, v).topology.nodes for v in res.variants})
    degrees = [res.graphs[v].degree[0] for v in res.variants if "metropolis" in v]
    req = request(res)
    return [
        f"{', '.join(str(s) for s in sizes[:-1])} and {sizes[-1]} nodes",
        f"{count(runs_of(res, res.variants[0]))} runs each",
        f"degree {', '.join(str(d) for d in degrees[:-1])} and {degrees[-1]}",
        f"forgotten at slot {count(req['request_iteration'])}",
    ]


def _by_walk(res: Any, walk: str) -> list[str]:
    return [v for v in res.variants if walk in v]


def ba_latency(load: Load) -> list[str]:
    res = load("ba_sweep")
    out = []
    for walk, name in (("metropolis", "Metropolis-Hastings"), ("simple", "simple random walk")):
        reqs = [request(res, v) for v in _by_walk(res, walk)]
        means = slash(
            f"{num(r['removal_latency']['restricted_mean'], 3 if r['removal_latency']['restricted_mean'] < 100 else 3)} "
            f"{interval(r['removal_latency']['restricted_mean_lo'], r['removal_latency']['restricted_mean_hi'])}"
            for r in reqs
        )
        out.append(f"{name} {means}")
        out.append(
            f"({'exact ' if walk == 'metropolis' else ''}{slash(dec(expected(r)) for r in reqs)})"
        )
        out.append(slash(count(round(r["retrain_latency"]["restricted_mean"])) for r in reqs))
    return out


def ba_cover(load: Load) -> list[str]:
    res = load("ba_sweep")
    entries = summary(res)
    small = [v for v in res.variants if v.startswith("nodes=15,")]
    out = [
        f"{dec(entries[v]['theory']['exact_cover_moves'])} ({'MH' if 'metro' in v else 'SRW'})"
        for v in small
    ]
    out.append("simulated " + " and ".join(pm(*cover_mean(res, v)) for v in small))
    big = "nodes=100, kind=metropolis-hastings"
    lo, hi = entries[big]["theory"]["matthews_cover_moves"]
    out.append(
        f"[{count(round(lo))}, {count(round(hi))}] around the simulated {pm(*cover_mean(res, big))}"
    )
    return out


def ba_visits(load: Load) -> list[str]:
    res = load("ba_sweep")
    return [
        f"{slash(pct(worst_visit_deviation(res, v)).removesuffix('%') for v in _by_walk(res, walk))}% ({name})"
        for walk, name in (("metropolis", "MH"), ("simple", "SRW"))
    ]


def server_vs_walk(load: Load) -> list[str]:
    res = load("server_vs_walk")
    walk, server_mh, uniform, rr = res.variants
    sc = scenario_of(res, server_mh)
    runs = res.runs[res.runs["variant"] == server_mh]
    slot_ms = 1e3 * float((runs["time"] / runs["iterations"]).median())  # the same in every run

    def conv(v: str) -> float:
        return mean_of(res, v, "convergence_iteration")

    def conv_time(v: str) -> float:
        return mean_of(res, v, "convergence_time")

    def removal(v: str) -> dict[str, Any]:
        return request(res, v)["removal_latency"]

    return [
        f"ring of {sc.topology.nodes} agents, {count(runs_of(res, walk))} runs each",
        f"node 0 forgotten at slot {count(request(res, walk)['request_iteration'])}",
        f"{num(slot_ms)} ms per slot",
        f"convergence at a mean of {num(conv(walk), 4)} slots for both"
        if conv(walk) == conv(server_mh)
        else "convergence",
        f"removal latency {num(removal(walk)['restricted_mean'])} slots",
        f"takes {num(conv_time(server_mh))} s to converge against {num(conv_time(walk))} s",
        f"({count(round(bits_at_convergence(res, server_mh)))} against {count(round(bits_at_convergence(res, walk)))})",
        f"round-robin converges in {num(conv(rr), 2)} slots ({num(conv_time(rr), 2)} s)",
        f"serves the request in {num(removal(rr)['restricted_mean'])} slots (exact {num(expected(request(res, rr)))})",
        f"uniform in {num(conv(uniform))} slots ({num(conv_time(uniform))} s) and {num(removal(uniform)['restricted_mean'])} (exact {num(expected(request(res, uniform)))})",
        f"the walk's at {num(last_time(res, walk), 2)} s",
        f"the server's at {num(last_time(res, rr))} s round-robin, {num(last_time(res, uniform))} s uniform, "
        f"{num(last_time(res, server_mh))} s with the walk's schedule",
    ]


def partial_participation(load: Load) -> list[str]:
    res = load("partial_participation")
    conv = [
        num(
            mean_of(res, v, "convergence_iteration"),
            4 if mean_of(res, v, "convergence_iteration") >= 100 else 3,
        )
        for v in res.variants
    ]
    removal = [num(request(res, v)["removal_latency"]["restricted_mean"]) for v in res.variants]
    cover = mean_of(res, res.variants[0], "cover_iteration")
    return [
        f"{count(runs_of(res, res.variants[0]))} runs each",
        f"forgotten at slot {count(request(res)['request_iteration'])}",
        f"a mean of {', '.join(conv[:-1])} and {conv[-1]} slots",
        f"covers the ring in {num(cover)}",
        f"{slash(removal)} slots against the exact hitting-time expectation {num(expected(request(res)))}",
    ]


def lazy_walk(load: Load) -> list[str]:
    res = load("lazy_walk")
    reqs = [request(res, v) for v in res.variants]
    return [
        f"forgotten at slot {count(reqs[0]['request_iteration'])}",
        f"{count(runs_of(res, res.variants[0]))} runs each",
        "mean removal latency "
        + " and ".join(
            f"{num(r['removal_latency']['restricted_mean'])} {interval(r['removal_latency']['restricted_mean_lo'], r['removal_latency']['restricted_mean_hi'])}"
            for r in reqs
        ),
        f"exact expectations {num(expected(reqs[0]), 2)} and {num(expected(reqs[1]))}",
    ]


def poisson_regression(load: Load) -> list[str]:
    res = load("poisson_regression")
    v = res.variants[0]
    sc = scenario_of(res)
    req = request(res)
    return [
        f"DSVGD with {setting(res, 'protocol.particles')} particles on a ring of {sc.topology.nodes} nodes, {sc.data.points_per_node} rows each",
        f"forgotten before slot {count(req['request_iteration'])}, {runs_of(res)} runs",
        f"Median KSD {num(at_slot(res, v, 'ksd', 600), 2)} at slot 600",
        f"tolerance {num(sc.metrics.tolerance)}",
        f"after a mean of {num(req['latency']['restricted_mean'], 2)} slots, against {num(req['retrain_latency']['restricted_mean'])} for retraining",
        f"removal latency {num(req['removal_latency']['restricted_mean'])} slots against the exact {num(expected(req))}",
    ]


def mixture(load: Load) -> list[str]:
    res = load("dsvgd_mixture_2d")
    d, _ = res.variants
    req = request(res, d)
    slot = int(req["request_iteration"]) - 1
    after = slot + 60
    end = int(scenario_of(res, d).run.iterations)
    return [
        f"N = {setting(res, 'protocol.particles', d)} particles, {runs_of(res, d)} runs",
        f"median KSD of {num(at_slot(res, d, 'ksd', slot), 2)} and MMD² of {num(at_slot(res, d, 'mmd', slot), 2)} at slot {slot}",
        f"MMD² to the posterior without node 4 is {num(at_slot(res, d, 'mmd_unlearned', after), 2)} "
        f"(retraining {num(at_slot(res, d, 'retrain_mmd_unlearned', after), 2)}, KSD {num(at_slot(res, d, 'ksd', after), 2)} "
        f"against retraining's {num(at_slot(res, d, 'retrain_ksd', after), 2)})",
        f"at slot {count(end)} {num(at_slot(res, d, 'mmd_unlearned', end))} against retraining's "
        f"{num(at_slot(res, d, 'retrain_mmd_unlearned', end))}",
    ]


def dsvgd_breast_cancer(load: Load) -> list[str]:
    res = load("dsvgd_breast_cancer")
    central, complete, ring, star, server, gfvl = res.variants
    slot = int(setting(res, "run.iterations", central))

    def medians(v: str, names: Sequence[str] = ("accuracy", "ece", "particle_spread")) -> list[str]:
        digits = {"accuracy": 3, "ece": 2, "particle_spread": 3}
        return [num(at_slot(res, v, name, slot), digits[name]) for name in names]

    return [
        f"K = {setting(res, 'topology.nodes', central)}",
        f"N = {setting(res, 'protocol.particles', central)} particles, {runs_of(res, central)} runs each",
        f"At slot {count(slot)} (medians)",
        "centralised SVGD accuracy {}, ECE {}, spread {}".format(*medians(central)),
        f"on the complete graph {slash(medians(complete))}, ring {slash(medians(ring))}, "
        f"star {slash(medians(star))}, with the server scheduling round-robin {slash(medians(server))}",
        f"Gaussian G-FVL (exact estimator) {slash(medians(gfvl, ('accuracy', 'ece')))}",
    ]


def plain(x: float) -> str:
    """A median of whole slots: "1", "332.5", "7,030"."""
    return count(x) if float(x).is_integer() else f"{x:,.1f}"


def excess(res: Any, variant: str) -> pd.Series:
    """KL − best-in-family KL of a variant's metrics rows (index as the metrics table)."""
    m = res.metrics.loc[res.metrics["variant"] == variant]
    return (m["kl"] - m["best_family_kl"]).astype(float)


def window(res: Any, variant: str | None = None) -> int:
    return int(setting(res, "metrics.latency_window", variant))


def fig4(load: Load) -> list[str]:
    res = load("fig4")
    variants = res.variants
    ls = [int(setting(res, "protocol.local_iterations", v)) for v in variants]
    best = {num(mean_of(res, v, "best_family_kl")) for v in variants}
    finals = []
    for v in variants:
        m = res.metrics.loc[res.metrics["variant"] == v]
        last = m["iteration"] == m["iteration"].max()
        finals.append(dec(float(excess(res, v)[last].median()), 3))
    first = variants[0]
    m = res.metrics.loc[res.metrics["variant"] == first]
    late = excess(res, first)[(m["iteration"] >= 5000) & (m["iteration"] <= 10000)]
    reached = [
        count(round(mean_of(res, v, "convergence_iteration") * L))
        for v, L in zip(variants, ls, strict=True)
    ]
    tol = num(float(setting(res, "metrics.tolerance")), 1)
    return [
        f"ρ = {setting(res, 'protocol.learning_rate'):.0e}".replace("e-0", "e-"),
        f"S = {setting(res, 'protocol.samples')} per data point, c = {setting(res, 'protocol.baseline'):g}",
        f"L = {', '.join(map(str, ls))} local iterations",
        f"{runs_of(res, first)} runs",
        f"({best.pop()} for this data draw, the same for the three variants)"
        if len(best) == 1
        else "differs",
        f"best + the tolerance {tol}",
        f"final medians {', '.join(finals)} for L = {', '.join(map(str, ls))}",
        f"for L = {ls[0]} over slots 5,000-10,000 median {dec(float(late.median()), 3)}, "
        f"95th percentile {dec(float(late.quantile(0.95)), 3)}",
        f"excess ≤ {tol} held for {window(res, first)} slots",
        f"reached after a mean of {', '.join(reached[:-1])} and {reached[-1]} local iterations",
    ]


def fig5_kl(load: Load) -> list[str]:
    res = load("fig5")
    v = res.variants[0]
    req = request(res)
    m = res.metrics.loc[res.metrics["variant"] == v]
    after = m["iteration"] >= req["request_iteration"]
    return [
        f"(node {req['node']}) forgotten at slot {count(req['request_iteration'])}",
        f"{runs_of(res)} runs",
        f"without node {req['node']} ({num(float(m.loc[after, 'best_family_kl'].median()))}; "
        f"{num(float(m.loc[~after, 'best_family_kl'].median()))} with all the data)",
    ]


def fig5_latency(load: Load) -> list[str]:
    res = load("fig5")
    req = request(res)
    removal, kl, retrain = req["removal_latency"], req["latency"], req["retrain_latency"]
    served = (
        "all served" if removal["observed"] == removal["total"] else f"{removal['observed']} served"
    )
    tol = num(float(setting(res, "metrics.tolerance")), 1)
    return [
        f"over the {req['arrived']} requests, {served}",
        f"{median_ci(removal)}, {mean_ci(removal)} slots against its exact expectation at the request's "
        f"slot, {num(expected(req), 2)}",
        f"excess ≤ {tol} held for {window(res)} slots",
        f"unlearning takes a median of {median_ci(kl).removeprefix('median ')} slots ({mean_ci(kl)}",
        f"against {median_ci(retrain).removeprefix('median ')} ({mean_ci(retrain)}) for retraining",
    ]


def logistic_evaluation(load: Load) -> list[str]:
    res = load("logistic_karate")
    full, diagonal = res.variants
    slot = int(setting(res, "run.iterations", full))

    def both(name: str, digits: int) -> str:
        return slash(num(at_slot(res, v, name, slot), digits) for v in (full, diagonal))

    return [
        f"{runs_of(res, full)} runs each",
        f"At slot {count(slot)} the median KL to the optimum is {num(at_slot(res, full, 'kl', slot), 2)} (full) "
        f"and {num(at_slot(res, diagonal, 'kl', slot), 2)} (mean field",
        f"median accuracy {both('accuracy', 3)} and ECE {both('ece', 2)}{optimum_words(res, slot)}",
    ]


def optimum_words(res: Any, slot: int) -> str:
    """ ", those of the optimum without node 0" where the medians at ``slot`` are, at the
    caption's precision, the accuracy and ECE of each family's optimum without the forgotten node
    (summary.json's theory ``target``); else what the optimum's are."""
    key = f"without {request(res)['node']}"
    optimum = [summary(res)[v]["theory"]["target"][key] for v in res.variants]
    ours = [
        (num(at_slot(res, v, "accuracy", slot)), num(at_slot(res, v, "ece", slot), 2))
        for v in res.variants
    ]
    theirs = [(num(o["accuracy"]), num(o["ece"], 2)) for o in optimum]
    if ours == theirs:
        return f", those of the optimum {key.replace('without', 'without node')}"
    return (
        f" (the optimum {key.replace('without', 'without node')}: "
        + ", ".join(f"{a} / {e}" for a, e in theirs)
        + ")"
    )


def logistic_unlearning(load: Load) -> list[str]:
    from gossipsim.figures.stats import interval_record

    res = load("logistic_karate")
    karate = load("unlearning_karate")
    full, diagonal = res.variants
    req = request(res, full)
    removal = interval_record(column(res.requests, full, "removal_latency").to_numpy(float))
    k = karate.requests
    k_removal = interval_record(k.loc[k["node"] == req["node"], "removal_latency"].to_numpy(float))

    def median(v: str, name: str) -> str:
        return plain(float(column(res.requests, v, name).astype(float).median()))

    return [
        f"Node {req['node']} is forgotten at slot {count(req['request_iteration'])}",
        f"removal latency {pm(removal['mean'], removal['half_width'])} slots (95% CI) in these {runs_of(res, full)} runs",
        f"the exact expectation at its slot, {num(expected(req))}",
        f"the {count(runs_of(karate))} runs of `unlearning_karate.toml`, the same walk, give "
        f"{pm(k_removal['mean'], k_removal['half_width'])}",
        f"KL ≤ {num(float(setting(res, 'metrics.tolerance')), 1)} to the optimum without node {req['node']}, "
        f"held for {window(res)} slots",
        f"after a median of {median(full, 'latency')} slot",
        f"and {median(diagonal, 'latency')} (mean field), against {median(full, 'retrain_latency')} and "
        f"{median(diagonal, 'retrain_latency')} for retraining",
    ]


def upload_k(res: Any, variant: str, share: float = 0.5) -> int:
    """k of a variant's compressed uploads: each of the sound variant's two arrays in ``share`` of
    the budget, after the 32 bits of its range (a_max = "max")."""
    compression = scenario_of(res, variant).protocol.options.compression
    d = fmnist_dimension(res)
    return compression.k(d, int(setting(res, "protocol.particles", variant)), share)


def compressed_schemes(load: Load) -> list[str]:
    res = load("compressed_fmnist_schemes")
    plain, per, shared, half, fifth = res.variants
    end = int(setting(res, "run.iterations", plain))
    d = fmnist_dimension(res)
    early = [num(at_slot(res, v, "accuracy", 100)) for v in (shared, half, fifth, per, plain)]
    late = [num(at_slot(res, v, "accuracy", end)) for v in (shared, half, fifth, per, plain)]
    ece = [num(at_slot(res, v, "ece", end), 2) for v in (shared, half, fifth, per, plain)]
    return [
        f"d = {d}, N_p = {setting(res, 'protocol.particles', plain)}",
        f"{upload_k(res, shared)} shared coordinates of each array or {upload_k(res, per)} per "
        f"particle; {runs_of(res)} runs",
        "at slot 100: shared {}, α = 0.5 {}, α = 0.2 {}, per-particle {} (uncompressed {})".format(
            *early
        ),
        f"at slot {count(end)}: " + "{} / {} / {} / {} ({})".format(*late),
        "ECE {} / {} / {} / {} ({})".format(*ece),
        f"{count(at_slot(res, plain, 'time', end))} simulated seconds uncompressed against "
        f"{count(at_slot(res, shared, 'time', end))} shared",
    ]


def compressed_equal_time(load: Load) -> list[str]:
    res = load("compressed_fmnist_equal_time")
    plain, per, shared, half, fifth = res.variants
    budget = setting(res, "run.max_time", plain)
    last = res.metrics.groupby("variant", observed=True)["iteration"].max()
    out = [
        f"uplink {num(setting(res, 'links.uplink_rate_bps') / 1e3)} kbit/s",
        f"{num(budget)} simulated seconds",
        f"uncompressed ends after {count(last[plain])} slots at accuracy "
        f"{num(at_slot(res, plain, 'accuracy', int(last[plain])))}",
    ]
    for v, label in (
        (shared, "shared"),
        (half, "α = 0.5"),
        (fifth, "α = 0.2"),
        (per, "per-particle"),
    ):
        end = int(
            res.metrics.loc[res.metrics["variant"] == v].groupby("run")["iteration"].max().min()
        )
        out.append(f"{label} {num(at_slot(res, v, 'accuracy', end))}")
    return out


def compressed_tradeoff(load: Load) -> list[str]:
    res = load("compressed_fmnist_tradeoff")
    end = int(res.metrics["iteration"].max())

    def acc(v: str, name: str = "accuracy") -> str:
        return num(at_slot(res, v, name, end), 3 if name == "accuracy" else 2)

    budgets = ("0.5d", "d", "5d", "10d")
    cases = ("DSVGD, N_p = 2", "DSVGD, N_p = 5", "DSVGD, N_p = 10", "FedAvg")
    out = [f"after {count(end)} slots", f"{runs_of(res)} runs each"]
    for case in cases:
        out.append(
            f"{case}: "
            + " / ".join(acc(f"{case}, {b}") for b in budgets)
            + " (ECE "
            + " / ".join(acc(f"{case}, {b}", "ece") for b in budgets)
            + ")"
        )
    return out


def compressed_forget(load: Load) -> list[str]:
    res = load("compressed_fmnist_forget")
    wide, narrow = res.variants
    req = request(res, wide)
    at = int(req["request_iteration"])
    end = int(setting(res, "run.iterations", wide))
    out = [
        f"N_p = {setting(res, 'protocol.particles', wide)}",
        f"{upload_k(res, wide)} coordinates of each array at 5d, {upload_k(res, narrow)} at d",
        f"{runs_of(res)} runs",
    ]
    for v, name in ((wide, "5d"), (narrow, "d")):
        out.append(
            f"At {name} the forgotten labels fall from "
            f"{num(at_slot(res, v, 'accuracy_forgotten', at), 2)} (slot {count(at)}) to "
            f"{num(at_slot(res, v, 'accuracy_forgotten', end), 2)} by slot {count(end)} "
            f"(retraining {num(at_slot(res, v, 'retrain_accuracy_forgotten', end), 1)}), the "
            f"remaining ones reach {num(at_slot(res, v, 'accuracy_remaining', end), 2)} "
            f"(retraining {num(at_slot(res, v, 'retrain_accuracy_remaining', end), 2)})"
        )
    return out


def fmnist_dimension(res: Any) -> int:
    """The particles' dimension d: the network's weights (gossipsim.models.bnn)."""
    from gossipsim.models.bnn import _layout

    return int(_layout(scenario_of(res).model_spec).dimension)


def span(values: Sequence[float], digits: int = 3) -> str:
    """ "lo-hi" of values at a fixed number of decimals: "0.818-0.819" ("0.000" when they agree)."""
    lo, hi = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return lo if lo == hi else f"{lo}-{hi}"


def per_run(res: Any, name: str, slot: int) -> list[float]:
    m = res.metrics
    return [float(x) for x in m.loc[m["iteration"] == slot, name]]


def fmnist_sound(load: Load) -> list[str]:
    res = load("fmnist_forget_sound")
    v = res.variants[0]
    req = request(res)
    at = int(req["request_iteration"])
    m = res.metrics
    before = int(m.loc[m["iteration"] < at, "iteration"].max())
    end = int(m["iteration"].max())
    unlearning = req["latency"]
    unserved = unlearning["observed"] == 0
    return [
        f"(d = {fmnist_dimension(res)}, N = {setting(res, 'protocol.particles')};",
        f"forgotten at slot {count(at)}; {runs_of(res)} runs",
        f"falls from {num(at_slot(res, v, 'accuracy_forgotten', before), 2)} (slot {count(before)}) to "
        f"{num(at_slot(res, v, 'accuracy_forgotten', at + 50), 2)} within 50 slots",
        f"to {span(per_run(res, 'accuracy_forgotten', end))} by slot {count(end)}, as retraining's "
        f"({span(per_run(res, 'retrain_accuracy_forgotten', end))})",
        f"rises from {num(at_slot(res, v, 'accuracy_remaining', before))} to "
        f"{span(per_run(res, 'accuracy_remaining', end))}, with retraining's "
        f"({span(per_run(res, 'retrain_accuracy_remaining', end))})",
        f"KSD to the posterior without the two nodes settles at {num(at_slot(res, v, 'ksd', end), 2)}",
        f"its level before the request ({num(at_slot(res, v, 'ksd', before), 2)})",
        f"relative tolerance ({setting(res, 'metrics.relative_tolerance'):g} × that level)",
        "is not reached in any run" if unserved else f"is reached in {unlearning['observed']} runs",
        f"retraining's KSD ({num(at_slot(res, v, 'retrain_ksd', end), 2)} at slot {count(end)}) "
        f"reaches it after a mean of {num(req['retrain_latency']['restricted_mean'])} slots",
    ]


def fmnist_paper(load: Load) -> list[str]:
    res = load("fmnist_forget_paper")
    v = res.variants[0]
    m = res.metrics
    req = request(res)
    at = int(req["request_iteration"])
    end = int(m["iteration"].max())
    first = int(m["iteration"].min())
    # the swings of the learning phase: from the second round of the round-robin server on
    rounds = m.loc[(m["iteration"] >= int(setting(res, "topology.nodes"))) & (m["iteration"] < at)]
    retrain = m.loc[m["iteration"] >= at]
    retrain_first = retrain.loc[retrain["iteration"] == retrain["iteration"].min()]
    after = m.loc[(m["iteration"] > at) & (m["iteration"] < end)]
    dips = after.groupby("run")["accuracy_remaining"].min()
    return [
        f"λ = {setting(res, 'protocol.kde_bandwidth')}",
        f"L = L' = {setting(res, 'protocol.local_iterations')} SVGD steps a visit",
        f"{runs_of(res)} runs",
        f"(forgotten labels {span(list(rounds['accuracy_forgotten']), 2)}, "
        f"the rest {span(list(rounds['accuracy_remaining']), 2)},",
        f"spread grows from {num(at_slot(res, v, 'particle_spread', first), 2)} at slot {first} to "
        f"{num(at_slot(res, v, 'particle_spread', end), 2)} at slot {end}",
        f"(retraining: {num(float(retrain_first['retrain_particle_spread'].median()), 2)} "
        f"to {num(at_slot(res, v, 'retrain_particle_spread', end), 2)} over its {end - at} slots)",
        f"forgotten labels fall to {span(per_run(res, 'accuracy_forgotten', end))} by slot {end} "
        f"(retraining {span(per_run(res, 'retrain_accuracy_forgotten', end))})",
        f"the rest to {span(per_run(res, 'accuracy_remaining', end))} "
        f"(retraining {span(per_run(res, 'retrain_accuracy_remaining', end))})",
        f"after a dip to {span(list(dips), 2)}",
        f"{end // int(setting(res, 'topology.nodes'))} rounds",
        *removal_slots(res),
    ]


def removal_slots(res: Any) -> list[str]:
    """ "node 9's factor leaves at slot 40": the slot each request's removal lands on, the same in
    every run (a round-robin schedule)."""
    out = []
    for req in summary(res)[res.variants[0]]["per_request"]:
        lat = req["removal_latency"]
        if lat["km_median_lo"] != lat["km_median_hi"] or lat["observed"] != lat["total"]:
            raise ValueError(f"node {req['node']}: the removal latency differs between runs")
        slot = int(req["request_iteration"] + lat["km_median"] - 1)
        out.append(f"node {req['node']}'s factor leaves at slot {slot}")
    return out


def expected_hop(res: Any, variant: str, bits: float) -> float:
    """A hop's expected seconds on a variant's links: bits / rate + latency + timeout · loss /
    (1 − loss) (stop-and-wait ARQ, its retry limit never reached)."""
    rate, latency = (
        setting(res, "links.rate_bps", variant),
        setting(res, "links.latency_s", variant),
    )
    loss = setting(res, "links.loss", variant)
    lost = setting(res, "links.timeout_s", variant) * loss / (1 - loss) if loss else 0.0
    return float(bits / rate + latency + lost)


def link_words(res: Any, variant: str) -> str:
    """A variant's link as the caption names it: "10 Mbit/s", "10 kbit/s with 10% loss"."""
    rate = float(setting(res, "links.rate_bps", variant))
    loss = float(setting(res, "links.loss", variant))
    words = f"{short(rate / 1e6, 3)} Mbit/s" if rate >= 1e6 else f"{short(rate / 1e3, 3)} kbit/s"
    return words + (f" with {short(100 * loss)}% loss" if loss else "")


def fig4_seconds(load: Load) -> list[str]:
    res = load("fig4_wall_clock")
    runs = res.runs
    ls = sorted({int(setting(res, "protocol.local_iterations", v)) for v in res.variants})
    links = list(dict.fromkeys(link_words(res, v) for v in res.variants))
    by = {(int(setting(res, "protocol.local_iterations", v)), link_words(res, v)): v
          for v in res.variants}  # fmt: skip
    # a complete graph under Metropolis-Hastings never keeps the token: every slot but the last
    # sends one message, every attempt of it counted in bits
    plain = by[(ls[0], links[0])]
    hops = column(runs, plain, "iterations").astype(float) - 1
    bits = column(runs, plain, "bits").astype(float) / hops
    if bits.nunique() != 1:
        raise ValueError("messages of different sizes")
    message = float(bits.iloc[0])
    hop_ms = [num(1e3 * expected_hop(res, by[(ls[0], link)], message)) for link in links]
    compute_ms = short(1e3 * float(scenario_of(res, plain).seconds_per_local_iteration), 3)
    local = [count(round(mean_of(res, by[(L, links[0])], "convergence_iteration") * L)) for L in ls]
    out = [
        f"{compute_ms} ms of compute per local iteration",
        f"its {count(message)}-bit message",
        f"expected hop {slash(hop_ms)} ms",
        f"{runs_of(res, plain)} runs",
        f"takes a mean of {slash(local)} local iterations for L = {slash(map(str, ls))}",
    ]
    for link in links:
        times = [num(mean_of(res, by[(L, link)], "convergence_time")) for L in ls]
        out.append(f"{link} {slash(times)} s")
    return out


def churn(name: str) -> Callable[[Load], list[str]]:
    """A churn study: per variant (the fraction of time a node is down, from its own up and down
    means), the medians over the runs of the convergence time, each request's removal latency in
    seconds and the tokens regenerated per 1,000 slots, read from the tables (not the figure's
    code); for exact updates, that every run ends at KL 0 (the exact posterior)."""

    def caption(load: Load) -> list[str]:
        res = load(name)
        down = [
            setting(res, "failures.node_down_s", v) / (setting(res, "failures.node_up_s", v)
                                                       + setting(res, "failures.node_down_s", v))
            for v in res.variants
        ]  # fmt: skip
        out = [f"{runs_of(res, res.variants[0])} runs", f"down {slash([share(x) for x in down])}"]
        conv = [num(column(res.runs, v, "convergence_time").astype(float).median())
                for v in res.variants]  # fmt: skip
        regen = [
            num(float((1000 * column(res.runs, v, "regenerations")
                       / column(res.runs, v, "iterations")).median()))
            for v in res.variants
        ]  # fmt: skip
        out += [f"converges in {slash(conv)} s", f"{slash(regen)} tokens regenerated"]
        req = res.requests
        for node in dict.fromkeys(req["node"]):
            removal = [
                num(float(req.loc[(req["variant"] == v) & (req["node"] == node),
                                  "removal_latency_time"].astype(float).median()))
                for v in res.variants
            ]  # fmt: skip
            out.append(f"node {node} removed {slash(removal)} s after its request")
        if "kl" in res.metrics.columns:
            m = res.metrics.sort_values("iteration").groupby(["variant", "run"]).tail(1)
            if not (m["kl"].astype(float) == 0.0).all():
                raise ValueError(f"{name}: a run did not end at the exact posterior")
            out.append(f"all {len(m)} runs end at the exact posterior")
        return out

    return caption


def share(x: float) -> str:
    """A share in percent to three significant digits: "71.5%"."""
    return f"{num(100 * x)}%"


def time_map(load: Load) -> list[str]:
    """The karate club with slow links: the time map's shares against their exact expectations
    from the walk's transition matrix (computed here, not by the figure's code)."""
    import networkx as nx

    import gossipsim as gs
    from gossipsim.figures.time_map import slot_compute_seconds, time_on_graph

    res = load("karate_slow_links")
    slow, fast = res.variants
    n = float(setting(res, "run.iterations", slow))
    out = [f"{runs_of(res, slow)} runs of {count(n)} slots"]
    entries = res.summary()["variants"]
    for v in (slow, fast):
        graph = res.graphs[v]
        compute = slot_compute_seconds(entries[v], graph)
        spent = time_on_graph(res.metrics, graph, v, compute)
        # exact: per slot, compute at a stationary holder (uniform under Metropolis-Hastings); per
        # move, edge {a, b} is crossed with probability π_a P(a, b) + π_b P(b, a) and costs its
        # link's hop: bits / rate + latency, the edge's own values where it has them
        p = gs.transition_matrix(nx.Graph(graph))
        p = p.toarray() if hasattr(p, "toarray") else np.asarray(p)
        nodes = list(graph.nodes)
        pi = 1.0 / len(nodes)
        bits = float(column(res.runs, v, "bits").astype(float).sum()) / float(spent.edge_hops.sum())
        rate, latency = setting(res, "links.rate_bps", v), setting(res, "links.latency_s", v)
        flows, hops, own = [], [], []
        for a, b in spent.edges:
            data = graph.edges[a, b]
            i, j = nodes.index(a), nodes.index(b)
            flows.append(pi * (p[i, j] + p[j, i]))
            hops.append(bits / data.get("rate_bps", rate) + data.get("latency_s", latency))
            own.append("rate_bps" in data)
        on_edges = (n - 1) * np.array(flows) * np.array(hops)
        total = float(on_edges.sum()) + n * float(np.mean(compute))
        mine = np.array(own)
        if v == slow:
            busiest = int(np.argmax(spent.edge_seconds))
            a, b = spent.edges[busiest]
            out += [
                f"{count(mine.sum())} edges between the two clubs",
                f"carry {share(spent.edge_hops[mine].sum() / spent.edge_hops.sum())} of the hops",
                f"take {share(spent.edge_seconds[mine].sum() / spent.total_seconds)} of the time "
                f"(exact expectation {share(on_edges[mine].sum() / total)})",
                f"links take {share(spent.link_seconds / spent.total_seconds)} "
                f"(exact {share(on_edges.sum() / total)})",
                f"the busiest link, {a}–{b}, takes {share(spent.edge_seconds[busiest] / spent.total_seconds)} "
                f"(exact {share(on_edges[busiest] / total)})",
            ]
        else:
            out.append(
                f"with every link fast links take {share(spent.link_seconds / spent.total_seconds)} "
                f"(exact {share(on_edges.sum() / total)})"
            )
    covered = column(res.runs, slow, "convergence_iteration").notna()
    out += [
        f"in {int(covered.sum())} of the {runs_of(res, slow)} runs",
        f"after a mean of {num(mean_of(res, slow, 'convergence_iteration'))} slots",
        f"{seconds(mean_of(res, slow, 'convergence_time'))} with the slow links against "
        f"{seconds(mean_of(res, fast, 'convergence_time'))}",
    ]
    return out


# ------------------------------------------------------------------- client selection (003)

SELECTION_KINDS = ("ksd", "hip", "round-robin", "uniform")


def per_iteration(res: Any, variant: str, name: str) -> float:
    """A cumulative column's median per iteration at the last recorded slot (bits, seconds)."""
    last = int(column(res.metrics, variant, "iteration").max())
    return at_slot(res, variant, name, last) / last


def selection_blr(load: Load) -> list[str]:
    """003's BLR comparison: per K, the median held-out accuracy at the last slot of the four
    kinds, the selection distribution's entropy against ln K, the bits and seconds of an
    iteration relative to round-robin's, and the KSD to the posterior at the last slot."""
    res = load("selection_blr")
    first = res.variants[0]
    last = int(column(res.metrics, first, "iteration").max())
    out = [f"{runs_of(res, first)} runs each", f"slot {count(last)}"]
    for nodes in (30, 120):
        names = [f"kind={k}, nodes={nodes}" for k in SELECTION_KINDS]
        acc = [num(at_slot(res, v, "accuracy", last)) for v in names]
        out.append(f"K = {nodes}: {slash(acc)}")
        entropy = [num(at_slot(res, v, "selection_entropy", last), 4) for v in names[:2]]
        out.append(f"entropy {slash(entropy)} against ln K = {num(math.log(nodes), 4)}")
        plain = per_iteration(res, names[2], "bits")
        ratio = [dec(per_iteration(res, v, "bits") / plain) for v in names[:2]]
        out.append(f"{slash(ratio)} times round-robin's bits")
        ksd = [num(at_slot(res, v, "ksd", last)) for v in names]
        out.append(f"KSD {slash(ksd)}")
    k30 = [f"kind={k}, nodes=30" for k in SELECTION_KINDS]
    plain = per_iteration(res, k30[2], "time")
    out.append(f"{slash([dec(per_iteration(res, v, 'time') / plain, 2) for v in k30[:2]])} "
               "times its seconds")  # fmt: skip
    return out


def late_spread(res: Any, variant: str) -> float:
    """Mean over the runs of the standard deviation of the accuracy over the last third of the
    recorded slots (how much it swings once learnt)."""
    m = res.metrics.loc[res.metrics["variant"] == variant]
    late = m.loc[m["iteration"] > m["iteration"].max() * 2 / 3]
    return float(late.groupby("run")["accuracy"].std().mean())


def selection_bnn(load: Load) -> list[str]:
    """003's BNN comparison and Fig. 5: the median held-out accuracy and NLL at the last slot of
    KSD / HIP / round-robin / random / parallel DSVGD, how much the accuracy swings late, the
    KSD to the posterior, and the bits and seconds of an iteration of HIP and parallel DSVGD."""
    res = load("selection_bnn")
    names = res.variants
    last = int(column(res.metrics, names[0], "iteration").max())
    out = [f"{runs_of(res, names[0])} runs each", f"slot {count(last)}"]
    out.append(f"accuracy {slash([num(at_slot(res, v, 'accuracy', last)) for v in names])}")
    out.append(f"NLL {slash([num(at_slot(res, v, 'nll', last)) for v in names])}")
    out.append(f"swings {slash([num(late_spread(res, v), 2) for v in names])}")
    out.append(f"KSD {slash([num(at_slot(res, v, 'ksd', last)) for v in names])}")
    hip, parallel = names[1], names[4]
    out.append(f"{num(per_iteration(res, hip, 'bits') / 1e6)} / "
               f"{num(per_iteration(res, parallel, 'bits') / 1e6)} Mbit")  # fmt: skip
    out.append(f"{num(per_iteration(res, hip, 'time'))} / "
               f"{num(per_iteration(res, parallel, 'time'))} s")  # fmt: skip
    return out


def at_budget(res: Any, variant: str, axis: str, budget: float) -> tuple[float, int]:
    """The mean over the runs of the accuracy at the last recorded slot whose ``axis`` (bits,
    time) is within ``budget``, and the last such slot of any run."""
    m = res.metrics.loc[res.metrics["variant"] == variant]
    within = m.loc[m[axis] <= budget].sort_values("iteration")
    last = within.groupby("run").tail(1)
    return float(last["accuracy"].mean()), int(within["iteration"].max())


def selection_bnn_cost(axis: str) -> Callable[[Load], list[str]]:
    """The BNN study against a cost: the budget (the smallest final median cost of a variant)
    and every variant's mean accuracy within it, with the iteration it is reached by."""

    def caption(load: Load) -> list[str]:
        res = load("selection_bnn")
        names = res.variants
        last = int(column(res.metrics, names[0], "iteration").max())
        budget = min(at_slot(res, v, axis, last) for v in names)
        got = [at_budget(res, v, axis, budget) for v in names]
        shown = f"{num(budget / 1e9)} Gbit" if axis == "bits" else seconds(budget)
        return [
            f"Within {shown}",
            f"accuracy {slash([num(a) for a, _ in got])}",
            f"iterations {slash([count(i) for _, i in got])}",
        ]

    return caption


def selection_walk(load: Load) -> list[str]:
    """The importance-weighted walks against Metropolis–Hastings: median accuracy at slots 50
    and the last, the mean removal latency, and the weights' mean age at the last slot."""
    res = load("selection_walk_karate")
    first = res.variants[0]
    last = int(column(res.metrics, first, "iteration").max())
    out = [f"{runs_of(res, first)} runs"]
    for slot in (50, last):
        out.append(slash([num(at_slot(res, v, "accuracy", slot)) for v in res.variants]))
    removal = [num(mean_of(res, v, "removal_latency", "requests")) for v in res.variants]
    out.append(f"removal latency {slash(removal)}")
    age = [num(at_slot(res, v, "indicator_age", last)) for v in res.variants[1:]]
    out.append(f"{slash(age)} slots old")
    return out


@dataclass(frozen=True)
class Figure:
    """A gallery row: the image in plots/, the results folder that draws it, the figure's file in
    that folder's plots/, and the texts its caption must contain."""

    image: str
    name: str
    source: str
    numbers: Callable[[Load], list[str]]
    #: the figure's x axis: a cost (``bits``, ``time``) is drawn by ``gossipsim plot --x`` after
    #: the run
    x: str = "iteration"


FIGURES = [
    Figure("fig3_kl_vs_iteration.png", "fig3", "kl_vs_iteration.png", fig3_kl),
    Figure("fig3_kl_vs_time.png", "fig3", "kl_vs_time.png", fig3_time),
    Figure("fig3_cover_time.png", "fig3", "cover_time.png", fig3_cover),
    Figure("fig3_visits.png", "fig3", "visits.png", fig3_visits),
    Figure("cover_time_vs_nodes.png", "cover_time_vs_nodes", "cover_time.png", cover_vs_nodes),
    Figure(
        "unlearning_complete_kl.png",
        "unlearning_complete",
        "unlearning_kl.png",
        unlearning_complete_kl,
    ),
    Figure(
        "unlearning_complete_latency.png",
        "unlearning_complete",
        "latency.png",
        unlearning_complete_latency,
    ),
    Figure("unlearning_karate_kl.png", "unlearning_karate", "unlearning_kl.png", karate_kl),
    Figure("unlearning_karate_latency.png", "unlearning_karate", "latency.png", karate_latency),
    Figure("unlearning_karate_visits.png", "unlearning_karate", "visits.png", karate_visits),
    Figure("fig4_kl_vs_local_iterations.png", "fig4", "kl_vs_local_iterations.png", fig4),
    Figure("fig5_unlearning_kl.png", "fig5", "unlearning_kl.png", fig5_kl),
    Figure("fig5_latency.png", "fig5", "latency.png", fig5_latency),
    Figure(
        "logistic_karate_evaluation.png", "logistic_karate", "evaluation.png", logistic_evaluation
    ),
    Figure(
        "logistic_karate_unlearning_kl.png",
        "logistic_karate",
        "unlearning_kl.png",
        logistic_unlearning,
    ),
    Figure("ba_sweep_kl_vs_iteration.png", "ba_sweep", "kl_vs_iteration.png", ba_kl),
    Figure("ba_sweep_latency.png", "ba_sweep", "latency.png", ba_latency),
    Figure("ba_sweep_cover_time.png", "ba_sweep", "cover_time.png", ba_cover),
    Figure("ba_sweep_visits.png", "ba_sweep", "visits.png", ba_visits),
    Figure("server_vs_walk_kl_vs_time.png", "server_vs_walk", "kl_vs_time.png", server_vs_walk),
    Figure(
        "dsvgd_breast_cancer_evaluation.png",
        "dsvgd_breast_cancer",
        "evaluation.png",
        dsvgd_breast_cancer,
    ),
    Figure(
        "fmnist_forget_sound_unlearning_accuracy.png",
        "fmnist_forget_sound",
        "unlearning_accuracy.png",
        fmnist_sound,
    ),
    Figure(
        "fmnist_forget_paper_unlearning_accuracy.png",
        "fmnist_forget_paper",
        "unlearning_accuracy.png",
        fmnist_paper,
    ),
    Figure(
        "partial_participation_kl_vs_iteration.png",
        "partial_participation",
        "kl_vs_iteration.png",
        partial_participation,
    ),
    Figure("lazy_walk_latency.png", "lazy_walk", "latency.png", lazy_walk),
    Figure(
        "poisson_regression_kl_vs_iteration.png",
        "poisson_regression",
        "kl_vs_iteration.png",
        poisson_regression,
    ),
    Figure("dsvgd_mixture_2d_particles.png", "dsvgd_mixture_2d", "particles.png", mixture),
    Figure(
        "compressed_fmnist_schemes_evaluation.png",
        "compressed_fmnist_schemes",
        "evaluation.png",
        compressed_schemes,
    ),
    Figure(
        "compressed_fmnist_equal_time_evaluation_vs_time.png",
        "compressed_fmnist_equal_time",
        "evaluation_vs_time.png",
        compressed_equal_time,
        x="time",
    ),
    Figure(
        "compressed_fmnist_tradeoff_accuracy_vs_ece.png",
        "compressed_fmnist_tradeoff",
        "accuracy_vs_ece.png",
        compressed_tradeoff,
    ),
    Figure(
        "compressed_fmnist_forget_unlearning_accuracy.png",
        "compressed_fmnist_forget",
        "unlearning_accuracy.png",
        compressed_forget,
    ),
    Figure("fig4_wall_clock_kl_vs_time.png", "fig4_wall_clock", "kl_vs_time.png", fig4_seconds),
    Figure("karate_slow_links_time_map.png", "karate_slow_links", "time_map.png", time_map),
    Figure("churn_karate_gfvl_churn.png", "churn_karate_gfvl", "churn.png",
           churn("churn_karate_gfvl")),  # fmt: skip
    Figure("churn_karate_dsvgd_churn.png", "churn_karate_dsvgd", "churn.png",
           churn("churn_karate_dsvgd")),  # fmt: skip
    Figure("selection_blr_evaluation.png", "selection_blr", "evaluation.png", selection_blr),
    Figure("selection_bnn_evaluation.png", "selection_bnn", "evaluation.png", selection_bnn),
    Figure("selection_bnn_evaluation_vs_bits.png", "selection_bnn", "evaluation_vs_bits.png",
           selection_bnn_cost("bits"), x="bits"),  # fmt: skip
    Figure("selection_bnn_evaluation_vs_time.png", "selection_bnn", "evaluation_vs_time.png",
           selection_bnn_cost("time"), x="time"),  # fmt: skip
    Figure("selection_walk_karate_evaluation.png", "selection_walk_karate", "evaluation.png",
           selection_walk),  # fmt: skip
]

#: numbers a caption quotes that no results folder holds: checked to be in the caption only
QUOTED: dict[str, list[str]] = {
    # the dimension of the papers' hierarchical prior on breast cancer: 30 features, a bias and
    # the log precision (docs/particles.md)
    "dsvgd_breast_cancer_evaluation.png": ["d = 32"],
    # the authors' own MATLAB code for Fig. 3 (shared/papers), not a results folder
    "fig3_cover_time.png": ["the same 24%"],
    # the optimum's acceptance (gossipsim.optimum), not written to the results folder
    "logistic_karate_evaluation.png": ["within an estimated KL of 1e-11"],
    # the KSD of 20 independent draws of the posterior (examples/poisson_regression.toml)
    "poisson_regression_kl_vs_iteration.png": ["20 exact posterior draws: about 200"],
    # the MMD² of 50 exact draws to the posterior, measured when the scenario was made
    "dsvgd_mixture_2d_particles.png": ["50 exact draws: median 0.011"],
}


# ------------------------------------------------------------------------------- the README


def captions(readme: str) -> dict[str, str]:
    """The gallery's rows: image file name -> caption (the row's second cell, as written)."""
    section = readme.split("\n## Gallery\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        found = re.match(r"\| !\[[^\]]*\]\(plots/([^)]+)\) \| (.*) \|$", line)
        if found:
            rows[found[1]] = found[2]
    return rows


def mismatches(folders: Load, readme: str, figures: Sequence[Figure] = ()) -> list[str]:
    """One line per text a caption should contain and does not, per gallery row without an entry
    in FIGURES and per entry without a row."""
    figures = figures or FIGURES
    rows = captions(readme)
    known = {f.image for f in FIGURES}
    out = [
        f"{image}: a gallery row that tools/gallery.py does not know"
        for image in rows
        if image not in known
    ]
    for fig in figures:
        caption = rows.get(fig.image)
        if caption is None:
            out.append(f"{fig.image}: no gallery row in the README")
            continue
        try:
            texts = fig.numbers(folders)
        except (OSError, ConfigError, KeyError, ValueError) as exc:
            out.append(f"{fig.image}: cannot recompute its numbers from {fig.name!r}: {exc}")
            continue
        for text in texts + QUOTED.get(fig.image, []):
            if text not in caption:
                out.append(f"{fig.image}: expected {text!r} in the caption: {caption}")
    return out


# ------------------------------------------------------------------------------ the commands


def complete(folder: Path, fig_files: Sequence[str]) -> bool:
    """Whether ``folder`` holds a finished run: summary.json, a complete record and the figures."""
    import json

    record = folder / ".gossipsim" / "study.json"
    if not (folder / "summary.json").is_file() or not record.is_file():
        return False
    try:
        state = json.loads(record.read_text(encoding="utf-8"))
    except ValueError:
        return False
    return state.get("complete") is True and all(
        (folder / "plots" / f).is_file() for f in fig_files
    )


def pixels_differing(new: Path, old: Path) -> str:
    """How ``new`` differs from ``old`` ("" where their pixels are the same): "12,345 pixels
    differ", "another size (1501, 699) -> (1501, 700)" or "new"."""
    import matplotlib.image as mpimg

    if not old.is_file():
        return "new"
    a, b = mpimg.imread(old), mpimg.imread(new)
    if a.shape != b.shape:
        return f"another size {a.shape[:2]} -> {b.shape[:2]}"
    differing = int(np.any(a != b, axis=-1).sum()) if a.ndim == 3 else int((a != b).sum())
    return f"{differing:,} pixels differ" if differing else ""


def run_scenario(scenario: Scenario, out: Path) -> None:
    env = dict(os.environ)
    if scenario.examples:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(EXAMPLES), env.get("PYTHONPATH")) if p)
    command = [
        sys.executable,
        "-m",
        "gossipsim",
        "run",
        str(ROOT / scenario.file),
        "--out",
        str(out),
    ]
    print(
        "$",
        ("PYTHONPATH=examples " if scenario.examples else "") + " ".join(command[2:]),
        flush=True,
    )
    subprocess.run(command, env=env, cwd=ROOT, check=True)


def plot_against(out: Path, x: str) -> None:
    """Draw a results folder's slot figures against the cost ``x`` (``gossipsim plot --x``)."""
    command = [sys.executable, "-m", "gossipsim", "plot", str(out), "--x", x]
    print("$", " ".join(command[2:]), flush=True)
    subprocess.run(command, cwd=ROOT, check=True)


def selected(only: Sequence[str]) -> list[Figure]:
    if not only:
        return list(FIGURES)
    names = set(only)
    unknown = names - {f.name for f in FIGURES} - {f.image.removesuffix(".png") for f in FIGURES}
    if unknown:
        raise SystemExit(
            f"--only: unknown {', '.join(sorted(unknown))}; names: {', '.join(BY_NAME)}"
        )
    return [f for f in FIGURES if f.name in names or f.image.removesuffix(".png") in names]


def print_numbers(figures: Sequence[Figure], folders: Load) -> None:
    for fig in figures:
        print(f"{fig.image}:")
        for text in fig.numbers(folders):
            print(f"    {text}")


def build_parser() -> argparse.ArgumentParser:
    """The tool's command line (tests/test_docs_blocks.py parses the README's lines with it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "check", "numbers"):
        p = sub.add_parser(name)
        p.add_argument(
            "--results", type=Path, default=ROOT / "results", help="folder of the results folders"
        )
        if name != "check":
            p.add_argument(
                "--only", nargs="+", default=[], metavar="NAME", help="results folders or images"
            )
        if name == "run":
            p.add_argument(
                "--rerun",
                action="store_true",
                help="run again even where a complete folder is there",
            )
        if name == "check":
            p.add_argument("--readme", type=Path, default=README)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    folders = Folders(args.results)
    if args.command == "check":
        lines = mismatches(folders, args.readme.read_text(encoding="utf-8"))
        for line in lines:
            print(line)
        print(f"{len(lines)} mismatch(es) in {len(FIGURES)} captions")
        return 1 if lines else 0
    figures = selected(args.only)
    if args.command == "run":
        for name in dict.fromkeys(f.name for f in figures):
            out = folders.path(name)
            sources = [f.source for f in FIGURES if f.name == name and f.x == "iteration"]
            if args.rerun or not complete(out, sources):
                run_scenario(BY_NAME[name], out)
            else:
                print(f"{name}: reusing {out}")
            for x in dict.fromkeys(f.x for f in FIGURES if f.name == name and f.x != "iteration"):
                plot_against(out, x)
        for fig in figures:
            source = folders.path(fig.name) / "plots" / fig.source
            target = PLOTS / fig.image
            changed = pixels_differing(source, target)
            if changed:  # a PNG of the same pixels (other bytes) is left as committed
                shutil.copyfile(source, target)
                print(f"plots/{fig.image}: {changed}; copied from {source}")
            else:
                print(f"plots/{fig.image}: the same pixels as {source}")
    print_numbers(figures, folders)
    return 0


if __name__ == "__main__":
    sys.exit(main())
