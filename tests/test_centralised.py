"""The centralised baseline (``[protocol] kind = "svgd"``, issue 30 item 3): it has no walk. It costs
the one upload of every node's data to the centre, in slot 1 (each node's rows, features and
labels, 64 bits a number, over its uplink, all at once) and nothing afterwards, on both engines
alike; runs.csv has no cover time for it, visits.csv no rows, and the walk's figures leave it out.

The expected bits and times are computed here from the data themselves (the arrays each node
holds, or the factors the scenario writes) and the link settings, not from the code's upload."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.engine.slottables import SlotCosts, StaySlots, stepped_clock
from tests.helpers import to_toml
from tests.test_particle_batches import _raw as particle_raw

#: links whose rates and latencies are not binary fractions, uplink and walk links different
LINKS = {"rate_bps": 3.0e4, "latency_s": 0.013, "uplink_rate_bps": 7.0e3, "uplink_latency_s": 0.021}
COMPUTE = 0.1


def centralised(architecture: str = "walk", model: str = "logistic-regression") -> dict[str, Any]:
    protocol = {"kind": "svgd", "particles": 6, "architecture": architecture}
    if model == "gaussian-mixture":
        protocol["step_size"] = 0.2
    raw = particle_raw(protocol, model)
    raw["links"] = dict(LINKS)
    raw["compute"] = {"seconds_per_iteration": COMPUTE}
    return raw


def expected_upload(res: gs.Results, raw: dict[str, Any]) -> tuple[float, float]:
    """(bits, seconds) of every node's upload: 64 bits a number of its training rows (features,
    bias column included, and labels) or of its mixture factor (weights, means, variance); the
    slowest node's time over the uplink."""
    world = gs.check(gs.parse_study(raw))[0]
    data = world.model.fixed_data
    if raw["model"]["kind"] == "gaussian-mixture":
        numbers = [f.means.shape[0] * (1 + f.means.shape[1]) + 1 for f in data.factors]
    else:
        numbers = [x.size + y.size for x, y in zip(data.X, data.y, strict=True)]
    bits = [64.0 * n for n in numbers]
    links = raw.get("links", {})
    rate = links.get("uplink_rate_bps", links.get("rate_bps", np.inf))
    latency = links.get("uplink_latency_s", links.get("latency_s", 0.0))
    return float(sum(bits)), max(b / rate + latency for b in bits)


def assert_upload_charged(res: gs.Results, raw: dict[str, Any]) -> None:
    """Every slot's bits are the upload's; slot i ends at i·compute + the slowest upload."""
    bits, seconds = expected_upload(res, raw)
    m = res.metrics
    assert bits > 0 and seconds > 0
    np.testing.assert_array_equal(m["bits"], np.full(len(m), bits))
    compute = raw.get("compute", {}).get("seconds_per_iteration", 0.0)
    np.testing.assert_allclose(m["time"], compute * m["iteration"] + seconds, rtol=1e-12)
    runs = res.runs
    np.testing.assert_array_equal(runs["bits"], np.full(len(runs), bits))


@pytest.mark.parametrize(
    ("architecture", "model"),
    [("walk", "logistic-regression"), ("server", "logistic-regression"),
     ("walk", "gaussian-mixture")],
)  # fmt: skip
def test_the_centralised_baseline_costs_the_upload_of_every_node_s_data(architecture, model):
    """The same tables on both engines (three requests, the retrain baseline: no second upload),
    whatever the architecture: the centre is the server."""
    raw = centralised(architecture, model)
    event, vectorized = gs.run(raw, engine="event"), gs.run(raw, engine="vectorized")
    for name in ("runs", "requests", "metrics", "particles", "visits"):
        pd.testing.assert_frame_equal(
            getattr(vectorized, name), getattr(event, name), check_exact=True, obj=name
        )
    assert_upload_charged(vectorized, raw)
    assert vectorized.runs["cover_iteration"].isna().all()
    assert vectorized.runs["cover_moves"].isna().all()
    assert vectorized.visits.empty
    # the requests arrive at the start of their slot: after the upload
    _, seconds = expected_upload(vectorized, raw)
    np.testing.assert_allclose(
        vectorized.requests["request_time"],
        COMPUTE * (vectorized.requests["request_iteration"] - 1) + seconds,
        rtol=1e-12,
    )


def test_without_links_the_upload_takes_no_time():
    raw = centralised()
    del raw["links"]
    res = gs.run(raw, engine="event")
    bits, seconds = expected_upload(res, raw)
    assert seconds == 0.0
    np.testing.assert_array_equal(res.metrics["bits"], bits)
    np.testing.assert_allclose(res.metrics["time"], COMPUTE * res.metrics["iteration"], rtol=1e-12)


@pytest.fixture(scope="module")
def beside_dsvgd() -> gs.Results:
    """Centralised SVGD beside DSVGD on the same walk."""
    raw = centralised()
    raw["sweep"] = {"protocol.kind": ["svgd", "dsvgd"]}
    return gs.run(raw)


def test_a_sweep_keeps_the_walk_s_tables_for_the_walking_variant(beside_dsvgd):
    """DSVGD keeps its cover time, visits and hop bits."""
    res = beside_dsvgd
    walking = res.runs[res.runs["variant"] == "dsvgd"]
    assert walking["cover_iteration"].notna().all()
    assert set(res.visits["variant"].astype(str)) == {"dsvgd"}
    assert res.visits["visits"].sum() == walking["iterations"].sum()
    summary = res.summary()["variants"]
    assert summary["svgd"]["cover"]["note"].startswith("no walk")
    assert summary["dsvgd"]["cover"]["observed"] == len(walking)


def test_the_walk_s_figures_leave_the_centralised_variant_out(beside_dsvgd):
    figures = beside_dsvgd.plot(which=["cover_time", "visits"])
    cover = figures["cover_time"]
    (ax,) = [a for a in cover.axes if a.get_ylabel()]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["dsvgd"]
    titles = [a.get_title() for a in figures["visits"].axes if a.get_title()]
    assert len(titles) == 1 and titles[0].startswith("dsvgd")


def test_a_first_round_is_charged_in_slot_1_only():
    """The stepped clock of a centralised run, against the event engine's arithmetic written out;
    drawn stays give the same numbers as products."""
    costs = SlotCosts(0.1, first_round_seconds=0.37, first_round_bits=1000.0)
    holders = np.array([[0, 1, 1, 2, 0]])
    end, start, sent = stepped_clock(costs, holders)
    s, expect = 0.0, []
    for slot in range(5):
        t = s + 0.1
        if slot == 0:
            t = t + 0.37
        expect.append(t)
        s = t  # no hop: nothing moves
    np.testing.assert_array_equal(end[0], expect)
    np.testing.assert_array_equal(start[0], [0.0, *expect[:-1]])
    np.testing.assert_array_equal(sent[0], np.full(5, 1000.0))
    odd = SlotCosts(0.1, first_round_seconds=0.37, first_round_bits=0.3)  # not a whole number
    np.testing.assert_array_equal(stepped_clock(odd, holders)[2][0], np.full(5, 0.3))
    stays = StaySlots(rows=np.array([0]), starts=np.array([1]), holders=np.array([0]),
                      hops=np.array([0]), columns=5, costs=costs,
                      per_run_visits=np.array([[5]]))  # fmt: skip
    slots, rows = np.arange(1, 6), np.zeros(5, dtype=np.int64)
    np.testing.assert_allclose(stays.end_time(rows, slots), expect, rtol=1e-15)
    np.testing.assert_allclose(stays.start_time(rows, slots), [0.0, *expect[:-1]], rtol=1e-15)
    np.testing.assert_array_equal(stays.bits(rows, slots), np.full(5, 1000.0))
    with pytest.raises(ValueError, match="only round"):
        SlotCosts(0.1, round_seconds=1.0, first_round_seconds=0.37)


def test_the_cli_says_the_centralised_variant_has_no_walk(tmp_path, capsys):
    from gossipsim.cli.parser import main

    raw = centralised()
    del raw["metrics"]["particles"], raw["metrics"]["particle_runs"]
    path = tmp_path / "c.toml"
    path.write_text(to_toml(raw), encoding="utf-8")
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "  pb: no walk (centralised); converged in" in out
