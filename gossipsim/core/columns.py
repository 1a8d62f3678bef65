"""The columns of runs.csv and metrics.csv, in a module of their own: the memory check of
``gossipsim validate`` counts them without importing pandas (:mod:`gossipsim.results.results`)."""

RUN_COLUMNS = [
    "variant",
    "run",
    "seed",
    "cover_iteration",
    "cover_moves",
    "convergence_iteration",
    "convergence_time",
    "convergence_threshold",
    "iterations",
    "time",
    "bits",
    "best_family_kl",
    "damped_steps",
    "domain_recoveries",
    "nonfinite_kl_slots",
]
METRIC_COLUMNS = [
    "variant", "run", "iteration", "time", "holder", "kl", "bits", "retrain_kl", "best_family_kl",
]  # fmt: skip
