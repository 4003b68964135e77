"""Speed of the Streamlit page in a real browser (Debian's chromium through Playwright), against
issue 15's targets (3 s each):

* first visit: a fresh ``streamlit run`` process and a browser with nothing cached open the page;
  timed until the uploader is interactive (its file input is on the page and the script has finished
  its run). Twice: opened on the uploader (``/?input=upload``), and opened at ``/`` (the bundled
  trace) with a click on "Upload" as soon as it is there;
* upload -> first timeline plot: the largest lab capture pair (client.pcap + server.pcap as peer,
  the parse cache emptied first: a capture never seen before) uploaded on a fresh page of the
  uploader; timed from handing the capture to the file input until the Paths tab's plot is visible
  (a click on Paths as soon as it is there). Before that the peer is uploaded and half a second
  passes: the time the page uses, while it waits for a file, to import on the server and load
  plotly.js in the browser (`workbench.ui.warm`); a user picking a file takes longer.

Also printed, without a target: the first visit of the default page (a fresh server, the bundled
trace read and its first plot on screen), the figure earlier measurements of issue 15 used.

Usage: bench_page.py [--pair DIR ...] [--repeat N]

DIR holds client.pcap + server.pcap (default: the largest lab pair under traces/lab and
../shared/traces/lab). Each figure is the median over ``--repeat`` runs, as wall time and as CPU
seconds of the server process and of the browser (chromium and its driver) over the same span. Wall
time depends on what else runs on the machine (the load average is printed); CPU seconds hardly do.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from _browser import CHROMIUM, CHROMIUM_ARGS, free_port  # noqa: E402

LAB_DIRS = [REPO / "traces" / "lab", REPO.parent / "shared" / "traces" / "lab"]
TARGET_S = 3.0
_CHART = '[data-testid="stPlotlyChart"] .main-svg:visible'
_UPLOADER = '[data-testid="stFileUploader"] input[type="file"]'
_TIMEOUT_MS = 120_000


def largest_pair(dirs: list[Path] = LAB_DIRS) -> Path | None:
    """The lab run folder whose client.pcap + server.pcap are the largest (bytes on disk)."""
    pairs = [d for root in dirs if root.is_dir() for d in sorted(root.iterdir())
             if (d / "client.pcap").is_file() and (d / "server.pcap").is_file()]
    return max(pairs, key=_pair_bytes, default=None)


def _shown(d: Path) -> str:
    try:
        return str(d.resolve().relative_to(REPO.parent))
    except ValueError:
        return str(d)


def _pair_bytes(d: Path) -> int:
    return sum((d / n).stat().st_size for n in ("client.pcap", "server.pcap"))


def _start(cache: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = os.environ | {"WORKBENCH_CACHE": str(cache / "parse"), "WORKBENCH_MAX_UPLOAD_MB": "256"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--server.maxUploadSize", "256",
         "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=REPO, env=env, stdout=open(cache / "streamlit.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base + "/_stcore/health", timeout=1):
                return proc, base
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("streamlit did not start")


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system, every thread) process ``pid`` used so far (0 once it is gone)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else 0.0


def _browser_cpu_s(server_pid: int) -> float:
    """CPU seconds of this process's descendants but the server: Playwright's driver and chromium
    (browser, renderers, GPU and utility processes) that are alive now."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (f := _stat(int(d.name))) is not None:
            parent[int(d.name)] = int(f[1])
    mine, changed = {os.getpid()}, True
    while changed:
        new = {p for p, pp in parent.items() if pp in mine and p not in mine and p != server_pid}
        mine |= new
        changed = bool(new)
    return sum(_cpu_s(p) for p in mine - {os.getpid()})


class Span:
    """Wall time, server CPU and browser CPU from construction to `stop`."""

    def __init__(self, server_pid: int) -> None:
        self.pid = server_pid
        self.t0, self.s0, self.b0 = time.perf_counter(), _cpu_s(server_pid), _browser_cpu_s(server_pid)

    def stop(self) -> tuple[float, float, float]:
        return (time.perf_counter() - self.t0, _cpu_s(self.pid) - self.s0, _browser_cpu_s(self.pid) - self.b0)


def _idle(page: Any) -> None:
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for(
        state="attached", timeout=_TIMEOUT_MS)


def _new_page(browser: Any) -> Any:
    # A new context each time: nothing cached from an earlier visit.
    return browser.new_page(viewport={"width": 1400, "height": 1000})


def _timed_visit(browser: Any, url: str, pid: int, until: Callable[[Any], None]) -> tuple[float, float, float]:
    """Wall and CPU time from opening ``url`` in a fresh page until ``until(page)`` returns."""
    page = _new_page(browser)
    span = Span(pid)
    page.goto(url, wait_until="commit")
    until(page)
    out = span.stop()
    page.close()
    return out


def _uploader_ready(page: Any) -> None:
    page.locator(_UPLOADER).first.wait_for(state="attached", timeout=_TIMEOUT_MS)
    _idle(page)


def first_visit_uploader(browser: Any, base: str, pid: int) -> tuple[float, float, float]:
    return _timed_visit(browser, base + "/?input=upload", pid, _uploader_ready)


def first_visit_click_upload(browser: Any, base: str, pid: int) -> tuple[float, float, float]:
    def click_then_ready(page: Any) -> None:
        page.locator('[data-testid="stSidebar"]').get_by_text("Upload", exact=True).click(timeout=_TIMEOUT_MS)
        _uploader_ready(page)

    return _timed_visit(browser, base + "/", pid, click_then_ready)


def first_visit_default(browser: Any, base: str, pid: int) -> tuple[float, float, float]:
    def first_plot(page: Any) -> None:
        page.get_by_role("tab", name="Paths").click(timeout=_TIMEOUT_MS)
        page.locator(_CHART).first.wait_for(state="visible", timeout=_TIMEOUT_MS)

    return _timed_visit(browser, base + "/", pid, first_plot)


def upload_to_plot(browser: Any, base: str, pid: int, pair: Path) -> tuple[float, float, float]:
    page = _new_page(browser)
    page.goto(base + "/?input=upload", wait_until="domcontentloaded")
    inputs = page.locator(_UPLOADER)
    inputs.first.wait_for(state="attached", timeout=_TIMEOUT_MS)
    _idle(page)
    # Peer first (alone it loads nothing), then the capture: exactly one load of the pair is timed.
    inputs.nth(1).set_input_files(str(pair / "server.pcap"))
    time.sleep(0.5)
    _idle(page)
    span = Span(pid)
    inputs.nth(0).set_input_files(str(pair / "client.pcap"))
    page.get_by_role("tab", name="Paths").click(timeout=_TIMEOUT_MS)
    page.locator(_CHART).first.wait_for(state="visible", timeout=_TIMEOUT_MS)
    out = span.stop()
    page.close()
    return out


def _with_server(fn: Callable[[str, int, Path], None]) -> None:
    cache = Path(tempfile.mkdtemp(prefix="bench-page-cache-"))
    proc, base = _start(cache)
    try:
        fn(base, proc.pid, cache / "parse")
    except Exception:
        print((cache / "streamlit.log").read_text(errors="replace")[-3000:], file=sys.stderr)
        raise
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pair", action="append", type=Path, help="folder with client.pcap + server.pcap")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    pairs = a.pair or [p for p in [largest_pair()] if p is not None]
    pairs = [p for p in pairs if (p / "client.pcap").is_file() and (p / "server.pcap").is_file()]
    if not pairs:
        raise SystemExit("no lab capture pair (client.pcap + server.pcap) found")
    results: dict[str, list[tuple[float, float, float]]] = {}
    targets: dict[str, float | None] = {}

    def record(name: str, target: float | None, value: tuple[float, float, float]) -> None:
        results.setdefault(name, []).append(value)
        targets[name] = target

    load_before = os.getloadavg()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            for _ in range(a.repeat):
                def uploads(base: str, pid: int, parse: Path) -> None:
                    record("first visit of /?input=upload (fresh server, uploader interactive)", TARGET_S,
                           first_visit_uploader(browser, base, pid))
                    for pair in pairs:
                        shutil.rmtree(parse, ignore_errors=True)
                        record(f"upload -> first timeline plot, {_shown(pair)} pair ({_pair_bytes(pair) / 1e6:.1f} MB, "
                               "cold)", TARGET_S, upload_to_plot(browser, base, pid, pair))

                def click_upload(base: str, pid: int, parse: Path) -> None:
                    record("first visit at / then a click on Upload (fresh server, uploader interactive)",
                           TARGET_S, first_visit_click_upload(browser, base, pid))

                def default(base: str, pid: int, parse: Path) -> None:
                    record("first visit of the default page (fresh server, bundled trace -> first plot)", None,
                           first_visit_default(browser, base, pid))

                _with_server(uploads)
                _with_server(click_upload)
                _with_server(default)
        finally:
            browser.close()
    for name, xs in results.items():
        wall, srv, brw = (statistics.median(x[i] for x in xs) for i in range(3))
        target = targets[name]
        verdict = "" if target is None else f"  [target {target:.0f} s: {'met' if wall <= target else 'MISSED'}]"
        runs = ", ".join(f"{x[0]:.2f}" for x in xs)
        print(f"{name}: wall {wall:.2f} s{verdict}; CPU s: server {srv:.2f}, browser {brw:.2f}, "
              f"sum {srv + brw:.2f}  (wall per run: {runs})")
    print("load average (1, 5, 15 min) before: " + ", ".join(f"{x:.2f}" for x in load_before)
          + "; after: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + f"; {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
