"""A fuzz campaign: cases of one input kind drawn from one seeded RNG, each run in the isolated
worker, counted by outcome; the first case of every crash, hang or memory signature is kept (and
minimized, for captures) so it can become a regression file."""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.fuzz.craft import crafted_capture
from benchmarks.fuzz.minimize import minimize_capture
from benchmarks.fuzz.mutate import load_seeds, mutate_capture
from benchmarks.fuzz.runner import IsolatedRunner, Limits
from benchmarks.fuzz.targets import OUTCOMES
from benchmarks.fuzz.text import csv_case, mahimahi_case, rate_case, scenario_case, upload_case

__all__ = ["KINDS", "CampaignResult", "make_case", "run_campaign"]

REPO = Path(__file__).resolve().parents[2]
SHARED_TRACES = REPO.parent / "shared" / "traces"
KINDS = ("capture", "csv", "rate", "mahimahi", "scenario", "upload")
_BAD = ("crash", "hang", "memory")


@dataclass
class CampaignResult:
    kind: str
    seed: int
    counts: Counter = field(default_factory=Counter)
    signatures: dict[str, int] = field(default_factory=dict)     # "outcome: detail" -> hits
    kept: list[Path] = field(default_factory=list)               # saved cases, one per bad signature
    seconds: float = 0.0

    @property
    def cases(self) -> int:
        return sum(self.counts.values())

    def line(self) -> str:
        parts = " ".join(f"{o}={self.counts.get(o, 0)}" for o in OUTCOMES)
        return f"{self.kind:9s} seed={self.seed} cases={self.cases} {parts} ({self.seconds:.0f} s)"


class _CaseMaker:
    def __init__(self, shared: Path) -> None:
        self.shared = shared
        self._seeds: list[bytes] | None = None

    @property
    def seeds(self) -> list[bytes]:
        if self._seeds is None:
            self._seeds = load_seeds(self.shared / "fixtures") + load_seeds(self.shared / "pair", max_records=150)[:2]
        return self._seeds

    def capture(self, rng: random.Random) -> dict[str, bytes]:
        r = rng.random()
        if r < 0.5:
            data = mutate_capture(rng.choice(self.seeds), rng)
            suffix = ".pcapng" if data[:4] == b"\x0a\x0d\x0d\x0a" else ".pcap"
        else:
            data, suffix = crafted_capture(rng)
            if r > 0.85:
                data = mutate_capture(data, rng)
        return {f"case{suffix}": data}

    def make(self, kind: str, rng: random.Random) -> dict[str, bytes]:
        if kind == "capture":
            return self.capture(rng)
        if kind == "upload":
            name, data = upload_case(rng, next(iter(self.capture(rng).values())))
            return {"upload.bin": name.encode("utf-8", "surrogatepass") + b"\n--\n" + data}
        gen: Callable[[random.Random, Path], dict[str, bytes]] = {
            "csv": csv_case, "rate": rate_case, "mahimahi": mahimahi_case, "scenario": scenario_case}[kind]
        return gen(rng, self.shared)


_MAKERS: dict[str, _CaseMaker] = {}


def make_case(kind: str, rng: random.Random, shared: Path = SHARED_TRACES) -> dict[str, bytes]:
    """The files of one case of `kind` (the first is the input)."""
    maker = _MAKERS.setdefault(str(shared), _CaseMaker(shared))
    return maker.make(kind, rng)


def _write_case(folder: Path, files: dict[str, bytes]) -> Path:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder / next(iter(files))


def run_campaign(kind: str, n_cases: int, *, seed: int, limits: Limits = Limits(), keep_dir: Path | None = None,
                 minimize: bool = True, progress: Callable[[CampaignResult], None] | None = None,
                 progress_every: int = 1000) -> CampaignResult:
    """`n_cases` cases of `kind` from `random.Random(seed)`; bad cases kept under `keep_dir`."""
    rng = random.Random(seed)
    res = CampaignResult(kind=kind, seed=seed)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"wb-fuzz-{kind}-") as tmp, IsolatedRunner(limits) as runner:
        case_dir = Path(tmp) / "case"
        for i in range(n_cases):
            files = make_case(kind, rng)
            path = _write_case(case_dir, files)
            outcome, detail = runner.run(kind, path)
            res.counts[outcome] += 1
            if outcome in _BAD:
                sig = f"{outcome}: {detail}"
                res.signatures[sig] = res.signatures.get(sig, 0) + 1
                if res.signatures[sig] == 1 and keep_dir is not None:
                    res.kept.append(_keep(keep_dir, kind, i, files, outcome, detail, runner, minimize))
            if progress is not None and (i + 1) % progress_every == 0:
                res.seconds = time.perf_counter() - t0
                progress(res)
    res.seconds = time.perf_counter() - t0
    return res


def _keep(keep_dir: Path, kind: str, index: int, files: dict[str, bytes], outcome: str, detail: str,
          runner: IsolatedRunner, minimize: bool) -> Path:
    folder = keep_dir / f"{kind}-{index:06d}-{outcome}"
    _write_case(folder, files)
    (folder / "SIGNATURE.txt").write_text(f"{outcome}: {detail}\n")
    main = next(iter(files))
    if minimize and kind == "capture":
        with tempfile.TemporaryDirectory(prefix="wb-fuzz-min-") as tmp:
            def still_fails(data: bytes) -> bool:
                p = _write_case(Path(tmp) / "m", {main: data})
                return runner.run(kind, p) == (outcome, detail)

            small = minimize_capture(files[main], still_fails)
        (folder / f"minimized-{main}").write_bytes(small)
    return folder
