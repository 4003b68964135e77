"""Getting ready for the first plot before it is asked for, on both sides of the page.

The server (`warm_imports`): while the page waits for an upload, import what reading a capture and
drawing its first plot will need: pandas (streamlit's tables), the capture reader, the timeline
estimator and plotly's figure classes. A fresh server otherwise paid for these imports (about 0.7 s,
more on a busy machine) between the upload and the first timeline plot; the user picking a file
gives them time. One daemon thread per process, started at most once; it only imports (and builds one
tiny figure, which loads plotly's validators), so nothing it does can be wrong for the page, and a
failure is ignored: the page imports the same modules where it uses them. Module import locks make a
page run that needs a module the thread is still importing wait until the import is complete.

The browser (`plotly_preload_html`): streamlit's front end loads plotly.js (a 4.7 MB chunk, about a
second to fetch and evaluate on a busy machine) only when the first chart arrives. A script in the
page imports that chunk soon after the page is drawn, when the browser is idle, so it is ready by the
time the first plot is sent:
the same URL, so the front end's own import finds the module already evaluated. Without the chunk
(another streamlit build) nothing is added and the page works as before.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

__all__ = ["plotly_preload_html", "warm_imports"]

_lock = threading.Lock()
_started = False


def _run() -> None:
    try:
        import pandas  # noqa: F401
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        import workbench.capture
        import workbench.inspect
        import workbench.timeline  # noqa: F401

        fig = make_subplots(rows=2, cols=1, shared_xaxes=True)
        fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line={"shape": "hv"}), row=1, col=1)
        fig.update_layout(template="plotly", hovermode="x unified")
        fig.to_json()
    except Exception:  # an optimisation only: the page imports what it needs itself
        pass


def warm_imports() -> bool:
    """Start the import thread unless it was started before in this process; True if started now."""
    global _started
    with _lock:
        if _started:
            return False
        _started = True
    threading.Thread(target=_run, name="workbench-warm-imports", daemon=True).start()
    return True


def plotly_preload_html() -> str | None:
    """A script (for ``st.html(..., unsafe_allow_javascript=True)``) importing the front end's plotly
    chunk when the browser is idle, or None when this streamlit build has no such chunk."""
    import streamlit

    js = Path(streamlit.__file__).parent / "static" / "static" / "js"
    chunk = next((p.name for p in sorted(js.glob("PlotlyChart.*.js")) if re.fullmatch(r"[\w.-]+\.js", p.name)),
                 None)
    if chunk is None:
        return None
    # Relative to the page, as the front end's own chunks are (a base URL path is kept). Started half a
    # second after this view is drawn and when the browser is idle: the view itself comes first.
    return ("<script>setTimeout(function () { (window.requestIdleCallback || setTimeout)(function () {"
            f"import('./static/js/{chunk}').catch(function () {{}}); }}); }}, 500);</script>")
