"""Studies: storage, creation and resumption, samplers, seeds, and the worker loop.

Storage: an SQLite file in the output folder by default; any optuna RDB URL (``postgresql://``,
``mysql+pymysql://``, ``sqlite:///``) or a journal file (``journal:PATH`` or a path ending in
``.log`` / ``.journal``: `JournalFileBackend`, safe on a shared filesystem) spreads workers over
machines: every ``workbench tune --storage URL --study NAME`` process is one more worker.

``--trials N`` is the number of finished trials the *study* should have (complete or pruned; failed
ones do not count): a worker runs trials until the study has N, so restarts and several workers add
up. Before each trial a worker counts finished trials plus trials running elsewhere; when those
already reach N it waits for them instead of starting another (overshoot is at most one trial per
worker that raced for the last slot).

Crashed workers: each running trial carries a heartbeat (a trial attribute refreshed every
``heartbeat_s`` by a thread of its worker). A running trial whose heartbeat is older than
``4 × heartbeat_s`` belongs to a dead worker: any worker marks it FAIL and runs a replacement, so a
SIGKILLed study still completes. (optuna's own heartbeat exists only for RDB storages; this one works
the same on journal files.)

Seeds: the sampler is re-created before every trial with seed ``mix(seed, trial.number)``, so what
trial k proposes depends only on the seed, k and the trials finished before it — an interrupted and
resumed study proposes what an uninterrupted one would have, and two workers starting together do
not propose the same random start points.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import optuna

from workbench.errors import InputError

__all__ = [
    "HEARTBEAT_ATTR",
    "RunStats",
    "TrialSeededSampler",
    "count_finished",
    "make_sampler",
    "open_study",
    "resolve_storage",
    "run_until",
]

HEARTBEAT_ATTR = "wb_heartbeat_unix_s"
FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
_JOURNAL_SUFFIXES = (".log", ".journal", ".jsonl")


def resolve_storage(storage: str | None, out_dir: Path) -> tuple[Any, str]:
    """(optuna storage object, text to show/record). None = ``sqlite:///OUT/study.db``."""
    from optuna.storages import RDBStorage
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    if storage is None:
        out_dir.mkdir(parents=True, exist_ok=True)
        storage = f"sqlite:///{(out_dir / 'study.db').resolve()}"
    text = storage
    journal_path: str | None = None
    if storage.startswith("journal:"):
        journal_path = storage[len("journal:"):].removeprefix("//")
    elif "://" not in storage and storage.endswith(_JOURNAL_SUFFIXES):
        journal_path = storage
    if journal_path is not None:
        p = Path(journal_path)
        p.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(p))), f"journal:{p}"
    if "://" not in storage:
        raise InputError(None, f"--storage {storage!r}: give an optuna storage URL (sqlite:///file.db, "
                               "postgresql://..., mysql+pymysql://...) or a journal file (journal:PATH)")
    kw: dict[str, Any] = {}
    lock_path: Path | None = None
    text = _without_password(storage)
    if storage.startswith(("postgresql", "postgres")):
        # An unreachable server fails in seconds, not after the operating system's TCP timeout.
        kw = {"connect_args": {"connect_timeout": 10}}
    if storage.startswith("sqlite"):
        # Several local workers share one SQLite file: wait for the write lock instead of failing
        # with "database is locked" (the default timeout is 5 s).
        kw = {"connect_args": {"timeout": 120}}
        db = storage.split("///", 1)[-1]
        if db and db != ":memory:":
            Path(db).parent.mkdir(parents=True, exist_ok=True)
            lock_path = Path(db + ".create-lock")
    for attempt in range(6):
        try:
            with _file_lock(lock_path):
                return RDBStorage(storage, engine_kwargs=kw), text
        except ImportError as e:
            raise InputError(None, f"--storage {text!r}: database driver missing ({e})") from None
        except Exception as e:  # sqlalchemy errors: bad URL, unreachable server, a creation race
            # Workers started together on a new database race to create its tables (and alembic's
            # version row); the loser fails with one of these and succeeds on the next try.
            racy = any(m in str(e) for m in ("already exists", "UNIQUE constraint", "Duplicate", "duplicate key",
                                             "database is locked"))
            if racy and attempt < 5:
                time.sleep(0.2 * (attempt + 1))
                continue
            first = str(e).splitlines()[0] if str(e) else ""
            raise InputError(None, f"--storage {text!r}: {type(e).__name__}: {first}") from None
    raise AssertionError("unreachable")


def _without_password(url: str) -> str:
    """The URL as shown in messages and records: a password in it is masked."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not an URL sqlalchemy understands: it fails with its own message later
        return url


@contextlib.contextmanager
def _file_lock(path: Path | None) -> Iterator[None]:
    """An exclusive lock on ``path`` (POSIX flock) while the storage is created; no-op for None."""
    if path is None:
        yield
        return
    import fcntl

    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _mix(seed: int, number: int) -> int:
    # A simple reversible mix keeps per-trial seeds distinct for every (seed, trial) pair we meet.
    return (seed * 1_000_003 + number * 7_919 + 12_345) % (2**32)


class TrialSeededSampler(optuna.samplers.BaseSampler):
    """Delegates to ``factory(seed')`` re-created before every trial with ``seed' = mix(seed, number)``."""

    def __init__(self, factory: Callable[[int], optuna.samplers.BaseSampler], seed: int) -> None:
        self._factory = factory
        self._seed = seed
        self._inner = factory(seed)

    @property
    def inner(self) -> optuna.samplers.BaseSampler:
        return self._inner

    def before_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        self._inner = self._factory(_mix(self._seed, trial.number))
        self._inner.before_trial(study, trial)

    def infer_relative_search_space(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> dict[str, Any]:
        return self._inner.infer_relative_search_space(study, trial)

    def sample_relative(self, study: optuna.Study, trial: optuna.trial.FrozenTrial,
                        search_space: dict[str, Any]) -> dict[str, Any]:
        return self._inner.sample_relative(study, trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: optuna.trial.FrozenTrial, param_name: str,
                           param_distribution: Any) -> Any:
        return self._inner.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial, state: Any,
                    values: Sequence[float] | None) -> None:
        self._inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self._inner.reseed_rng()


def make_sampler(n_objectives: int, seed: int, *, n_trials: int) -> TrialSeededSampler:
    """TPE for one objective, NSGA-II for several (Pareto front), both seeded per trial."""
    if n_objectives == 1:
        # Fewer random start-up trials than optuna's 10 when the budget is small, so TPE gets to work.
        n_startup = 10 if n_trials >= 40 else max(4, n_trials // 4)

        def tpe(s: int) -> optuna.samplers.BaseSampler:
            # constant_liar: running trials of other workers count as pessimistic guesses, so
            # parallel workers do not all probe the same promising point.
            return optuna.samplers.TPESampler(seed=s, n_startup_trials=n_startup, multivariate=True,
                                              constant_liar=True)
        return TrialSeededSampler(tpe, seed)
    population = max(8, min(50, n_trials // 4))

    def nsga(s: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.NSGAIISampler(seed=s, population_size=population)
    return TrialSeededSampler(nsga, seed)


def open_study(storage: Any, name: str, directions: Sequence[Literal["minimize", "maximize"]], *,
               settings: Mapping[str, Any],
               sampler: optuna.samplers.BaseSampler, pruner: optuna.pruners.BasePruner | None,
               enqueue: Mapping[str, Any] | None = None) -> optuna.Study:
    """Create the study or load it to continue. ``settings`` (scheduler, objectives, space, inputs)
    are stored with a new study; a study with other settings is refused (its values would not be
    comparable with new ones). ``enqueue``: parameters for the first trial of a new study (the
    defaults: the baseline every tuned value must beat)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.create_study(storage=storage, study_name=name, directions=list(directions),
                                    sampler=sampler, pruner=pruner, load_if_exists=True)
    except ValueError as e:
        raise InputError(None, f"study {name!r}: {e}") from None
    have = [d.name.lower() for d in study.directions]
    if have != [d.lower() for d in directions]:
        raise InputError(None, f"study {name!r} exists with directions {have}, not {list(directions)}; "
                               "choose another --study")
    stored = study.user_attrs.get("workbench")
    if stored is None:
        study.set_user_attr("workbench", dict(settings))
    else:
        diff = [k for k in settings if k in stored and stored[k] != settings[k]]
        if diff:
            raise InputError(None, f"study {name!r} was made with other {', '.join(diff)} "
                                   f"({'; '.join(f'{k}: {stored[k]!r}' for k in diff)}); "
                                   "choose another --study or the same settings")
    if enqueue is not None and not study.get_trials(deepcopy=False):
        study.enqueue_trial(dict(enqueue), user_attrs={"baseline": "defaults"}, skip_if_exists=True)
    return study


def count_finished(trials: Sequence[optuna.trial.FrozenTrial]) -> int:
    return sum(t.state in FINISHED for t in trials)


def _last_beat(t: optuna.trial.FrozenTrial) -> float:
    beat = t.user_attrs.get(HEARTBEAT_ATTR)
    if beat is not None:
        return float(beat)
    return t.datetime_start.timestamp() if t.datetime_start is not None else time.time()


def fail_stale(study: optuna.Study, trials: Sequence[optuna.trial.FrozenTrial], grace_s: float) -> int:
    """Mark running trials without a recent heartbeat FAIL (their worker died). Returns how many."""
    now = time.time()
    n = 0
    for t in trials:
        if t.state == optuna.trial.TrialState.RUNNING and now - _last_beat(t) > grace_s:
            # Another worker may fail it at the same moment: then this one loses the race, fine.
            with contextlib.suppress(Exception):
                study.tell(t.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
                n += 1
    return n


@contextlib.contextmanager
def _heartbeat(trial: optuna.Trial, interval_s: float) -> Iterator[None]:
    stop = threading.Event()

    def beat() -> None:
        while True:
            with contextlib.suppress(Exception):  # a missed beat is harmless; the next one comes
                trial.set_user_attr(HEARTBEAT_ATTR, time.time())
            if stop.wait(interval_s):
                return

    th = threading.Thread(target=beat, name=f"heartbeat-{trial.number}", daemon=True)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join()


@dataclass
class RunStats:
    finished_here: int = 0     # trials this worker finished (complete or pruned)
    failed_here: int = 0
    stale_failed: int = 0      # dead workers' trials this worker marked FAIL
    wall_s: float = 0.0
    stopped_by: str = "trials"  # "trials" | "timeout"


def run_until(study: optuna.Study, objective: Callable[[optuna.Trial], Any], n_trials: int, *,
              timeout_s: float | None = None, heartbeat_s: float = 10.0,
              catch: tuple[type[Exception], ...] = (),
              on_progress: Callable[[int, Sequence[optuna.trial.FrozenTrial]], None] | None = None,
              poll_s: float = 0.5) -> RunStats:
    """Run trials until the study has ``n_trials`` finished ones (see the module docstring)."""
    grace_s = 4.0 * heartbeat_s
    stats = RunStats()
    t0 = time.monotonic()

    current: dict[str, int] = {}

    def with_heartbeat(trial: optuna.Trial) -> Any:
        current["number"] = trial.number
        with _heartbeat(trial, heartbeat_s):
            return objective(trial)

    while True:
        trials = study.get_trials(deepcopy=False)
        n_stale = fail_stale(study, trials, grace_s)
        if n_stale:
            stats.stale_failed += n_stale
            trials = study.get_trials(deepcopy=False)
        done = count_finished(trials)
        if on_progress is not None:
            on_progress(done, trials)
        if done >= n_trials:
            break
        if timeout_s is not None and time.monotonic() - t0 >= timeout_s:
            stats.stopped_by = "timeout"
            break
        running = sum(t.state == optuna.trial.TrialState.RUNNING for t in trials)
        waiting = sum(t.state == optuna.trial.TrialState.WAITING for t in trials)
        if done + running >= n_trials and not waiting:
            time.sleep(poll_s)  # the last trials run elsewhere: wait for them (or for them to go stale)
            continue
        current.clear()
        study.optimize(with_heartbeat, n_trials=1, catch=catch, gc_after_trial=False, show_progress_bar=False)
        mine = [t for t in study.get_trials(deepcopy=False) if t.number == current.get("number")]
        state = mine[0].state if mine else None
        if state in FINISHED:
            stats.finished_here += 1
        elif state == optuna.trial.TrialState.FAIL:
            stats.failed_here += 1
            if stats.failed_here >= 5 and stats.finished_here == 0:
                why = mine[0].user_attrs.get("missing") or "see the trial's user attributes"
                raise InputError(None, f"{stats.failed_here} trials failed in a row ({why}); stopping")
    stats.wall_s = time.monotonic() - t0
    return stats
