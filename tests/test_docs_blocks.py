"""Every code block of the README and docs/ runs in the test suite (issue 20, item 18).

Each fenced block has a language:

- ``python``: the blocks of one page run in order in one namespace (a session), in a scratch folder
  that links the shipped ``scenarios/``, ``topologies/`` and ``examples/``; ``gs.run`` is held to a
  few runs per variant (what is checked is that the code runs as written, not its numbers);
- ``toml``: a whole scenario (it has a ``[scenario]`` table) is validated as ``gossipsim validate``
  does, as a file of ``scenarios/``; a fragment is merged, section by section, into the page's
  last whole scenario before it and validated so;
- ``sh``: each ``gossipsim`` command line runs (a ``run`` held to a few runs), each ``make`` line is
  a target of the Makefile (``make -n``), each ``python tools/X.py`` line is parsed by the tool's
  ``build_parser()``; a synopsis (marked ``<!-- docs-test: synopsis -->``)
  names exactly the options each command has;
- ``text``: output shown as printed, or a diagram: nothing to run.

A block marked ``<!-- docs-test: slow -->`` (a Dask cluster) runs under ``make test-slow``. Blocks
checked elsewhere say where: ``<!-- notebook-example -->`` (tests/test_docs.py runs it and checks
what it shows) and ``<!-- from examples/X.py -->`` (tests/test_extending.py: a verbatim piece of the
example module the tests run).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

import gossipsim
import gossipsim as gs
from gossipsim import api
from gossipsim.cli.parser import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(
    r"(?:^<!-- (?P<mark>[^>]*?) -->\n)?^```(?P<lang>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$",
    re.S | re.M,
)
RUNS = 4  # runs per variant of every gs.run and `gossipsim run` of the docs
LANGUAGES = {"python", "toml", "sh", "text"}


def blocks(page: Path) -> list[tuple[int, str, str, str]]:
    """(line, language, marker, body) of every fenced block of ``page``."""
    text = page.read_text(encoding="utf-8")
    return [
        (text[: m.start("lang")].count("\n") + 1, m["lang"].strip(), m["mark"] or "", m["body"])
        for m in BLOCK.finditer(text)
    ]


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_block_says_its_language(page):
    bad = [line for line, lang, _, _ in blocks(page) if lang not in LANGUAGES]
    assert bad == [], f"{_name(page)}: blocks without a known language at lines {bad}"


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A scratch folder with the shipped inputs linked, as the current folder; examples/ on the
    import path (as PYTHONPATH=examples does); gs.run held to RUNS runs per variant."""
    for name in ("scenarios", "topologies", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    real = api.run

    def few_runs(scenario: Any, *args: Any, runs: int | None = None, **kwargs: Any) -> Any:
        study = api._as_study(scenario)
        if kwargs.get("overrides"):
            study = study.replace(kwargs.pop("overrides"))
        most = max(v.scenario.run.runs for v in study.variants)
        return real(study, *args, runs=min(runs or most, RUNS), **kwargs)

    monkeypatch.setattr(gossipsim, "run", few_runs)
    return tmp_path


def _python_blocks(page: Path, slow: bool) -> list[tuple[int, str]]:
    return [
        (line, body)
        for line, lang, mark, body in blocks(page)
        if lang == "python"
        and mark != "notebook-example"
        and not mark.startswith("from examples/")
        and (mark == "docs-test: slow") == slow
    ]


PYTHON_PAGES = [
    pytest.param(page, slow, id=f"{_name(page)}{' (slow)' if slow else ''}",
                 marks=[pytest.mark.slow] if slow else [])
    for page in PAGES
    for slow in (False, True)
    if _python_blocks(page, slow)
]  # fmt: skip


@pytest.mark.parametrize(("page", "slow"), PYTHON_PAGES)
def test_the_python_blocks_of_each_page_run_as_a_session(scratch, page, slow):
    namespace: dict[str, Any] = {"__name__": "__main__"}  # as a script run by python
    for line, body in _python_blocks(page, slow):
        code = compile(body, f"{_name(page)}:{line}", "exec")
        exec(code, namespace)  # a failure names the page and line of the block


def _merged(base: dict[str, Any], fragment: dict[str, Any]) -> dict[str, Any]:
    """The scenario with the fragment's sections in place of its own; a fragment that sets the
    topology leaves out the scenario's sweep and requests (they name its graph's sizes and
    nodes)."""
    out = copy.deepcopy(base)
    if "topology" in fragment:
        out.pop("sweep", None)
        out.pop("unlearning", None)
    out.update(copy.deepcopy(fragment))
    return out


TOML_PAGES = [p for p in PAGES if any(lang == "toml" for _, lang, _, _ in blocks(p))]


@pytest.mark.parametrize("page", TOML_PAGES, ids=_name)
def test_the_toml_blocks_of_each_page_are_valid_scenarios(scratch, page):
    whole: dict[str, Any] | None = None
    for line, lang, _, body in blocks(page):
        if lang != "toml":
            continue
        raw = tomllib.loads(body)
        if "scenario" in raw:
            whole = raw
        else:
            assert whole is not None, f"{_name(page)}:{line}: a fragment before any scenario"
            raw = _merged(whole, raw)
        raw["scenario"] = {**raw["scenario"], "runs": 1}
        try:
            gs.check(gs.parse_study(raw, path=str(scratch / "scenarios" / "doc.toml")))
        except gs.ConfigError as exc:
            pytest.fail(f"{_name(page)}:{line}: {exc}")


def _command_lines(body: str) -> list[str]:
    lines = []
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith("$ "):
            line = line[2:]
        if not line:
            continue
        lines.append(line)
    return lines


SH_BLOCKS = [
    pytest.param(page, line, mark, body, id=f"{_name(page)}:{line}",
                 marks=[pytest.mark.slow] if mark == "docs-test: slow" else [])
    for page in PAGES
    for line, lang, mark, body in blocks(page)
    if lang == "sh"
]  # fmt: skip


@pytest.mark.parametrize(("page", "line", "mark", "body"), SH_BLOCKS)
def test_the_shell_blocks_run(scratch, capsys, page, line, mark, body):
    if mark == "docs-test: synopsis":
        _check_synopsis(body)
        return
    for command in _command_lines(body):
        words = shlex.split(command, comments=True)
        env = {}
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        where = f"{_name(page)}:{line}: {command}"
        if words[0] == "make":
            done = subprocess.run(["make", "-n", *words[1:]], cwd=ROOT, capture_output=True)
            assert done.returncode == 0, where
            continue
        if words[0] == "python" and words[1].startswith("tools/"):
            _check_tool_line(words[1], words[2:], where)
            continue
        assert words[0] == "gossipsim", f"{where}: only gossipsim, make and tool commands are run"
        args = words[1:]
        if args[0] == "run" and "--runs" not in args:
            args += ["--runs", str(RUNS), "--no-plots"]
        if env.get("PYTHONPATH") == "examples":
            sys.path.insert(0, str(ROOT / "examples"))
        code = main(args)
        captured = capsys.readouterr()
        assert code == 0, f"{where}\n{captured.err}"


def _check_tool_line(tool: str, args: list[str], where: str) -> None:
    """A ``python tools/X.py ...`` line is parsed by the tool's own ``build_parser()`` (what it
    does takes minutes, e.g. the gallery's studies: tests/test_gallery_tool.py runs it small)."""
    path = ROOT / tool
    spec = importlib.util.spec_from_file_location(f"docs_tool_{path.stem}", path)
    assert spec is not None and spec.loader is not None, where
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    assert hasattr(module, "build_parser"), f"{where}: {tool} has no build_parser()"
    try:
        module.build_parser().parse_args(args)
    except SystemExit as exc:
        pytest.fail(f"{where}: {tool} refuses these arguments (exit {exc.code})")


def _check_synopsis(body: str) -> None:
    """Each command of the synopsis lists exactly the options its parser has (and the
    positional arguments it takes, in capitals)."""
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    text = re.sub(r"\n\s+(?=\[|--)", " ", body)  # continuation lines joined
    for line in text.splitlines():
        words = line.split()
        assert words[0] == "gossipsim", line
        sub = commands.choices[words[1]]
        shown = set(re.findall(r"--[a-z][a-z-]*", line))
        options = {
            o
            for a in sub._actions
            for o in a.option_strings
            if o.startswith("--") and o != "--help"
        }
        hidden = (
            {"--param", "--path", "--scheduler", "--seed", "--nodes"} if "[...]" in line else set()
        )
        assert shown == options - hidden, (words[1], sorted(shown ^ (options - hidden)))


@pytest.mark.slow
def test_a_script_without_the_main_guard_gets_one_line_about_it(tmp_path):
    """docs/sweeps.md: a script that starts a local Dask cluster without the guard used to print
    hundreds of lines of tracebacks ending in "Nanny failed to start"; it now ends in one
    ConfigError line that says what to do, and the workers it started print nothing."""
    script = tmp_path / "sweep.py"
    script.write_text(
        "import gossipsim as gs\n"
        f"gs.run({str(ROOT / 'scenarios' / 'fig3_beta_bernoulli.toml')!r}, runs=2, "
        "cluster='local:2')\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("gossipsim.errors.ConfigError: --cluster:") and "__main__" in last
    assert done.stderr.count("Traceback") == 1, done.stderr


NOTEBOOKS = sorted((ROOT / "examples").glob("*.ipynb"))


def _code_cells(notebook: Path) -> list[str]:
    import json

    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_name)
def test_the_example_notebooks_run(scratch, notebook):
    """The code cells of each shipped notebook in order, as a kernel would run them (gs.run held to
    a few runs); what a figure cell leaves as its value is something a notebook shows."""
    from gossipsim.figures.canvas import Figures

    namespace: dict[str, Any] = {"__name__": "__main__"}
    for i, cell in enumerate(_code_cells(notebook)):
        exec(compile(cell, f"{_name(notebook)}: cell {i}", "exec"), namespace)
    shown = [v for v in namespace.values() if isinstance(v, Figures)]
    assert shown and all(f._repr_html_().count("<img") == len(f) for f in shown)


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_name)
def test_the_example_notebooks_run_in_a_kernel(tmp_path, notebook):
    """In a Jupyter kernel (nbclient and ipykernel, not dependencies of gossipsim: skipped without
    them), from the repository's root: no cell fails and the figures come out as images."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    for name in ("scenarios", "topologies", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    nb = nbformat.read(notebook, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = " ".join(o.get("data", {}).get("text/html", "") for o in outputs)
    assert html.count('src="data:image/png') >= 2
    assert any("image/png" in o.get("data", {}) for o in outputs)
    warned = [o.text for o in outputs if o.output_type == "stream" and "Warning" in o.text]
    assert warned == []
