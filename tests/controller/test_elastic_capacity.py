"""An elastic TPU RayJob's growth and shrinking against node pools: the growth's slice is provisioned by DWS
(a ProvisioningRequest of its own) and its pool grows by a slice; shrinking lets the pool scale back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests import admin
from tests.conftest import Server, guide_text
from tests.controller.test_live_capacity import CAPACITY, capacity_server
from tests.support import condition, eventually, guide_setup, nodes, serve_capacity

__all__ = ["capacity_server"]

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads"
REPLACES = "kueue.x-k8s.io/workload-slice-replacement-for"


def _replicas(srv: Server, job: str, n: int) -> None:
    patch = [{"op": "replace", "path": "/spec/rayClusterSpec/workerGroupSpecs/0/replicas", "value": n}]
    response = admin.patch(f"{srv.url}/apis/ray.io/v1/namespaces/default/rayjobs/{job}", json=patch,
                           headers={"Content-Type": "application/json-patch+json"})
    assert response.status_code == 200, response.text


def _pool_nodes(srv: Server, pool: str) -> int:
    return sum(1 for n in nodes(srv).values() if n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] == pool)


def test_a_dws_job_grows_by_a_provisioned_slice_and_shrinks_back(capacity_server: Server) -> None:
    srv = capacity_server
    guide_setup(srv, guide_text("dws-tpu-queue.yaml"), max_nodes=8)

    def running() -> None:
        assert _pool_nodes(srv, "dws-pool") == 4 and _pool_nodes(srv, "on-demand-pool") == 4

    eventually(running)
    _replicas(srv, "rayjob-tpu-v6e-dws-2", 2)

    def grown() -> dict[str, Any]:
        items = admin.get(srv.url + WORKLOADS).json()["items"]
        new = next(w for w in items if REPLACES in (w["metadata"].get("annotations") or {}))
        assert condition(new, "Admitted") == "True"
        assert _pool_nodes(srv, "dws-pool") == 8
        return new

    new = eventually(grown, timeout=40)
    mine = [e["message"] for e in admin.get(srv.url + "/api/v1/namespaces/default/events").json()["items"]
            if e["involvedObject"]["name"] == new["metadata"]["name"]]
    assert any("is Accepted: waiting for 4 ct6e-standard-4t node(s) in dws-pool" in m for m in mine), \
        f"the growth asks DWS for the slice it adds, not for both: {mine}"
    assert "pods bound to 9 node(s) in default-pool, dws-pool" in mine, "its pods: the old slice's nodes and the new"
    assert [p["count"] for p in new["status"]["admission"]["podSetAssignments"]] == [1, 8]
    _replicas(srv, "rayjob-tpu-v6e-dws-2", 1)  # shrinks in place: the slice it no longer uses goes idle, then away
    eventually(lambda: _assert(_pool_nodes(srv, "dws-pool") == 4), timeout=40)
    assert condition(admin.get(f"{srv.url}{WORKLOADS}/{new['metadata']['name']}").json(), "Admitted") == "True"


def _assert(ok: bool) -> None:
    assert ok


def test_an_on_demand_job_grows_by_a_slice_its_pool_adds(tmp_path: Path) -> None:
    # Plan A with room for two slices, in quota and in the cloud; the pool may add just one.
    queue = guide_text("dws-tpu-queue.yaml").replace("nominalQuota: 40", "nominalQuota: 80").replace(
        "nominalQuota: 75Gi", "nominalQuota: 150Gi").replace("nominalQuota: 16", "nominalQuota: 32")
    servers = serve_capacity(tmp_path, CAPACITY.replace("{available: 4, bootTime: 1s}", "{available: 8, bootTime: 1s}"))
    srv = next(servers)
    try:
        guide_setup(srv, queue, jobs=("1",), max_nodes=8)
        eventually(lambda: _assert(_pool_nodes(srv, "on-demand-pool") == 4), timeout=30)
        # Admitted once its pods start (it raced on-demand and dws until then): only then is growth a new slice.
        eventually(lambda: _assert(condition(admin.get(srv.url + WORKLOADS).json()["items"][0], "Admitted") == "True"),
                    timeout=30)
        _replicas(srv, "rayjob-tpu-v6e-dws-1", 2)

        def grown() -> None:
            items = admin.get(srv.url + WORKLOADS).json()["items"]
            new = next(w for w in items if REPLACES in (w["metadata"].get("annotations") or {}))
            assert condition(new, "Admitted") == "True" and _pool_nodes(srv, "on-demand-pool") == 8
            events = admin.get(srv.url + "/api/v1/namespaces/default/events").json()["items"]
            mine = [e["message"] for e in events if e["involvedObject"]["name"] == new["metadata"]["name"]]
            assert "node pool on-demand-pool: 4 node(s) requested, ready in 1s" in mine, mine
            assert "pods bound to 9 node(s) in default-pool, on-demand-pool" in mine, mine

        eventually(grown, timeout=40)
    finally:
        servers.close()
