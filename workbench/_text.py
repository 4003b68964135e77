"""How numbers are shown in the terminal tables of the command line."""

from __future__ import annotations

from typing import Any

__all__ = ["fmt_value"]


def fmt_value(v: Any, digits: int = 2) -> str:
    """A table cell: "–" for unknown, floats with `digits` decimals, anything else as text."""
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)
