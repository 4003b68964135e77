"""Speed of the Streamlit page in a real browser (Debian's chromium through Playwright): the first
visit (page opened -> the default trace's first plot on screen, a fresh ``streamlit run`` process, so
imports and the first script run count) and upload -> first timeline plot for lab capture pairs
(the parse cache emptied before each upload: a capture never seen before).

Usage: bench_page.py [--pair DIR ...] [--repeat N]

DIR holds client.pcap + server.pcap (default: the largest lab pair in ../shared/traces/lab, c05, and
the bundled traces/lab/c01). Prints one line per measurement, the median over ``--repeat`` runs, and
the machine's load average (the timings are wall time: other work on the machine slows them; the
server's CPU seconds for the same span are printed beside them, as a load-independent figure).
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from _browser import CHROMIUM, CHROMIUM_ARGS, free_port  # noqa: E402

DEFAULT_PAIRS = [REPO.parent / "shared" / "traces" / "lab" / "c05", REPO / "traces" / "lab" / "c01"]
_CHART = '[data-testid="stPlotlyChart"] .main-svg:visible'


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


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the server process used so far: unlike wall time, hardly changed by
    other work on a busy machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _idle(page: object) -> None:
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for(  # type: ignore[attr-defined]
        state="attached", timeout=120_000)


def first_visit(browser: object, base: str) -> float:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    page.goto(base + "/", wait_until="commit")
    page.get_by_role("tab", name="Paths").click(timeout=120_000)
    page.locator(_CHART).first.wait_for(state="visible", timeout=120_000)
    dt = time.perf_counter() - t0
    page.close()
    return dt


def upload_to_plot(browser: object, base: str, pair: Path) -> float:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
    page.goto(base + "/?input=upload", wait_until="domcontentloaded")
    inputs = page.locator('[data-testid="stFileUploader"] input[type="file"]')
    inputs.first.wait_for(state="attached", timeout=60_000)
    _idle(page)
    # Peer first (alone it loads nothing), then the capture: exactly one load of the pair is timed.
    inputs.nth(1).set_input_files(str(pair / "server.pcap"))
    _idle(page)
    t0 = time.perf_counter()
    inputs.nth(0).set_input_files(str(pair / "client.pcap"))
    page.get_by_role("tab", name="Paths").click(timeout=120_000)
    page.locator(_CHART).first.wait_for(state="visible", timeout=120_000)
    dt = time.perf_counter() - t0
    page.close()
    return dt


def main() -> None:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pair", action="append", type=Path, help="folder with client.pcap + server.pcap")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    pairs = [p for p in (a.pair or DEFAULT_PAIRS) if (p / "client.pcap").is_file() and (p / "server.pcap").is_file()]
    results: dict[str, list[float]] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            for _ in range(a.repeat):
                cache = Path(tempfile.mkdtemp(prefix="bench-page-cache-"))
                proc, base = _start(cache)
                parse = cache / "parse"
                try:
                    c0 = _cpu_s(proc.pid)
                    results.setdefault("first visit (fresh server, default trace -> first plot)", []).append(
                        first_visit(browser, base))
                    results.setdefault("  server CPU s of the first visit", []).append(_cpu_s(proc.pid) - c0)
                    for pair in pairs:
                        shutil.rmtree(parse, ignore_errors=True)
                        mb = sum((pair / n).stat().st_size for n in ("client.pcap", "server.pcap")) / 1e6
                        c0 = _cpu_s(proc.pid)
                        results.setdefault(f"upload -> first timeline plot, {pair.name} pair ({mb:.1f} MB, cold)",
                                           []).append(upload_to_plot(browser, base, pair))
                        results.setdefault(f"  server CPU s of that upload ({pair.name})", []).append(
                            _cpu_s(proc.pid) - c0)
                except Exception:
                    print((cache / "streamlit.log").read_text(errors="replace")[-3000:], file=sys.stderr)
                    raise
                finally:
                    proc.terminate()
                    proc.wait(timeout=15)
                    shutil.rmtree(cache, ignore_errors=True)
        finally:
            browser.close()
    for name, xs in results.items():
        print(f"{name}: median {statistics.median(xs):.2f} s  (runs: {', '.join(f'{x:.2f}' for x in xs)})")
    print("load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
