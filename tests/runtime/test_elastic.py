"""An elastic RayJob grows while it runs: a new workload slice is admitted and a worker node joins its cluster."""

from __future__ import annotations

from typing import Any

import pytest

from tests import admin
from tests.conftest import ROOT, Server
from tests.runtime.test_guide_end_to_end import ray_server
from tests.support import assert_done, cli_ok, eventually, get_rayjob

__all__ = ["ray_server"]

EXAMPLE = ROOT / "examples" / "elastic"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads"
REPLACES = "kueue.x-k8s.io/workload-slice-replacement-for"


def _workloads(srv: Server) -> list[dict[str, Any]]:
    return sorted(admin.get(srv.url + WORKLOADS).json()["items"], key=lambda w: w["metadata"]["creationTimestamp"])


def _condition(wl: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in wl.get("status", {}).get("conditions") or [] if c["type"] == kind), {})


def test_patching_the_worker_replicas_admits_a_slice_and_adds_a_worker(ray_server: Server) -> None:
    srv = ray_server
    cli_ok(srv, "apply", "-f", str(EXAMPLE / "queue.yaml"))
    cli_ok(srv, "create", "configmap", "elastic-script", f"--from-file={EXAMPLE / 'elastic_job.py'}")
    # No pending demand (the script only waits for a second worker), so growth comes from the patch alone.
    job = (EXAMPLE / "rayjob-elastic.yaml").read_text().replace("elastic_job.py 2 --demand", "elastic_job.py 2")
    cli_ok(srv, "apply", "-f", "-", input=job)

    def running() -> None:
        assert get_rayjob(srv, "elastic").get("status", {}).get("jobStatus") == "RUNNING"

    eventually(running, timeout=60)
    first = _workloads(srv)
    assert len(first) == 1 and first[0]["status"]["admission"]["podSetAssignments"][1]["count"] == 1
    patch = [{"op": "replace", "path": "/spec/rayClusterSpec/workerGroupSpecs/0/replicas", "value": 2}]
    response = admin.patch(f"{srv.url}/apis/ray.io/v1/namespaces/default/rayjobs/elastic", json=patch,
                           headers={"Content-Type": "application/json-patch+json"})
    assert response.status_code == 200, response.text
    eventually(lambda: assert_done(get_rayjob(srv, "elastic")), timeout=60)
    log = cli_ok(srv, "logs", "rayjob/elastic").stdout
    assert get_rayjob(srv, "elastic")["status"]["jobStatus"] == "SUCCEEDED", log[-3000:]
    assert "waiting for 2" in log and "2 worker node(s)" in log and "Elastic job complete" in log, log
    assert "worker group workers: 1 -> 2 worker node(s)" in log
    old, new = _workloads(srv)
    assert old["metadata"]["name"] == first[0]["metadata"]["name"]
    replaced = _condition(old, "Finished")
    assert (replaced["status"], replaced["reason"]) == ("True", "WorkloadSliceReplaced")
    assert new["metadata"]["annotations"]["kueue.x-k8s.io/workload-slice-replacement-for"] == \
        f"default/{old['metadata']['name']}"
    assert [p["count"] for p in new["spec"]["podSets"]] == [1, 2]
    events = admin.get(f"{srv.url}/api/v1/namespaces/default/events").json()["items"]
    assert {"QuotaReserved", "Admitted"} <= {e["reason"] for e in events
                                              if e["involvedObject"]["name"] == new["metadata"]["name"]}
    assert _condition(new, "Finished")["reason"] == "Succeeded", "the job's end finishes the slice that replaced"

    def freed() -> None:
        cq = admin.get(srv.url + "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cpu-queue").json()
        assert cq["status"]["admittedWorkloads"] == 0

    eventually(freed)


def test_pending_demand_makes_the_autoscaler_ask_for_workers_and_idle_ones_are_given_back(
        ray_server: Server) -> None:
    srv = ray_server
    cli_ok(srv, "apply", "-f", str(EXAMPLE / "queue.yaml"))
    cli_ok(srv, "create", "configmap", "elastic-script", f"--from-file={EXAMPLE / 'elastic_job.py'}")
    # 2 one-CPU tasks for 1 one-CPU worker; then the job waits for the idle worker to be given back.
    job = (EXAMPLE / "rayjob-elastic.yaml").read_text().replace("--demand", "--demand --shrink").replace(
        "idleTimeoutSeconds: 30", "idleTimeoutSeconds: 5")
    cli_ok(srv, "apply", "-f", "-", input=job)
    eventually(lambda: assert_done(get_rayjob(srv, "elastic")), timeout=120)
    log = cli_ok(srv, "logs", "rayjob/elastic").stdout
    assert get_rayjob(srv, "elastic")["status"]["jobStatus"] == "SUCCEEDED", log[-3000:]
    assert "2 worker node(s)" in log and "2 tasks ran on" in log, log
    assert "worker group workers: 2 -> 1 worker node(s)" in log and "the idle ones were given back" in log, log
    events = admin.get(f"{srv.url}/api/v1/namespaces/default/events").json()["items"]
    asked = [e["message"] for e in events if e["reason"] == "AutoscalerScaling"]
    assert sorted(asked) == ["worker group workers: replicas 1 -> 2", "worker group workers: replicas 2 -> 1"]
    grown, = (w for w in _workloads(srv) if _condition(w, "Finished").get("reason") == "Succeeded")
    assert [p["count"] for p in grown["spec"]["podSets"]] == [1, 1], "the shrink resized the slice in place"
    assert len(_workloads(srv)) == 2, "the growth was admitted as a new workload slice, the shrink made none"


@pytest.mark.long
def test_an_elastic_tpu_job_grows_by_an_emulated_slice_and_gives_it_back(ray_server: Server) -> None:
    srv = ray_server
    cli_ok(srv, "apply", "-f", str(EXAMPLE / "queue-tpu.yaml"))
    cli_ok(srv, "create", "configmap", "slices-script", f"--from-file={EXAMPLE / 'slices_job.py'}")
    job = (EXAMPLE / "rayjob-elastic-tpu.yaml").read_text().replace("slices_job.py 2", "slices_job.py 2 --shrink") \
        .replace("idleTimeoutSeconds: 30", "idleTimeoutSeconds: 5")
    cli_ok(srv, "apply", "-f", "-", input=job)
    eventually(lambda: assert_done(get_rayjob(srv, "elastic-tpu")), timeout=150)
    log = cli_ok(srv, "logs", "rayjob/elastic-tpu").stdout
    assert get_rayjob(srv, "elastic-tpu")["status"]["jobStatus"] == "SUCCEEDED", log[-3000:]
    assert "1 slice(s); 2 tasks" in log, log
    assert "2 tasks ran on slices: flexq-emulated-slice, flexq-emulated-slice-tpu-group-1" in log, log
    assert "worker group tpu-group: 1 -> 2 TPU slice(s)" in log and "2 -> 1 TPU slice(s)" in log, log
    assert "the idle one was given back" in log, log
    events = admin.get(f"{srv.url}/api/v1/namespaces/default/events").json()["items"]
    asked = [e["message"] for e in events if e["reason"] == "AutoscalerScaling"]
    assert sorted(asked) == ["worker group tpu-group: replicas 1 -> 2", "worker group tpu-group: replicas 2 -> 1"]
    slices = _workloads(srv)
    assert len(slices) == 2
    grown, = (w for w in slices if REPLACES in (w["metadata"].get("annotations") or {}))
    assert [p["count"] for p in grown["spec"]["podSets"]] == [1, 4], "after the shrink: one slice again"
    assert grown["status"]["admission"]["podSetAssignments"][1]["resourceUsage"]["google.com/tpu"] == "16"
