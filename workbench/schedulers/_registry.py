"""Name -> scheduler class registry. Names are resolved here, at the edge (CLI, scenario files,
tuning); the engine only ever sees instances."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.errors import InputError
from workbench.schedulers.base import ParamSpec, Scheduler

__all__ = ["SchedulerInfo", "available", "get", "info", "register"]

_REGISTRY: dict[str, type[Scheduler]] = {}


@dataclass(frozen=True)
class SchedulerInfo:
    name: str
    description: str
    source: str
    params: tuple[ParamSpec, ...]
    cls: type[Scheduler]


def register(cls: type[Scheduler]) -> type[Scheduler]:
    """Class decorator: make ``cls`` available as ``get(cls.name)``."""
    key = cls.name.lower()
    if not key or key in ("base", "layer"):
        raise ValueError(f"{cls.__name__} needs a proper `name`")
    other = _REGISTRY.get(key)
    if other is not None and other is not cls:
        raise ValueError(f"scheduler name {key!r} already registered by {other.__name__}")
    _REGISTRY[key] = cls
    return cls


def get(name: str, **params: Any) -> Scheduler:
    """A new instance of the scheduler called ``name`` with ``params`` (validated)."""
    cls = _REGISTRY.get(name.lower())
    if cls is None:
        raise InputError(None, f"unknown scheduler {name!r}; available: {', '.join(sorted(_REGISTRY))}")
    return cls(**params)


def available() -> list[str]:
    """Registered scheduler names, sorted."""
    return sorted(_REGISTRY)


def info(name: str) -> SchedulerInfo:
    cls = _REGISTRY.get(name.lower())
    if cls is None:
        raise InputError(None, f"unknown scheduler {name!r}")
    return SchedulerInfo(cls.name, cls.description, cls.source, cls.params, cls)
