"""A real report, rendered in headless Chromium with the network cut off."""

import shutil
from pathlib import Path

import pytest

from autotune.report import write_report
from tests.test_report import DOCUMENT, KNOWN, explanation, known_space, make_study

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_report_draws_every_plot_offline_without_javascript_errors(tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    path = write_report(make_study(*KNOWN), tmp_path / "report.html", DOCUMENT, explanation(), known_space())
    errors, requests = [], []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run"],
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)

        def offline(route):  # the report must need nothing but its own file
            requests.append(route.request.url)
            route.continue_() if route.request.url.startswith("file:") else route.abort()

        page.route("**/*", offline)
        page.goto(path.as_uri(), wait_until="load")
        drawn = page.evaluate(
            """() => Array.from(document.querySelectorAll('div.js-plotly-plot')).map(el => ({
                id: el.id, traces: (el.data || []).length, svg: !!el.querySelector('svg.main-svg')}))"""
        )
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
        browser.close()
    assert errors == []
    assert [r for r in requests if not r.startswith("file:")] == []
    assert sorted(d["id"] for d in drawn) == sorted(
        ["plot-winner", "plot-explain", "plot-history", "plot-pareto", "plot-worth", "plot-parallel"])
    assert all(d["traces"] > 0 and d["svg"] for d in drawn), drawn
