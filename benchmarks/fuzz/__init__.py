"""Fuzzing harness for every input the workbench reads: captures (mutated real ones and
structure-aware ones built with scapy), tshark CSV exports, rate and mahimahi files, scenario files
and page uploads. Each case runs the full path of its input kind in an isolated worker with a time
and memory limit, and ends as ok, warning, clean error, crash, hang or memory.

    python -m benchmarks.fuzz --kind capture --cases 100000 --seed 1      # from the repository root
"""

from benchmarks.fuzz.campaign import KINDS, CampaignResult, make_case, run_campaign
from benchmarks.fuzz.runner import IsolatedRunner, Limits
from benchmarks.fuzz.targets import OUTCOMES, run_target

__all__ = ["KINDS", "OUTCOMES", "CampaignResult", "IsolatedRunner", "Limits", "make_case", "run_campaign",
           "run_target"]
