"""The dashboard's jobs page with 10,000 workloads in the store: how long its first load takes and what it moves.

    python bench/ui_bench.py [--workloads N] [--repeat R]

A first load is what a browser fetches to show the page: the HTML, its stylesheet and scripts, and the first page
of the jobs table's JSON (50 rows, filtered, sorted and paged by the server). Each load is made on new connections,
after a workload changed (the server's table follows the change log); a request made as soon as the server
listens, while it still reads every workload to build that table, is measured apart. Targets: under 1 s and
under 200 KB. The overview's first load is measured the same way: its page and assets, its JSON and its
pictures' history (jobs waiting and admissions over the last hour, read back from the 10,000 workloads). The figures
are printed as a table and written to ``bench/results/ui.json``. Where Chromium and Playwright are installed, the
pages are also loaded in Chromium, timed from navigation until the jobs table's 50 rows show, and until the
overview's pictures are drawn.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from flexq.objects.service import ObjectService
from flexq.server.app import create_app
from flexq.store import Key, Store

RESULTS = Path(__file__).parent / "results" / "ui.json"
TARGET_SECONDS = 1.0
TARGET_BYTES = 200 * 1024
FIRST_PAGE = "/flexq/v1/dashboard/jobs?sort=created&order=asc&offset=0&limit=50"
OVERVIEW = ("/flexq/v1/dashboard/overview", "/flexq/v1/dashboard/history?minutes=60")
STATES = ("pending", "reserved", "admitted", "finished")


def _workload(i: int, stamp: str) -> dict[str, Any]:
    """A Job's workload as the controller writes it: its pod set, and a status for one of four states."""
    state = STATES[i % len(STATES)]
    flavor = ("on-demand", "spot", "dws")[i % 3]
    conditions: list[dict[str, Any]] = []
    status: dict[str, Any] = {"conditions": conditions, "cost": {"usd": round(i * 0.013, 4)}}
    if state == "pending":
        conditions.append({"type": "QuotaReserved", "status": "False", "reason": "Pending", "lastTransitionTime": stamp,
                           "message": f"couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
                                      f"flavor {flavor}, {i % 7 + 1} more needed"})
    else:
        status["admission"] = {"clusterQueue": f"cq-{i % 10}", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": flavor, "memory": flavor}, "resourceUsage": {"cpu": "4",
                                                                                          "memory": "8Gi"},
             "count": 1}]}
        conditions.append({"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                           "message": f"Quota reserved in ClusterQueue cq-{i % 10}", "lastTransitionTime": stamp})
        admitted = state != "reserved"
        conditions.append({"type": "Admitted", "status": "True" if admitted else "False",
                           "reason": "Admitted" if admitted else "UnsatisfiedAdmissionChecks",
                           "message": "The workload is admitted" if admitted else
                           "waiting for ProvisioningRequest pr; expected in 10m", "lastTransitionTime": stamp})
        if state == "finished":
            conditions.append({"type": "Finished", "status": "True", "reason": "Succeeded",
                               "message": "Job finished", "lastTransitionTime": stamp})
    name = f"job-{i:05d}"
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"job-{name}-{i % 99991:05x}", "namespace": f"team-{i % 4}",
                         "labels": {"kueue.x-k8s.io/job-uid": str(i)},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": str(i),
                                              "controller": True}]},
            "spec": {"queueName": f"queue-{i % 10}", "priority": i % 3 * 100, "active": True, "podSets": [
                {"name": "main", "count": 1, "template": {"spec": {"containers": [
                    {"name": "main", "image": "python:3.11", "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}
                ]}}}]},
            "status": status}


def _fill(store: Store, workloads: int) -> None:
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with store.transaction():
        for i in range(workloads):
            wl = _workload(i, stamp)
            meta = wl["metadata"]
            store.create(Key("kueue.x-k8s.io", "workloads", meta["namespace"], meta["name"]), wl)


def _first_load(url: str, page_path: str = "/ui/jobs", data: tuple[str, ...] = (FIRST_PAGE,)) -> tuple[float, int, int]:
    """Seconds, bytes received (bodies and headers) and requests of one first load, on new connections."""
    moved = 0
    requests = 0
    start = time.perf_counter()
    with httpx.Client(base_url=url, timeout=60) as client:
        page = client.get(page_path)
        assert page.status_code == 200
        fetched = [page]
        assets = re.findall(r'(?:href|src)="(/ui/static/[^"]+)"', page.text)
        fetched += [client.get(asset) for asset in assets]
        fetched += [client.get(path) for path in data]
    elapsed = time.perf_counter() - start
    for response in fetched:
        assert response.status_code == 200, response.url
        requests += 1
        moved += len(response.content) + sum(len(k) + len(v) + 4 for k, v in response.headers.items())
    if data == (FIRST_PAGE,):
        rows = fetched[-1].json()
        assert len(rows["items"]) == 50 and rows["total"] > 0
    else:
        assert sum(s["points"][-1][1] for s in fetched[-1].json()["waiting"]) > 0, "the history counts the waiting"
    return elapsed, moved, requests


def _in_chromium(url: str, path: str = "/ui/jobs",
                 ready: str = "document.querySelectorAll('#jobs tbody tr').length === 50") -> tuple[float, int] | None:
    """Seconds from navigation to ``ready`` (the median of three visits, each with an empty cache) and bytes
    transferred, in Debian's Chromium (None where Chromium or Playwright is missing)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if chromium is None:
        return None
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu",
                                                                    "--disable-background-networking",
                                                                    "--no-first-run", "--disable-sync"])
        try:
            browser.new_page().goto("about:blank")  # the browser itself is up: what is timed is the page
            runs = []
            for _ in range(3):
                context = browser.new_context()  # an empty cache: a first visit
                page = context.new_page()
                start = time.perf_counter()
                page.goto(url + path)
                page.wait_for_function(ready)
                elapsed = time.perf_counter() - start
                moved = page.evaluate("performance.getEntries().filter(e => 'transferSize' in e)"
                                      ".reduce((n, e) => n + e.transferSize, 0)")
                runs.append((elapsed, int(moved)))
                context.close()
        finally:
            browser.close()
    return statistics.median(r[0] for r in runs), max(r[1] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="flexq-ui-bench-") as tmp:
        store = Store(Path(tmp) / "flexq.db")
        made = time.perf_counter()
        _fill(store, args.workloads)
        fill_s = time.perf_counter() - made
        server = uvicorn.Server(uvicorn.Config(create_app(ObjectService(store), home=Path(tmp)), host="127.0.0.1",
                                               port=0, log_level="warning", access_log=False))
        server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        port = server.servers[0].sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        loads = []
        try:
            cold = _first_load(url)  # the server's first request: the table may still be being built
            for n in range(args.repeat):
                # A workload changes before each visit: the table follows the change log to serve it.
                key = Key("kueue.x-k8s.io", "workloads", "team-0", f"job-job-{4 * n:05d}-{4 * n % 99991:05x}")
                changed = store.get(key)
                changed["status"]["cost"] = {"usd": 1000.0 + n}
                store.update(key, changed, subresource="status")
                loads.append(_first_load(url))
            overview = [_first_load(url, "/ui/", OVERVIEW) for _ in range(args.repeat)]
            browser = _in_chromium(url)
            pictures = _in_chromium(url, "/ui/", "document.querySelector('#waiting-chart svg path.series') !== null")
        finally:
            server.should_exit = True
            thread.join(timeout=20)
            store.close()
    seconds = [s for s, _, _ in loads]
    moved = max(b for _, b, _ in loads)
    result = {"workloads": args.workloads, "repeat": args.repeat, "requests": loads[0][2],
              "first_load_best_s": round(min(seconds), 4), "first_load_median_s": round(statistics.median(seconds), 4),
              "first_load_bytes": moved, "target_s": TARGET_SECONDS, "target_bytes": TARGET_BYTES,
              "first_load_new_server_s": round(cold[0], 4), "store_fill_s": round(fill_s, 2),
              "chromium_rows_shown_s": round(browser[0], 4) if browser else None,
              "chromium_bytes": browser[1] if browser else None,
              "overview_median_s": round(statistics.median(s for s, _, _ in overview), 4),
              "overview_bytes": max(b for _, b, _ in overview),
              "chromium_overview_drawn_s": round(pictures[0], 4) if pictures else None,
              "chromium_overview_bytes": pictures[1] if pictures else None,
              "ok": statistics.median(seconds) < TARGET_SECONDS and moved < TARGET_BYTES
              and statistics.median(s for s, _, _ in overview) < TARGET_SECONDS
              and max(b for _, b, _ in overview) < TARGET_BYTES
              and all(b is None or (b[0] < TARGET_SECONDS and b[1] < TARGET_BYTES) for b in (browser, pictures)),
              "measured": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'page':<8} {'workloads':>9} {'requests':>8} {'best s':>7} {'median s':>8} {'target s':>8} "
          f"{'KB':>7} {'target KB':>9}  result")
    print(f"{'jobs':<8} {args.workloads:>9} {result['requests']:>8} {result['first_load_best_s']:>7.3f} "
          f"{result['first_load_median_s']:>8.3f} {TARGET_SECONDS:>8.1f} {moved / 1024:>7.1f} "
          f"{TARGET_BYTES / 1024:>9.0f}  {'ok' if result['ok'] else 'OVER TARGET'}")
    if browser is not None:
        print(f"{'chromium':<8} {args.workloads:>9} {'':>8} {browser[0]:>7.3f} {'':>8} {TARGET_SECONDS:>8.1f} "
              f"{browser[1] / 1024:>7.1f} {TARGET_BYTES / 1024:>9.0f}  "
              f"{'ok' if browser[0] < TARGET_SECONDS and browser[1] < TARGET_BYTES else 'OVER TARGET'}"
              "  (median of 3: navigation to 50 rows shown)")
    o_s, o_b = result["overview_median_s"], result["overview_bytes"]
    print(f"{'overview':<8} {args.workloads:>9} {overview[0][2]:>8} {min(s for s, _, _ in overview):>7.3f} {o_s:>8.3f} "
          f"{TARGET_SECONDS:>8.1f} {o_b / 1024:>7.1f} {TARGET_BYTES / 1024:>9.0f}  "
          f"{'ok' if o_s < TARGET_SECONDS and o_b < TARGET_BYTES else 'OVER TARGET'}  (page, overview, history)")
    if pictures is not None:
        print(f"{'chromium':<8} {args.workloads:>9} {'':>8} {pictures[0]:>7.3f} {'':>8} {TARGET_SECONDS:>8.1f} "
              f"{pictures[1] / 1024:>7.1f} {TARGET_BYTES / 1024:>9.0f}  "
              f"{'ok' if pictures[0] < TARGET_SECONDS and pictures[1] < TARGET_BYTES else 'OVER TARGET'}"
              "  (median of 3: navigation to the overview's pictures drawn)")
    print(f"(a request made as soon as the server listens, while it reads every workload: {cold[0]:.3f} s; "
          f"written to {RESULTS})")


if __name__ == "__main__":
    main()
