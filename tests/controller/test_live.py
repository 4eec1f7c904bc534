"""The queue controller in a real server: jobs become workloads, get flavors, start and stop."""

from __future__ import annotations

from typing import Any

import yaml

from tests import admin
from tests.conftest import GUIDE, Server, guide_text, start_server, stop_server
from tests.support import condition, eventually, flavors, job, workloads

WL = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads"


def _submit(flexq: Any, job_id: str) -> None:
    result = flexq("apply", "-f", "-", input=guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID=job_id))
    assert result.code == 0, result.err


def test_guide_jobs_are_queued_admitted_and_started(flexq: Any, server: Server) -> None:
    assert flexq("apply", "-f", "-", input=guide_text("dws-tpu-queue.yaml")).code == 0
    assert flexq("create", "configmap", "jax-train-script", f"--from-file={GUIDE / 'train.py'}").code == 0
    for job_id in ("1", "2", "3"):
        _submit(flexq, job_id)

    def placed() -> dict[str, dict[str, Any]]:
        wls = workloads(server)
        assert len(wls) == 3 and all(condition(w, "QuotaReserved") == "True" for w in wls.values())
        return wls

    wls = eventually(placed)
    assert flavors(wls["rayjob-tpu-v6e-dws-1"]) == {"head": {"default-cpu"}, "tpu-group": {"on-demand"}}
    assert condition(wls["rayjob-tpu-v6e-dws-1"], "Admitted") == "True"
    for name in ("rayjob-tpu-v6e-dws-2", "rayjob-tpu-v6e-dws-3"):
        assert flavors(wls[name])["tpu-group"] == {"dws"}
        assert condition(wls[name], "Admitted") == "False"
        assert wls[name]["status"]["admissionChecks"][0]["state"] == "Pending"

    job1 = yaml.safe_load(flexq("get", "rayjob", "rayjob-tpu-v6e-dws-1", "-o", "yaml").out)
    assert job1["spec"]["suspend"] is False
    worker = job1["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert worker["nodeSelector"]["cloud.google.com/gke-nodepool"] == "on-demand-pool"
    job2 = yaml.safe_load(flexq("get", "rayjob", "rayjob-tpu-v6e-dws-2", "-o", "yaml").out)
    assert job2["spec"]["suspend"] is True, "waiting for its dws-prov check"

    table = flexq("get", "workloads").out
    assert "waiting for admission checks: dws-prov" in table and "tpu-group=dws" in table

    done = flexq("check", "set", "rayjob/rayjob-tpu-v6e-dws-2", "--check", "dws-prov", "--state", "Ready")
    assert done.code == 0, done.err
    eventually(lambda: _assert(condition(workloads(server)["rayjob-tpu-v6e-dws-2"], "Admitted") == "True"))
    job2 = yaml.safe_load(flexq("get", "rayjob", "rayjob-tpu-v6e-dws-2", "-o", "yaml").out)
    assert job2["spec"]["suspend"] is False
    assert job2["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"][
        "cloud.google.com/gke-nodepool"] == "dws-pool"

    lq = yaml.safe_load(flexq("get", "lq", "user-queue", "-o", "yaml").out)["status"]
    assert (lq["pendingWorkloads"], lq["reservingWorkloads"], lq["admittedWorkloads"]) == (0, 3, 2)
    # Kueue's quota per flavor: reserved by all three (job 3 waits for its check in dws), used by the two admitted.
    def totals(rows: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
        return {f["name"]: {r["name"]: r["total"] for r in f["resources"]} for f in rows}

    assert totals(lq["flavorsReservation"]) == {
        "default-cpu": {"cpu": "6", "memory": "12Gi", "google.com/tpu": "0"},
        "on-demand": {"cpu": "32", "memory": "64Gi", "google.com/tpu": "16"},
        "dws": {"cpu": "64", "memory": "128Gi", "google.com/tpu": "32"}}
    assert totals(lq["flavorsUsage"]) == {
        "default-cpu": {"cpu": "4", "memory": "8Gi", "google.com/tpu": "0"},
        "on-demand": {"cpu": "32", "memory": "64Gi", "google.com/tpu": "16"},
        "dws": {"cpu": "32", "memory": "64Gi", "google.com/tpu": "16"}}
    v1beta1 = admin.get(f"{server.url}/apis/kueue.x-k8s.io/v1beta1/namespaces/default/localqueues/user-queue")
    assert v1beta1.json()["status"]["flavorUsage"] == lq["flavorsUsage"], "v1beta1 calls it flavorUsage"
    assert "flavorsUsage" not in v1beta1.json()["status"]

    # Deleting job 1 deletes its workload and frees on-demand: a new job takes it.
    assert flexq("delete", "rayjob", "rayjob-tpu-v6e-dws-1").code == 0
    eventually(lambda: _assert("rayjob-tpu-v6e-dws-1" not in workloads(server)))
    _submit(flexq, "4")
    wl4 = eventually(lambda: _reserved(server, "rayjob-tpu-v6e-dws-4"))
    assert flavors(wl4)["tpu-group"] == {"on-demand"}

    described = flexq("describe", "workload", wl4["metadata"]["name"])
    assert "Quota reserved in ClusterQueue cluster-queue" in described.out and "QuotaReserved" in described.out


def _assert(value: bool) -> None:
    assert value


def _reserved(server: Server, job: str) -> dict[str, Any]:
    wl = workloads(server).get(job)
    assert wl is not None and condition(wl, "QuotaReserved") == "True"
    return wl


def test_pending_workload_explains_itself_and_state_survives_restart(flexq: Any, server: Server, tmp_path: Any
                                                                    ) -> None:
    small = guide_text("dws-tpu-queue.yaml").replace("nominalQuota: 1000000000 #", "nominalQuota: 0 #")
    assert flexq("apply", "-f", "-", input=small).code == 0
    for job_id in ("1", "2"):
        _submit(flexq, job_id)

    def pending() -> dict[str, Any]:
        wl = workloads(server).get("rayjob-tpu-v6e-dws-2")
        assert wl is not None and condition(wl, "QuotaReserved") == "False"
        return wl

    wl2 = eventually(pending)
    message = next(c["message"] for c in wl2["status"]["conditions"] if c["type"] == "QuotaReserved")
    assert message.startswith("couldn't assign flavors to pod set tpu-group:")
    assert "insufficient quota for google.com/tpu in flavor dws" in message
    considered = {(c["podSet"], c["flavor"]): c for c in wl2["status"]["flavorsConsidered"]}
    assert considered[("tpu-group", "on-demand")]["mode"] == "NoPreemptionCandidates"
    assert considered[("tpu-group", "default-cpu")]["mode"] == "NoFit"
    assert "insufficient unused quota for google.com/tpu in flavor on-demand, 16 more needed" in \
        considered[("tpu-group", "on-demand")]["reasons"]
    described = flexq("describe", "workload", wl2["metadata"]["name"]).out
    assert "Flavors Considered" in described and "Pending" in described
    events = admin.get(server.url + "/api/v1/namespaces/default/events").json()["items"]
    assert any(e["reason"] == "Pending" and e["involvedObject"]["name"] == wl2["metadata"]["name"] for e in events)

    # Restart the server on the same state: the admitted workload keeps its quota, the pending one waits.
    stop_server(server)
    again = start_server(server.home)
    try:
        wls = workloads(again)
        assert condition(wls["rayjob-tpu-v6e-dws-1"], "Admitted") == "True"
        assert condition(wls["rayjob-tpu-v6e-dws-2"], "QuotaReserved") == "False"
        admin.delete(again.url + "/apis/ray.io/v1/namespaces/default/rayjobs/rayjob-tpu-v6e-dws-1")
        eventually(lambda: _reserved(again, "rayjob-tpu-v6e-dws-2"))
    finally:
        stop_server(again)
        server.process = again.process


def test_jobs_without_a_queue_are_refused_or_defaulted(flexq: Any) -> None:
    job = guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID="9").replace(
        "  labels:\n    kueue.x-k8s.io/queue-name: user-queue\n", "")
    refused = flexq("apply", "-f", "-", input=job)
    assert refused.code == 1 and "kueue.x-k8s.io/queue-name" in refused.err and "LocalQueue named 'default'" in \
        refused.err
    default_lq = ("apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata:\n  name: default\n"
                  "  namespace: default\nspec:\n  clusterQueue: cluster-queue\n")
    assert flexq("apply", "-f", "-", input=default_lq).code == 0
    accepted = flexq("apply", "-f", "-", input=job)
    assert accepted.code == 0, accepted.err
    stored = yaml.safe_load(flexq("get", "rayjob", "rayjob-tpu-v6e-dws-9", "-o", "yaml").out)
    assert stored["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert stored["spec"]["suspend"] is True


def test_a_finished_workload_keeps_its_admission_and_holds_no_quota(flexq: Any, server: Server) -> None:
    small = guide_text("dws-tpu-queue.yaml").replace("nominalQuota: 1000000000 #", "nominalQuota: 0 #")
    assert flexq("apply", "-f", "-", input=small).code == 0
    for job_id in ("1", "2"):
        _submit(flexq, job_id)
    eventually(lambda: _reserved(server, "rayjob-tpu-v6e-dws-1"))
    response = admin.patch(server.url + "/apis/ray.io/v1/namespaces/default/rayjobs/rayjob-tpu-v6e-dws-1/status",
                           json={"status": {"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete"}},
                           headers={"Content-Type": "application/merge-patch+json"})
    assert response.status_code == 200, response.text
    eventually(lambda: _reserved(server, "rayjob-tpu-v6e-dws-2"))  # job 1's on-demand quota is free again

    def check(srv: Server) -> None:
        wl1 = workloads(srv)["rayjob-tpu-v6e-dws-1"]
        # As Kueue: finishing adds the Finished condition and leaves what the workload ran with.
        assert [condition(wl1, t) for t in ("Finished", "QuotaReserved", "Admitted")] == ["True", "True", "True"]
        assert wl1["status"]["admission"]["clusterQueue"] == "cluster-queue"
        assert flavors(wl1)["tpu-group"] == {"on-demand"}
        cq = admin.get(srv.url + "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cluster-queue").json()["status"]
        assert (cq["reservingWorkloads"], cq["admittedWorkloads"]) == (1, 1), "job 2 alone holds quota"

    check(server)
    stop_server(server)
    again = start_server(server.home)
    try:
        check(again)  # read back after a restart, the finished workload still holds nothing
    finally:
        stop_server(again)
        server.process = again.process


def test_the_head_behind_one_that_does_not_fit_is_admitted_at_once(flexq: Any, server: Server) -> None:
    """The live side of tests/sim/test_next_head.py: the same three Jobs, created together."""
    from tests.queues import queue_yaml
    from tests.sim.test_next_head import JOBS

    assert flexq("apply", "-f", "-", input=queue_yaml(("default-flavor", None), cpu=2)).code == 0
    jobs = yaml.safe_dump_all([job(name, queue="q", cpu=cpu).object() for name, cpu in JOBS])
    assert flexq("apply", "-f", "-", input=jobs).code == 0

    def reserved() -> dict[str, str | None]:
        wls = workloads(server)
        assert len(wls) == 3 and condition(wls["small"], "QuotaReserved") == "True"
        return {name: condition(wl, "QuotaReserved") for name, wl in wls.items()}

    assert eventually(reserved) == {"big": "True", "blocked": "False", "small": "True"}
