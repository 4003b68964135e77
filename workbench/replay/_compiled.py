"""Whether the engine core runs compiled (mypyc, see setup.py), and a guard against a compiled module
that is older than its source: Python imports the compiled one first, so an edited .py would be
silently ignored until the project is rebuilt."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

__all__ = ["COMPILED_MODULES", "check_compiled_engine", "engine_is_compiled", "stale_compiled",
           "use_python_engine"]

COMPILED_MODULES = ("events", "link", "tcp", "mptcp")


class _SourceFirst(importlib.abc.MetaPathFinder):
    """Finds the engine modules' .py files before their compiled versions."""

    def find_spec(self, fullname: str, path: object = None, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != "workbench.replay" or name not in COMPILED_MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, Path(__file__).with_name(f"{name}.py"))


def use_python_engine() -> None:
    """Run the engine core as Python even where it is compiled (WORKBENCH_PURE_PYTHON=1 does this
    at import): for debugging and profiling in Python, and to check both give the same results.
    Call it before `workbench.replay`'s modules are imported."""
    if not any(isinstance(f, _SourceFirst) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceFirst())


def _origin(name: str) -> Path | None:
    spec = importlib.util.find_spec(f"workbench.replay.{name}")
    return Path(spec.origin) if spec is not None and spec.origin else None


def engine_is_compiled() -> bool:
    """Whether the engine modules that are loaded (or would be) are the compiled ones."""
    for n in COMPILED_MODULES:
        mod = sys.modules.get(f"workbench.replay.{n}")
        origin = Path(mod.__file__) if mod is not None and mod.__file__ else _origin(n)
        if origin is None or origin.suffix == ".py":
            return False
    return True


def stale_compiled(origin: Path) -> Path | None:
    """The .py source beside compiled module `origin` when it is newer than it, else None."""
    if origin.suffix == ".py":
        return None
    source = origin.with_name(origin.name.split(".", 1)[0] + ".py")
    if source.is_file() and source.stat().st_mtime > origin.stat().st_mtime:
        return source
    return None


def check_compiled_engine() -> None:
    """Raise ImportError when a compiled engine module is older than its .py beside it."""
    if any(isinstance(f, _SourceFirst) for f in sys.meta_path):
        return  # the sources are what will run
    for name in COMPILED_MODULES:
        origin = _origin(name)
        source = stale_compiled(origin) if origin is not None else None
        if origin is not None and source is not None:
            raise ImportError(
                f"{origin.name} is older than {source}: the compiled replay engine is stale. Rebuild it "
                "with `bash scripts/setup.sh` (or `pip install -e .`), or delete the .so files in "
                f"{source.parent} to run it as Python.")
