"""What one fuzz case runs, inside the isolated worker: the full path a user's command takes for
that kind of input, and the outcome it came to.

Outcomes: "ok" (result, no warning), "warning" (result with warnings), "error" (a clean
`InputError`: one line naming the input), "crash" (any other exception, or an InputError that is
not one clean line), "memory" (MemoryError). The runner adds "hang" and deaths of the worker.
"""

from __future__ import annotations

import traceback
from pathlib import Path

__all__ = ["OUTCOMES", "TARGETS", "run_target"]

OUTCOMES = ("ok", "warning", "error", "crash", "hang", "memory")


def _capture(path: Path) -> bool:
    """read -> streams -> connections -> PacketEvents -> metrics (what `workbench inspect` does)."""
    from workbench.capture import load
    from workbench.inspect import inspect_loaded

    cap = load(path, use_cache=False)
    report = inspect_loaded(cap)
    return bool(cap.warnings or report.get("warnings"))


def _csv(path: Path) -> bool:
    from workbench.inspect import inspect_capture

    report = inspect_capture(path)
    return bool(report.get("warnings"))


def _rate(path: Path) -> bool:
    from workbench.timeline import Timelines
    from workbench.timeline.convert import to_path_configs
    from workbench.timeline.importers.rate_csv import read_rate_csv

    tl = read_rate_csv(path, kind="capacity")
    to_path_configs(Timelines([tl]), duration_ns=10**9, default_owd_ns=10_000_000)
    return False


def _mahimahi(path: Path) -> bool:
    from workbench.timeline import Timelines
    from workbench.timeline.convert import to_path_configs
    from workbench.timeline.importers.mahimahi import read_mahimahi

    tl = read_mahimahi(path)
    to_path_configs(Timelines([tl]), duration_ns=10**9, default_owd_ns=10_000_000)
    return False


def _scenario(path: Path) -> bool:
    from workbench.scenario import load_scenario

    load_scenario(path)
    return False


def _upload(path: Path) -> bool:
    """The page's path: the uploaded bytes go through `UploadStore` (the name the browser sent is in
    the case file's first line), then the capture is inspected."""
    from workbench.inspect import inspect_capture
    from workbench.ui.uploads import UploadStore

    raw = path.read_bytes()
    name, _, data = raw.partition(b"\n--\n")
    store = UploadStore(max_bytes=1 << 20, parent=str(path.parent))
    try:
        up = store.accept([(name.decode("utf-8", "replace"), data)])
        for f in up.files:
            if Path(f).resolve().parent != store.root.resolve():
                raise AssertionError(f"upload escaped its folder: {f}")
        report = inspect_capture(up.files[0])
        return bool(report.get("warnings"))
    finally:
        store.close()


def _selftest(path: Path) -> bool:
    """A target that does what its file says, so tests can check the harness sees every outcome."""
    import os
    import time

    from workbench.errors import InputError

    what = path.read_text().strip()
    if what == "crash":
        raise TypeError("planted crash")
    if what == "error":
        raise InputError(path, "planted clean error")
    if what == "unclean":
        raise InputError(None, "planted error that names no file")
    if what == "hang":
        time.sleep(3600)
    if what == "memory":
        return len(bytearray(1 << 40)) > 0  # over any RLIMIT_AS the runner sets
    if what == "abort":
        os.abort()
    return what == "warning"


TARGETS = {"_selftest": _selftest, "capture": _capture, "csv": _csv, "rate": _rate, "mahimahi": _mahimahi, "scenario": _scenario,
           "upload": _upload}


def _signature(e: BaseException) -> str:
    """Exception type and the innermost frame in the project's code: equal bugs get equal names."""
    frames = traceback.extract_tb(e.__traceback__)
    ours = [f for f in frames if "/workbench/" in f.filename and "/site-packages/" not in f.filename] or frames
    where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else "?"
    return f"{type(e).__name__} at {where}: {str(e).splitlines()[0][:160] if str(e) else ''}"


def run_target(kind: str, path: str) -> tuple[str, str]:
    """Run one case; (outcome, detail)."""
    return _classify(kind, Path(path))


def _classify(kind: str, p: Path) -> tuple[str, str]:
    from workbench.errors import InputError

    names = {q.name for q in p.parent.iterdir()} | {p.name}
    try:
        warned = TARGETS[kind](p)
    except InputError as e:
        msg = str(e)
        if "\n" in msg:
            return "crash", f"InputError over several lines: {msg[:200]!r}"
        # The message names the input (or the uploaded name, or a file the input refers to).
        if kind != "upload" and not any(n and n in msg for n in names):
            return "crash", f"InputError that names no input: {msg[:200]!r}"
        return "error", msg[:300]
    except MemoryError:
        return "memory", "MemoryError"
    except RecursionError as e:
        return "crash", _signature(e)
    except Exception as e:
        return "crash", _signature(e)
    return ("warning" if warned else "ok"), ""
