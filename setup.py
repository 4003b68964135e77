"""Build hook: compile the replay engine's hot modules (event list, links, TCP subflows, MPTCP
connection) with mypyc, which about doubles simulation speed. Everything else is plain Python.

Compilation is optional: without a C compiler or Python headers, or with WORKBENCH_PURE_PYTHON=1,
the same modules run as Python (same results, about half the speed). Congestion control (cc.py) stays
Python: its unit tests drive it with stand-in subflows, which compiled code would refuse.
"""

from __future__ import annotations

import os
import sys

from setuptools import setup

ENGINE = ["workbench/replay/events.py", "workbench/replay/link.py", "workbench/replay/tcp.py",
          "workbench/replay/mptcp.py"]


def engine_extensions() -> list:
    if os.environ.get("WORKBENCH_PURE_PYTHON"):
        return []
    try:
        from mypyc.build import mypycify

        exts = mypycify(["--follow-imports=skip", "--ignore-missing-imports", *ENGINE], opt_level="3")
    except Exception as e:  # no mypyc, or the modules do not type-check: run as Python
        print(f"workbench: replay engine not compiled ({e}); it runs as Python", file=sys.stderr)
        return []
    for ext in exts:
        ext.optional = True  # a failed C build falls back to the Python modules
    return exts


setup(ext_modules=engine_extensions())
