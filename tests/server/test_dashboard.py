"""The dashboard's JSON and pages: paging, filters and sorting over a store of jobs (the app served in-process),
and what a live server running the guide's flow says about its queues, pools, ProvisioningRequests and jobs."""

from __future__ import annotations

import os
import re
import shutil
import stat
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest

from flexq.durations import dated, ends_at
from flexq.objects.service import ObjectService
from flexq.server.app import create_app
from flexq.server.ui import State
from flexq.server.ui_data import STATES as STATES_SHOWN
from flexq.server.ui_data import JobEntry, cohorts, eta, metric_points, phases, queues, unlimited
from flexq.server.ui_history import PoolHistory, history
from flexq.server.ui_jobs import JobTable
from flexq.server.ui_models import JobRow, Series
from flexq.store import Key, Store
from tests import admin, forks
from tests.conftest import guide_text
from tests.server.inprocess import serving
from tests.support import cli, condition, eventually, guide_setup, serve_capacity, workloads

STATES = ("pending", "reserved", "admitted", "succeeded")


def _workload(i: int, state: str, now: datetime) -> dict[str, Any]:
    """A Job's workload as the controller writes it, in one of :data:`STATES`."""
    created = now  # the store stamps creation itself, a moment later (another second, on a busy machine)
    stamp = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    reserved = (created + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")  # after the store's creation stamp
    conditions: list[dict[str, Any]] = []
    status: dict[str, Any] = {"conditions": conditions, "cost": {"usd": i / 100}}
    flavor = "spot" if i % 2 else "on-demand"
    if state == "pending":
        conditions.append({"type": "QuotaReserved", "status": "False", "reason": "Pending", "lastTransitionTime": stamp,
                           "message": "waiting for ProvisioningRequest pr-1; expected in 2m"})
    else:
        status["admission"] = {"clusterQueue": "cq", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": flavor}, "count": 1}]}
        conditions.append({"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                           "message": "Quota reserved in ClusterQueue cq", "lastTransitionTime": reserved})
        admitted = state in ("admitted", "succeeded")
        conditions.append({"type": "Admitted", "status": "True" if admitted else "False",
                           "reason": "Admitted" if admitted else "UnsatisfiedAdmissionChecks",
                           "message": "The workload is admitted" if admitted else "waiting for checks",
                           "lastTransitionTime": (created + timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")})
        if state == "succeeded":
            conditions.append({"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done",
                               "lastTransitionTime": stamp})
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"job-{i:04d}-wl", "namespace": "team", "creationTimestamp": stamp,
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": f"job-{i:04d}",
                                              "uid": str(i)}]},
            "spec": {"queueName": f"q{i % 3}", "priority": i % 5, "podSets": []}, "status": status}


@pytest.fixture
def client(tmp_path: Path) -> Any:
    store = Store(tmp_path / "home" / "flexq.db")
    now = datetime.now(UTC)
    with store.transaction():
        for i in range(120):
            wl = _workload(i, STATES[i % 4], now)
            store.create(Key("kueue.x-k8s.io", "workloads", "team", wl["metadata"]["name"]), wl)
        for name, used in (("cq-a", "3"), ("cq-b", "1")):
            store.create(Key("kueue.x-k8s.io", "clusterqueues", "", name), {
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
                "spec": {"cohort": "ml", "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                    {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]},
                "status": {"flavorsReservation": [{"name": "spot", "resources": [{"name": "cpu", "total": used}]}]}})
        store.create(Key("kueue.x-k8s.io", "cohorts", "", "ml"), {  # cohorts form a tree: ml under org
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "ml"},
            "spec": {"parentName": "org"}})
        variant = _workload(999, "pending", now)
        variant["metadata"]["ownerReferences"] = [{"kind": "Workload", "name": "job-0000-wl", "uid": "0"}]
        store.create(Key("kueue.x-k8s.io", "workloads", "team", "job-0999-wl"), variant)
    report = tmp_path / "home" / "reports" / "week"
    report.mkdir(parents=True)
    (report / "report.html").write_text("<title>report</title>")
    try:
        with serving(create_app(ObjectService(store), home=tmp_path / "home")) as url, \
                admin.client(url) as http:
            yield http
    finally:
        store.close()


def test_jobs_are_filtered_sorted_and_paged_by_the_server(client: httpx.Client) -> None:
    page = client.get("/flexq/v1/dashboard/jobs", params={"limit": 25}).json()
    assert page["total"] == 120, "a racing variant is not a row"
    assert len(page["items"]) == 25 and page["items"][0]["jobName"] == "job-0000"
    assert page["flavors"] == ["on-demand", "spot"] and page["queues"] == ["cq", "q0", "q1", "q2"]
    last = client.get("/flexq/v1/dashboard/jobs", params={"limit": 25, "offset": 100}).json()["items"]
    assert [r["jobName"] for r in last] == [f"job-{i:04d}" for i in range(100, 120)]
    pending = client.get("/flexq/v1/dashboard/jobs", params={"state": "pending", "queue": "q1"}).json()
    assert pending["total"] == 10 and {r["state"] for r in pending["items"]} == {"pending"}
    assert all(int(r["jobName"][4:]) % 12 == 4 for r in pending["items"]), "i % 4 == 0 and i % 3 == 1"
    row = pending["items"][0]
    assert row["reason"] == "waiting for ProvisioningRequest pr-1; expected in 2m" and row["flavors"] == ""
    assert 119 <= (datetime.fromisoformat(row["eta"]) - datetime.fromisoformat(row["created"])).total_seconds() <= 120
    spot = client.get("/flexq/v1/dashboard/jobs", params={"flavor": "spot", "state": "succeeded"}).json()
    assert spot["total"] == 30 and all(r["flavors"] == "main=spot" for r in spot["items"])
    assert all(r["reason"] == "" and 29 <= r["waitSeconds"] <= 30 for r in spot["items"]), "until admitted"
    costly = client.get("/flexq/v1/dashboard/jobs", params={"sort": "cost", "order": "desc", "limit": 3}).json()
    assert [r["costUsd"] for r in costly["items"]] == [1.19, 1.18, 1.17]
    by_priority = client.get("/flexq/v1/dashboard/jobs", params={"sort": "priority", "limit": 500}).json()["items"]
    assert [r["priority"] for r in by_priority] == sorted(r["priority"] for r in by_priority)
    assert client.get("/flexq/v1/dashboard/jobs", params={"sort": "bogus"}).status_code == 422
    assert client.get("/flexq/v1/dashboard/jobs", params={"limit": 0}).status_code == 422
    assert get_args(State) == STATES_SHOWN
    refused = client.get("/flexq/v1/dashboard/jobs", params={"state": "sleeping"})
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["query", "state"]


def test_a_running_jobs_cost_is_what_it_has_cost_until_now(tmp_path: Path) -> None:
    """The status says what a job had cost when it was last written; the table shows what it has cost as of now,
    where the controller knows it (a run still going), and sorts by that."""
    store = Store(tmp_path / "flexq.db")
    try:
        now = datetime.now(UTC)
        for i in (1, 2, 3):
            wl = _workload(i, "admitted", now)
            store.create(Key("kueue.x-k8s.io", "workloads", "team", wl["metadata"]["name"]), wl)
        table = JobTable(store)
        live = {"team/job-0001-wl": 24.83999, "team/elsewhere": 9.0}
        page = table.page(None, None, None, "cost", True, 0, 10, costs=live)
        assert [(r.name, r.costUsd) for r in page.items] == [
            ("job-0001-wl", 24.84), ("job-0003-wl", 0.03), ("job-0002-wl", 0.02)], "written 0.01, running since"
        assert [r.costUsd for r in table.page(None, None, None, "cost", True, 0, 10).items] == [0.03, 0.02, 0.01]
        row = table.row("team", "job-0001-wl", live)
        assert row is not None and row.costUsd == 24.84
    finally:
        store.close()


def test_one_job_and_what_is_missing(client: httpx.Client) -> None:
    detail = client.get("/flexq/v1/dashboard/jobs/team/job-0002-wl").json()
    assert detail["job"]["state"] == "admitted" and detail["logUrl"] is None and detail["rayDashboardUrl"] is None
    assert [t["what"] for t in detail["timeline"]] == ["Created", "QuotaReserved=True", "Admitted=True"]
    missing = client.get("/flexq/v1/dashboard/jobs/team/nope")
    assert missing.status_code == 404 and "nope" in missing.json()["message"]
    assert client.get("/flexq/v1/dashboard/jobs/team/job-0999-wl").status_code == 404, "a variant has no page"
    assert client.get("/ui/ray/team/job-0002/").status_code == 404, "no runtime, no Ray dashboard"


def test_pages_assets_and_reports(client: httpx.Client) -> None:
    for path, title in (("/ui/", "Overview"), ("/ui/jobs", "Jobs"), ("/ui/jobs/team/job-0002-wl", "Job"),
                        ("/ui/reports", "Simulator reports")):
        page = client.get(path)
        assert page.status_code == 200 and f"<title>flexq · {title}</title>" in page.text
        urls = re.findall(r'(?:href|src)="([^"]+)"', page.text)
        assert urls and all(u.startswith(("/", "data:")) and not u.startswith("//") for u in urls), "same origin"
        for asset in (u for u in urls if u.startswith("/ui/static/")):
            assert client.get(asset).status_code == 200, asset
    assert client.get("/ui/static/nope.js").status_code == 404
    assert client.get("/flexq/v1/dashboard/reports").json()[0]["url"] == "/ui/reports/week/report.html"
    assert client.get("/ui/reports/week/report.html").text == "<title>report</title>"
    assert client.get("/ui/reports/week/..%2F..%2Fflexq.db").status_code == 404
    assert client.get("/ui/reports/..%2Fweek/report.html").status_code == 404
    paths = client.get("/openapi.json").json()["paths"]
    jobs = paths["/flexq/v1/dashboard/jobs"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert jobs == {"$ref": "#/components/schemas/JobPage"}
    assert {"/flexq/v1/dashboard/overview", "/flexq/v1/dashboard/jobs/{namespace}/{name}",
            "/flexq/v1/dashboard/changes"} <= set(paths)


def test_a_cohort_sums_its_queues() -> None:
    def cq(name: str, cohort: str, used: str, nominal: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"cohort": cohort, "resourceGroups": [{"flavors": [
            {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": nominal},
                                           {"name": "memory", "nominalQuota": "32Gi"}]}]}]},
                "status": {"flavorsReservation": [{"name": "spot", "resources": [
                    {"name": "cpu", "total": used}, {"name": "memory", "total": "8Gi"}]}]}}

    rows = queues([cq("b", "ml", "3", "10"), cq("a", "ml", "500m", "4"), cq("c", "", "1", "1")])
    [ml] = cohorts(rows)
    assert (ml.name, ml.queues) == ("ml", ["a", "b"])
    assert [(r.resource, r.used, r.nominal, r.usedText, r.nominalText) for r in ml.flavors[0].resources] == [
        ("cpu", 3.5, 14.0, "3.5", "14"), ("memory", 16 * 2**30, 64 * 2**30, "16Gi", "64Gi")]


def test_eta_and_metrics_are_read_from_what_was_written() -> None:
    assert eta("waiting for 4 node(s) in dws-pool; expected in 1h30m", "2026-01-01T10:00:00Z") == "2026-01-01T11:30:00Z"
    assert eta("waits for room: a slice frees in 45s", "2026-01-01T10:00:00Z") == "2026-01-01T10:00:45Z"
    assert eta("Quota reserved", "2026-01-01T10:00:00Z") is None
    said = dated("waiting for ProvisioningRequest pr-1; expected in 2m", datetime(2026, 1, 1, 10, 0, tzinfo=UTC))
    assert said == "waiting for ProvisioningRequest pr-1; expected in 2m (at 2026-01-01T10:02:00Z)"
    assert eta(said, "2026-01-01T09:00:00Z") == "2026-01-01T10:02:00Z", "the moment said, not the transition's"
    later = datetime(2026, 1, 1, 10, 1, tzinfo=UTC)
    assert dated("waiting for ProvisioningRequest pr-1; expected in 2m", later, said) == said, "the same wait stands"
    assert dated("waiting for ProvisioningRequest pr-1; expected in 1m", later, said) == (
        "waiting for ProvisioningRequest pr-1; expected in 1m (at 2026-01-01T10:02:00Z)")
    assert dated("Quota reserved", later, said) == "Quota reserved"
    # A moment known exactly (the cloud's answer at 10:01:59.7) is named as it is, whenever the message is written.
    exact = datetime(2026, 1, 1, 10, 1, 59, 700000, tzinfo=UTC)
    assert ends_at("waiting for 4 node(s) in dws-pool; expected in 2m", exact) == (
        "waiting for 4 node(s) in dws-pool; expected in 2m (at 2026-01-01T10:01:59Z)")
    assert ends_at(said, exact) == said and ends_at("Quota reserved", exact) == "Quota reserved"
    log = "".join(f"(RayTrainWorker pid=1) Reporting training result {n}: TrainingReport(checkpoint=None, metrics="
                  f"{{'loss': {10.0 / n}, 'epoch': {10 * (n - 1)}}}, validation=False) from rank 0\n"
                  f"(RayTrainWorker pid=2) Reporting training result {n}: TrainingReport(checkpoint=None, metrics="
                  f"{{'loss': {10.0 / n}, 'epoch': {10 * (n - 1)}}}, validation=False) from rank 1\n"
                  for n in range(1, 6))
    points = metric_points(log + "Training Complete!\n")
    assert [(p.report, p.values["epoch"], p.values["loss"]) for p in points] == [
        (n, 10.0 * (n - 1), 10.0 / n) for n in range(1, 6)]


CAPACITY = """cloud:
  on-demand-pool: {available: 4, bootTime: 1s}
  dws-pool: {queuedDelay: 1h}
  default-pool: {bootTime: 1s}
"""


def test_a_live_server_shows_where_the_guides_jobs_stand(tmp_path: Path) -> None:
    servers = serve_capacity(tmp_path, CAPACITY)
    srv = next(servers)
    try:
        with admin.stream("GET", srv.url + "/flexq/v1/dashboard/changes", timeout=10) as events:
            lines = events.iter_lines()
            assert next(lines) == "retry: 2000"
            first = next(int(line[6:]) for line in lines if line.startswith("data: "))
            # Each command in a process of its own: with the jobs made within a second of each other, job 2 waits
            # for quota before it races, and its row's ETA, read from its condition's lastTransitionTime (which a
            # new message does not move), comes out a second or more before its request's.
            guide_setup(srv, guide_text("dws-tpu-queue.yaml"), here=False)
            assert next(int(line[6:]) for line in lines if line.startswith("data: ")) > first, "the store changed"
        eventually(lambda: _assert(condition(workloads(srv)["rayjob-tpu-v6e-dws-1"], "Admitted") == "True"))

        def settled() -> dict[str, Any]:
            view = admin.get(srv.url + "/flexq/v1/dashboard/overview").json()
            assert view["provisioning"] and {p["name"]: p["ready"] for p in view["pools"]}["on-demand-pool"] == 4
            # The queue's figures are its status, written apart from the workloads' (at most every 0.1 s, less often
            # on a busy machine): they may be a write behind the pools.
            queue = view["queues"][0]
            assert (queue["name"], queue["pending"], queue["reserving"], queue["admitted"]) == \
                ("cluster-queue", 1, 1, 1)
            return dict(view)

        view = eventually(settled)
        queue = view["queues"][0]
        tpu = {(f["flavor"], r["resource"]): r for f in queue["flavors"] for r in f["resources"]}
        assert (tpu[("on-demand", "google.com/tpu")]["used"], tpu[("on-demand", "google.com/tpu")]["nominal"]) == \
            (16.0, 16.0)
        pools = {p["name"]: p for p in view["pools"]}
        assert pools["dws-pool"]["capacityType"] == "flex-start" and pools["on-demand-pool"]["costPerHour"] > 0
        request = view["provisioning"][0]
        assert request["state"] == "Accepted" and "dws-pool" in request["message"]
        ahead = datetime.fromisoformat(request["eta"]) - datetime.now(UTC)
        assert timedelta(minutes=55) < ahead <= timedelta(hours=1), "DWS answers in an hour"
        rows = {r["jobName"]: r for r in admin.get(srv.url + "/flexq/v1/dashboard/jobs").json()["items"]}
        assert sorted(rows) == ["rayjob-tpu-v6e-dws-1", "rayjob-tpu-v6e-dws-2"]
        one, two = rows["rayjob-tpu-v6e-dws-1"], rows["rayjob-tpu-v6e-dws-2"]
        assert one["state"] == "admitted" and "tpu-group=on-demand" in one["flavors"] and one["reason"] == ""
        assert one["costUsd"] > 0, "its slice's nodes cost from the moment they are up, before its status is written"
        assert two["state"] == "pending" and two["reason"].startswith("racing: dws: waiting for ProvisioningRequest")
        assert two["eta"] == request["eta"]
        detail = admin.get(f"{srv.url}/flexq/v1/dashboard/jobs/default/{two['name']}").json()
        assert sorted(v["flavor"] for v in detail["variants"]) == ["dws", "on-demand"]
        assert detail["why"].startswith(two["reason"][:-3]) and "; on-demand: " in detail["why"], "not cut short"
        assert any(t["source"] == "provisioning" and "Accepted=True" in t["what"] for t in detail["timeline"])
        assert any(t["what"] == "VariantCreated" for t in detail["timeline"])
        printed = cli(srv, "dashboard", "--no-open")
        # The browser signs in once, with a one-time code that stands for the token (never the token itself, which
        # the address would carry over plain HTTP); the page keeps a cookie.
        assert printed.returncode == 0 and printed.stdout.startswith(f"{srv.url}/ui/?code="), printed.stdout
        assert srv.token not in printed.stdout
        signed = httpx.get(printed.stdout.strip(), follow_redirects=False, timeout=30)
        assert signed.status_code == 303 and "flexq-token=" in signed.headers["set-cookie"]
        assert httpx.get(printed.stdout.strip(), follow_redirects=False, timeout=30).status_code == 401, \
            "a code works once"
        opened = tmp_path / "opened"
        browser = tmp_path / "browser.sh"
        browser.write_text(f"#!/bin/sh\necho \"$1\" > {opened}\n")
        browser.chmod(browser.stat().st_mode | stat.S_IEXEC)
        env = {**srv.env(), "BROWSER": str(browser)}
        env.pop("DISPLAY", None)
        shown = forks.run(["dashboard"], text=True, env=env, timeout=60)
        assert shown.returncode == 0 and opened.read_text().strip() == shown.stdout.strip()
        assert f"{srv.url}/ui/?code=" in shown.stdout and shown.stdout != printed.stdout
        with admin.stream("GET", srv.url + "/flexq/v1/dashboard/changes", timeout=10) as events:
            assert next(events.iter_lines()) == "retry: 2000"
            srv.process.terminate()  # a browser tab left open does not keep a stopping server running
            assert srv.process.wait(timeout=8) == 0
        assert srv.process.stderr is not None and "Traceback" not in srv.process.stderr.read().decode()
    finally:
        servers.close()
    gone = forks.run(["dashboard", "--no-open"], text=True, env={**os.environ, "FLEXQ_SERVER": srv.url}, timeout=60)
    assert gone.returncode == 1 and "cannot reach the flexq server" in gone.stderr and not gone.stdout


def _assert(value: bool) -> None:
    assert value


def test_the_jobs_table_follows_the_change_log(tmp_path: Path) -> None:
    store = Store(tmp_path / "flexq.db")
    try:
        now = datetime.now(UTC)
        queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                 "metadata": {"name": "q1", "namespace": "team"}, "spec": {"clusterQueue": "cq-a"}}
        lq = store.create(Key("kueue.x-k8s.io", "localqueues", "team", "q1"), queue)
        for i in (1, 4, 5):
            wl = _workload(i, "pending" if i != 5 else "admitted", now)
            store.create(Key("kueue.x-k8s.io", "workloads", "team", wl["metadata"]["name"]), wl)
        job = store.create(Key("batch", "jobs", "team", "job-0005"), {"apiVersion": "batch/v1", "kind": "Job",
                                                                      "metadata": {"name": "job-0005"}})
        table = JobTable(store)

        def rows() -> dict[str, JobRow]:
            return {r.jobName: r for r in table.page(None, None, None, "name", False, 0, 50).items}

        assert {n: (r.state, r.clusterQueue) for n, r in rows().items()} == {
            "job-0001": ("pending", "cq-a"), "job-0004": ("pending", "cq-a"), "job-0005": ("admitted", "cq")}
        store.update(Key("batch", "jobs", "team", "job-0005"), {**job, "status": {"active": 1}}, subresource="status")
        store.update(Key("kueue.x-k8s.io", "localqueues", "team", "q1"), {**lq, "spec": {"clusterQueue": "cq-b"}})
        store.delete(Key("kueue.x-k8s.io", "workloads", "team", "job-0004-wl"))
        assert {n: (r.state, r.clusterQueue) for n, r in rows().items()} == {
            "job-0001": ("pending", "cq-b"), "job-0005": ("running", "cq")}
        first = rows()["job-0001"].waitSeconds
        time.sleep(1.1)
        assert rows()["job-0001"].waitSeconds >= first + 1, "a wait is counted when the page is served"
        store.create(Key("kueue.x-k8s.io", "workloads", "team", "job-0007-wl"), _workload(7, "succeeded", now))
        store.compact(keep=0)  # the table had not read the change: it builds anew
        store.create(Key("kueue.x-k8s.io", "workloads", "team", "job-0010-wl"), _workload(10, "pending", now))
        assert sorted(rows()) == ["job-0001", "job-0005", "job-0007", "job-0010"]
        assert rows()["job-0007"].state == "succeeded" and rows()["job-0010"].clusterQueue == "cq-b"
    finally:
        store.close()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--no-first-run", "--disable-sync"]


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
def test_a_late_answer_does_not_replace_a_newer_view_in_chromium(client: httpx.Client) -> None:
    """The pending jobs are asked for, then all of them; the first answer comes last (a slow server): the table
    shows what was asked last."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright package (the dev extra)")
    expect = sync_api.expect
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page()
            page.goto(f"{client.base_url}/ui/jobs")
            shown = page.locator("#page")
            expect(shown).to_have_text("rows 1 to 50 of 120")
            held: list[Any] = []

            def pending(url: str) -> bool:
                return "/dashboard/jobs?" in url and "state=pending" in url

            def hold(route: Any) -> None:  # the first is held; any other goes on
                if held:
                    route.continue_()
                else:
                    held.append(route)

            page.route(pending, hold)
            page.get_by_label("State").select_option("pending")
            page.wait_for_timeout(200)
            page.get_by_label("State").select_option("")
            expect(shown).to_have_text("rows 1 to 50 of 120")
            assert len(held) == 1, "the pending view's request was held"
            with page.expect_response(lambda response: pending(response.url)):
                held[0].continue_()
            page.wait_for_timeout(100)  # its answer read, and shown if it were to be
            assert shown.text_content() == "rows 1 to 50 of 120"
            assert page.locator("#jobs tbody tr").count() == 50
        finally:
            browser.close()


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
def test_the_jobs_page_from_the_keyboard_in_chromium(client: httpx.Client) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright package (the dev extra)")
    expect = sync_api.expect
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page()
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{client.base_url}/ui/jobs")
            rows, shown = page.locator("#jobs tbody tr"), page.locator("#page")
            expect(rows).to_have_count(50)
            expect(shown).to_have_text("rows 1 to 50 of 120")
            cost = page.locator('button[data-sort="cost"]')
            cost.focus()
            page.keyboard.press("Enter")
            expect(page.locator('th[aria-sort="ascending"]')).to_contain_text("cost")
            page.keyboard.press("Enter")  # the button keeps the focus: again, descending
            expect(page.locator('th[aria-sort="descending"]')).to_contain_text("cost")
            expect(rows.first).to_have_attribute("data-job", "job-0119")
            page.get_by_label("State").select_option("pending")
            expect(shown).to_have_text("rows 1 to 30 of 30")
            assert "state=pending" in page.url and "sort=cost" in page.url, "the view is in the address"
            page.get_by_label("State").select_option("")
            expect(shown).to_have_text("rows 1 to 50 of 120")  # as a person would: Next is enabled again
            page.get_by_role("button", name="Next →").press("Enter")
            expect(shown).to_have_text("rows 51 to 100 of 120")
            rows.first.get_by_role("link").press("Enter")
            expect(page.locator("#title")).to_have_text("Job job-0069")
            expect(page.locator("#facts")).to_contain_text("spot")
            page.goto(f"{client.base_url}/ui/")
            cohort = page.locator('#cohorts tr[data-cohort="ml"]')
            expect(cohort).to_have_count(1)
            expect(cohort.locator("td.num")).to_have_text("4 / 8")
            assert cohort.get_by_role("meter").get_attribute("aria-valuenow") == "4"
            page.goto(f"{client.base_url}/ui/reports")
            page.get_by_role("link", name="week").press("Enter")
            expect(page).to_have_title("report")
        finally:
            browser.close()
    assert errors == []


def test_a_job_is_found_by_its_jobs_name_and_its_phases_are_told(client: httpx.Client) -> None:
    by_workload = client.get("/flexq/v1/dashboard/jobs/team/job-0002-wl").json()
    by_job = client.get("/flexq/v1/dashboard/jobs/team/job-0002").json()
    assert by_job == by_workload and by_job["job"]["name"] == "job-0002-wl"
    assert by_job["executes"] is False, "served without a runtime: jobs are not executed"
    assert [(p["name"], p["end"] is None) for p in by_job["phases"]] == [("queued", False), ("waiting for checks",
                                                                                             False), ("admitted", True)]
    assert "--runtime none" in by_job["phases"][-1]["detail"]
    page = client.get("/ui/jobs/team/job-0002")
    assert page.status_code == 200 and 'id="not-executed"' in page.text and "--runtime none" in page.text
    missing = client.get("/flexq/v1/dashboard/jobs/team/job-9999")
    assert missing.status_code == 404 and missing.json()["message"] == 'no workload or job "job-9999" in namespace team'
    assert client.get("/flexq/v1/dashboard/jobs/other/job-0002").status_code == 404, "another namespace's job"
    assert client.get("/flexq/v1/dashboard/overview").json()["executes"] is False


T = ["2026-01-01T10:00:00Z", "2026-01-01T10:01:00Z", "2026-01-01T10:02:00Z", "2026-01-01T10:05:00Z"]


def _story(conditions: list[tuple[str, str, int]], requests: list[tuple[int, str | None, int]] = (),
           events: list[tuple[str, int] | tuple[str, int, str]] = ()
           ) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """A workload with ``(type, status, at)`` conditions, ProvisioningRequests ``(created, done, at)`` and Events
    ``(reason, at)``, times indexing :data:`T`."""
    wl = {"metadata": {"name": "wl", "creationTimestamp": T[0]},
          "status": {"conditions": [{"type": k, "status": v, "lastTransitionTime": T[at]} for k, v, at in conditions]}}
    prs = [{"metadata": {"name": f"pr-{i}", "creationTimestamp": T[made]},
            "status": {"conditions": [{"type": done, "status": "True", "lastTransitionTime": T[at]}] if done else []}}
           for i, (made, done, at) in enumerate(requests)]
    evs = [{"reason": e[0], "firstTimestamp": T[e[1]], "message": e[2] if len(e) > 2 else ""} for e in events]
    return wl, evs, prs


PHASES: dict[str, tuple[Any, bool, bool, list[tuple[str, str, str | None]]]] = {
    "waiting for quota": (_story([("QuotaReserved", "False", 0)]), False, True, [("queued", T[0], None)]),
    "quota reserved, DWS asked": (
        _story([("QuotaReserved", "True", 1), ("Admitted", "False", 1)], requests=[(1, None, 0)]), False, True,
        [("queued", T[0], T[1]), ("provisioning", T[1], None), ("waiting for checks", T[1], None)]),
    "raced, won, runs": (
        _story([("QuotaReserved", "True", 1), ("Admitted", "True", 1)], events=[("VariantCreated", 0)],
               requests=[(0, "Failed", 1)]), True, True,
        [("queued", T[0], T[1]), ("racing", T[0], T[1]), ("provisioning", T[0], T[1]), ("running", T[1], None)]),
    "raced, DWS withdrawn and deleted": (
        _story([("QuotaReserved", "True", 1), ("Admitted", "True", 1)],
               events=[("VariantCreated", 0, "variant wl-variant-dws-12345: Variant of team/wl for flavor dws"),
                       ("ProvisioningRequest", 0, "ProvisioningRequest pr-gone is Accepted: waiting"),
                       ("ProvisioningRequest", 1, "ProvisioningRequest pr-gone withdrawn before it was provisioned")]),
        True, True,
        [("queued", T[0], T[1]), ("racing", T[0], T[1]), ("provisioning", T[0], T[1]), ("running", T[1], None)]),
    "admitted, not executed": (
        _story([("QuotaReserved", "True", 1), ("Admitted", "True", 1)]), False, False,
        [("queued", T[0], T[1]), ("admitted", T[1], None)]),
    "admitted, not started": (
        _story([("QuotaReserved", "True", 1), ("Admitted", "True", 1)]), False, True,
        [("queued", T[0], T[1]), ("admitted", T[1], None)]),
    "finished, its quota released": (
        _story([("QuotaReserved", "False", 3), ("Admitted", "False", 3), ("Finished", "True", 3)],
               events=[("QuotaReserved", 1), ("Admitted", 2)]), False, True,
        [("queued", T[0], T[1]), ("waiting for checks", T[1], T[2]), ("running", T[2], T[3])]),
}


@pytest.mark.parametrize("case", sorted(PHASES))
def test_a_jobs_phases(case: str) -> None:
    (wl, events, requests), running, executes, expected = PHASES[case]
    told = phases(wl, events, requests, running, executes)
    assert [(p.name, p.start, p.end) for p in told] == expected
    details = {p.name: p.detail for p in told}
    if case == "raced, DWS withdrawn and deleted":
        assert details["racing"] == "on dws"
        assert details["provisioning"] == "pr-gone withdrawn before it was provisioned"
    if "not executed" in case:
        assert "--runtime none" in details["admitted"]


@pytest.mark.parametrize(("quota", "free"), [("1000000000", True), ("1000000000Gi", True), ("1e9", True),
                                             ("2000000000m", True), ("2000m", False), ("999999999", False),
                                             ("256Gi", False), ("64", False), ("bogus", False)])
def test_a_billion_units_of_quota_is_no_limit(quota: str, free: bool) -> None:
    assert unlimited(quota) is free
    cq = {"metadata": {"name": "dws"}, "spec": {"cohort": "ml", "resourceGroups": [{"flavors": [
        {"name": "dws", "resources": [{"name": "memory", "nominalQuota": quota}]}]}]},
          "status": {"flavorsReservation": [{"name": "dws", "resources": [{"name": "memory", "total": "256Gi"}]}]}}
    [row] = queues([cq])
    use = row.flavors[0].resources[0]
    assert (use.unlimited, use.nominalText) == (free, "unlimited" if free else quota)
    [ml] = cohorts([row])
    assert ml.flavors[0].resources[0].nominalText == ("unlimited" if free else ml.flavors[0].resources[0].nominalText)


def test_cohorts_form_a_tree() -> None:
    rows = queues([{"metadata": {"name": "a"}, "spec": {"cohort": "ml"}}, {"metadata": {"name": "b"}, "spec": {}}])
    told = cohorts(rows, [{"metadata": {"name": "ml"}, "spec": {"parentName": "org"}},
                          {"metadata": {"name": "lone"}, "spec": {}}])
    assert [(c.name, c.parent, c.queues) for c in told] == [("lone", "", []), ("ml", "org", ["a"]), ("org", "", [])]


def _entry(queue: str, created: float, admitted: float | None, finished: float | None = None) -> JobEntry:
    row = JobRow(namespace="team", name=f"{queue}-{created}", jobKind="Job", jobName="j", queue="lq",
                 clusterQueue=queue, state="pending", priority=0, flavors="", created="", waitSeconds=0.0, reason="",
                 eta=None, costUsd=0.0)
    ended = admitted if admitted is not None else finished
    return JobEntry(row, created, ended, frozenset(), admitted)


def test_waits_and_admissions_over_time_are_read_from_the_jobs() -> None:
    entries = [_entry("a", 0, 50), _entry("a", 10, 20), _entry("a", 30, None), _entry("b", 100, 101),
               _entry("b", 5, None, finished=150), _entry("a", -500, -400)]
    told = history(entries, [Series(name="pool", points=[(0.0, 2.0)])], since=0.0, now=200.0, buckets=4)
    assert told.step == 50.0 and told.admissions == [1, 1, 1, 0], "at 20, 50 and 101"
    assert {s.name: s.points for s in told.waiting} == {
        "a": [(0.0, 1.0), (10.0, 2.0), (20.0, 1.0), (30.0, 2.0), (50.0, 1.0)],
        "b": [(0.0, 0.0), (5.0, 1.0), (100.0, 2.0), (101.0, 1.0), (150.0, 0.0)]}
    assert told.pools == [Series(name="pool", points=[(0.0, 2.0)])]


def test_the_history_endpoint(client: httpx.Client) -> None:
    told = client.get("/flexq/v1/dashboard/history", params={"minutes": 30}).json()
    assert told["now"] - told["since"] == pytest.approx(1800, abs=1) and len(told["admissions"]) == 60
    assert [s["name"] for s in told["waiting"]] == ["cq", "q0", "q1", "q2"]
    assert sum(s["points"][-1][1] for s in told["waiting"]) == 120, "created now, admitted (if at all) 30 s later"
    assert told["admissions"] == [0] * 60
    assert told["pools"] == []
    refused = client.get("/flexq/v1/dashboard/history", params={"minutes": 0})
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["query", "minutes"]


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
def test_the_cohort_tree_in_chromium(client: httpx.Client) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright package (the dev extra)")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{client.base_url}/ui/")
            nodes = page.locator("#cohort-tree svg g[data-node]")
            sync_api.expect(nodes).to_have_count(4)
            drawn = nodes.evaluate_all("els => els.map(e => [e.dataset.node, e.dataset.kind, e.dataset.depth])")
            assert drawn == [["org", "cohort", "0"], ["ml", "cohort", "1"], ["cq-a", "queue", "2"],
                             ["cq-b", "queue", "2"]]
            assert page.locator("#cohort-tree path.tree-line").count() == 3, "each child joined to its parent"
            assert "busiest 75%" in page.locator('#cohort-tree g[data-node="cq-a"]').text_content()
        finally:
            browser.close()
    assert errors == []


def test_pool_nodes_are_followed_from_the_stores_commits(tmp_path: Path) -> None:
    store = Store(tmp_path / "flexq.db")
    try:
        def node(name: str, pool: str) -> None:
            store.create(Key("", "nodes", "", name), {"apiVersion": "v1", "kind": "Node", "metadata": {
                "name": name, "labels": {"cloud.google.com/gke-nodepool": pool}}})

        node("cpu-0", "cpu")
        now = [100.0]
        pools = PoolHistory(store, clock=lambda: now[0])
        now[0] = 110.0
        with store.transaction():
            node("tpu-0", "tpu")
            node("tpu-1", "tpu")
        now[0] = 120.0
        store.delete(Key("", "nodes", "", "cpu-0"))
        now[0] = 130.0
        store.delete(Key("", "nodes", "", "tpu-0"))
        now[0] = 140.0
        store.update(Key("", "nodes", "", "tpu-1"), {**store.get(Key("", "nodes", "", "tpu-1")), "spec": {}})
        told = {s.name: s.points for s in pools.series(0.0, ["dws"])}
        assert told == {"cpu": [(100.0, 1.0), (120.0, 0.0)], "tpu": [(100.0, 0.0), (110.0, 2.0), (130.0, 1.0)],
                        "dws": [(100.0, 0.0)]}, "known from the server's start; a change moving no count adds no point"
        assert {s.name: s.points for s in pools.series(115.0)} == {"cpu": [(115.0, 1.0), (120.0, 0.0)],
                                                                    "tpu": [(115.0, 2.0), (130.0, 1.0)]}
    finally:
        store.close()
