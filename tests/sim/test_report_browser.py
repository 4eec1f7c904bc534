"""The simulation report opens in a real browser (Debian's chromium, driven by Playwright) and shows its plots."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GUIDE

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")


def test_report_renders_every_plot_in_chromium(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "flexq.cli.main", "simulate", str(GUIDE / "scenario-week.yaml"),
                           "--report", str(tmp_path), "--compare", "--no-progress"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "lower-bound" in proc.stderr and "p95 wait" in proc.stderr  # the table at the end
    errors: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("requestfailed", lambda req: errors.append(req.url))
            page.goto((tmp_path / "report.html").as_uri())
            policies = page.locator("#policies tr td:first-child").all_inner_texts()
            assert policies == ["kueue-compatible", "flexq", "oracle", "lower-bound"]
            ratios = page.locator("#policies tr td:nth-child(6)").all_inner_texts()
            assert ratios[2] == "1.00" and float(ratios[1]) <= 1.1 and float(ratios[0]) > float(ratios[1])
            labels = page.locator("svg[aria-label]").evaluate_all("els => els.map(e => e.getAttribute('aria-label'))")
            assert labels == ["wait distribution per policy", "jobs waiting over time",
                              "pool nodes over time, kueue-compatible", "pool nodes over time, flexq"]
            for svg in page.locator("svg").all():
                box = svg.bounding_box()
                assert box is not None and box["width"] > 100 and box["height"] > 50
            # Every plotted series is drawn: a path with real extent per policy or pool.
            lengths = page.locator("svg[aria-label] path").evaluate_all(
                "els => els.map(e => e.getTotalLength())")
            assert len(lengths) == 4 + 4 + 6 + 6 and min(lengths) > 50  # CDFs, queues, pools (nodes, in use)
            assert page.locator("svg rect").count() > 2 * 191  # Gantt: a waiting and a running bar per job
        finally:
            browser.close()
    assert errors == []
