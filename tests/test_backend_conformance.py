"""The backend conformance suite (workbench.testing.backend_conformance_cases) run per backend, the
way Optuna runs one storage test suite against every storage. The kernel backend's cases need root
and an MPTCP kernel: in CI both are there, so they run; elsewhere they are skipped with the reason."""

from __future__ import annotations

import pytest

from workbench.testing import BACKEND_CHECKS, backend_conformance_cases, check_backend


@pytest.mark.parametrize("case", backend_conformance_cases(["model"]), ids=str)
def test_model_backend_conforms(case) -> None:
    case.check()


def test_the_suite_catches_a_broken_backend() -> None:
    """Each check can fail: a backend that drops the handshake rows, loses the last segment and
    labels uploads as downloads is reported by the checks that look at those."""
    import polars as pl

    from workbench.backends import ModelBackend, Run

    class Broken(ModelBackend):
        name = "broken"

        def run(self, experiment, *, record=True, workdir=None) -> Run:  # type: ignore[no-untyped-def]
            r = super().run(experiment, record=record)
            ev = r.events
            ev = ev.filter(~((pl.col("flags") & 0x2) != 0))                       # no handshake
            last = ev.filter(pl.col("payload_bytes") > 0)["dsn"].max()
            ev = ev.filter(pl.col("dsn").is_null() | (pl.col("dsn") != last))    # lose the last segment
            ev = ev.with_columns(dir=pl.lit("s2c"))                               # wrong direction on uploads
            r._events = ev
            return r

    problems = check_backend(Broken(), checks=("download", "upload", "handshake"))
    kinds = {p.split(":")[0] for p in problems}
    assert kinds == {"download", "upload", "handshake"}, problems
    assert set(BACKEND_CHECKS) >= kinds


@pytest.mark.slow
@pytest.mark.parametrize("case", backend_conformance_cases(["kernel"]), ids=str)
def test_kernel_backend_conforms(case) -> None:
    from tests._kernel import require_lab

    require_lab()
    case.check()
