"""The fingerprint of the code that makes a sweep's numbers, so that ``--resume`` never mixes runs
of two versions of it.

:func:`code_fingerprint` records gossipsim's version, the hash of each of its own source files, the
versions of Python and of the libraries the runs compute with (NumPy, SciPy, NetworkX, SimPy), and
the hash of the source file of every plug-in the scenario names (``[model]``, ``[protocol]``,
``[scheduler]`` or ``[links]`` ``kind = "module:Class"``, or a kind registered from Python whose
class is not gossipsim's own). :func:`code_changes` says, in a few words each, what differs between
two fingerprints.

gossipsim's own source is part of the fingerprint, not only its version: in a development
install (``pip install -e``) the version stays the same while the code is edited, and an edit
between a kill and ``--resume`` would otherwise mix runs of both codes unseen. Any edit to a
gossipsim file counts, even one that cannot change a number (a figure's colour): the refusal
names the files, and ``--allow-code-change`` resumes anyway.

A plug-in is fingerprinted by the bytes of the file of the module that defines it; the other
modules it imports are not (keep what decides a plug-in's numbers in its module, or start a
new results folder after editing them).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import inspect
import platform
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gossipsim.core.version import __version__

if TYPE_CHECKING:  # the source's hashes are read without the scenario's machinery (gossipsim plot)
    from gossipsim.study.scenario import Study

#: the libraries whose versions are recorded (their numbers are the runs' numbers)
LIBRARIES = ("numpy", "scipy", "networkx", "simpy")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def source_hashes() -> dict[str, str]:
    """The hash of each ``.py`` file of the gossipsim package, by its path inside the package
    (``gossipsim/results/store.py``); read once per process."""
    root = Path(__file__).resolve().parents[1]  # the gossipsim package (this is results/)
    out = {}
    for path in sorted(root.rglob("*.py")):
        out[path.relative_to(root.parent).as_posix()] = _digest(path.read_bytes())
    return out


def _library_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def plugin_hashes(study: Study) -> dict[str, dict[str, str | None]]:
    """Each plug-in kind the study's variants use (``model.kind``, ``protocol.kind``,
    ``scheduler.kind``, a channel's ``links.kind``), by ``key=kind``: the file that defines it and
    the hash of its bytes."""
    out: dict[str, dict[str, str | None]] = {}
    for variant in study.variants:
        sc = variant.scenario
        for key, kind in (
            ("model.kind", sc.model.kind),
            ("protocol.kind", sc.protocol.kind),
            ("scheduler.kind", sc.scheduler.kind),
            ("links.kind", sc.links.kind),
        ):
            if kind is None:  # the built-in links
                continue
            name = f"{key}={kind}"
            if name in out:
                continue
            obj = _kind_object(key, kind)
            if obj is None:
                continue
            entry = _fingerprint_of(obj)
            if entry is not None:
                out[name] = entry
    return out


def _kind_object(key: str, kind: str) -> Any:
    """The class (or instance) a kind names, once the scenario has been checked (it is imported
    by then); None where it cannot be found."""
    if ":" in kind:
        module_name, _, attribute = kind.partition(":")
        module = sys.modules.get(module_name)
        if module is None:
            try:
                module = importlib.import_module(module_name)
            except Exception:  # checked when the scenario was read: not expected
                return None
        return getattr(module, attribute, None)
    try:
        if key == "model.kind":
            from gossipsim.core.registry import MODEL_KINDS

            return MODEL_KINDS[kind]
        if key == "protocol.kind":
            from gossipsim.core.registry import PROTOCOL_KINDS

            return PROTOCOL_KINDS[kind]
        from gossipsim.scheduling import SCHEDULERS

        return SCHEDULERS.get(kind)
    except Exception:  # an unknown kind is refused when the scenario is read
        return None


def _fingerprint_of(obj: Any) -> dict[str, str | None] | None:
    """The file and hash of the module defining ``obj`` (a class, or an instance of one); None for
    gossipsim's own kinds (its source is fingerprinted as a whole)."""
    cls = obj if isinstance(obj, type) else type(obj)
    module_name = getattr(cls, "__module__", "") or ""
    if module_name == "gossipsim" or module_name.startswith("gossipsim."):
        return None
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if path is not None:
        try:
            return {"file": str(path), "sha256": _digest(Path(path).read_bytes())}
        except OSError:
            pass
    try:  # a class defined in a notebook or an interactive session: its own source
        return {"file": None, "sha256": _digest(inspect.getsource(cls).encode())}
    except (OSError, TypeError):
        return {"file": None, "sha256": None}


def code_fingerprint(study: Study) -> dict[str, Any]:
    """What ``study.json`` records of the code that makes the runs' numbers (module doc)."""
    return {
        "gossipsim": __version__,
        "python": platform.python_version(),
        "libraries": _library_versions(),
        "source": source_hashes(),
        "plugins": plugin_hashes(study),
    }


def code_changes(before: Any, now: dict[str, Any]) -> list[str]:
    """What differs between the fingerprint ``before`` (as a record holds it; None or anything
    else for a record without one) and ``now``, a few words each; empty if nothing."""
    if not isinstance(before, dict):
        return ["the record does not say which code made its runs (an older gossipsim made it)"]
    changes = []
    if before.get("gossipsim") != now["gossipsim"]:
        changes.append(f"gossipsim {before.get('gossipsim')} -> {now['gossipsim']}")
    if before.get("python") != now["python"]:
        changes.append(f"Python {before.get('python')} -> {now['python']}")
    libraries = _table(before.get("libraries"))
    for name, version in now["libraries"].items():
        if libraries.get(name) != version:
            changes.append(f"{name} {libraries.get(name)} -> {version}")
    source = _table(before.get("source"))
    edited = sorted(
        name
        for name in set(source) | set(now["source"])
        if source.get(name) != now["source"].get(name)
    )
    if edited:
        shown = ", ".join(edited[:3]) + (f" and {len(edited) - 3} more" if len(edited) > 3 else "")
        changes.append(f"gossipsim's source ({shown})")
    plugins = _table(before.get("plugins"))
    for name in sorted(set(plugins) | set(now["plugins"])):
        old, new = plugins.get(name), now["plugins"].get(name)
        if _table(old).get("sha256") == _table(new).get("sha256") and (old is None) == (
            new is None
        ):
            continue  # the same bytes (wherever the file now is)
        key, _, kind = name.partition("=")
        where = _table(new or old).get("file")
        what = f"the plug-in {kind!r} ({key}" + (f", {where})" if where else ")")
        if new is None:
            changes.append(f"{what} is no longer used")
        elif old is None:
            changes.append(f"{what} is new")
        elif _table(new).get("sha256") is None:
            changes.append(f"{what} cannot be read to compare")
        else:
            changes.append(f"{what} has been edited")
    return changes


def _table(x: Any) -> dict[str, Any]:
    """``x`` if it is a dict (a record's entry), else an empty one."""
    return x if isinstance(x, dict) else {}
