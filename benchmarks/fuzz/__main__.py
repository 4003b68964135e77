"""Command line of the fuzz campaign: counts by outcome per input kind, bad cases kept."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.fuzz.campaign import KINDS, CampaignResult, run_campaign
from benchmarks.fuzz.runner import Limits


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.fuzz", description=__doc__)
    ap.add_argument("--kind", action="append", choices=KINDS, help="input kind (repeatable; default: all)")
    ap.add_argument("--cases", type=int, default=100_000, help="cases per kind")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--time-limit-s", type=float, default=20.0)
    ap.add_argument("--memory-limit-mb", type=int, default=1024)
    ap.add_argument("--keep", type=Path, default=Path(".cache/fuzz"), help="folder for crash/hang/memory cases")
    ap.add_argument("--json", type=Path, help="write the counts here as JSON")
    ap.add_argument("--progress-every", type=int, default=1000)
    a = ap.parse_args(argv)
    limits = Limits(time_s=a.time_limit_s, memory_bytes=a.memory_limit_mb << 20)
    results: list[CampaignResult] = []

    def dump(current: CampaignResult | None = None) -> None:
        if a.json:
            rows = [*results, *([current] if current is not None else [])]
            a.json.write_text(json.dumps([{"kind": x.kind, "seed": x.seed, "cases": x.cases, "counts": dict(x.counts),
                                           "signatures": x.signatures, "kept": [str(k) for k in x.kept],
                                           "seconds": round(x.seconds, 1)} for x in rows], indent=1))

    def show(r: CampaignResult) -> None:
        print(r.line(), flush=True)
        dump(r)

    for kind in a.kind or KINDS:
        r = run_campaign(kind, a.cases, seed=a.seed, limits=limits, keep_dir=a.keep, progress=show,
                         progress_every=a.progress_every)
        results.append(r)
        print("done", r.line(), flush=True)
        for sig, hits in sorted(r.signatures.items(), key=lambda x: -x[1]):
            print(f"    {hits:6d} x {sig}", flush=True)
        dump()
    bad = sum(r.counts.get(o, 0) for r in results for o in ("crash", "hang", "memory"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
