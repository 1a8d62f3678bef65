"""Protocols and models chosen by the scenario (registries and plug-ins by import path, in worker
processes too), and the fast path by declaration only."""

from __future__ import annotations

import multiprocessing
import os

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.api import choose_engines
from gossipsim.cli.parser import main
from gossipsim.core.capabilities import (
    BATCHED_MEAN_GRADIENT,
    EXACT_FACTORS,
    LOGLIK_GRADIENT,
    MEAN_GRADIENT,
)
from gossipsim.core.contracts import abstract_methods, missing_methods
from gossipsim.errors import ConfigError
from gossipsim.execution import executors
from gossipsim.execution.vectorized import capability
from gossipsim.models import Model
from gossipsim.network.channels import Channel
from gossipsim.protocols import PROTOCOL_KINDS, GFVLSettings, protocol_kind
from gossipsim.protocols.registry import ProtocolKind
from gossipsim.scheduling import SCHEDULERS, Scheduler, register, unregister
from gossipsim.study import budget
from tests.helpers import base_scenario, to_toml
from tests.plugins import TARGET_LOG, PlainWalk

PLUGIN_PROTOCOL = "tests.plugins:PlainGFVL"
PLUGIN_MODEL = "tests.plugins:CoinModel"
PLUGIN_SCHEDULER = "tests.plugins:PathWalk"


def _tables(res) -> dict[str, pd.DataFrame]:
    return {"runs": res.runs, "metrics": res.metrics, "requests": res.requests}


def test_the_scenario_chooses_the_protocol_kind_and_gfvl_is_registered():
    assert "gfvl" in PROTOCOL_KINDS
    scenario = gs.parse_study(base_scenario()).variants[0].scenario
    assert scenario.protocol.kind == "gfvl"
    assert isinstance(scenario.protocol.options, GFVLSettings)
    with pytest.raises(ConfigError, match=r"^protocol\.kind: unknown protocol 'nope'"):
        gs.parse_study(base_scenario(protocol={"kind": "nope"}))


@pytest.mark.parametrize(
    "path, message",
    [
        ("tests.plugins:Missing", "has no 'Missing'"),
        (
            "no_such_module_xyz:Kind",
            "cannot import 'no_such_module_xyz': No module named 'no_such_module_xyz' (install "
            "it, or put the folder that holds it on PYTHONPATH)",
        ),
        # the plug-in is found but needs a missing package: named, and no hint about the path
        (
            "tests.plugin_needs_missing:Kind",
            "cannot import 'tests.plugin_needs_missing': No module named "
            "'no_such_dependency_xyz'\n",
        ),
        ("tests.plugins:CoinModel", "is not a gossipsim ProtocolKind"),
        (":Kind", "written module:attribute"),
    ],
)
def test_a_bad_plugin_path_is_one_line(tmp_path, capsys, path, message):
    file = tmp_path / "s.toml"
    file.write_text(to_toml(base_scenario(protocol={"kind": path})))
    assert main(["validate", str(file)]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "protocol.kind" in err and message in err


@pytest.fixture
def _forget_path_walk():
    """The scheduler named by import path is registered under it on first use: removed after."""
    yield
    unregister(PLUGIN_SCHEDULER)


def test_plugin_protocol_model_and_scheduler_run_identically_in_workers_and_on_dask(
    tmp_path, capsys, monkeypatch, _forget_path_walk
):
    """A protocol kind, a model and a scheduler named by import path: the same tables in this
    process, in a pool of 2 worker processes and on a 2-worker Dask cluster (which import the
    plug-ins again). Each target is computed once per command, by this process while checking the
    sweep: Dask's workers build the variant again but take its targets from here, and forked pool
    workers start with the variant this process built."""
    log = tmp_path / "targets.log"
    monkeypatch.setenv(TARGET_LOG, str(log))
    raw = base_scenario(
        scenario={"name": "plug", "seed": 3, "runs": 6, "iterations": 80},
        model={"kind": PLUGIN_MODEL, "prior": {"a": 2, "b": 2}},
        protocol={"kind": PLUGIN_PROTOCOL},
        scheduler={"kind": PLUGIN_SCHEDULER},
        unlearning=[{"node": 2, "at_iteration": 40}],
    )
    path = tmp_path / "s.toml"
    path.write_text(to_toml(raw))
    outs = []
    for flags in ([], ["--workers", "2"], ["--cluster", "local:2"]):
        out = tmp_path / f"out{len(outs)}"
        executors._CACHE.update(key=None, worlds={})  # no worlds left by the command before
        assert main(["run", str(path), "--out", str(out), "--no-plots", *flags]) == 0
        outs.append(out)
        here = str(os.getpid())
        lines = [line.split(" ", 1) for line in log.read_text(encoding="utf-8").splitlines()]
        log.unlink()
        # the two stages (nothing forgotten, then node 2), once each, by this process
        targets = [(pid, what) for pid, what in lines if what != "built"]
        assert targets == [(here, "[]"), (here, "[2]")], (flags, lines)
        if flags[:1] != ["--cluster"] and multiprocessing.get_start_method() == "fork":
            assert {pid for pid, _ in lines} == {here}, (flags, lines)  # nothing built again
    text = capsys.readouterr().out
    assert "declares no vectorised kernel" in text  # the plug-in declares none: event engine
    first = {name: pd.read_csv(outs[0] / f"{name}.csv") for name in ("runs", "metrics", "requests")}
    for out in outs[1:]:
        for name, table in first.items():
            pd.testing.assert_frame_equal(table, pd.read_csv(out / f"{name}.csv"))
    # the plug-ins are beta–Bernoulli and Metropolis-Hastings under other names: the built-ins'
    # numbers
    raw["model"]["kind"] = "beta-bernoulli"
    raw["protocol"] = {"kind": "gfvl"}
    raw["scheduler"] = {"kind": "metropolis-hastings"}
    builtin = gs.run(raw, engine="event")
    plugin = gs.run(
        {
            **raw,
            "model": {"kind": PLUGIN_MODEL, "prior": {"a": 2, "b": 2}},
            "scheduler": {"kind": PLUGIN_SCHEDULER},
        }
    )
    for name, table in _tables(builtin).items():
        pd.testing.assert_frame_equal(table, _tables(plugin)[name])


class NoKernelChannel(Channel):
    """A channel without a kernel declaration (test only)."""

    def delay(self, sender, receiver, bits):
        return 0.001


@pytest.fixture
def plain_walk():
    register(PlainWalk)
    try:
        yield PlainWalk
    finally:
        unregister(PlainWalk.kind)


def test_only_what_declares_a_kernel_is_vectorised(plain_walk):
    """A protocol, a scheduler and a channel without a kernel are never vectorised: ``auto`` picks
    the event engine and says why, ``vectorized`` refuses in one line; with all three declared
    (the built-ins) the fast path runs."""
    raw = base_scenario(scenario={"name": "k", "seed": 1, "runs": 40, "iterations": 60})
    cases = {
        "protocol": {"protocol": {"kind": PLUGIN_PROTOCOL}},
        "scheduler": {"scheduler": {"kind": PlainWalk.kind}},
        "channel": {},
    }
    for what, sections in cases.items():
        study = gs.parse_study({**raw, **sections})
        worlds = gs.check(study)
        if what == "channel":
            worlds[0].links = NoKernelChannel()
        reason = capability.unavailable(worlds[0])
        assert reason is not None and "declares no vectorised kernel" in reason, (what, reason)
        engines, notes = choose_engines(study, worlds, "auto")
        assert engines == ["event"] and "declares no vectorised kernel" in notes[0]
        with pytest.raises(ConfigError, match=r"^--engine: the vectorized engine cannot run"):
            choose_engines(study, worlds, "vectorized")
    study = gs.parse_study(raw)
    assert choose_engines(study, gs.check(study), "auto")[0] == ["vectorized"]


def test_the_kernel_declarations_of_the_built_ins():
    world = gs.check(gs.parse_study(base_scenario()))[0]
    assert protocol_kind("gfvl").kernel(world.model) in capability.KERNELS
    assert world.links.kernel in capability.CHANNEL_KERNELS
    natgrad = gs.check(
        gs.parse_study(
            base_scenario(
                model={"kind": "beta-exponential", "prior": {"a": 2, "b": 2}},
                data={"points_per_node": 5, "theta": 0.5},
            )
        )
    )[0]
    # steps at every visit: stepped for many runs at once
    assert protocol_kind("gfvl").kernel(natgrad.model) == "batched-steps"
    assert "batched-steps" in capability.KERNELS


def test_protocol_stats_become_columns_of_runs_csv(monkeypatch):
    """A counter a protocol reports (``stats()``) is a runs.csv column, with no edit to results."""
    from gossipsim.protocols.gfvl import ConjugateGFVL

    monkeypatch.setattr(
        ConjugateGFVL, "stats", lambda self: {"factor_events": float(len(self.trace))}
    )
    res = gs.run(
        base_scenario(scenario={"name": "s", "seed": 2, "runs": 3, "iterations": 50}),
        engine="event",
    )
    assert "factor_events" in res.runs.columns
    assert (res.runs["factor_events"] >= 1).all()
    assert list(res.runs.columns[:3]) == ["variant", "run", "seed"]
    assert np.isfinite(res.runs["factor_events"]).all()


# ------------------------------------------------------------- what a kind of one's own must define

INCOMPLETE = "tests.plugins:Incomplete"


class _Minimal(Model):
    """A model that defines what every model must (it is never run: the check comes first)."""

    kind = INCOMPLETE

    def draw_data(self, rng):
        return None

    @classmethod
    def sizes(cls, spec, nodes):
        return budget.ModelSizes(state_entries=2, message_entries=2)

    def compute_target(self, data, forgotten):
        raise NotImplementedError

    def node_sizes(self, data):
        return []


class _MinimalKind(ProtocolKind):
    name = INCOMPLETE

    def check_model(self, model):
        pass

    def build(self, request):
        raise NotImplementedError


class _MinimalWalk(Scheduler):
    kind = INCOMPLETE
    description = "tests only"
    kernel = "batched-step"

    def edge_weights(self, g, view=None):
        return np.full(g.indices.size, 0.0)

    def sampler(self, g, rng, view=None):
        return lambda k: k

    def step(self, positions, u, v, csr, view=None):
        return positions


def _without(cls: type, *names: str, **attributes) -> type:
    """``cls`` with its own ``names`` taken out (so they are whatever its base has)."""
    own = {k: v for k, v in vars(cls).items() if k not in (*names, "__dict__", "__weakref__")}
    return type("Incomplete", cls.__bases__, {**own, **attributes})


@pytest.fixture
def incomplete(monkeypatch):
    """Put a class at ``tests.plugins:Incomplete`` (a scheduler registered under it is removed
    after the test)."""
    import tests.plugins

    def put(cls: type) -> None:
        monkeypatch.setattr(tests.plugins, "Incomplete", cls, raising=False)

    yield put
    unregister(INCOMPLETE)


def _refusal(raw: dict, tmp_path, capsys) -> str:
    """The one line ``gossipsim validate`` prints (exit status 2), which ``gs.parse_study`` raises
    too."""
    with pytest.raises(ConfigError) as caught:
        gs.parse_study(raw)
    file = tmp_path / "s.toml"
    file.write_text(to_toml(raw))
    assert main(["validate", str(file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err == f"gossipsim: error: {caught.value}\n", err
    return str(caught.value)


def test_the_minimal_kinds_define_what_they_must():
    assert missing_methods(_Minimal) == missing_methods(_MinimalKind) == []
    assert missing_methods(_MinimalWalk) == []


@pytest.mark.parametrize("method", sorted(abstract_methods(Model)))
def test_a_model_without_a_method_every_model_needs_is_one_line(
    tmp_path, capsys, incomplete, method
):
    """Each abstract method of Model missing (``node_sizes`` too: without it the theory step failed
    after every run), one line naming it with its arguments, at validation."""
    assert set(abstract_methods(Model)) == {"compute_target", "draw_data", "node_sizes", "sizes"}
    incomplete(_without(_Minimal, method))
    signature = {"compute_target": "compute_target(data, forgotten)", "draw_data": "draw_data(rng)",
                 "node_sizes": "node_sizes(data)", "sizes": "sizes(spec, nodes)"}[method]  # fmt: skip
    assert _refusal(base_scenario(model={"kind": INCOMPLETE}), tmp_path, capsys) == (
        f"model.kind: {INCOMPLETE!r} does not define {signature}, which a model kind must define "
        "(docs/extending.md lists them)"
    )


@pytest.mark.parametrize(
    "capabilities, missing",
    [
        ({EXACT_FACTORS}, "factors"),
        ({MEAN_GRADIENT}, "estimators, mean_gradient"),
        ({BATCHED_MEAN_GRADIENT}, "batched_mean_gradient, in_domain_rows"),
        ({LOGLIK_GRADIENT}, "evaluate_particles, log_likelihood, log_prior, node_rows, "
                            "particle_columns, particle_dimension, particle_target, sample_prior"),
    ],
)  # fmt: skip
def test_a_model_without_what_its_capabilities_need_is_one_line(
    tmp_path, capsys, incomplete, capabilities, missing
):
    incomplete(_without(_Minimal, capabilities=frozenset(capabilities)))
    err = _refusal(base_scenario(model={"kind": INCOMPLETE}), tmp_path, capsys)
    assert err.startswith(f"model.kind: {INCOMPLETE!r} does not define {missing}, which"), err


@pytest.mark.parametrize("method", ["build", "check_model"])
def test_a_protocol_kind_without_a_method_is_one_line(tmp_path, capsys, incomplete, method):
    """It was a TypeError from instantiating the abstract class (a traceback)."""
    incomplete(_without(_MinimalKind, method))
    err = _refusal(base_scenario(protocol={"kind": INCOMPLETE}), tmp_path, capsys)
    signature = {"build": "build(request)", "check_model": "check_model(model)"}[method]
    assert err.startswith(f"protocol.kind: {INCOMPLETE!r} does not define {signature}, "), err


@pytest.mark.parametrize(
    "names, attributes, missing",
    [
        (("sampler",), {}, "sampler(g, rng, view)"),
        (("step",), {}, "step(positions, u, v, csr, view)"),  # for kernel = "batched-step"
        (("edge_weights",), {}, "edge_weights(g, view)"),
        (
            ("edge_weights",),
            {"transition_matrix": lambda self, g, view=None: None},
            "jump_chain(g, view)",
        ),
    ],
)
def test_a_scheduler_without_a_method_is_one_line(
    tmp_path, capsys, incomplete, names, attributes, missing
):
    incomplete(_without(_MinimalWalk, *names, **attributes))
    err = _refusal(base_scenario(scheduler={"kind": INCOMPLETE}), tmp_path, capsys)
    assert err.startswith(f"scheduler.kind: {INCOMPLETE!r} does not define {missing}, "), err
    assert INCOMPLETE not in SCHEDULERS  # refused before it was registered


def test_a_step_is_needed_only_with_the_batched_step_kernel(incomplete):
    incomplete(_without(_MinimalWalk, "step", kernel=None))
    gs.parse_study(base_scenario(scheduler={"kind": INCOMPLETE}))


def test_a_kind_registered_from_python_is_checked_too():
    """Registered in this process rather than named by import path: refused at its lookup."""
    from gossipsim.models import MODEL_KINDS, register_model

    register_model(_without(_Minimal, "sizes", kind="test-incomplete"))
    try:
        with pytest.raises(ConfigError, match=r"^model\.kind: 'test-incomplete' does not define "
                                              r"sizes\(spec, nodes\), which"):  # fmt: skip
            gs.parse_study(base_scenario(model={"kind": "test-incomplete"}))
    finally:
        MODEL_KINDS._entries.pop("test-incomplete")
