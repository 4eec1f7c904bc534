"""Concurrent admission through the live server on the real clock: the guide's manifests, unchanged, race."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.conftest import Server, guide_text
from tests.controller.test_live import _cond, _eventually, _flavors, _workloads
from tests.controller.test_live_capacity import _nodes, guide_setup, serve_capacity

JOBS = "/apis/ray.io/v1/namespaces/default/rayjobs"
REQUESTS = "/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests"


def _capacity(dws_delay: str) -> str:
    return f"""cloud:
  on-demand-pool: {{available: 4, bootTime: 1s}}
  dws-pool: {{queuedDelay: {dws_delay}}}
  default-pool: {{bootTime: 1s}}
scaleDownAfter: 60s
"""


def _finish(srv: Server, job_id: str) -> None:
    response = httpx.patch(f"{srv.url}{JOBS}/rayjob-tpu-v6e-dws-{job_id}/status",
                           json={"status": {"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete"}},
                           headers={"Content-Type": "application/merge-patch+json"})
    assert response.status_code == 200, response.text


def _admitted_on(srv: Server, job_id: str, flavor: str) -> dict[str, Any]:
    wl = _workloads(srv)[f"rayjob-tpu-v6e-dws-{job_id}"]
    assert _cond(wl, "Admitted") == "True" and _flavors(wl)["tpu-group"] == {flavor}, wl.get("status")
    return wl


def _messages(srv: Server, workload: dict[str, Any]) -> list[str]:
    events = httpx.get(srv.url + "/api/v1/namespaces/default/events").json()["items"]
    return [e["message"] for e in events if e["involvedObject"]["name"] == workload["metadata"]["name"]]


def _pools(srv: Server) -> list[str]:
    return [n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] for n in _nodes(srv).values()]


def test_plan_a_busy_dws_slow_the_waiting_job_takes_plan_a_when_it_frees(tmp_path: Path) -> None:
    servers = serve_capacity(tmp_path, _capacity("1h"))
    srv = next(servers)
    try:
        guide_setup(srv, guide_text("dws-tpu-queue.yaml"))
        _eventually(lambda: _admitted_on(srv, "1", "on-demand"))

        def racing() -> None:
            wl2 = _workloads(srv)["rayjob-tpu-v6e-dws-2"]
            variants = {v["flavor"]: v for v in wl2["status"].get("variants", [])}
            assert set(variants) == {"on-demand", "dws"}, wl2["status"]
            assert variants["dws"]["state"] == "QuotaReserved" and "waiting for ProvisioningRequest" in \
                variants["dws"]["message"]
            assert _cond_message(wl2, "QuotaReserved").startswith("racing: dws: waiting for ProvisioningRequest")
            (request,) = httpx.get(srv.url + REQUESTS).json()["items"]  # job 1's was withdrawn when it started
            assert request["metadata"]["name"] == f"{wl2['metadata']['name']}-dws-prov-1"

        _eventually(racing)
        _finish(srv, "1")
        wl2 = _eventually(lambda: _admitted_on(srv, "2", "on-demand"))
        assert any("withdrawn before it was provisioned: no cost" in m for m in _messages(srv, wl2))
        assert httpx.get(srv.url + REQUESTS).json()["items"] == [], "the DWS request is withdrawn"
        assert "dws-pool" not in _pools(srv), "no node of the DWS pool was brought up"
        assert "variants" not in wl2["status"]
    finally:
        servers.close()


def _cond_message(wl: dict[str, Any], type_: str) -> str:
    return next((str(c.get("message", "")) for c in wl["status"].get("conditions", []) if c["type"] == type_), "")


def test_three_jobs_on_one_slice_pools_none_is_deactivated_the_third_runs_when_a_slice_frees(
        tmp_path: Path) -> None:
    servers = serve_capacity(tmp_path, _capacity("1s"))
    srv = next(servers)
    try:
        guide_setup(srv, guide_text("dws-tpu-queue.yaml"), jobs=("1", "2", "3"))
        _eventually(lambda: (_admitted_on(srv, "1", "on-demand"), _admitted_on(srv, "2", "dws")))

        def waiting_for_room() -> dict[str, Any]:
            wl3 = _workloads(srv)["rayjob-tpu-v6e-dws-3"]
            assert any("waits for room: node pool dws-pool is at its maximum" in m for m in _messages(srv, wl3))
            return wl3

        wl3 = _eventually(waiting_for_room)
        assert _cond(wl3, "Admitted") != "True" and wl3["spec"].get("active") is not False
        _finish(srv, "2")  # the DWS slice frees: its idle nodes go at once and the waiting request is provisioned
        wl3 = _eventually(lambda: _admitted_on(srv, "3", "dws"))
        assert not [m for m in _messages(srv, wl3) if "Deactivated" in m or "Rejected" in m]
        assert _pools(srv).count("dws-pool") == 4
    finally:
        servers.close()
