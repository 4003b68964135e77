"""Backends run an `Experiment` (`workbench.experiment`) and return a `Run`:

* ``model``: the discrete-event replay engine (`workbench.replay`);
* ``kernel``: the real Linux MPTCP stack in network namespaces (needs root and an MPTCP kernel).

>>> from workbench.backends import get_backend
>>> run = get_backend("model").run(experiment)
>>> run.events  # PacketEvents, the schema captures use

Strings are resolved here, at the edge; everything inside takes `Backend` instances.
"""

from __future__ import annotations

from typing import Any

from workbench.backends._base import CAPABILITIES, Backend, Run, UnsupportedExperiment, required_capabilities
from workbench.backends._model import ModelBackend
from workbench.errors import InputError

__all__ = ["CAPABILITIES", "Backend", "ModelBackend", "Run", "UnsupportedExperiment", "available_backends",
           "get_backend", "required_capabilities"]


def available_backends() -> list[str]:
    return ["kernel", "model"]


def get_backend(backend: str | Backend, **kw: Any) -> Backend:
    """A backend instance from its name (``model``, ``kernel``) or the instance itself."""
    if isinstance(backend, Backend):
        return backend
    if backend == "model":
        return ModelBackend(**kw)
    if backend == "kernel":
        try:
            from workbench.backends._kernel import KernelBackend
        except ImportError as e:
            raise InputError(None, f"the kernel backend is not available ({e})") from None
        return KernelBackend(**kw)
    raise InputError(None, f"unknown backend {backend!r}; known: {', '.join(available_backends())}")
