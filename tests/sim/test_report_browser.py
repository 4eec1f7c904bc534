"""The simulation report opens in a real browser (Debian's chromium, driven by Playwright) and shows its plots:
every axis titled, a small plot per pool (pools never drawn over each other), Gantt labels whole, a way back to the
dashboard's reports where the server serves it."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path
from typing import Any

import pytest

from flexq.objects.service import ObjectService
from flexq.server.app import create_app
from flexq.store import Store
from tests import forks
from tests.conftest import GUIDE
from tests.server.inprocess import serving

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
POLICIES = ["kueue-compatible", "flexq", "oracle", "lower-bound"]
POOLS = ["default-pool", "dws-pool", "on-demand-pool"]


def _simulate(scenario: Path, out: Path, *extra: str) -> str:
    proc = forks.run(["simulate", str(scenario), "--report", str(out), "--no-progress", *extra], text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def _inside(inner: dict[str, float] | None, outer: dict[str, float] | None) -> bool:
    assert inner is not None and outer is not None
    return (inner["x"] >= outer["x"] - 0.5 and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 0.5
            and inner["y"] >= outer["y"] - 0.5 and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + 0.5)


def test_report_renders_every_plot_in_chromium(tmp_path: Path) -> None:
    stderr = _simulate(GUIDE / "scenario-week.yaml", tmp_path, "--compare")
    assert "lower-bound" in stderr and "p95 wait" in stderr  # the table at the end
    with (tmp_path / "jobs.csv").open() as fh:
        names = {r["job"] for r in csv.DictReader(fh)}
    errors: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("requestfailed", lambda req: errors.append(req.url))
            page.goto((tmp_path / "report.html").as_uri())
            policies = page.locator("#policies tr td:first-child").all_inner_texts()
            assert policies == POLICIES
            ratios = page.locator("#policies tr td:nth-child(6)").all_inner_texts()
            assert ratios[2] == "1.00" and float(ratios[1]) <= 1.1 and float(ratios[0]) > float(ratios[1])
            labels = page.locator("svg[aria-label]").evaluate_all("els => els.map(e => e.getAttribute('aria-label'))")
            pools = [f"{pool} nodes over time, {policy}" for policy in POLICIES[:2] for pool in POOLS]
            gantts = [f"jobs over time, {policy}" for policy in POLICIES]
            assert labels == ["wait distribution per policy", "jobs waiting over time", *pools, *gantts]
            for svg in page.locator("svg").all():
                box = svg.bounding_box()
                assert box is not None and box["width"] > 100 and box["height"] > 50
                titles = svg.locator("text.title").all_text_contents()
                assert len(titles) == (1 if svg.get_attribute("aria-label") in gantts else 2) and all(titles), \
                    "every axis says what it measures (a Gantt's rows are its jobs)"
            # Every plotted series is drawn: a path with real extent per policy or pool.
            lengths = page.locator("svg[aria-label] path").evaluate_all("els => els.map(e => e.getTotalLength())")
            assert len(lengths) == 4 + 4 + 6 + 6 and min(lengths) > 50  # CDFs, queues, pools (nodes, in use)
            for label in pools:  # one pool a plot, side by side: no two share an area
                assert page.locator(f'svg[aria-label="{label}"] path').count() == 2
            boxes = [page.locator(f'svg[aria-label="{label}"]').bounding_box() for label in pools]
            assert not any(_inside(a, b) or _inside(b, a) for i, a in enumerate(boxes) for b in boxes[i + 1:])
            assert page.locator("svg rect").count() > 2 * 191  # Gantt: a waiting and a running bar per job
            gantt = page.locator(f'svg[aria-label="{gantts[1]}"]')
            written = gantt.locator("text.name").evaluate_all("els => els.map(e => e.firstChild.textContent)")
            assert len(written) > 100 and set(written) <= names, "each job's whole name"
            frame = gantt.bounding_box()
            for text in gantt.locator("text.name").all()[:50]:
                assert _inside(text.bounding_box(), frame), "no label is clipped"
            contents = page.locator("header nav a")
            assert contents.count() >= 6
            contents.filter(has_text="Pool nodes").click()
            assert page.url.endswith("#pools-h")
            assert page.locator("#back").is_hidden(), "opened as a file: there is no dashboard to go back to"
        finally:
            browser.close()
    assert errors == []


def test_a_served_report_leads_back_to_the_list(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _simulate(GUIDE / "scenario-capacity.yaml", home / "reports" / "guide")
    store = Store(home / "flexq.db")
    try:
        with serving(create_app(ObjectService(store), home=home)) as url, playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page: Any = browser.new_page(viewport={"width": 1200, "height": 900})
                page.goto(f"{url}/ui/reports/guide/report.html")
                back = page.get_by_role("link", name="← Simulator reports")
                playwright.expect(back).to_be_visible()
                back.click()
                playwright.expect(page).to_have_url(f"{url}/ui/reports")
                playwright.expect(page.get_by_role("link", name="guide")).to_be_visible()
                page.get_by_role("link", name="guide").click()
                gantt = page.locator('svg[aria-label="jobs over time, flexq"]')
                assert gantt.locator("text.name").evaluate_all("els => els.map(e => e.firstChild.textContent)") == [
                    "RayJob default/rayjob-tpu-v6e-dws-1", "RayJob default/rayjob-tpu-v6e-dws-2"]
            finally:
                browser.close()
    finally:
        store.close()
