"""Public names keep working across the house's move (issue 31, item 4).

``tests/data/moved_names.json`` lists each module of gossipsim 0.1's flat layout (commit c9b15c8,
before the move) with the public names it defined, read from its source. An import path a
scenario file or plug-in wrote then (``module:attribute``) resolves for every one of them, also
where a later split took the name into another module of the package it moved to; a Python
import of an old module gives the module at its new place with a DeprecationWarning naming it.
What ``gs.`` offers is checked by tests/test_layers.py and tests/test_api.py."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import types
import warnings
from pathlib import Path

import pytest

from gossipsim.core.moved import BECAME_PACKAGES, MOVED, resolve_moved
from gossipsim.core.registry import import_object

OLD = json.loads((Path(__file__).parent / "data" / "moved_names.json").read_text())
#: names the move dropped, and why
DROPPED = {"gossipsim.plots:KL_LABEL": "unused by any figure; it was KL.axis (states.divergences)"}


def test_the_list_is_every_old_module():
    assert set(OLD) == set(MOVED) | BECAME_PACKAGES


@pytest.mark.parametrize("old", sorted(OLD))
def test_every_public_name_of_an_old_module_resolves_by_its_old_import_path(old):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        missing = []
        for name in OLD[old]:
            if f"{old}:{name}" in DROPPED:
                continue
            try:
                found = import_object(f"{old}:{name}", "kind")
            except Exception as exc:  # noqa: BLE001 - collected and reported together
                missing.append(f"{name} ({exc})")
                continue
            if isinstance(found, types.ModuleType):  # a submodule that took the old name
                missing.append(f"{name} (the module {found.__name__})")
    assert not missing, f"{old}: {missing}"


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_python_import_of_an_old_module_aliases_it_with_a_deprecation_warning(old):
    new = resolve_moved(old)
    assert importlib.util.find_spec(new) is not None, (old, new)
    sys.modules.pop(old, None)  # an alias imported before is not found again, nor warned of
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    said = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert any(new in text for text in said), said


def test_a_name_split_out_of_its_module_is_found_in_the_package():
    """``gossipsim.fastpath:unavailable`` (the vectorized driver's, now in capability.py)."""
    from gossipsim.execution.vectorized.capability import unavailable

    assert import_object("gossipsim.fastpath:unavailable", "kind") is unavailable


def test_a_submodule_that_took_an_old_name_does_not_hide_it(monkeypatch):
    """Once ``gossipsim.cli.run`` (the module of ``gossipsim run``) is imported, the package has an
    attribute ``run``; an old path to a name ``run`` of the old ``cli`` module would have to
    skip it. Checked with a name the old ``results`` module had and a submodule put in its way."""
    import gossipsim.results as package
    from gossipsim.results.assembly import collect

    monkeypatch.setattr(
        package, "collect", types.ModuleType("gossipsim.results.collect"), raising=False
    )
    assert import_object("gossipsim.results:collect", "kind") is collect


def test_an_unknown_name_of_an_old_module_is_one_line():
    from gossipsim.errors import ConfigError

    with pytest.raises(ConfigError, match="has no 'nothing_here'"):
        import_object("gossipsim.fastpath:nothing_here", "protocol.kind")
