"""MPTCP schedulers as plug-ins: a small base class, a registry, one private module per scheduler.

>>> from workbench.schedulers import get, available
>>> sched = get("minrtt", opportunistic=False)

Adding one = a new module with a ``@register``-ed `Scheduler` subclass + an import line below.
A user can also pass their own instance to ``run_replay`` without registering it.
"""

from __future__ import annotations

from workbench.schedulers import (  # noqa: F401  (importing a module registers its scheduler)
    _blest,
    _daps,
    _drepas,
    _ecf,
    _minrtt,
    _otias,
    _rbp,
    _redundant,
    _roundrobin,
    _stms,
    _sttf,
    _upstream,
)
from workbench.schedulers._minrtt import MinRTT, MinRTTNoOR
from workbench.schedulers._redundant import Redundant
from workbench.schedulers._registry import SchedulerInfo, available, get, info, register
from workbench.schedulers._roundrobin import RoundRobin
from workbench.schedulers._upstream import UpstreamDefault
from workbench.schedulers.base import (
    ConnOverride,
    ConnView,
    Decision,
    Layer,
    ParamSpec,
    Scheduler,
    SubflowView,
    clip_to_window,
    is_available,
    is_def_unavailable,
)

__all__ = [
    "ConnOverride",
    "ConnView",
    "Decision",
    "Layer",
    "MinRTT",
    "MinRTTNoOR",
    "ParamSpec",
    "Redundant",
    "RoundRobin",
    "Scheduler",
    "SchedulerInfo",
    "SubflowView",
    "UpstreamDefault",
    "available",
    "clip_to_window",
    "get",
    "info",
    "is_available",
    "is_def_unavailable",
    "register",
]
