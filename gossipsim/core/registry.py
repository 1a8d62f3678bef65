"""Named registries of the kinds a scenario selects: models and protocols.

A registry maps a kind's name to the object that implements it, written as an import path
``"module.sub:attribute"`` until first use, so that reading and validating a scenario imports only
the kinds it names (and the layers stay apart: :mod:`gossipsim.study.sections` looks kinds up here and
imports no model or protocol module itself). A plug-in of one's own is either registered with one
line (:meth:`Registry.register`) or named by import path in the scenario
(``kind = "mypackage.module:MyProtocol"``), which worker processes import again.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gossipsim.core.moved import holds, moved_attribute, resolve_moved
from gossipsim.errors import ConfigError


def import_object(path: str, key: str) -> Any:
    """The object named by ``module.sub:attribute`` (a plug-in), or a one-line error naming ``key``."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ConfigError(key, f"an import path is written module:attribute (got {path!r})")
    module_name = resolve_moved(module_name)  # a built-in named at its place before issue 31
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        hint = ""
        if exc.name is not None and module_name.split(".")[0] == exc.name.split(".")[0]:
            hint = " (install it, or put the folder that holds it on PYTHONPATH)"
        raise ConfigError(key, f"cannot import {module_name!r}: {exc}{hint}") from None
    except Exception as exc:  # an error inside the plug-in's module
        raise ConfigError(key, f"cannot import {module_name!r}: {exc}") from None
    if holds(module, attribute):
        return getattr(module, attribute)
    moved = moved_attribute(path.partition(":")[0], attribute)  # a name a split moved away
    if moved is not None:
        return moved[1]
    if not hasattr(module, attribute):
        raise ConfigError(key, f"module {module_name!r} has no {attribute!r}")
    return getattr(module, attribute)  # a submodule named as the attribute


class Registry(Mapping[str, Any]):
    """Kinds by name. ``accept(obj)`` says whether ``obj`` is one of this registry's things (a
    subclass of its base, or an instance where ``instantiate``); ``what`` names them in errors. A
    kind must define every method its base requires before it is used
    (:func:`gossipsim.core.contracts.check_complete`: a one-line error naming the key and each missing
    method); an accepted class is instantiated where ``instantiate``."""

    def __init__(
        self,
        noun: str,
        what: str,
        accept: Callable[[Any], bool],
        builtins: Mapping[str, str],
        *,
        instantiate: bool = False,
    ) -> None:
        self.noun = noun
        self.what = what
        self._accept = accept
        self._instantiate = instantiate
        self._entries: dict[str, Any] = dict(builtins)  # import path (str) until first use

    def register(self, name: str, obj: Any) -> Any:
        """Register ``obj`` (or an import path to it) under ``name``: the one line that adds a kind."""
        if not name:
            raise ValueError(f"a {self.what} needs a name")
        self._entries[name] = obj
        return obj

    def __getitem__(self, name: str) -> Any:
        entry = self._entries[name]
        if isinstance(entry, str):
            key = f"{self.what} {name!r}"
            found = self._usable(import_object(entry, key), key, entry)
            if found is None:
                raise TypeError(f"{entry} is not a {self.what}")
            self._entries[name] = entry = found
        return entry

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, name: str, key: str) -> Any:
        """The kind called ``name``: a registered name, or an import path ``module:attribute`` to a
        plug-in; anything else, or a kind that lacks a method it must define, is a one-line error
        naming ``key`` and what is allowed."""
        if name in self._entries:
            found = self[name]
            from gossipsim.core.contracts import check_complete

            check_complete(found, key, f"{self.noun} kind", name)  # one registered from Python
            return found
        if ":" in name:
            found = self._usable(import_object(name, key), key, name)
            if found is None:
                raise ConfigError(key, f"{name!r} is not a gossipsim {self.what}")
            return found
        raise ConfigError(
            key,
            f"unknown {self.noun} {name!r}; allowed: {', '.join(self._entries)}, "
            "or an import path module:Class",
        )

    def _usable(self, obj: Any, key: str, name: str) -> Any:
        """``obj`` ready to use (instantiated where this registry instantiates classes), None when
        it is not one of this registry's things; a one-line error naming ``key`` when it lacks a
        method it must define."""
        if not self._accept(obj):
            return None
        from gossipsim.core.contracts import check_complete

        check_complete(obj, key, f"{self.noun} kind", name)
        return obj() if self._instantiate and isinstance(obj, type) else obj


def _subclass_of(base: str, *, instances: bool = False) -> Callable[[Any], bool]:
    """An ``accept`` function for :class:`Registry`: subclasses of the class at import path
    ``base`` (and its instances, where ``instances``). The base is imported on first use, by name,
    like the kinds themselves."""

    def accept(obj: Any) -> bool:
        cls = import_object(base, "registry")
        return (isinstance(obj, type) and issubclass(obj, cls)) or (
            instances and isinstance(obj, cls)
        )

    return accept


#: ``[model] kind``: :class:`~gossipsim.models.Model` subclasses
MODEL_KINDS = Registry(
    "model",
    "Model subclass",
    _subclass_of("gossipsim.models.base:Model"),
    {
        "beta-bernoulli": "gossipsim.models.conjugate:BetaBernoulliModel",
        "gamma-poisson": "gossipsim.models.conjugate:GammaPoissonModel",
        "normal-normal": "gossipsim.models.conjugate:NormalNormalModel",
        "dirichlet-categorical": "gossipsim.models.conjugate:DirichletCategoricalModel",
        "beta-exponential": "gossipsim.models.beta_exponential:BetaExponential",
        "linear-regression": "gossipsim.models.regression:LinearRegression",
        "logistic-regression": "gossipsim.models.regression:LogisticRegression",
        "bnn": "gossipsim.models.bnn:BayesianNeuralNetwork",
        "gaussian-mixture": "gossipsim.models.mixture:GaussianMixtureModel",
    },
)

#: ``[protocol] kind``: :class:`~gossipsim.protocols.ProtocolKind` subclasses or instances
PROTOCOL_KINDS = Registry(
    "protocol",
    "ProtocolKind (subclass or instance)",
    _subclass_of("gossipsim.protocols.registry:ProtocolKind", instances=True),
    {
        "gfvl": "gossipsim.protocols.gfvl_kind:GFVL",
        "svgd": "gossipsim.protocols.particle_kinds:SVGD",
        "dsvgd": "gossipsim.protocols.particle_kinds:DSVGD",
        "parallel-dsvgd": "gossipsim.protocols.particle_kinds:ParallelDSVGD",
        "fedavg": "gossipsim.protocols.fedavg_kind:FedAvg",
    },
    instantiate=True,
)
