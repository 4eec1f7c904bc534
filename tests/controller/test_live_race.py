"""Concurrent admission through the live server on the real clock: the guide's manifests, unchanged, race."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests import admin
from tests.conftest import Server, guide_text, start_server, stop_server
from tests.support import cli, condition, eventually, eventually_value, guide_setup, nodes, serve_capacity, workloads
from tests.support import flavors as _flavors

JOBS = "/apis/ray.io/v1/namespaces/default/rayjobs"
REQUESTS = "/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads"


def _capacity(dws_delay: str) -> str:
    return f"""cloud:
  on-demand-pool: {{available: 4, bootTime: 1s}}
  dws-pool: {{queuedDelay: {dws_delay}}}
  default-pool: {{bootTime: 1s}}
scaleDownAfter: 60s
"""


def _finish(srv: Server, job_id: str) -> None:
    response = admin.patch(f"{srv.url}{JOBS}/rayjob-tpu-v6e-dws-{job_id}/status",
                           json={"status": {"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete"}},
                           headers={"Content-Type": "application/merge-patch+json"})
    assert response.status_code == 200, response.text


def _admitted_on(srv: Server, job_id: str, flavor: str) -> dict[str, Any]:
    wl = workloads(srv)[f"rayjob-tpu-v6e-dws-{job_id}"]
    assert condition(wl, "Admitted") == "True" and _flavors(wl)["tpu-group"] == {flavor}, wl.get("status")
    return wl


def _messages(srv: Server, workload: dict[str, Any]) -> list[str]:
    events = admin.get(srv.url + "/api/v1/namespaces/default/events").json()["items"]
    return [e["message"] for e in events if e["involvedObject"]["name"] == workload["metadata"]["name"]]


def _pools(srv: Server) -> list[str]:
    return [n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] for n in nodes(srv).values()]


def test_plan_a_busy_dws_slow_the_waiting_job_takes_plan_a_when_it_frees(tmp_path: Path) -> None:
    servers = serve_capacity(tmp_path, _capacity("1h"))
    srv = next(servers)
    try:
        guide_setup(srv, guide_text("dws-tpu-queue.yaml"))
        eventually(lambda: _admitted_on(srv, "1", "on-demand"))

        def racing() -> None:
            wl2 = workloads(srv)["rayjob-tpu-v6e-dws-2"]
            variants = {v["flavor"]: v for v in wl2["status"].get("variants", [])}
            assert set(variants) == {"on-demand", "dws"}, wl2["status"]
            assert variants["dws"]["state"] == "QuotaReserved" and "waiting for ProvisioningRequest" in \
                variants["dws"]["message"]
            assert _cond_message(wl2, "QuotaReserved").startswith("racing: dws: waiting for ProvisioningRequest")
            assert wl2["metadata"]["labels"]["kueue.x-k8s.io/concurrent-admission-parent"] == "true"
            # Kueue's variants: Workloads of their own, owned by the parent, one flavor each.
            owned = [w for w in admin.get(srv.url + WORKLOADS).json()["items"]
                     if w["metadata"]["ownerReferences"][0] == {
                         "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": wl2["metadata"]["name"],
                         "uid": wl2["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
            flavors = {w["metadata"]["annotations"]["kueue.x-k8s.io/workload-allowed-resource-flavors"]: w
                       for w in owned}
            assert set(flavors) == {"on-demand", "dws"}
            base = wl2["metadata"]["name"].rsplit("-", 1)[0]
            assert all(w["metadata"]["name"].startswith(f"{base}-variant-{f}-") for f, w in flavors.items())
            assert condition(flavors["dws"], "QuotaReserved") == "True" and condition(flavors["on-demand"],
                                                                                "QuotaReserved") == "False"
            assert flavors["dws"]["status"]["admissionChecks"][0]["state"] == "Pending"
            reserved = next(c for c in flavors["on-demand"]["status"]["conditions"] if c["type"] == "QuotaReserved")
            assert reserved["reason"] == "WaitingForQuota", reserved  # Kueue's reason: Plan A's quota is in use
            assert "kueue.x-k8s.io/concurrent-admission-parent" not in flavors["dws"]["metadata"]["labels"]
            (request,) = admin.get(srv.url + REQUESTS).json()["items"]  # job 1's was withdrawn when it started
            assert request["metadata"]["name"] == f"{wl2['metadata']['name']}-dws-prov-1"

        eventually(racing)
        _finish(srv, "1")
        wl2 = eventually(lambda: _admitted_on(srv, "2", "on-demand"))
        assert any("withdrawn before it was provisioned: no cost" in m for m in _messages(srv, wl2))
        assert admin.get(srv.url + REQUESTS).json()["items"] == [], "the DWS request is withdrawn"
        assert "dws-pool" not in _pools(srv), "no node of the DWS pool was brought up"
        assert "variants" not in wl2["status"]
        assert [w for w in admin.get(srv.url + WORKLOADS).json()["items"]
                if w["metadata"]["ownerReferences"][0]["kind"] == "Workload"] == [], "its variants are gone"
        assert _cond_message(wl2, "Admitted").startswith("The variant rayjob-rayjob-tpu-v6e-dws-2-variant-on-demand-")
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
        eventually(lambda: (_admitted_on(srv, "1", "on-demand"), _admitted_on(srv, "2", "dws")))

        def waiting_for_room() -> dict[str, Any]:
            wl3 = workloads(srv)["rayjob-tpu-v6e-dws-3"]
            assert any("waits for room: node pool dws-pool is at its maximum" in m for m in _messages(srv, wl3))
            return wl3

        wl3 = eventually(waiting_for_room)
        assert condition(wl3, "Admitted") != "True" and wl3["spec"].get("active") is not False
        _finish(srv, "2")  # the DWS slice frees: its idle nodes go at once and the waiting request is provisioned
        wl3 = eventually(lambda: _admitted_on(srv, "3", "dws"))
        assert not [m for m in _messages(srv, wl3) if "Deactivated" in m or "Rejected" in m]
        assert _pools(srv).count("dws-pool") == 4
    finally:
        servers.close()


def _restock(srv: Server, capacity: str) -> None:
    """Plan A's stock-out ends now: the capacity file without it, read again (``kill -HUP``, as a user would)."""
    (srv.home.parent / "capacity.yaml").write_text(capacity)
    srv.process.send_signal(signal.SIGHUP)


def _log_line(srv: Server, text: str) -> str | None:
    """The first line of the server's log so far that holds ``text`` (None: none yet)."""
    assert srv.process.stderr is not None
    os.set_blocking(srv.process.stderr.fileno(), False)
    lines = _LOGS.setdefault(srv.url, [])
    lines += (srv.process.stderr.read() or b"").decode(errors="replace").splitlines()
    return next((line for line in lines if text in line), None)


_LOGS: dict[str, list[str]] = {}
"""What each server's log has shown so far (read as it comes)."""


STOCKED_OUT = "stockouts: [{from: 0s, to: 1000h}]"
"""Plan A's stock-out, until the test ends it (:func:`_restock`)."""


@pytest.mark.parametrize("fallback", [True, False], ids=["flexq", "kueue-compatible"])
def test_plan_a_stocked_out_and_dws_never_answers_the_job_starts_when_plan_a_recovers(
        tmp_path: Path, fallback: bool) -> None:
    capacity = f"""cloud:
  on-demand-pool: {{available: 4, bootTime: 1s, {STOCKED_OUT}}}
  dws-pool: {{queuedDelay: never}}
  default-pool: {{bootTime: 1s}}
fallback: {str(fallback).lower()}
"""
    servers = serve_capacity(tmp_path, capacity)
    srv = next(servers)
    try:
        guide_setup(srv, guide_text("dws-tpu-queue.yaml"), jobs=("1",))

        def waits_for_plan_a() -> None:
            assert any("stock-out" in m for m in _messages(srv, workloads(srv)["rayjob-tpu-v6e-dws-1"]))

        eventually(waits_for_plan_a, timeout=60)
        assert "on-demand-pool" not in _pools(srv), "no node of Plan A while it is stocked out"
        # A file that no longer reads is refused, in the server's log, and the last capacity stays.
        _restock(srv, capacity.replace("bootTime: 1s", "bootTime: soon", 1))
        assert "bootTime" in eventually_value(lambda: _log_line(srv, "capacity file was not read again"))
        assert "on-demand-pool" not in _pools(srv)
        _restock(srv, capacity.replace(f", {STOCKED_OUT}", ""))
        wl = eventually(lambda: _admitted_on(srv, "1", "on-demand"), timeout=60)
        messages = _messages(srv, wl)
        assert not any("cannot deliver nodes" in m for m in messages), "no fallback to a flavor that never delivers"
        if fallback:
            assert any("withdrawn before it was provisioned: no cost" in m for m in messages)
        eventually_value(lambda: _pools(srv).count("on-demand-pool") == 4, timeout=60)  # the job's 4x4 slice
        assert admin.get(srv.url + REQUESTS).json()["items"] == []
    finally:
        servers.close()


def _kueue_policy(queue: str) -> str:
    queue = queue.replace("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue",
                          "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue")
    return queue.replace("  namespaceSelector: {}\n", "  namespaceSelector: {}\n  concurrentAdmissionPolicy:\n"
                         "    migration:\n      mode: TryPreferredFlavors\n", 1)


@pytest.mark.parametrize("run_time", [None, "1h"], ids=["run-time-unknown", "finishes-sooner-where-it-runs"])
def test_try_preferred_flavors_migrates_a_running_job_live(tmp_path: Path, run_time: str | None) -> None:
    capacity = f"""cloud:
  on-demand-pool: {{available: 4, bootTime: 1s, {STOCKED_OUT}}}
  dws-pool: {{queuedDelay: 1s}}
  default-pool: {{bootTime: 1s}}
"""
    servers = serve_capacity(tmp_path, capacity)
    srv = next(servers)
    try:
        job = guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID="1")
        if run_time is not None:
            job = job.replace("  annotations:\n", f"  annotations:\n    flexq.dev/expected-run-time: {run_time}\n", 1)
        guide_setup(srv, _kueue_policy(guide_text("dws-tpu-queue.yaml")), jobs=())
        made = cli(srv, "apply", "-f", "-", input=job)
        assert made.returncode == 0, made.stderr
        wl = eventually(lambda: _admitted_on(srv, "1", "dws"), timeout=30)
        _restock(srv, capacity.replace(f", {STOCKED_OUT}", ""))
        if run_time is None:
            wl = eventually(lambda: _admitted_on(srv, "1", "on-demand"), timeout=60)
            messages = _messages(srv, wl)
            assert any("due to migration to more favorable resource flavor on-demand" in m for m in messages)
            job_events = [e for e in admin.get(srv.url + "/api/v1/namespaces/default/events").json()["items"]
                          if e["involvedObject"]["name"] == "rayjob-tpu-v6e-dws-1"]
            counts = {e["reason"]: e.get("count", 1) for e in job_events}
            assert counts["Started"] == 2 and counts["Stopped"] == 1, "stopped, then started again"
        else:
            def refused() -> None:
                assert any("no migration to flavor on-demand: it finishes sooner where it runs" in m
                           for m in _messages(srv, wl))

            eventually(refused, timeout=60)
            assert _flavors(workloads(srv)["rayjob-tpu-v6e-dws-1"])["tpu-group"] == {"dws"}
    finally:
        servers.close()


def test_a_racing_job_races_on_after_a_restart(tmp_path: Path) -> None:
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(_capacity("1h"))
    srv = start_server(tmp_path / "home", "--capacity", str(capacity))
    try:
        guide_setup(srv, guide_text("dws-tpu-queue.yaml"))
        eventually(lambda: _admitted_on(srv, "1", "on-demand"))
        eventually(lambda: _assert(len(_variant_objects(srv)) == 2))
    finally:
        stop_server(srv)
    again = start_server(tmp_path / "home", "--capacity", str(capacity))
    try:
        # Nodes do not outlive the server: job 1 gets Plan A again; job 2 races again, its variants stored once.
        eventually(lambda: _admitted_on(again, "1", "on-demand"), timeout=30)
        variants = eventually(lambda: _assert_two(_variant_objects(again)))
        assert sorted(v["metadata"]["annotations"]["kueue.x-k8s.io/workload-allowed-resource-flavors"]
                      for v in variants) == ["dws", "on-demand"]
        _finish(again, "1")
        eventually(lambda: _admitted_on(again, "2", "on-demand"), timeout=30)
        eventually(lambda: _assert(_variant_objects(again) == []))
    finally:
        stop_server(again)


def _variant_objects(srv: Server) -> list[dict[str, Any]]:
    return [w for w in admin.get(srv.url + WORKLOADS).json()["items"]
            if w["metadata"]["ownerReferences"][0]["kind"] == "Workload"]


def _assert(ok: bool) -> None:
    assert ok


def _assert_two(variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    assert len(variants) == 2, [v["metadata"]["name"] for v in variants]
    return variants
