"""Record or compare the tables of a fixed set of scenarios: the "no number changes" check of a
refactoring (issue 10, item 8).

    python tools/snapshot_tables.py record DIR     # run every case, save its tables in DIR
    python tools/snapshot_tables.py compare DIR    # run again, compare every recorded column

Cases: every shipped scenario (runs reduced so the set takes minutes, not hours; the same code
paths) and hand-made ones covering both engines, timed and per-iteration requests, links, per-run
data, every scheduler and start, sweeps, natural-gradient learning and unlearning, linear and
logistic regression. ``compare`` checks that every column that existed keeps its values, row for
row (new columns are allowed) and prints one line per case.
"""

from __future__ import annotations

import copy
import sys
import tomllib
from pathlib import Path
from typing import Any

import pandas as pd

import gossipsim as gs

sys.path.insert(
    0, str(Path(__file__).resolve().parent.parent / "examples")
)  # the examples' plug-ins

ROOT = Path(__file__).resolve().parent.parent
TABLES = ("runs", "requests", "metrics", "visits")
SHIPPED_RUNS = {  # runs per shipped scenario in the snapshot
    "cover_time_vs_nodes": 2,
    "dsvgd_fashion_mnist_unlearning_paper": 1,
    "fig3_beta_bernoulli": 200,
    "fig4_beta_exponential": 3,
    "fig5_beta_exponential_unlearning": 3,
    "logistic_breast_cancer_karate": 2,
    "unlearning_complete": 300,
    "unlearning_karate": 100,
}


EXAMPLE_RUNS = 20  # runs per example scenario in the snapshot


def _base(**sections: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "scenario": {"name": "c", "seed": 7, "runs": 40, "iterations": 150},
        "topology": {"kind": "complete", "nodes": 8},
        "model": {"kind": "beta-bernoulli", "prior": {"a": 2, "b": 2}},
        "data": {"points_per_node": 20, "theta": 0.7},
    }
    raw.update(copy.deepcopy(sections))
    return raw


def cases() -> dict[str, tuple[dict[str, Any], str]]:
    """name -> (scenario as dicts, engine): every shipped scenario, every example's scenario
    (``example_<name>``, its plug-in imported from examples/) and the hand-made cases."""
    out: dict[str, tuple[dict[str, Any], str]] = {}
    for path in sorted((ROOT / "scenarios").glob("*.toml")):
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        raw.setdefault("scenario", {})["runs"] = SHIPPED_RUNS.get(path.stem, 5)
        if path.stem == "cover_time_vs_nodes":  # the star with 1,000 nodes takes minutes a run
            raw["sweep"]["topology.nodes"] = [10, 20, 50]
        if path.stem == "dsvgd_fashion_mnist_unlearning_paper":  # 12 minutes a run as shipped
            raw["scenario"]["iterations"] = 45  # the requests at slot 40 still served
            raw["data"]["test_rows"] = 500
        out[path.stem] = (raw, "auto")
    for path in sorted((ROOT / "examples").glob("*.toml")):
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        raw.setdefault("scenario", {})["runs"] = EXAMPLE_RUNS
        out[f"example_{path.stem}"] = (raw, "auto")
    requests = [{"node": 2, "at_iteration": 60}, {"node": 5, "at_time": 0.02}]
    for engine in ("event", "vectorized"):
        out[f"requests_links_{engine}"] = (
            _base(
                unlearning=[requests[0]],
                links={"rate_bps": 1e5, "latency_s": 0.001},
                compute={"seconds_per_iteration": 0.0005},
            ),
            engine,
        )
        for kind in ("metropolis-hastings", "simple-random-walk", "uniform"):
            for start in ("uniform", "stationary", "Medici"):
                out[f"{kind}_{start}_{engine}"] = (
                    _base(
                        topology={"kind": "florentine"},
                        scheduler={"kind": kind, "start": start},
                        unlearning=[{"node": "Pazzi", "at_iteration": 90}],
                        scenario={"name": "s", "seed": 3, "runs": 20, "iterations": 200},
                    ),
                    engine,
                )
        out[f"per_run_data_{engine}"] = (
            _base(data={"points_per_node": 10, "theta": 0.4, "draw": "per-run"}),
            engine,
        )
        out[f"sweep_{engine}"] = (
            _base(sweep={"topology.kind": ["ring", "star"], "topology.nodes": [6, 9]}),
            engine,
        )
    out["timed_requests_event"] = (
        _base(
            unlearning=requests,
            links={"latency_s": 0.001},
            compute={"seconds_per_iteration": 0.001},
        ),
        "event",
    )
    out["gamma_poisson_dirichlet"] = (
        _base(
            model={"kind": "gamma-poisson", "prior": {"shape": 2, "rate": 1}},
            data={"points_per_node": 5, "mean": 2.0},
            sweep={"topology.kind": ["ring", "complete"]},
        ),
        "auto",
    )
    out["natgrad_beta_exponential"] = (
        _base(
            model={"kind": "beta-exponential", "prior": {"a": 2, "b": 2}},
            data={"points_per_node": 8, "theta": 0.3},
            protocol={"learning_rate": 0.01, "samples": 5, "local_iterations": 2},
            unlearning=[{"node": 3, "at_iteration": 100}],
            metrics={"tolerance": 0.1, "excess": True},
            scenario={"name": "n", "seed": 9, "runs": 6, "iterations": 300},
        ),
        "event",
    )
    out["linear_regression"] = (
        _base(
            model={"kind": "linear-regression", "sigma": 1.0, "prior": {"mean": 0, "variance": 2}},
            data={"dataset": "diabetes", "partition": "iid"},
            unlearning=[{"node": 1, "at_iteration": 80}],
        ),
        "auto",
    )
    out["logistic_reinforce"] = (
        _base(
            model={"kind": "logistic-regression", "family": "gaussian-diagonal"},
            data={"dataset": "wine", "partition": "iid"},
            protocol={"estimator": "reinforce", "learning_rate": 0.01, "samples": 3},
            unlearning=[{"node": 0, "at_iteration": 100}],
            metrics={"tolerance": 0.5, "record_every": 10},
            scenario={"name": "l", "seed": 2, "runs": 3, "iterations": 160},
        ),
        "event",
    )
    return out


def run_case(
    raw: dict[str, Any], engine: str, folder: str = "scenarios"
) -> dict[str, pd.DataFrame]:
    study = gs.parse_study(raw, path=str(ROOT / folder / "x.toml"))
    res = gs.run(study, engine=engine)
    return {name: getattr(res, name) for name in TABLES}


def _comparable(frame: pd.DataFrame) -> pd.DataFrame:
    """Categorical columns (the variant label, recorded as text before issue 11) as their labels,
    so that values, not the column type, are compared."""
    out = frame.copy()
    for name in out.columns:
        if isinstance(out[name].dtype, pd.CategoricalDtype):
            out[name] = out[name].astype(object)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("record", "compare"):
        print(__doc__)
        return 2
    mode, folder = argv[0], Path(argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name, (raw, engine) in cases().items():
        if mode == "compare" and not (folder / f"{name}.runs.pkl").exists():
            print(f"compare {name}: new since the recording (not compared)")
            continue
        tables = run_case(raw, engine, "examples" if name.startswith("example_") else "scenarios")
        differ = 0  # this case's tables that differ
        for table, frame in tables.items():
            path = folder / f"{name}.{table}.pkl"
            if mode == "record":
                frame.to_pickle(path)
                continue
            before = pd.read_pickle(path)
            after = _comparable(frame[[c for c in before.columns if c in frame.columns]])
            missing = [c for c in before.columns if c not in frame.columns]
            try:
                pd.testing.assert_frame_equal(
                    before.reset_index(drop=True),
                    after.reset_index(drop=True),
                    check_dtype=False,
                    check_exact=True,
                    check_categorical=False,
                )
                ok = not missing
            except AssertionError as exc:
                ok = False
                print(f"  {name}.{table}: {str(exc).splitlines()[0:3]}")
            if missing:
                print(f"  {name}.{table}: columns gone: {missing}")
            differ += not ok
        failed += differ
        print(f"{mode} {name}: {'ok' if mode == 'record' or differ == 0 else 'see above'}")
    print(f"{failed} table(s) differ" if mode == "compare" else "recorded")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
