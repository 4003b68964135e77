"""A report opened in headless Chromium (Playwright): the index and a page load with no console
errors, served over HTTP from the report folder alone (plotly.js from ./assets, no network), and
every figure the page emitted renders (a .js-plotly-plot with an svg.main-svg inside)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from _browser import CHROMIUM, CHROMIUM_ARGS, free_port

from workbench.report import resolve_settings, run_report

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
C07 = ROOT / "traces" / "lab" / "c07"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium missing")]



@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("browser") / "report"
    bad = out.parent / "bad.pcap"
    bad.write_bytes(b"not a capture at all\n")
    o = run_report([str(C07), str(bad)], out, resolve_settings("all"), jobs=1, show_progress=False)
    assert o.n_ok == 1 and o.n_failed == 1
    port = free_port()
    srv = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                            "--directory", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(base + "/index.html", timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    try:
        yield out, base
    finally:
        srv.terminate()
        srv.wait(timeout=10)


def test_index_and_page_render_every_figure_without_console_errors(served) -> None:
    from playwright.sync_api import sync_playwright

    out, base = served
    man = json.loads((out / "manifest.json").read_text())
    ok = next(i for i in man["inputs"] if i["status"] == "ok")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            problems: list[str] = []
            outside: list[str] = []
            page.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
            page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(base) else None)

            page.goto(base + "/index.html", wait_until="load")
            assert page.locator("a[href$='.html']").count() >= 1
            assert "not a capture" in page.content() or "bad.pcap" in page.content()
            page.screenshot(path=str(ARTIFACTS / "report-index.png"), full_page=True)

            page.goto(f"{base}/{ok['page']}", wait_until="load")
            expected = int(page.evaluate("document.body.dataset.figures"))
            assert expected == ok["figures"] == 8   # 7 comparison figures + the capture views
            page.wait_for_function(
                "n => Array.from(document.querySelectorAll('.js-plotly-plot'))"
                ".filter(e => e.querySelector('svg.main-svg')).length === n", arg=expected, timeout=30_000)
            rendered = page.evaluate(
                "Array.from(document.querySelectorAll('.js-plotly-plot'))"
                ".filter(e => e.querySelector('svg.main-svg')).length")
            assert rendered == expected
            assert page.locator("td.best").count() > 0
            # The tables read without scrolling sideways (issue 15): nothing wider than the window.
            assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
            page.screenshot(path=str(ARTIFACTS / "report-page.png"), full_page=True)
            assert problems == []
            assert outside == []  # offline: nothing but the report folder was fetched
        finally:
            browser.close()
