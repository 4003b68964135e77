"""Resolving a scheduler spec at the edge (CLI, scenario files, tuning): a registered name, or a user's
`Scheduler` subclass loaded from a module, with parameters validated against its `ParamSpec`s.

Spec forms::

    minrtt                          a registered scheduler (workbench.schedulers.available())
    mypkg.mymod:MySched             a class in an importable module (sys.path, then the base folder
                                    and the current folder, so a module beside you just works)
    path/to/file.py:MySched         a class in a Python file (relative to the base folder, else cwd)
    path/to/file.py                 the one Scheduler subclass defined in that file

Parameters come as a mapping (scenario files: already typed) or as ``k=v`` strings (command line):
strings are converted to the declared parameter's type (``true/false/yes/no/on/off/1/0`` for
booleans, the matching choice for choice parameters), then checked by `ParamSpec.check` (range,
choices). A `Layer` (a policy wrapped around another scheduler: DRePaS, RBP) takes its inner
scheduler as ``inner=<spec>`` and that scheduler's parameters as ``inner.NAME=VALUE`` (or, in a
scenario file, ``inner_params: {...}``); without ``inner`` the layer's own default is used.

Every problem is a one-line `InputError`: unknown name, missing module or file, import failure,
no such class, not a Scheduler, unknown or malformed parameter, value out of range.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from workbench.errors import InputError
from workbench.schedulers.base import Layer, ParamSpec, Scheduler

__all__ = [
    "coerce_params",
    "describe_scheduler",
    "load_scheduler_class",
    "parse_param_args",
    "resolve_scheduler",
    "scheduler_catalog",
]

_TRUE = frozenset(("true", "yes", "on", "1"))
_FALSE = frozenset(("false", "no", "off", "0"))

# file path -> (mtime_ns, module): loading the same file twice must give the same class objects
_FILE_MODULES: dict[Path, tuple[int, Any]] = {}


def parse_param_args(items: Iterable[str] | None) -> dict[str, str]:
    """``["k=v", ...]`` (repeated ``--param``) -> ``{"k": "v"}``; one-line InputError when malformed."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(None, f"--param {item!r}: expected NAME=VALUE")
        if key in out:
            raise InputError(None, f"--param {key} given twice")
        out[key] = value.strip()
    return out


def _coerce_one(spec: ParamSpec, value: Any) -> Any:
    """A command-line string -> the parameter's type (typed values pass through unchanged)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if spec.choices is not None:
        for c in spec.choices:
            if isinstance(c, bool):
                if (c and text.lower() in _TRUE) or (not c and text.lower() in _FALSE):
                    return c
            elif str(c).lower() == text.lower():
                return c
        return text  # ParamSpec.check names the choices
    if isinstance(spec.default, bool):
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise InputError(None, f"parameter {spec.name}={value!r} is not a boolean (true/false)")
    if isinstance(spec.default, int):
        try:
            return int(text)
        except ValueError:
            raise InputError(None, f"parameter {spec.name}={value!r} is not an integer") from None
    return text  # floats: ParamSpec.check converts and range-checks


def coerce_params(cls: type[Scheduler], params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` converted and validated against ``cls.params`` (unknown names are an error)."""
    specs = {p.name: p for p in cls.params}
    unknown = sorted(set(params) - set(specs))
    if unknown:
        known = ", ".join(sorted(specs)) or "none"
        raise InputError(None, f"scheduler {cls.name!r} has no parameter(s) {', '.join(unknown)}; known: {known}")
    return {k: specs[k].check(_coerce_one(specs[k], v)) for k, v in params.items()}


def _load_file(path: Path) -> Any:
    """Import a Python file as a module (cached by path and modification time)."""
    path = path.resolve()
    mtime = path.stat().st_mtime_ns
    hit = _FILE_MODULES.get(path)
    if hit is not None and hit[0] == mtime:
        return hit[1]
    # a stable, unique module name per file (dataclasses and pickling look modules up by name)
    name = f"workbench_user_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise InputError(path, "cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # the file's own folder is importable while it runs, so it can import its neighbours
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        sys.modules.pop(name, None)
        raise InputError(path, f"importing it failed: {type(e).__name__}: {_first_line(e)}") from None
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(path.parent))
    _FILE_MODULES[path] = (mtime, module)
    return module


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


def _try_import(modname: str, spec: str) -> Any:
    """The module, or None when the module itself is not found (an import error inside it, or of
    something it needs, is the user's problem to see: one line)."""
    try:
        return importlib.import_module(modname)
    except ModuleNotFoundError as e:
        if e.name is None or not (modname == e.name or modname.startswith(e.name + ".")):
            raise InputError(None, f"{spec!r}: importing module {modname!r} failed: {_first_line(e)}") from None
        return None
    except Exception as e:
        raise InputError(None, f"{spec!r}: importing module {modname!r} failed: {type(e).__name__}: "
                               f"{_first_line(e)}") from None


def _import_module(modname: str, spec: str, extra_dirs: list[Path]) -> Any:
    module = _try_import(modname, spec)
    if module is not None:
        return module
    # not on sys.path: try the base folder and the current folder (a console script does not put
    # the current folder on sys.path, `python -m` does; users expect both to work)
    for d in extra_dirs:
        if str(d) in sys.path:
            continue
        sys.path.insert(0, str(d))
        try:
            module = _try_import(modname, spec)
        finally:
            sys.path.remove(str(d))
        if module is not None:
            return module
    # the spec goes in quotes, never as the error's source: "mod:X:" would read as an emoji code
    raise InputError(None, f"{spec!r}: no module named {modname!r} (not on sys.path, not in "
                           f"{', '.join(str(d) for d in extra_dirs)})")


def _scheduler_classes(module: Any) -> list[type[Scheduler]]:
    """Scheduler subclasses defined in ``module`` itself (not imported into it)."""
    return [c for c in vars(module).values()
            if inspect.isclass(c) and issubclass(c, Scheduler) and c not in (Scheduler, Layer)
            and c.__module__ == module.__name__]


def load_scheduler_class(spec: str, *, base_dir: str | Path | None = None) -> type[Scheduler]:
    """The `Scheduler` subclass a spec names: a registered name, ``module:Class``, ``file.py:Class``
    or ``file.py`` (its only Scheduler subclass). Relative files resolve against ``base_dir`` (a
    scenario file's folder), then the current folder."""
    from workbench.schedulers import available, info

    spec = spec.strip()
    if not spec:
        raise InputError(None, "empty scheduler name")
    base = Path(base_dir) if base_dir is not None else None
    target, sep, clsname = spec.rpartition(":")
    if not sep:
        target, clsname = spec, ""
    if not sep and not target.endswith(".py"):
        if target.lower() not in available():
            raise InputError(None, f"unknown scheduler {target!r}; available: {', '.join(available())} "
                                   f"(or give module:Class / file.py:Class)")
        return info(target).cls
    if target.endswith(".py"):
        p = Path(target).expanduser()
        candidates = [p] if p.is_absolute() else ([base / p] if base is not None else []) + [Path.cwd() / p]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            raise InputError(target, "scheduler file not found")
        module = _load_file(found)
        where: str | Path = found
    else:
        if not target:
            raise InputError(None, f"{spec!r}: expected module:Class")
        dirs = ([base.resolve()] if base is not None else []) + [Path.cwd()]
        module = _import_module(target, spec, list(dict.fromkeys(dirs)))
        where = repr(target)
    if not clsname:
        classes = _scheduler_classes(module)
        if len(classes) != 1:
            names = ", ".join(c.__name__ for c in classes) or "none"
            raise InputError(where, f"say which class (file.py:Class): Scheduler subclasses defined here: {names}")
        return classes[0]
    obj = getattr(module, clsname, None)
    if obj is None:
        defined = ", ".join(c.__name__ for c in _scheduler_classes(module)) or "none"
        raise InputError(where, f"has no class {clsname!r} (Scheduler subclasses defined there: {defined})")
    if not (inspect.isclass(obj) and issubclass(obj, Scheduler)):
        raise InputError(where, f"{clsname} is not a subclass of workbench.schedulers.Scheduler")
    return obj


def resolve_scheduler(spec: str | type[Scheduler] | Scheduler,
                      params: Mapping[str, Any] | Iterable[str] | None = None, *,
                      base_dir: str | Path | None = None) -> Scheduler:
    """A ready `Scheduler` instance from a spec (see the module docstring) and its parameters
    (a mapping, or ``k=v`` strings). An instance is returned as it is (no parameters allowed)."""
    if isinstance(spec, Scheduler):
        if params:
            raise InputError(None, "parameters go with a scheduler name or class, not an instance")
        return spec
    if isinstance(params, Mapping):
        raw: dict[str, Any] = dict(params)
    else:
        raw = dict(parse_param_args(params))
    cls = spec if isinstance(spec, type) else load_scheduler_class(spec, base_dir=base_dir)
    if not issubclass(cls, Scheduler):
        raise InputError(None, f"{cls!r} is not a subclass of workbench.schedulers.Scheduler")
    inner = None
    if issubclass(cls, Layer):
        # the wrapped scheduler: inner=<spec>, its parameters as inner.NAME=VALUE (command line) or
        # inner_params: {...} (scenario files); without inner=, the layer's own default inner
        inner_params: dict[str, Any] = dict(raw.pop("inner_params", None) or {})
        for k in [k for k in raw if k.startswith("inner.")]:
            inner_params[k[len("inner."):]] = raw.pop(k)
        inner_spec = raw.pop("inner", None)
        if inner_spec is None and inner_params:
            default = inspect.signature(cls.__init__).parameters.get("inner")
            inner_spec = default.default if default is not None else inspect.Parameter.empty
            if inner_spec is inspect.Parameter.empty:
                raise InputError(None, f"scheduler {cls.name!r} needs inner=<scheduler> for its inner parameters")
        if inner_spec is not None:
            inner = (inner_spec if isinstance(inner_spec, Scheduler)
                     else resolve_scheduler(str(inner_spec), inner_params, base_dir=base_dir))
    values = coerce_params(cls, raw)
    try:
        # inner is set only for a Layer
        return cast("type[Layer]", cls)(inner, **values) if inner is not None else cls(**values)
    except InputError:
        raise
    except TypeError as e:
        hint = " (a layer needs inner=<scheduler>)" if issubclass(cls, Layer) and inner is None else ""
        raise InputError(None, f"cannot create scheduler {cls.__name__}: {_first_line(e)}{hint}") from None
    except Exception as e:
        raise InputError(None, f"cannot create scheduler {cls.__name__}: {type(e).__name__}: {_first_line(e)}") from None


def describe_scheduler(cls: type[Scheduler]) -> dict[str, Any]:
    """What `workbench schedulers` shows about one scheduler class (JSON-ready)."""
    declared = getattr(cls, "queues_beyond_cwnd", False)
    # a property (the answer depends on parameters, or on a layer's inner scheduler) reads as None
    queues = None if isinstance(declared, property) or issubclass(cls, Layer) else bool(declared)
    return {
        "name": cls.name,
        "class": f"{cls.__module__}:{cls.__qualname__}",
        "description": cls.description,
        "source": cls.source,
        "layer": issubclass(cls, Layer),
        "queues_beyond_cwnd": queues,
        "params": [{"name": p.name, "default": p.default, "low": p.low, "high": p.high, "log": p.log,
                    "choices": list(p.choices) if p.choices is not None else None, "doc": p.doc}
                   for p in cls.params],
    }


def scheduler_catalog() -> list[dict[str, Any]]:
    """`describe_scheduler` of every registered scheduler, by name."""
    from workbench.schedulers import available, info

    return [describe_scheduler(info(n).cls) for n in available()]
