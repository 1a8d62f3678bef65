"""The scenario reference is generated from the keys the code checks: the two cannot drift."""

from __future__ import annotations

from pathlib import Path

import pytest

from gossipsim.api import check
from gossipsim.errors import ConfigError
from gossipsim.study import reference
from gossipsim.study.scenario import parse_study
from gossipsim.study.sections import parse_scenario
from gossipsim.study.settings import SCHEMA, MetricsSettings, RunSettings, SchedulerSettings
from tests.helpers import base_scenario

DOC = Path(__file__).resolve().parent.parent / "docs" / "scenarios.md"
API_DOC = DOC.parent / "python-api.md"


def test_every_key_table_of_the_reference_is_the_code_s():
    text = DOC.read_text(encoding="utf-8")
    assert reference.render(text) == text, (
        "docs/scenarios.md is out of date: run `python -m gossipsim.study.reference docs/scenarios.md`"
    )
    assert set(reference.regions(text)) == set(reference.tables()), "a key table is missing"


def test_the_checker_notices_a_stale_table():
    text = DOC.read_text(encoding="utf-8")
    stale = text.replace("| `runs` | 100 |", "| `runs` | 10 |")
    assert stale != text and reference.render(stale) == text


@pytest.mark.parametrize("section", sorted(SCHEMA))
def test_each_documented_key_is_read_and_others_are_refused(section):
    """Every key in the schema is a key the parser accepts, and a key outside it is refused with a
    line naming it (the schema is what the parser reads, not a description beside it)."""
    raw = base_scenario()
    table = (
        raw.setdefault(section, {}) if section != "unlearning" else {"node": 1, "at_iteration": 5}
    )
    if section == "unlearning":
        raw["unlearning"] = [table]
    table["no_such_key"] = 1
    where = "unlearning[0]" if section == "unlearning" else section
    with pytest.raises(ConfigError) as info:
        if section == "topology":  # the kind's parameters are checked when the graph is built
            check(parse_study(raw))
        else:
            parse_scenario(raw)
    assert info.value.key == f"{where}.no_such_key"
    if section == "topology":
        return
    for key in SCHEMA[section]:
        assert key.name in str(info.value), f"{section}.{key.name} missing from the allowed list"


def test_dataclass_defaults_are_the_schema_s():
    parsed = parse_scenario(base_scenario(scenario={"name": "d"}, metrics={"latency_window": 1}))
    assert parsed.run == RunSettings(name="d")
    assert parsed.scheduler == SchedulerSettings()
    assert parsed.metrics == MetricsSettings()


def test_the_notebook_session_of_the_python_api_docs_runs(tmp_path, monkeypatch):
    """docs/python-api.md's notebook session, run as written (in a scratch folder, the shipped
    scenarios reached through a link), and what it shows checked."""
    text = API_DOC.read_text(encoding="utf-8")
    block = text.split("<!-- notebook-example -->\n```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "scenarios").symlink_to(DOC.parent.parent / "scenarios")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block, "docs/python-api.md", "exec"), namespace)
    res, served = namespace["res"], namespace["served"]["removal_latency"]
    assert list(res.runs["topology.nodes"].unique()) == [15, 30]
    assert 0 < served["observed"] < served["total"] == 40  # some runs end before node 0 holds
    assert (
        namespace["own"].graphs[namespace["own"].variants[0]].edges["Valjean", "Myriel"]["weight"]
        == 5
    )
    assert "graph_note" in namespace["redrawn"].theory[namespace["redrawn"].variants[0]]
    assert {"kl_vs_iteration", "latency", "visits"} <= set(namespace["figures"])
    assert (tmp_path / "results" / "ba_notebook" / "plots" / "visits.png").is_file()
