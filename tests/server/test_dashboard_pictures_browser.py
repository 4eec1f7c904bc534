"""The dashboard in a real browser (Debian's chromium, driven by Playwright) against a live ``flexq server`` that
does not run jobs (``--runtime none``), the guide's two jobs queued on it: job 2 racing on-demand against DWS,
DWS slow to answer. What a person sees: that jobs are not executed, a job's page reached by the job's own name and
agreeing with itself, its phases drawn, the queues, admissions, pools and cohorts drawn, and the jobs table whole at
900 px and at 1400 px."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, Server, guide_text
from tests.support import condition, eventually, guide_setup, serve_capacity, workloads

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright package (the dev extra)")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
expect = sync_api.expect

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]
ARTIFACTS = ROOT / ".pytest-artifacts" / "dashboard"
CAPACITY = """cloud:
  on-demand-pool: {available: 4, bootTime: 1s}
  dws-pool: {queuedDelay: 1h}
  default-pool: {bootTime: 1s}
"""


@pytest.fixture(scope="module")
def guide(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    servers = serve_capacity(tmp_path_factory.mktemp("pictures"), CAPACITY)
    srv = next(servers)
    try:
        guide_setup(srv, guide_text("dws-tpu-queue.yaml"))
        eventually(lambda: _true(condition(workloads(srv)["rayjob-tpu-v6e-dws-1"], "Admitted") == "True"))
        yield srv
    finally:
        servers.close()


@pytest.fixture
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        opened = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield opened
        finally:
            opened.close()


def _true(value: bool) -> None:
    assert value


def _page(browser: Any, srv: Server, width: int, errors: list[str]) -> Any:
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.new_page().goto(f"{srv.url}/ui/?token={srv.token}")  # signed in once, as `flexq dashboard` does
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return page


@pytest.mark.long
def test_a_job_page_by_the_jobs_name_says_it_is_not_executed(guide: Server, browser: Any) -> None:
    errors: list[str] = []
    page = _page(browser, guide, 1400, errors)
    page.goto(f"{guide.url}/ui/jobs/default/rayjob-tpu-v6e-dws-1")  # the job's name, not its workload's
    expect(page.locator("#title")).to_have_text("RayJob rayjob-tpu-v6e-dws-1")
    expect(page.locator("#state")).to_have_text("admitted")
    expect(page.locator("#not-executed")).to_contain_text("--runtime none")
    expect(page.locator("#execution")).to_contain_text("not executed")
    log = page.locator("#log")
    expect(log).to_contain_text("never executed")
    assert "not started yet" not in (log.text_content() or ""), "the timeline says it was admitted"
    timeline = page.locator("#timeline").inner_text()
    assert "Admitted=True" in timeline
    bars = page.locator("#phases svg rect[data-phase]")
    assert bars.evaluate_all("els => els.map(e => e.dataset.phase)") == ["queued", "racing", "provisioning", "admitted"]
    story = page.locator("#phases").inner_text()
    assert "racing" in story and "on dws, on-demand" in story and "withdrawn before it was provisioned" in story
    assert page.locator('#phases rect[data-phase="admitted"]').get_attribute("data-ongoing") == "true"
    page.screenshot(path=str(ARTIFACTS / "job-not-executed.png"), full_page=True)

    page.goto(f"{guide.url}/ui/jobs/default/rayjob-tpu-v6e-dws-2")  # racing, DWS to answer in an hour
    expect(page.locator("#state")).to_have_text("pending")
    expect(page.locator("#log")).to_contain_text("has not started yet")
    phases = page.locator("#phases svg rect[data-phase]")
    expect(phases.first).to_be_visible()
    shown = phases.evaluate_all("els => els.map(e => e.dataset.phase)")
    assert shown[:2] == ["queued", "racing"] and "provisioning" in shown, shown
    assert all(v == "true" for v in phases.evaluate_all("els => els.map(e => e.dataset.ongoing)"))
    widths = phases.evaluate_all("els => els.map(e => Number(e.getAttribute('width')))")
    assert min(widths) >= 2
    page.goto(f"{guide.url}/ui/jobs/default/no-such-job")
    expect(page.locator("#error")).to_contain_text('404 no workload or job "no-such-job" in namespace default')
    expect(page.locator("#facts .loading")).to_have_text("Could not load this: the server did not answer.")
    assert errors == []


def test_the_overview_draws_queues_admissions_pools_and_cohorts(guide: Server, browser: Any) -> None:
    errors: list[str] = []
    page = _page(browser, guide, 1400, errors)
    page.goto(f"{guide.url}/ui/")
    waiting = page.locator('#waiting-chart path[data-series="cluster-queue"]')
    expect(waiting).to_have_count(1)
    admitted = page.locator("#admissions-chart rect.bar-v")
    expect(admitted.first).to_be_visible()
    assert sum(int(v) for v in admitted.evaluate_all("els => els.map(e => e.dataset.value)")) >= 1
    expect(page.locator("#admissions-caption")).to_contain_text("in the hour")
    pool = page.locator('[data-pool-chart="on-demand-pool"] path.series')
    expect(pool).to_have_count(1)
    assert pool.evaluate("e => e.getTotalLength()") > 50, "the pool grew from 0 to 4 nodes: a line with extent"
    for svg in page.locator("#history-h ~ * svg, #pool-charts svg").all():
        assert svg.locator("text.axis-title").count() == 2, "both axes say what they measure"
    quota = page.locator('#queues tr[data-queue="cluster-queue"] td.num', has_text="unlimited")
    expect(quota.first).to_be_visible()
    assert "1000000000" not in page.locator("#queues").inner_text()
    page.screenshot(path=str(ARTIFACTS / "overview-pictures.png"), full_page=True)
    assert errors == []


@pytest.mark.parametrize("width", [900, 1400])
def test_the_jobs_table_shows_eta_and_cost_without_scrolling(guide: Server, browser: Any, width: int) -> None:
    errors: list[str] = []
    page = _page(browser, guide, width, errors)
    page.goto(f"{guide.url}/ui/jobs")
    rows = page.locator("#jobs tbody tr")
    expect(rows).to_have_count(2)
    expect(page.locator('tr[data-job="rayjob-tpu-v6e-dws-2"] td.eta')).to_contain_text("(in ")
    assert page.evaluate("document.documentElement.scrollWidth") <= width, "no sideways scrolling"
    cells = ["th.eta", 'th[data-sort="cost"]', 'tr[data-job="rayjob-tpu-v6e-dws-2"] td.eta',
             'tr[data-job="rayjob-tpu-v6e-dws-2"] td.cost']
    # Measured together in the page, between two of its updates (a row is drawn anew on each: measured one at a time,
    # a cell could be gone between finding it and measuring it).
    boxes = page.evaluate("""cells => cells.map(c => {
        const e = document.querySelector("#jobs " + c); if (!e) return null;
        const r = e.getBoundingClientRect(); return {x: r.x, width: r.width}; })""", cells)
    for cell, box in zip(cells, boxes, strict=True):
        assert box is not None and box["width"] > 20 and box["x"] + box["width"] <= width, (cell, box)
    page.screenshot(path=str(ARTIFACTS / f"jobs-{width}.png"), full_page=True)
    assert errors == []


def test_cards_say_loading_then_say_when_the_server_fails(guide: Server, browser: Any) -> None:
    errors: list[str] = []
    page = _page(browser, guide, 1400, errors)
    held: list[Any] = []
    page.route("**/flexq/v1/dashboard/overview", lambda route: held.append(route))
    page.goto(f"{guide.url}/ui/")
    expect(page.locator("#queues .loading")).to_have_text("Loading…")
    expect(page.locator("#pools .loading")).to_have_text("Loading…")
    assert held, "the overview was asked for and is held"
    held[0].fulfill(status=500, body="the store is down")
    expect(page.locator("#error")).to_contain_text("the store is down")
    expect(page.locator("#queues .loading")).to_have_text("Could not load this: the server did not answer.")
    page.unroute("**/flexq/v1/dashboard/overview")
    expect(page.locator("#queues table")).to_be_visible(timeout=15_000)  # tried again
    expect(page.locator("#error")).to_be_hidden()
    assert errors == []


@pytest.fixture(autouse=True)
def _artifacts() -> None:
    Path(ARTIFACTS).mkdir(parents=True, exist_ok=True)
