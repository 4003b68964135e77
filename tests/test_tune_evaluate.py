"""Tuned vs default: verdicts, and the flag for tuned parameters that only win on the tuning set
(naming the parameter when several were tuned)."""

from __future__ import annotations

from typing import Any

import pytest

from workbench.tune import evaluate as ev_mod
from workbench.tune.evaluate import Candidate, compare, evaluate
from workbench.tune.objective import resolve_objectives

OOO = resolve_objectives(["ooo_p95"])
BOTH = resolve_objectives(["goodput", "ooo_p95"])


def test_compare_verdicts() -> None:
    assert compare({"ooo_p95_ms": 10.0}, {"ooo_p95_ms": 12.0}, OOO) == "wins"
    assert compare({"ooo_p95_ms": 12.0}, {"ooo_p95_ms": 10.0}, OOO) == "loses"
    assert compare({"ooo_p95_ms": 10.0}, {"ooo_p95_ms": 10.000001}, OOO) == "ties"   # within tolerance
    assert compare({"ooo_p95_ms": None}, {"ooo_p95_ms": 10.0}, OOO) == "n/a"
    assert compare({"goodput_mbps": 30.0, "ooo_p95_ms": 9.0}, {"goodput_mbps": 30.0, "ooo_p95_ms": 10.0}, BOTH) == "wins"
    assert compare({"goodput_mbps": 29.0, "ooo_p95_ms": 9.0}, {"goodput_mbps": 30.0, "ooo_p95_ms": 10.0}, BOTH) == "mixed"


class _Inp:
    def __init__(self, label: str) -> None:
        self.label = label


def test_flags_parameter_that_only_wins_on_tuning_set(monkeypatch: pytest.MonkeyPatch) -> None:
    # a helps everywhere; b helps on the tuning inputs and hurts on the held-out ones
    def fake(inp: Any, scheduler: str, params: dict[str, Any], metrics: Any, *, seed: int = 0) -> dict[str, Any]:
        hold = inp.label.startswith("h")
        v = 20.0 - 5.0 * params["a"] + (4.0 if hold else -4.0) * params["b"]
        return {m: v for m in metrics} | {"wall_s": 0.0}

    monkeypatch.setattr(ev_mod, "run_input", fake)
    e = evaluate([_Inp("t1"), _Inp("t2")], [_Inp("h1")], "stms_a", defaults={"a": 0, "b": 0},  # type: ignore[list-item]
                 candidates=[Candidate("tuned", {"a": 1, "b": 1})], objectives=OOO, how="mean")
    assert e.verdicts["tuning"] == {"tuned": "wins", "only:a": "wins", "only:b": "wins"}
    assert e.verdicts["holdout"] == {"tuned": "wins", "only:a": "wins", "only:b": "loses"}
    assert len(e.flags) == 1 and "parameter b alone only win on the tuning set" in e.flags[0]
    assert e.aggregates["holdout"]["tuned"]["ooo_p95_ms"] == 19.0
    # rows: 3 inputs x 4 candidates (default, tuned, only:a, only:b)
    assert len(e.rows) == 12 and {r["set"] for r in e.rows} == {"tuning", "holdout"}

    # whole tuned set loses on held-out inputs -> flagged; no held-out inputs -> said so
    e = evaluate([_Inp("t1")], [_Inp("h1")], "stms_a", defaults={"a": 0, "b": 0},  # type: ignore[list-item]
                 candidates=[Candidate("tuned", {"a": 0, "b": 1})], objectives=OOO, how="worst")
    assert any("tuned parameters" in f and "only win on the tuning set" in f for f in e.flags)
    e = evaluate([_Inp("t1")], [], "stms_a", defaults={"a": 0, "b": 0},  # type: ignore[list-item]
                 candidates=[Candidate("tuned", {"a": 1, "b": 0})], objectives=OOO, how="mean")
    assert "holdout" not in e.aggregates and any("no held-out inputs" in f for f in e.flags)
