"""Capacity in the live server: node pools scale, DWS provisions, nodes appear as Node objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import admin, forks
from tests.conftest import Server, guide_text
from tests.support import cli, condition, eventually, flavors, guide_setup, serve_capacity, workloads
from tests.support import nodes as _nodes

CAPACITY = """cloud:
  on-demand-pool: {available: 4, bootTime: 1s}
  dws-pool: {queuedDelay: 3s}
  default-pool: {bootTime: 1s}
provisioningTimeout: 10s
scaleDownAfter: 2s
"""


@pytest.fixture
def capacity_server(tmp_path: Path) -> Any:
    yield from serve_capacity(tmp_path, CAPACITY)


def _ok(server: Server) -> None:
    try:
        assert admin.get(server.url + "/healthz", timeout=1).status_code == 200
    except httpx.HTTPError as exc:
        raise AssertionError(str(exc)) from None


@pytest.mark.long
def test_pools_scale_and_dws_provisions(capacity_server: Server) -> None:
    srv = capacity_server
    # The config names a node selector from the provisioned request's class details (Kueue's podSetUpdates).
    guide_setup(srv, guide_text("dws-tpu-queue.yaml").replace("  managedResources:\n    - google.com/tpu\n", (
        "  managedResources:\n    - google.com/tpu\n  podSetUpdates:\n    nodeSelector:\n"
        "    - {key: cloud.google.com/gke-nodepool, valueFromProvisioningClassDetail: NodePoolName}\n"
        "    - {key: example.com/group, valueFromProvisioningClassDetail: NodeGroupName}\n")))

    def both_placed() -> dict[str, dict[str, Any]]:
        nodes = _nodes(srv)
        pools = [n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] for n in nodes.values()]
        assert pools.count("on-demand-pool") == 4 and pools.count("dws-pool") == 4
        assert all(n["status"]["conditions"][0]["status"] == "True" for n in nodes.values())
        return nodes

    nodes = eventually(both_placed)
    dws_node = next(n for n in nodes.values() if n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] == "dws-pool")
    assert {"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NoSchedule"} in dws_node["spec"]["taints"]
    assert dws_node["metadata"]["labels"]["cloud.google.com/gke-tpu-topology"] == "4x4"
    assert dws_node["status"]["allocatable"]["google.com/tpu"] == "4"
    wls = workloads(srv)
    assert condition(wls["rayjob-tpu-v6e-dws-2"], "Admitted") == "True"
    (check,) = wls["rayjob-tpu-v6e-dws-2"]["status"]["admissionChecks"]
    (update,) = check["podSetUpdates"]
    consume = update["annotations"]["autoscaling.x-k8s.io/consume-provisioning-request"]
    assert update["name"] == "tpu-group" and consume.endswith("-dws-prov-1"), "the Ray head asks no TPU: no update"
    assert update["nodeSelector"] == {"cloud.google.com/gke-nodepool": "dws-pool"}, "NodeGroupName: not a detail here"
    job2 = admin.get(srv.url + "/apis/ray.io/v1/namespaces/default/rayjobs/rayjob-tpu-v6e-dws-2").json()
    worker = job2["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]
    assert worker["metadata"]["annotations"]["autoscaling.x-k8s.io/consume-provisioning-request"] == consume
    assert worker["spec"]["nodeSelector"]["cloud.google.com/gke-nodepool"] == "dws-pool"
    requests = admin.get(srv.url + "/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests").json()
    (request,) = requests["items"]
    assert request["metadata"]["name"].endswith("-dws-prov-1")
    assert request["spec"] == {"provisioningClassName": "queued-provisioning.gke.io", "podSets": [
        {"podTemplateRef": {"name": f"ppt-{request['metadata']['name']}-tpu-group"}, "count": 4}]}, \
        "the class dws-config names; only the pod set asking for TPUs (its managed resource), with its count"
    assert {c["type"]: c["status"] for c in request["status"]["conditions"]} == {"Accepted": "True",
                                                                                 "Provisioned": "True"}
    details = request["status"]["provisioningClassDetails"]
    assert (details["NodePoolName"], details["AcceleratorType"]) == ("dws-pool", "tpu-v6e-slice")
    listed = admin.get(srv.url + "/apis/flexq.dev/v1alpha1/nodepools").json()["items"]
    pools = {p["metadata"]["name"]: p for p in listed}
    assert pools["dws-pool"]["status"]["nodeCount"] == 4
    events = admin.get(srv.url + "/api/v1/namespaces/default/events").json()["items"]
    reasons = {e["reason"] for e in events}
    assert {"ScaledUp", "ProvisioningRequest", "Started"} <= reasons
    accepted = next(e for e in events if e["reason"] == "ProvisioningRequest" and "Accepted" in e["message"])
    assert "waiting for 4 ct6e-standard-4t node(s) in dws-pool; expected in 3s" in accepted["message"]

    # Jobs deleted: their nodes go idle and the pools scale back to zero (the default pool keeps its node).
    for job_id in ("1", "2"):
        assert cli(srv, "delete", "rayjob", f"rayjob-tpu-v6e-dws-{job_id}").returncode == 0
    eventually(lambda: _assert_only_default(_nodes(srv)))


def _assert_only_default(nodes: dict[str, dict[str, Any]]) -> None:
    assert [n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] for n in nodes.values()] == ["default-pool"]


def test_bad_capacity_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "capacity.yaml"
    path.write_text("cloud:\n  dws-pool: {queuedDelay: soon}\n")
    proc = forks.run(["server", "--port", "1", "--capacity", str(path)], text=True, timeout=60)
    assert proc.returncode == 1 and "capacity.cloud.dws-pool.queuedDelay" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("flavor", ["on-demand", "dws"])
def test_a_lost_host_costs_its_tpu_slice_and_the_job_gets_one_back(tmp_path: Path, flavor: str) -> None:
    """On-demand: the slice is repaired (its nodes recreated under their names after the boot time); DWS: the slice
    is released and a new ProvisioningRequest brings a new one. Either way the requeued job is the same RayJob and
    Workload (same uids), so it runs again in its own directory and resumes from the checkpoints there."""
    queue = guide_text("dws-tpu-queue.yaml")
    if flavor == "dws":
        queue = queue.replace("nominalQuota: 16", "nominalQuota: 0")  # no Plan A quota: the job runs on DWS
    pool = "on-demand-pool" if flavor == "on-demand" else "dws-pool"
    # Nodes boot in 3 s and idle ones go after a minute (not before the requeued job is back); where the job runs
    # on-demand, DWS answers only after a minute, so that the repaired slice wins the race.
    capacity = CAPACITY.replace("bootTime: 1s}", "bootTime: 3s}").replace("scaleDownAfter: 2s", "scaleDownAfter: 60s")
    if flavor == "on-demand":
        capacity = capacity.replace("queuedDelay: 3s", "queuedDelay: 60s")
    servers = serve_capacity(tmp_path, capacity)
    srv = next(servers)
    try:
        guide_setup(srv, queue, jobs=("1",))  # each pool at most 4 nodes: one 4x4 slice
        job_url = f"{srv.url}/apis/ray.io/v1/namespaces/default/rayjobs/rayjob-tpu-v6e-dws-1"

        def running() -> list[str]:
            wl = workloads(srv)["rayjob-tpu-v6e-dws-1"]
            assert condition(wl, "Admitted") == "True"
            nodes = {n: node for n, node in _nodes(srv).items()
                     if node["metadata"]["labels"]["cloud.google.com/gke-nodepool"] == pool}
            assert len(nodes) == 4 and all(condition(node, "Ready") == "True" for node in nodes.values())
            return sorted(nodes)

        first = eventually(running)
        uids = (workloads(srv)["rayjob-tpu-v6e-dws-1"]["metadata"]["uid"],
                admin.get(job_url).json()["metadata"]["uid"])
        assert admin.delete(f"{srv.url}/api/v1/nodes/{first[0]}").status_code == 200

        def events() -> list[dict[str, Any]]:
            return list(admin.get(srv.url + "/api/v1/namespaces/default/events").json()["items"])

        def evicted() -> None:
            assert any(e["reason"] == "Evicted" and f"Node {first[0]} was deleted" in e["message"] for e in events())

        eventually(evicted, timeout=30)
        again = eventually(running, timeout=30)
        slice_events = {e["reason"]: e for e in events() if e["involvedObject"]["kind"] == "NodePool"}
        if flavor == "on-demand":
            assert again == first, "the slice was repaired: the same nodes, recreated"
            assert flavors(workloads(srv)["rayjob-tpu-v6e-dws-1"])["tpu-group"] == {"on-demand"}
            assert "4 node(s) are recreated, ready in 3s" in slice_events["SliceRepaired"]["message"]
        else:
            assert not set(again) & set(first), "the whole slice was released and a new one came"
            assert "its other 3 node(s) are released" in slice_events["SliceReleased"]["message"]
        assert "Fallback" not in {e["reason"] for e in events()}
        wl = workloads(srv)["rayjob-tpu-v6e-dws-1"]
        assert (wl["metadata"]["uid"], admin.get(job_url).json()["metadata"]["uid"]) == uids, "the same job, requeued"
    finally:
        servers.close()
