"""``/metrics`` scraped from a live server running the guide's flow, parsed with Prometheus' own parser, and
compared with what the store says; and a scrape that waits for the controller while the server answers the rest."""

from __future__ import annotations

import concurrent.futures
import threading
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from flexq.controller import Sample, Tally
from flexq.objects.service import ObjectService
from flexq.server.app import create_app
from flexq.server.prometheus import render
from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario
from flexq.store import Store
from tests import admin
from tests.conftest import GUIDE, Server, guide_text
from tests.kueue_metrics import check_scrape
from tests.server.inprocess import serving
from tests.support import condition, eventually, guide_setup, serve_capacity, workloads

CAPACITY = """cloud:
  on-demand-pool: {available: 4, bootTime: 1s}
  dws-pool: {queuedDelay: 1h}
  default-pool: {bootTime: 1s}
"""
CQ = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cluster-queue"


def _scrape(srv: Server) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = admin.get(srv.url + "/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _one(m: dict[tuple[str, tuple[tuple[str, str], ...]], float], metric: str, /, **labels: str) -> float:
    """The value of the one sample ``metric`` whose labels include ``labels``."""
    found = [v for (n, have), v in m.items() if n == metric and set(labels.items()) <= set(have)]
    assert len(found) == 1, (metric, labels, found)
    return found[0]


def test_metrics_match_the_store(tmp_path: Path) -> None:
    servers = serve_capacity(tmp_path, CAPACITY)
    srv = next(servers)
    try:
        guide_setup(srv, guide_text("dws-tpu-queue.yaml"))
        eventually(lambda: _assert(condition(workloads(srv)["rayjob-tpu-v6e-dws-1"], "Admitted") == "True"))

        def settled() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
            m = _scrape(srv)
            assert _one(m, "kueue_admitted_workloads_total", cluster_queue="cluster-queue") == 1
            return m

        m = eventually(settled)
        cq = admin.get(srv.url + CQ).json()["status"]
        q = ("cluster_queue", "cluster-queue")
        role = ("replica_role", "standalone")
        assert m[("kueue_admitted_active_workloads", (q, role))] == cq["admittedWorkloads"] == 1
        assert m[("kueue_reserving_active_workloads", (q, role))] == cq["reservingWorkloads"] == 1
        pending = sum(v for (name, labels), v in m.items() if name == "kueue_pending_workloads" and q in labels)
        assert pending == cq["pendingWorkloads"] == 1, "job 2 races: one pending workload, not its variants"
        used = {r["name"]: r["total"] for f in cq["flavorsUsage"] if f["name"] == "on-demand" for r in f["resources"]}
        on_demand = (("cluster_queue", "cluster-queue"), ("cohort", ""), ("flavor", "on-demand"))
        tpu = (*on_demand, ("replica_role", "standalone"), ("resource", "google.com/tpu"))
        assert m[("kueue_cluster_queue_resource_usage", tpu)] == float(used["google.com/tpu"]) == 16.0
        assert m[("kueue_cluster_queue_resource_reservation", tpu)] == 16.0
        assert m[("kueue_cluster_queue_nominal_quota", tpu)] == 16.0
        assert m[("kueue_cluster_queue_status", (q, role, ("status", "active")))] == 1
        assert m[("flexq_races_won_total", (q, ("flavor", "on-demand")))] == 1
        assert m[("flexq_node_pool_nodes", (("node_pool", "on-demand-pool"), ("state", "busy")))] == 4
        assert m[("flexq_provisioning_requests_in_flight", (("node_pool", "dws-pool"),))] == 1
        assert _one(m, "kueue_admission_wait_time_seconds_count", cluster_queue="cluster-queue") == 1
        assert _one(m, "kueue_admission_wait_time_seconds_bucket", cluster_queue="cluster-queue", le="+Inf") == 1
        assert 0 < _one(m, "kueue_admission_wait_time_seconds_sum", cluster_queue="cluster-queue") < 30
        eventually(lambda: _ready_timed(srv))
        # The controller's steps: counted, timed whole and by phase (the phases add up to the whole).
        steps = m[("flexq_controller_steps_total", ())]
        assert steps >= 1
        assert m[("flexq_controller_step_duration_seconds_count", ())] == steps
        assert m[("flexq_controller_step_duration_seconds_bucket", (("le", "+Inf"),))] == steps
        spent = m[("flexq_controller_step_duration_seconds_sum", ())]
        phases = {labels[0][1]: v for (name, labels), v in m.items()
                  if name == "flexq_controller_step_phase_seconds_total"}
        assert set(phases) == {"read", "schedule", "write", "queues", "commit"}
        assert abs(sum(phases.values()) - spent) < 1e-6 * max(1.0, spent) + 1e-9
        assert m[("flexq_controller_changes_read_total", ())] > 0
        assert m[("flexq_controller_workload_writes_total", ())] >= 2, "both jobs' workloads were written"
        # Where the server's CPU went, by thread: the event loop's (which loaded the server) and the controller's.
        threads = {labels[0][1]: v for (name, labels), v in m.items() if name == "flexq_thread_cpu_seconds_total"}
        assert {"MainThread", "flexq-queue-controller"} <= set(threads), threads
        assert threads["MainThread"] > 0 and min(threads.values()) >= 0
        _kueue_as_kueue_has_them(srv)
    finally:
        servers.close()


def _ready_timed(srv: Server) -> None:
    """waitForPodsReady (on by default): the admitted job's pods, placed, are ready, and Kueue's readiness waits
    time it once, by ClusterQueue and by LocalQueue."""
    m = _scrape(srv)
    q, lq = {"cluster_queue": "cluster-queue"}, {"name": "user-queue", "namespace": "default"}
    counted = {metric: _one(m, f"kueue_{metric}_count", **(lq if metric.startswith("local") else q))
               for metric in ("ready_wait_time_seconds", "admitted_until_ready_wait_time_seconds",
                              "local_queue_ready_wait_time_seconds",
                              "local_queue_admitted_until_ready_wait_time_seconds")}
    assert set(counted.values()) == {1}, counted


def _kueue_as_kueue_has_them(srv: Server) -> None:
    """Every Kueue metric with a meaning here, as Kueue's list has it; the LocalQueue family by name and namespace;
    and a deleted queue's series gone with it."""
    text = admin.get(srv.url + "/metrics").text
    assert check_scrape(text, need_samples=False) == []
    m = _scrape(srv)
    lq = {"name": "user-queue", "namespace": "default"}
    assert _one(m, "kueue_local_queue_admitted_workloads_total", **lq) == 1
    assert _one(m, "kueue_local_queue_admitted_active_workloads", **lq) == 1
    assert _one(m, "kueue_local_queue_status", **lq, active="True") == 1
    assert _one(m, "kueue_quota_reserved_workloads_total", cluster_queue="cluster-queue", priority_class="") == 1
    assert admin.delete(srv.url + CQ).status_code == 200
    assert admin.delete(srv.url + "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/localqueues/user-queue"
                        ).status_code == 200

    def gone() -> None:
        left = sorted(name for (name, labels), _ in _scrape(srv).items() if name.startswith("kueue_")
                      and {("cluster_queue", "cluster-queue"), ("name", "user-queue")} & set(labels))
        assert left == []

    eventually(gone)


def _assert(ok: bool) -> None:
    assert ok


def test_a_scrape_waits_for_the_controller_without_holding_up_other_requests(tmp_path: Path) -> None:
    """The controller in a long step: its figures are read when the step ends, and the server answers meanwhile; then
    the scrape is sent as it is written, what the figures render to."""
    counts, state = run_scenario(load_scenario(GUIDE / "scenario.yaml"), metrics=True).kueue or \
        pytest.fail("the simulator counted no metrics")
    tally, sample = Tally(kueue=counts), Sample(state, {}, {}, {}, {})
    entered, release = threading.Event(), threading.Event()

    class InALongStep:
        def observe(self) -> tuple[Tally, Sample]:
            entered.set()
            release.wait(30)
            return tally, sample

        def standing(self) -> Sample:
            return sample

        def costs(self) -> dict[str, float]:
            return {}

    with serving(create_app(ObjectService(Store()), observed=InALongStep(), home=tmp_path / "home")) as url, \
            concurrent.futures.ThreadPoolExecutor(1) as pool:
        scrape = pool.submit(httpx.get, url + "/metrics", timeout=30)
        assert entered.wait(10)
        try:
            assert httpx.get(url + "/version", timeout=5).status_code == 200
            assert not scrape.done()
        finally:
            release.set()
        response = scrape.result()
    assert response.status_code == 200 and response.headers["transfer-encoding"] == "chunked"
    threads = b"# HELP flexq_thread_cpu_seconds"  # the last family: the server's threads' CPU, as it is then
    assert response.content.partition(threads)[0] == render(tally, sample).partition(threads)[0]
    assert b"kueue_admitted_workloads_total{" in response.content and threads in response.content


def test_the_dashboards_overview_reads_where_things_stand_without_the_counters(tmp_path: Path) -> None:
    """The overview shows the forecast waits and the pools: it does not copy the controller's counters for them."""
    _, state = run_scenario(load_scenario(GUIDE / "scenario.yaml"), metrics=True).kueue or \
        pytest.fail("the simulator counted no metrics")
    now = Sample(state, {}, {}, {}, {}, estimated_waits={"cluster-queue": [30.0, 90.0]})

    class Standing:
        def observe(self) -> tuple[Tally, Sample]:
            raise AssertionError("the counters were copied for the overview")

        def standing(self) -> Sample:
            return now

        def costs(self) -> dict[str, float]:
            return {}

    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cluster-queue"},
             "spec": {"namespaceSelector": {}, "resourceGroups": []}}
    with serving(create_app(ObjectService(Store()), observed=Standing(), home=tmp_path / "home")) as url:
        assert httpx.post(url + "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", json=queue, timeout=10).status_code == 201
        overview = httpx.get(url + "/flexq/v1/dashboard/overview", timeout=10)
    assert overview.status_code == 200, overview.text
    queue = next(q for q in overview.json()["queues"] if q["name"] == "cluster-queue")
    assert (queue["nextStartSeconds"], queue["allStartedSeconds"]) == (30, 90)
