"""gossipsim: Bayesian federated learning and unlearning over decentralized networks.

>>> import gossipsim as gs
>>> study = gs.load_scenario("scenarios/fig3_beta_bernoulli.toml")      # doctest: +SKIP
>>> res = gs.run(study, runs=50, workers=2)                              # doctest: +SKIP
>>> res.runs.groupby("variant")["cover_iteration"].mean()                # doctest: +SKIP
"""

from typing import TYPE_CHECKING, Any

from gossipsim.core import moved
from gossipsim.core.version import __version__ as __version__

moved.install()  # old module paths (before issue 31) resolve to their new places

# The package namespace is lazy (PEP 562): ``import gossipsim`` loads nothing else, and each name
# below imports its module on first use, so that importing one layer (the engine, say) never drags
# in the others through this file.
_LAZY = {
    "CONJUGATE_MODELS": "families",
    "ConfigError": "errors",
    "ConjugateGFVL": "protocols",
    "IndexedGraph": "scheduling",
    "LinkModel": "network.links",
    "OptimumError": "families.optimum",
    "PostProcessingError": "results.results",
    "Protocol": "protocols",
    "Request": "engine.records",
    "Results": "results.results",
    "RunRecord": "engine.records",
    "Scenario": "study.scenario",
    "ServerLinks": "network.links",
    "ServerRounds": "protocols",
    "StateTrace": "protocols",
    "Study": "study.scenario",
    "TOPOLOGY_KINDS": "topology",
    "Walker": "scheduling",
    "WithRetrainBaseline": "protocols",
    "World": "world.world",
    "build_indexed": "topology",
    "build_topology": "topology",
    "build_world": "world.world",
    "check": "api",
    "check_graph": "topology",
    "exact_cover_moves": "cover",
    "expected_removal_latency": "cover",
    "expected_unlearning_latency": "cover",
    "hitting_times_to": "cover",
    "load_results": "results.results",
    "load_scenario": "study.scenario",
    "matthews_bounds": "cover",
    "monte_carlo_cover_moves": "cover",
    "monte_carlo_unlearning_latency": "cover",
    "next_visit_latency": "cover",
    "parse_study": "study.scenario",
    "removal_latency_law": "cover",
    "run": "api",
    "run_token": "engine.token",
    "simulate_run": "execution.runner",
    "stationary_distribution": "scheduling",
    "theoretical_cover": "cover",
    "theoretical_cover_moves": "cover",
    "transition_matrix": "scheduling",
    "variational_optimum": "families.optimum",
}

if TYPE_CHECKING:
    from gossipsim.api import check, run
    from gossipsim.cover import (
        exact_cover_moves,
        expected_removal_latency,
        expected_unlearning_latency,
        hitting_times_to,
        matthews_bounds,
        monte_carlo_cover_moves,
        monte_carlo_unlearning_latency,
        next_visit_latency,
        removal_latency_law,
        theoretical_cover,
        theoretical_cover_moves,
    )
    from gossipsim.engine.records import Request, RunRecord
    from gossipsim.engine.token import run_token
    from gossipsim.errors import ConfigError
    from gossipsim.execution.runner import World, build_world, simulate_run
    from gossipsim.families import CONJUGATE_MODELS
    from gossipsim.families.optimum import OptimumError, variational_optimum
    from gossipsim.network.links import LinkModel, ServerLinks
    from gossipsim.protocols import (
        ConjugateGFVL,
        Protocol,
        ServerRounds,
        StateTrace,
        WithRetrainBaseline,
    )
    from gossipsim.results.results import PostProcessingError, Results, load_results
    from gossipsim.scheduling import (
        IndexedGraph,
        Walker,
        stationary_distribution,
        transition_matrix,
    )
    from gossipsim.study.scenario import Scenario, Study, load_scenario, parse_study
    from gossipsim.topology import TOPOLOGY_KINDS, build_indexed, build_topology, check_graph


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gossipsim' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"gossipsim.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "CONJUGATE_MODELS",
    "TOPOLOGY_KINDS",
    "ConfigError",
    "ConjugateGFVL",
    "IndexedGraph",
    "LinkModel",
    "OptimumError",
    "PostProcessingError",
    "Protocol",
    "Request",
    "Results",
    "RunRecord",
    "Scenario",
    "ServerLinks",
    "ServerRounds",
    "StateTrace",
    "Study",
    "Walker",
    "WithRetrainBaseline",
    "World",
    "build_indexed",
    "build_topology",
    "build_world",
    "check",
    "check_graph",
    "exact_cover_moves",
    "expected_removal_latency",
    "expected_unlearning_latency",
    "hitting_times_to",
    "load_results",
    "load_scenario",
    "matthews_bounds",
    "monte_carlo_cover_moves",
    "monte_carlo_unlearning_latency",
    "next_visit_latency",
    "parse_study",
    "removal_latency_law",
    "run",
    "run_token",
    "simulate_run",
    "stationary_distribution",
    "theoretical_cover",
    "theoretical_cover_moves",
    "transition_matrix",
    "variational_optimum",
]
