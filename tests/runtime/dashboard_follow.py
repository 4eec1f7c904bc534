"""The web dashboard in a real browser (Debian's chromium, driven by Playwright) following the guide's flow on a real
``flexq server`` with real Ray and emulated capacity (DWS answers after a delay): job 1 on on-demand, job 2 waiting
for its ProvisioningRequest with an ETA, then both running and succeeded; job 1's page with its log, its loss chart
and its Ray dashboard through the server; the report of a simulation. A screenshot of each page is kept under
``.pytest-artifacts/dashboard/``. It follows the run that :mod:`tests.runtime.guide_run` makes and checks."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any

from tests.conftest import GUIDE, ROOT, Server
from tests.runtime.ray_leaks import RayProcesses, clusters_of
from tests.support import cli_ok

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]
ARTIFACTS = ROOT / ".pytest-artifacts" / "dashboard"
# Every state a row of the jobs table shows, per job, as the page updates itself.
RECORD_STATES = """
window.__seen = {};
new MutationObserver(() => {
  for (const row of document.querySelectorAll("#jobs tbody tr")) {
    (window.__seen[row.dataset.job] ||= []).includes(row.dataset.state) || window.__seen[row.dataset.job].push(
      row.dataset.state);
  }
}).observe(document, {subtree: true, childList: true, attributes: true});
"""


def follow(srv: Server, chromium: str, start: Callable[[], None], procs: RayProcesses) -> None:
    """Open the dashboard's pages, call ``start`` (which submits the guide's two jobs), and follow the jobs in the
    browser to their end. Fails on what a page shows wrong and on any error a page's scripts raise."""
    from playwright import sync_api as playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    cli_ok(srv, "simulate", str(GUIDE / "scenario-capacity.yaml"), "--report", str(srv.home / "reports" / "guide"),
           "--no-progress")
    errors: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000}, timezone_id="Asia/Tokyo")
            signing_in = context.new_page()  # as `flexq dashboard` opens it: the token once, then a cookie
            signing_in.goto(f"{srv.url}/ui/?token={srv.token}")
            signing_in.close()
            pages: list[Any] = []

            def page(url: str) -> Any:
                opened = context.new_page()
                opened.on("pageerror", lambda exc: errors.append(f"{url}: {exc}"))
                if url.endswith("/ui/jobs") and not pages:
                    opened.add_init_script(RECORD_STATES)
                opened.goto(srv.url + url)
                pages.append(opened)
                return opened

            jobs = page("/ui/jobs")
            overview = page("/ui/")  # both open before the jobs come: they update themselves
            start()
            _waiting(playwright, jobs, overview)
            _job_one(playwright, srv, context, page("/ui/jobs"), procs)
            _both_done(playwright, jobs)
            reports = page("/ui/reports")
            reports.get_by_role("link", name="guide").click()
            playwright.expect(reports.locator("svg[aria-label]").first).to_be_visible()
            reports.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
            context.close()
        finally:
            browser.close()
    assert errors == []


def _row(jobs: Any, name: str) -> Any:
    return jobs.locator(f'#jobs tbody tr[data-job="{name}"]')


def _waiting(playwright: Any, jobs: Any, overview: Any) -> None:
    """What lasts only until DWS answers: job 2 waits for its ProvisioningRequest, with an ETA; job 1 on Plan A."""
    one, two = _row(jobs, "rayjob-tpu-v6e-dws-1"), _row(jobs, "rayjob-tpu-v6e-dws-2")
    playwright.expect(two.locator("td.reason")).to_contain_text("waiting for ProvisioningRequest", timeout=30_000)
    playwright.expect(two.locator("td.eta")).to_have_text(re.compile(r"\(in \d+s\)"))
    playwright.expect(one.locator("td.flavors")).to_contain_text("tpu-group=on-demand", timeout=60_000)
    jobs.screenshot(path=str(ARTIFACTS / "jobs-waiting.png"), full_page=True)
    request = overview.locator("#provisioning tbody tr").first
    playwright.expect(request.locator("td.eta")).to_contain_text("(in ")
    playwright.expect(overview.locator('#pools tr[data-pool="on-demand-pool"] td').nth(1)).to_have_text("on-demand")
    playwright.expect(overview.locator("#live")).to_contain_text("times in Asia/Tokyo")
    overview.screenshot(path=str(ARTIFACTS / "overview.png"), full_page=True)


def _job_one(playwright: Any, srv: Server, context: Any, job: Any, procs: RayProcesses) -> None:
    """Job 1's page, reached as a person would (by its link in the table): its Ray dashboard through the server while
    it runs, then its state, log and loss chart."""
    job.get_by_role("link", name="rayjob-tpu-v6e-dws-1").click()
    link = job.locator("#ray-link")
    playwright.expect(link).to_be_visible(timeout=180_000)
    assert clusters_of(srv.process.pid), "job 1's Ray cluster runs under the server"
    assert procs.count(), "and carries the test's tag"
    ray = context.new_page()
    answer = ray.goto(srv.url + str(link.get_attribute("href")))
    assert answer is not None and answer.ok and "<title>Ray Dashboard</title>" in answer.text()
    assert ray.url.startswith(srv.url + "/ui/ray/default/rayjob-tpu-v6e-dws-1/")
    ray.wait_for_function("document.getElementById('root')?.children.length > 0")  # its scripts ran
    playwright.expect(ray).to_have_title(re.compile(r".+ \| Ray Dashboard$"))  # its app routed itself
    # What it shows comes from the cluster's API, through the server as well: the job's submission.
    playwright.expect(ray.get_by_text(re.compile(r"rayjob-tpu-v6e-dws-1-\d{5}")).first).to_be_visible(
        timeout=60_000)
    ray.screenshot(path=str(ARTIFACTS / "ray-dashboard.png"))
    ray.close()
    playwright.expect(job.locator("#state")).to_have_text("succeeded", timeout=240_000)
    playwright.expect(job.locator("#log")).to_contain_text("Training Complete!", timeout=30_000)
    log = cli_ok(srv, "logs", "job/rayjob-tpu-v6e-dws-1").stdout
    epochs = sorted({int(e) for e in re.findall(r"'epoch': (\d+)\}, validation", log)})
    assert epochs == [0, 10, 20, 30, 40], "train.py reports every tenth epoch"
    points = job.locator("#chart svg circle")
    playwright.expect(points).to_have_count(len(epochs))
    assert [int(x) for x in points.evaluate_all("els => els.map(e => e.dataset.x)")] == epochs
    assert job.locator("#chart svg").get_attribute("aria-label") == "loss against epoch"
    job.get_by_label("Logarithmic scale").check()
    heights = points.evaluate_all("els => els.map(e => Number(e.getAttribute('cy')))")
    assert min(abs(a - b) for a, b in itertools.pairwise(heights)) > 5, \
        "on a log scale the loss, falling by orders of magnitude, spreads out"
    job.screenshot(path=str(ARTIFACTS / "job.png"), full_page=True)


def _both_done(playwright: Any, jobs: Any) -> None:
    """Both jobs succeeded, and the table showed each one running first (job 2 pending before that)."""
    one, two = _row(jobs, "rayjob-tpu-v6e-dws-1"), _row(jobs, "rayjob-tpu-v6e-dws-2")
    playwright.expect(two.locator("td.state")).to_have_text("succeeded", timeout=240_000)
    playwright.expect(one.locator("td.state")).to_have_text("succeeded")
    seen = jobs.evaluate("window.__seen")
    for name in ("rayjob-tpu-v6e-dws-1", "rayjob-tpu-v6e-dws-2"):
        assert "running" in seen[name] and seen[name][-1] == "succeeded", seen
    assert "pending" in seen["rayjob-tpu-v6e-dws-2"], seen
    jobs.screenshot(path=str(ARTIFACTS / "jobs-succeeded.png"), full_page=True)
