"""Importers: path timelines from files that hold no packets.

Each importer says in its result's ``kind`` whether the numbers are link capacity (what the path
could carry: mahimahi, the lab's applied rate schedules, scenario files) or achieved throughput
(what one TCP flow got: Oboe, 5Gophers), and tags every value measured / estimated / assumed.
"""

from __future__ import annotations

from workbench.timeline.importers.mahimahi import mahimahi_bins, read_mahimahi
from workbench.timeline.importers.multipath_csv import read_5gophers, read_multipath_csv
from workbench.timeline.importers.ping import parse_ping_log, read_ping
from workbench.timeline.importers.rate_csv import parse_rate_unit, parse_time_unit, read_oboe, read_rate_csv

__all__ = [
    "mahimahi_bins",
    "parse_ping_log",
    "parse_rate_unit",
    "parse_time_unit",
    "read_5gophers",
    "read_mahimahi",
    "read_multipath_csv",
    "read_oboe",
    "read_ping",
    "read_rate_csv",
]
