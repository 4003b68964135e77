"""Errors at the page's edge: one short line, never a stack trace.

A problem the user can fix (`InputError`) shows its own text; anything else shows
``internal error: Type: message`` (set ``WORKBENCH_DEBUG=1`` to see the trace, as on the command
line). Streamlit's own control-flow exceptions (rerun, stop) derive from BaseException and pass.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from workbench.errors import InputError

__all__ = ["error_line", "guard"]


def error_line(e: BaseException, rename: Callable[[str], str] | None = None) -> str:
    """The one line shown for ``e``; ``rename`` maps private file paths back to the uploaded names."""
    text = str(e) if isinstance(e, InputError) else f"internal error: {type(e).__name__}: {e}"
    text = " ".join(text.split()) or type(e).__name__
    if rename is not None:
        text = rename(text)
    return text if len(text) <= 400 else text[:397] + "..."


@contextmanager
def guard(show: Callable[[str], object], rename: Callable[[str], str] | None = None) -> Iterator[None]:
    """Run the block; on an exception call ``show`` with its one line and carry on with the page."""
    try:
        yield
    except Exception as e:
        if os.environ.get("WORKBENCH_DEBUG") and not isinstance(e, InputError):
            raise
        show(error_line(e, rename))
