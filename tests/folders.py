"""Shared helpers for the results-folder tests (tests/test_folder_integrity.py, tests/test_fuzz.py):
small sweeps, interrupted folders written part by part, and parts taken apart and put together
again (with a checksum that matches, as a part forged on purpose would have)."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import pandas as pd

import gossipsim as gs
from tests.helpers import base_scenario

MAGIC = b"GOSSIPSIM-PART-2\n"  # the part format, as docs/sweeps.md describes it
DIGEST = 32
LENGTH = struct.Struct("<Q")
TABLES = ("metrics", "runs", "requests", "visits", "failures")


def sweep_raw(runs: int = 6, iterations: int = 60, name: str = "fold") -> dict[str, Any]:
    """Two variants (ring, complete) of a small beta-Bernoulli scenario with a request."""
    raw = base_scenario(
        scenario={"name": name, "seed": 11, "runs": runs, "iterations": iterations},
        topology={"kind": "ring", "nodes": 8},
        unlearning=[{"node": 3, "at_iteration": 30}],
    )
    raw["sweep"] = {"topology.kind": ["ring", "complete"]}
    return raw


def interrupted(study: gs.Study, out: Path, groups: list[tuple[int, list[int]]]) -> None:
    """A results folder of ``study`` as an interrupted sweep leaves it: one part per group
    (variant, runs), written by the event engine's commits."""
    from gossipsim.execution.runner import build_world, run_seed, simulate_run
    from gossipsim.results.store import RunStore

    store = RunStore(out, study, resume=out.exists())
    worlds = {}
    for variant, runs in groups:
        if variant not in worlds:
            worlds[variant] = build_world(study.variants[variant].scenario)
        world = worlds[variant]
        for r in runs:
            store.save(variant, simulate_run(world, r, run_seed(world.scenario.run.seed, r)))
        store.commit()


def parts_of(out: Path) -> list[Path]:
    return sorted((out / ".gossipsim" / "parts").glob("v*.part"))


def split(data: bytes) -> tuple[dict[str, Any], bytes]:
    """A part's header and its array data."""
    assert data.startswith(MAGIC)
    start = len(MAGIC) + DIGEST
    (length,) = LENGTH.unpack_from(data, start)
    head = start + LENGTH.size
    return json.loads(data[head : head + length]), data[head + length :]


def forged(header: dict[str, Any], arrays: bytes, *, length: int | None = None) -> bytes:
    """A part of ``header`` and ``arrays`` whose checksum matches (``length``: the header length
    field, if not the header's own)."""
    text = json.dumps(header).encode()
    body = LENGTH.pack(len(text) if length is None else length) + text + arrays
    return MAGIC + hashlib.sha256(body).digest() + body


def same_tables(a: gs.Results, b: gs.Results) -> None:
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(b, name), getattr(a, name), obj=name)
