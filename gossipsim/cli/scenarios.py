"""The commands about scenario files that run nothing: ``gossipsim validate`` checks one as
``run`` would (every key, graph, data file and target), ``gossipsim list`` shows the kinds a
scenario can name (topologies, models, schedulers, protocols) with their parameters."""

from __future__ import annotations

import argparse


def validate_command(args: argparse.Namespace) -> int:
    from gossipsim.api import check, check_memory, choose_engines, warn_long_study
    from gossipsim.study.scenario import load_scenario

    study = load_scenario(args.file)
    worlds = check(study)
    check_memory(study, worlds, "scenario.runs")  # what `run` refuses, refused here too
    choose_engines(study, worlds, "auto")  # e.g. drawn stays the vectorised engine cannot draw
    warn_long_study(study, worlds)  # what `run` warns of on one worker
    runs = sum(v.scenario.run.runs for v in study.variants)
    print(f"{args.file}: valid ({len(study.variants)} variant(s), {runs} runs in all)")
    for variant, world in zip(study.variants, worlds, strict=True):
        drawn = world.model.fixed_data is None and variant.scenario.data.draw == "per-run"
        observations = (
            "observations drawn per run" if drawn else f"{sum(world.points)} observations"
        )
        print(
            f"  {variant.label}: {world.nodes} nodes, {world.indexed.indices.size // 2} edges, "
            f"{observations}, {len(world.requests)} unlearning request(s)"
        )
    return 0


def list_command(args: argparse.Namespace) -> int:
    from gossipsim.core.capabilities import EXACT_FACTORS, MEAN_GRADIENT
    from gossipsim.models import MODEL_KINDS
    from gossipsim.protocols import PROTOCOL_KINDS
    from gossipsim.scheduling import SCHEDULER_KINDS, scheduler_for
    from gossipsim.topology import TOPOLOGY_KINDS

    print("topologies ([topology] kind, --topology):")
    for name, spec in TOPOLOGY_KINDS.items():
        params = ", ".join(
            f"{p.name}" + ("" if p.default is None else f"={p.default}")
            for p in spec.params.values()
        )
        shown = ", ".join(p for p in ("nodes" if spec.needs_nodes else "", params) if p)
        print(f"  {name:<17} {spec.description}" + (f"  [{shown}]" if shown else ""))
    print("models ([model] kind):")
    for name, model in MODEL_KINDS.items():
        data = (
            ", ".join([p.name for p in model.data_params] + [k.name for k in model.data_keys])
            or "-"
        )
        exact = EXACT_FACTORS in model.capabilities
        how = (
            "exact conjugate factors"
            if exact
            else "expected log-likelihood gradients"
            if MEAN_GRADIENT in model.capabilities
            else "log-likelihood gradients at points (particle protocols)"
        )
        estimators = getattr(model, "estimators", ())
        extra = f"; estimators: {', '.join(estimators)}" if estimators and not exact else ""
        print(f"  {name:<22} {model.description}")
        print(f"  {'':<22} prior: {model.describe_prior()}; data: {data}; {how}{extra}")
    print('schedulers ([scheduler] kind; stays = "stepped", or "drawn" where marked):')
    for name, text in SCHEDULER_KINDS.items():
        drawn = "  [stays: drawn]" if scheduler_for(name).stay_kernel else ""
        print(f"  {name:<20} {text}{drawn}")
    print("protocols ([protocol] kind):")
    width = max((len(name) for name in PROTOCOL_KINDS), default=0)
    for name, kind in PROTOCOL_KINDS.items():
        text = kind.describe()
        print(f"  {name:<{width}} {text}")
    print(
        'models, schedulers and protocols of your own: kind = "module:Class" (an import path; '
        "see docs/extending.md)"
    )
    return 0
