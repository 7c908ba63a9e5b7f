"""The load-balancing policies, one module each, chosen once by name from this registry.

    from ryu_apps import policies
    policy = policies.make("malb")                 # a Policy (policies/base.py)
    policies.names()                               # every registered name
    policies.title("malb"), policies.policy_class("malb"), policies.takes_option(...)

A module registers its policy class with ``@register("name")`` under a name the
configuration declares (common/config/model.py's POLICIES, read by every part without
importing this package); one class may be registered under several names with different
presets; every module of the package is imported with it, so adding a policy is adding one
module, its name in POLICIES and its unit test (docs/controller.md, "Policies").
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, fields
from typing import Any

from common.config.model import POLICIES
from ryu_apps.policies.base import Backend, Decision, Flow, NoBackend, Options, Policy

__all__ = ["Backend", "Decision", "Flow", "NoBackend", "Options", "Policy", "make", "names",
           "policy_class", "register", "takes_option", "title"]

_NOT_POLICIES = {"base", "rules"}    # the shared interface and the rules several policies use


@dataclass(frozen=True)
class _Entry:
    cls: type[Policy]
    preset: dict[str, Any]
    title: str | None


_REGISTRY: dict[str, _Entry] = {}


def register(name: str, title: str | None = None, **preset):
    """Class decorator: register the policy under `name`, one the configuration declares
    (common/config/model.py's POLICIES; reports call it `title`, default the class's), its
    options preset."""
    def add(cls: type[Policy]) -> type[Policy]:
        if name not in POLICIES:
            raise ValueError(f"policy {name!r} is not declared in common/config/model.py's "
                             f"POLICIES: add it there")
        if name in _REGISTRY:
            raise ValueError(f"policy {name!r} is registered twice")
        cls.Options.from_dict(name, preset)        # a bad preset fails at import
        _REGISTRY[name] = _Entry(cls, dict(preset), title)
        return cls
    return add


def names() -> tuple[str, ...]:
    """The registered policies, in the configuration's order."""
    return tuple(n for n in POLICIES if n in _REGISTRY)


def policy_class(name: str) -> type[Policy]:
    return _entry(name).cls


def takes_option(name: str, option: str) -> bool:
    """Whether the named policy has that option (False for an unknown name)."""
    entry = _REGISTRY.get(name)
    return entry is not None and option in {f.name for f in fields(entry.cls.Options)}


def title(name: str) -> str:
    """How reports name the policy."""
    entry = _REGISTRY.get(name)
    return (entry.title or entry.cls.title or name) if entry else name


def make(name: str, **options) -> Policy:
    """A new policy object; `options` override the name's preset."""
    entry = _entry(name)
    policy = entry.cls(entry.cls.Options.from_dict(name, {**entry.preset, **options}))
    policy.name = name
    return policy


def _entry(name: str) -> _Entry:
    entry = _REGISTRY.get(name)
    if entry is None:
        raise ValueError(f"policy: must be one of {', '.join(names())}, got {name!r}")
    return entry


for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module not in _NOT_POLICIES:
        importlib.import_module(f"{__name__}.{_module}")
