"""Start-up that costs nothing (issue 31, item 5): a command imports only what it uses. ``validate``,
``status`` and ``plot`` import no engine (neither the event engine's runner and token nor the
vectorized engine's kernels, nor SimPy), ``validate`` no pandas, and no command's summary imports
``scipy.stats`` (the Kaplan–Meier estimates are computed in closed form: tests/test_censoring.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "fig3_beta_bernoulli.toml"

ENGINE = (
    "simpy",
    "gossipsim.engine.token",
    "gossipsim.execution.runner",
    "gossipsim.execution.vectorized.driver",
    "gossipsim.execution.vectorized.first_visits",
    "gossipsim.execution.vectorized.steps",
)

CHILD = """
import json, sys
from gossipsim.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _imports(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *args], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert last["code"] == 0, done.stderr[-2000:]
    return set(last["modules"])


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("startup") / "fig3"
    modules = _imports(
        "run", str(SCENARIO), "--runs", "20", "--engine", "vectorized", "--no-plots",
        "--progress", "off", "--out", str(out),
    )  # fmt: skip
    assert "scipy.stats" not in modules  # the summary's estimates (three walks, star censored)
    assert "gossipsim.execution.runner" not in modules  # the event engine is not what ran
    return out


@pytest.mark.parametrize("command", ["validate", "status", "plot"])
def test_validate_status_and_plot_import_no_engine(folder, command):
    args = [str(SCENARIO)] if command == "validate" else [str(folder)]
    if command == "plot":
        args += ["--figure", "kl_vs_iteration"]
    modules = _imports(command, *args)
    assert not modules & set(ENGINE), sorted(modules & set(ENGINE))
    assert "scipy.stats" not in modules
    if command == "validate":  # pandas is a quarter of a second of validate's start-up (measured)
        assert "pandas" not in modules, "validate imported pandas"
