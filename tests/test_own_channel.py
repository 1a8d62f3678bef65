"""A channel of one's own (issue 33, item 1): ``[links] kind = "module:Class"`` names a Channel
subclass, built from its own ``[links]`` keys (as constructor arguments, or by its from_settings
for the graph), on the walk and with the server, bounded in time by its worst_seconds; bad input is
one line naming the key. The lossy example, Gilbert–Elliott bursty loss, in workers and on Dask:
tests/test_gilbert_elliott.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gossipsim as gs
from gossipsim.errors import ConfigError
from gossipsim.network.links import check_horizon
from gossipsim.world.world import world_for_run
from tests.helpers import base_scenario, slot_hops, validate_error
from tests.plugins import EdgeCount, FixedDelay


def test_a_channel_built_from_its_keys_as_constructor_arguments():
    """``tests.plugins:FixedDelay`` (no from_settings of its own): every hop takes ``seconds``;
    it declares no kernel, so ``auto`` runs the event engine and says why; summary.json records
    the kind and its keys."""
    raw = base_scenario(links={"kind": "tests.plugins:FixedDelay", "seconds": 0.25})
    raw["scenario"].update(runs=20, iterations=80)
    res = gs.run(raw, plots=False)
    assert res.engines["t"] == "event (the channel FixedDelay declares no vectorised kernel)"
    hops = slot_hops(res)
    moved = hops["sender"] != hops["receiver"]
    assert moved.sum() > 1000
    np.testing.assert_allclose(hops.loc[moved, "dt"], 0.25)
    np.testing.assert_allclose(hops.loc[~moved, "dt"], 0.0)
    assert "retransmissions" not in res.runs.columns  # lossless: the tables keep their columns
    scenario = gs.parse_study(raw).variants[0].scenario
    assert scenario.resolved()["links"] == {"kind": "tests.plugins:FixedDelay", "seconds": 0.25}


def test_a_channel_built_for_each_run_s_own_graph():
    """``tests.plugins:EdgeCount`` reads the graph it is built for: with a graph drawn per run,
    each run's hops take ``seconds`` × its own graph's edge count."""
    raw = base_scenario(
        topology={"kind": "erdos_renyi", "nodes": 12, "p": 0.5, "draw": "per-run"},
        links={"kind": "tests.plugins:EdgeCount", "seconds": 0.001},
    )
    raw["scenario"].update(runs=6, iterations=60)
    study = gs.parse_study(raw)
    world = gs.check(study)[0]
    res = gs.run(study, plots=False)
    hops = slot_hops(res)
    seeds = res.runs.set_index("run")["seed"]
    counts = []
    for run, group in hops[hops["sender"] != hops["receiver"]].groupby("run"):
        edges = world_for_run(world, int(seeds.loc[run])).indexed.indices.size // 2
        np.testing.assert_allclose(group["dt"], 0.001 * edges, rtol=1e-12)
        counts.append(edges)
    assert len(counts) == 6 and len(set(counts)) > 1  # the runs' graphs differ


def test_a_lossless_channel_of_one_s_own_carries_the_server_s_transfers():
    """With the parameter server each slot is a download and an upload, each a transmission over
    the channel: slot i ends at i × 2 × seconds."""
    raw = base_scenario(
        links={"kind": "tests.plugins:FixedDelay", "seconds": 0.125},
        protocol={"architecture": "server"},
        scheduler={"kind": "uniform"},
    )
    raw["scenario"].update(runs=3, iterations=40)
    m = gs.run(raw, plots=False).metrics
    np.testing.assert_allclose(m["time"], 0.25 * m["iteration"])


def test_the_time_bound_asks_the_channel_for_its_worst_transmission():
    """check_horizon: a channel's worst_seconds per transmission (2 a slot with the server), an
    overflow naming links.kind; no bound (None): the compute time alone is checked and the bound is
    infinite."""
    assert check_horizon(100, 0.5, EdgeCount(2.0), 64.0) == 100 * 2.5
    assert check_horizon(100, 0.5, EdgeCount(2.0), 64.0, transmissions=2) == 100 * 4.5
    with pytest.raises(ConfigError, match=r"^links\.kind: up to 1e\+299 s per transmission"):
        check_horizon(100, 0.5, EdgeCount(1e299), 64.0)
    assert check_horizon(100, 0.5, FixedDelay(1e299), 64.0) == math.inf
    with pytest.raises(ConfigError, match=r"^compute\.seconds_per_iteration: "):
        check_horizon(100, 1e299, FixedDelay(1.0), 64.0)


def test_a_channel_s_bound_refuses_what_no_run_can_reach(tmp_path, capsys):
    """Once the channel is built for the graph (a ring of 10 edges: EdgeCount's hops take 10 ×
    seconds): a clock that would overflow, and a request after the longest a run can last, 200
    slots × 10 s."""
    links = {"kind": "tests.plugins:EdgeCount", "seconds": 1e299}
    err = validate_error(base_scenario(links=links, topology={"kind": "ring", "nodes": 10}),
                         tmp_path, capsys)  # fmt: skip
    assert err.startswith("gossipsim: error: links.kind: up to 1e+300 s per transmission"), err
    raw = base_scenario(
        links={"kind": "tests.plugins:EdgeCount", "seconds": 1.0},
        topology={"kind": "ring", "nodes": 10},
        unlearning=[{"node": 1, "at_time": 2001.0}],
    )
    err = validate_error(raw, tmp_path, capsys)
    assert err.startswith("gossipsim: error: unlearning[0].at_time: is 2001 s, after the longest")
    assert "(2000 s: " in err and "worst_seconds" in err, err
    raw["unlearning"] = [{"node": 1, "at_time": 2000.0}]
    gs.check(gs.parse_study(raw))  # reachable


@pytest.mark.parametrize(
    ("links", "key", "words"),
    [
        ({"kind": "no_such_module_xyz:C"}, "links.kind", "cannot import 'no_such_module_xyz'"),
        ({"kind": "tests.plugins:CoinModel"}, "links.kind", "is not a gossipsim Channel subclass"),
        ({"kind": "gilbert"}, "links.kind", "allowed: an import path module:Class"),
        ({"kind": 5}, "links.kind", "must be a string"),
        ({"kind": "gossipsim.network.channels:Channel"}, "links.kind",
         "does not define delay(sender, receiver, bits), which a channel must define"),
        ({"kind": "tests.plugins:NotBuilt", "seconds": 1.0}, "links.kind",
         "cannot be built from its keys"),
        ({"kind": "tests.plugins:FixedDelay", "loss": 0.1}, "links.loss",
         "unknown key; allowed: kind, seconds"),
        ({"kind": "tests.plugins:FixedDelay", "seconds": -1}, "links.seconds", ">= 0"),
    ],
)  # fmt: skip
def test_bad_channels_are_one_line(tmp_path, capsys, links, key, words):
    err = validate_error(base_scenario(links=links), tmp_path, capsys)
    assert err.startswith(f"gossipsim: error: {key}: ") and words in err, err
