"""Compressed DSVGD (issue 32, item 2). With the parameter server, the paper variant: each slot
costs the uncompressed download of the global particles plus the upload's bits of eqs. 9-11 exactly
(none for a forgotten agent's idle visit); the sound variant: two arrays in half the budget each,
the server's aggregate the sum of what it decoded. The download quantized, the walk's token
quantized. The tables are the same with 1 or 2 workers, and bad settings are one line."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import gossipsim as gs
from gossipsim.study.sections import parse_scenario
from gossipsim.world.world import build_protocol, build_world
from tests.helpers import validate_error

BASE = {
    "scenario": {"name": "c", "seed": 3, "runs": 2, "iterations": 24},
    "topology": {"kind": "complete", "nodes": 4},
    "scheduler": {"kind": "round-robin", "start": 0},
    "model": {"kind": "logistic-regression"},
    "data": {"dataset": "breast_cancer"},
    "protocol": {
        "kind": "dsvgd", "architecture": "server", "variant": "paper", "particles": 4,
        "local_iterations": 3, "fit_iterations": 3,
        "compression": {"scheme": "alpha-shared", "alpha": 0.5, "budget": "2d", "a_max": 0.5},
    },
    "unlearning": [{"node": 1, "at_iteration": 10}],
}  # fmt: skip


def _with(**protocol):
    raw = copy.deepcopy(BASE)
    raw["protocol"].update(protocol)
    return raw


def _sound(**compression):
    raw = _with(variant="sound", local_iterations=2)
    raw["protocol"].pop("fit_iterations")
    raw["protocol"]["compression"] = {"scheme": "shared", "budget": "6d", "a_max": "max"}
    raw["protocol"]["compression"].update(compression)
    return raw


def _eq10_k(d, particles, entry_bits, budget):
    """The largest k of a shared upload (eq. 10) in ``budget`` bits, by the exact binomial."""
    bits = [math.log2(math.comb(d, k)) + particles * entry_bits * k for k in range(d + 1)]
    k = max(j for j in range(d + 1) if bits[j] <= budget)
    return k, bits[k]


def _per_slot(rows):
    return np.diff(np.concatenate([[0.0], rows["bits"].to_numpy()]))


def test_each_slot_costs_the_download_and_the_papers_upload_bits():
    res = gs.run(BASE, plots=False)
    d, particles = 32, 4  # 30 features, the bias and log ξ
    budget = 2 * d
    # eq. 11 by the exact binomial (2 groups of 2 particles, 5 bits an entry), not upload_bits
    bits = [2 * math.log2(math.comb(d, k)) + particles * 5 * k for k in range(d + 1)]
    k = max(j for j in range(d + 1) if bits[j] <= budget)
    upload = bits[k]
    download = particles * d * 64
    for _, rows in res.metrics.groupby("run"):
        per_slot = np.diff(np.concatenate([[0.0], rows["bits"].to_numpy()]))
        holders = rows["holder"].to_numpy()
        slots = rows["iteration"].to_numpy()
        # node 1 (holder at slots 2, 6, 10, ...) is forgotten at slot 10, its visit when the
        # request arrives: its later visits change nothing and upload nothing
        idle = (holders == 1) & (slots > 10)
        assert np.allclose(per_slot[~idle], download + upload)
        assert np.allclose(per_slot[idle], download)
        assert idle.any()


@pytest.mark.parametrize("variant", ["paper", "sound"])
def test_compressed_tables_are_the_same_with_one_or_two_workers(variant):
    raw = BASE if variant == "paper" else _sound()
    one = gs.run(raw, plots=False, workers=1)
    two = gs.run(raw, plots=False, workers=2)
    assert one.metrics.equals(two.metrics) and one.requests.equals(two.requests)
    assert one.engines[one.variants[0]].startswith("event")


def test_error_feedback_changes_the_run_and_the_bits_stay_the_budget():
    plain = gs.run(BASE, plots=False)
    raw = copy.deepcopy(BASE)
    raw["protocol"]["compression"]["error_feedback"] = True
    fed = gs.run(raw, plots=False)
    assert fed.metrics["bits"].equals(plain.metrics["bits"])
    assert not fed.metrics["ksd"].equals(plain.metrics["ksd"])


@pytest.mark.parametrize(
    ("change", "key", "says"),
    [
        ({"budget": "lots"}, "protocol.compression.budget", "multiple of d"),
        ({"budget": "1"}, "protocol.compression.budget", "do not hold one entry"),
        ({"alpha": 0.3}, "protocol.compression.alpha", "whole number of groups"),
        ({"entry_bits": 1}, "protocol.compression.entry_bits", "2"),
        ({"a_max": 0}, "protocol.compression.a_max", ""),
        ({"a_max": None}, "protocol.compression.a_max", "is required"),
        ({"scheme": "top-k"}, "protocol.compression.scheme", "shared"),
    ],
)
def test_bad_compression_settings_are_one_line(tmp_path, capsys, change, key, says):
    raw = copy.deepcopy(BASE)
    table = raw["protocol"]["compression"]
    for name, value in change.items():
        if value is None:
            table.pop(name)
        else:
            table[name] = value
    line = validate_error(raw, tmp_path, capsys)
    assert key in line and says in line, line


def test_the_sound_variants_slot_costs_two_half_budget_arrays_and_the_range():
    res = gs.run(_sound(), plots=False)
    d, particles = 32, 4
    # each array: eq. 10 in half of 6d after the 32 bits of its range (a_max = max)
    k, array_bits = _eq10_k(d, particles, 5, 3 * d - 32)
    assert k >= 1
    download = 2 * particles * d * 64  # the particles and the scores' aggregate
    for _, rows in res.metrics.groupby("run"):
        per_slot = _per_slot(rows)
        holders, slots = rows["holder"].to_numpy(), rows["iteration"].to_numpy()
        # node 1's visits from its removal slot (10, its visit when the request arrives) on step
        # on the others' scores and upload the particles' update alone
        alone = (holders == 1) & (slots >= 10)
        assert np.allclose(per_slot[~alone], download + 2 * (array_bits + 32))
        assert np.allclose(per_slot[alone], download + array_bits + 32)
        assert alone.any()


def test_the_sound_servers_aggregate_is_the_sum_of_what_it_decoded():
    """S = Σ_k ĝ_k after every slot (to rounding), and a removal subtracts the agent's ĝ_k
    exactly: the server and the agents agree on what each contributed."""
    raw = _sound()
    world = build_world(parse_scenario(raw))
    data = world.model.fixed_data
    protocol = build_protocol(world, data, np.random.default_rng(5))
    for slot in range(1, 17):
        holder = (slot - 1) % 4
        if slot == 9:
            protocol.on_request(1, slot)
        round_ = protocol.on_token(holder, slot)
        total = sum(protocol.own.values())
        assert np.allclose(protocol.state.aggregate, total, rtol=1e-12, atol=1e-9)
        assert round_.transfers[1].message.bits > 0
    assert 1 not in protocol.own and protocol.removals() == {1: 10}


def test_an_agents_history_grows_only_where_its_upload_reached_the_server():
    world = build_world(parse_scenario(_sound()))
    protocol = build_protocol(world, world.model.fixed_data, np.random.default_rng(5))
    sent = {}
    upload = protocol.uploader.upload

    def spy(agent, delta, *feedback):  # the entries each particles' upload sent
        out = upload(agent, delta, *feedback)
        sent[agent] = protocol.uploader.kept.copy()
        return out

    protocol.uploader.upload = spy
    protocol.on_token(0, 1)
    first = protocol.histories[0].copy()
    assert np.all(first[~sent[(0, "particles")]] == 0) and np.all(first[sent[(0, "particles")]] > 0)
    protocol.on_token(1, 2)
    protocol.on_token(0, 3)
    second, kept = protocol.histories[0], sent[(0, "particles")]
    assert np.array_equal(second[~kept], first[~kept])
    assert np.all(second[kept] > first[kept])


def test_the_sound_variants_score_upload_carries_no_residual_with_error_feedback():
    """Δg_k is a difference to the server's ĝ_k: error feedback keeps a residual for the
    particles' update only (a residual on the scores counted what was left out twice)."""
    world = build_world(parse_scenario(_sound(error_feedback=True)))
    protocol = build_protocol(world, world.model.fixed_data, np.random.default_rng(5))
    for slot in range(1, 9):
        protocol.on_token((slot - 1) % 4, slot)
        assert np.allclose(protocol.state.aggregate, sum(protocol.own.values()), atol=1e-9)
    kinds = {key[1] for key in protocol.uploader.residual}
    assert kinds == {"particles"}
    assert any(np.any(r != 0) for r in protocol.uploader.residual.values())


def test_the_sound_variant_with_a_large_budget_learns_like_the_uncompressed_one():
    """With 40d (k = 31 of 32 coordinates kept per array, 5-bit values) the held-out accuracy
    after 40 slots is within 3 standard errors of a test set of 113 rows of the uncompressed
    run's (same seed)."""
    raw = _sound(budget="40d")
    raw["scenario"]["iterations"] = 40
    compressed = gs.run(raw, plots=False).metrics.groupby("run").tail(1)["accuracy"].mean()
    raw["protocol"].pop("compression")
    plain = gs.run(raw, plots=False).metrics.groupby("run").tail(1)["accuracy"].mean()
    se = math.sqrt(plain * (1 - plain) / 113)
    assert abs(compressed - plain) <= 3 * se + 1e-12, (compressed, plain)


def test_the_walks_quantized_token_costs_n_b_an_entry_and_lies_on_the_levels():
    raw = _with(architecture="walk", compression={"entry_bits": 6, "a_max": 40})
    raw["scheduler"] = {"kind": "metropolis-hastings", "start": 0}
    res = gs.run(raw, plots=False)
    # on the walk a slot's bits are the hops before it (none before slot 1)
    assert np.allclose(_per_slot(res.metrics[res.metrics.run == 0])[1:], 4 * 32 * 6)
    world = build_world(parse_scenario(raw))
    protocol = build_protocol(world, world.model.fixed_data, np.random.default_rng(2))
    protocol.on_token(0, 1)
    step = 40 / (2**5 - 1)
    levels = protocol.particles / step
    assert np.allclose(levels, np.round(levels)) and np.abs(protocol.particles).max() <= 40


def test_the_quantized_download_and_a_range_sent_with_each_upload_are_counted():
    raw = _with(downlink_compression={"entry_bits": 8, "a_max": "max"})
    raw["protocol"]["compression"].update(budget="3d", a_max="max")
    res = gs.run(raw, plots=False)
    d, particles = 32, 4
    bits = [2 * math.log2(math.comb(d, k)) + particles * 5 * k for k in range(d + 1)]
    k = max(j for j in range(d + 1) if bits[j] <= 3 * d - 32)
    download = particles * d * 8 + 32
    for _, rows in res.metrics.groupby("run"):
        per_slot = _per_slot(rows)
        idle = (rows["holder"].to_numpy() == 1) & (rows["iteration"].to_numpy() > 10)
        assert np.allclose(per_slot[~idle], download + bits[k] + 32)
        assert np.allclose(per_slot[idle], download)


@pytest.mark.parametrize(
    ("protocol", "key", "says"),
    [
        ({"architecture": "walk"}, "protocol.compression.scheme", 'architecture = "server"'),
        ({"downlink_compression": {"a_max": 1}, "variant": "sound"},
         "protocol.downlink_compression", 'variant = "paper"'),
        ({"downlink_compression": {"entry_bits": 8}}, "protocol.downlink_compression.a_max",
         "is required"),
        ({"compression": {"a_max": "most"}}, "protocol.compression.a_max", "max"),
        ({"compression": {"budget": "d", "a_max": "max"}}, "protocol.compression.budget",
         "after the 32 bits"),
    ],
)  # fmt: skip
def test_compression_settings_that_do_not_apply_are_one_line(tmp_path, capsys, protocol, key, says):
    raw = _with(**protocol)
    if protocol.get("variant") == "sound":
        raw["protocol"].pop("fit_iterations")
    line = validate_error(raw, tmp_path, capsys)
    assert key in line and says in line, line


def test_the_sound_variants_compression_on_the_walk_is_one_line(tmp_path, capsys):
    raw = _sound()
    raw["protocol"]["architecture"] = "walk"
    raw["protocol"]["compression"] = {"a_max": 1.0}
    line = validate_error(raw, tmp_path, capsys)
    assert "protocol.compression" in line and 'variant = "paper"' in line, line
