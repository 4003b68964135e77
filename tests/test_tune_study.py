"""Studies: per-trial seeding (reproducible, resumable), --trials as a study-wide total, crashed
workers' trials failed by heartbeat, storage URLs, refusing to mix settings in one study."""

from __future__ import annotations

import time
from pathlib import Path

import optuna
import pytest

from workbench.errors import InputError
from workbench.tune.study import (
    HEARTBEAT_ATTR,
    count_finished,
    make_sampler,
    open_study,
    resolve_storage,
    run_until,
)

SETTINGS = {"scheduler": "x", "objectives": ["ooo_p95"], "space": "s"}


def _f(trial: optuna.Trial) -> float:
    x = trial.suggest_float("x", 0.0, 10.0)
    k = trial.suggest_int("k", 1, 5)
    return (x - 3.3) ** 2 + k


def _study(storage: object = None, *, n: int = 8, seed: int = 0, name: str = "s") -> optuna.Study:
    return open_study(storage, name, ["minimize"], settings=SETTINGS, sampler=make_sampler(1, seed, n_trials=n),
                      pruner=None)


def test_same_seed_same_trials_and_a_resume_proposes_the_same() -> None:
    a = _study()
    run_until(a, _f, 12)
    b = _study()
    run_until(b, _f, 12)
    assert [t.params for t in a.trials] == [t.params for t in b.trials]
    # interrupted after 5 trials, resumed by a new process (new sampler object): identical sequence
    storage = optuna.storages.InMemoryStorage()
    run_until(_study(storage), _f, 5)
    run_until(_study(storage), _f, 12)
    c = optuna.load_study(study_name="s", storage=storage)
    assert [t.params for t in c.trials] == [t.params for t in a.trials]
    # another seed, other proposals
    d = _study(seed=1)
    run_until(d, _f, 3)
    assert [t.params for t in d.trials] != [t.params for t in a.trials[:3]]


def test_trials_is_a_total_for_the_study() -> None:
    storage = optuna.storages.InMemoryStorage()
    s1 = run_until(_study(storage), _f, 4)
    s2 = run_until(_study(storage), _f, 4)     # already there: nothing to do
    s3 = run_until(_study(storage), _f, 7)     # three more
    assert (s1.finished_here, s2.finished_here, s3.finished_here) == (4, 0, 3)
    assert count_finished(optuna.load_study(study_name="s", storage=storage).trials) == 7


def test_stale_running_trial_is_failed_and_replaced() -> None:
    study = _study()
    zombie = study.ask()                    # a worker that died mid-trial leaves a RUNNING trial
    zombie.set_user_attr(HEARTBEAT_ATTR, time.time() - 100)
    fresh = study.ask()                     # a live worker's trial (fresh heartbeat): left alone
    fresh.set_user_attr(HEARTBEAT_ATTR, time.time() + 1000)
    stats = run_until(study, _f, 3, heartbeat_s=1.0, timeout_s=2, poll_s=0.1)
    states = {t.number: t.state for t in study.trials}
    assert states[zombie.number] == optuna.trial.TrialState.FAIL
    assert states[fresh.number] == optuna.trial.TrialState.RUNNING
    assert stats.stale_failed == 1
    # 2 finished + 1 running elsewhere make the 3 wanted: the worker waits for the live one instead
    # of overshooting, until its timeout.
    assert count_finished(study.trials) == 2 and stats.finished_here == 2 and stats.stopped_by == "timeout"


def test_open_study_refuses_other_settings_or_directions(tmp_path: Path) -> None:
    storage, _ = resolve_storage(None, tmp_path)
    run_until(_study(storage), _f, 2)
    with pytest.raises(InputError, match="other space"):
        open_study(storage, "s", ["minimize"], settings=SETTINGS | {"space": "t"},
                   sampler=make_sampler(1, 0, n_trials=2), pruner=None)
    with pytest.raises(InputError, match="directions"):
        open_study(storage, "s", ["maximize"], settings=SETTINGS, sampler=make_sampler(1, 0, n_trials=2), pruner=None)


def test_enqueued_defaults_are_the_first_trial() -> None:
    study = open_study(None, "s", ["minimize"], settings=SETTINGS, sampler=make_sampler(1, 0, n_trials=3),
                       pruner=None, enqueue={"x": 1.5, "k": 2})
    run_until(study, _f, 3)
    assert study.trials[0].params == {"x": 1.5, "k": 2}
    assert study.trials[0].user_attrs["baseline"] == "defaults"


def test_resolve_storage(tmp_path: Path) -> None:
    from optuna.storages import RDBStorage
    from optuna.storages.journal import JournalStorage

    st, text = resolve_storage(None, tmp_path / "out")
    assert isinstance(st, RDBStorage) and text == f"sqlite:///{(tmp_path / 'out' / 'study.db').resolve()}"
    for spec in (f"journal:{tmp_path / 'j' / 'a.log'}", str(tmp_path / "b.journal")):
        st, text = resolve_storage(spec, tmp_path)
        assert isinstance(st, JournalStorage) and text.startswith("journal:")
    with pytest.raises(InputError, match="storage URL"):
        resolve_storage("not-a-url", tmp_path)
    with pytest.raises(InputError):
        resolve_storage("postgresql://nobody@127.0.0.1:1/none", tmp_path)


def test_multi_objective_uses_nsga2() -> None:
    s = make_sampler(2, 0, n_trials=40)
    assert isinstance(s.inner, optuna.samplers.NSGAIISampler)
    assert isinstance(make_sampler(1, 0, n_trials=40).inner, optuna.samplers.TPESampler)
