"""Compressed DSVGD uploads to the parameter server (issue 32, item 2, first part: the paper
variant): each slot costs the uncompressed download of the global particles plus the upload's
bits of eqs. 9-11 exactly (none for a forgotten agent's idle visit), the tables are the same with
1 or 2 workers, and bad settings are one line."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import gossipsim as gs
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


def test_compressed_tables_are_the_same_with_one_or_two_workers():
    one = gs.run(BASE, plots=False, workers=1)
    two = gs.run(BASE, plots=False, workers=2)
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


@pytest.mark.parametrize("protocol", [{"variant": "sound"}, {"architecture": "walk"}])
def test_compression_elsewhere_than_the_paper_variant_with_the_server_is_one_line(
    tmp_path, capsys, protocol
):
    raw = _with(**protocol)
    if protocol.get("variant") == "sound":
        for key in ("fit_iterations",):
            raw["protocol"].pop(key)
    line = validate_error(raw, tmp_path, capsys)
    assert "protocol.compression" in line and "so far" in line, line
