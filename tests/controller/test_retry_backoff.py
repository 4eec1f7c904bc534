"""A failed ProvisioningRequest is retried after the announced backoff, on the real clock as in virtual time.

The ProvisioningRequestConfig's ``retryStrategy`` (Kueue's ``backoffBaseSeconds * 2^(n-1)``, capped at
``backoffMaxSeconds``, ``backoffLimitCount`` retries) sets when the workload queues again. In the live server,
status writes the controller makes itself (ClusterQueue and LocalQueue counts, NodePool sizes) must not put a
workload that waits out its backoff back into its queue early.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario
from tests import admin
from tests.conftest import guide_text
from tests.sim.guide_setup import guide_scenario, job
from tests.support import cli, guide_setup, serve_capacity

# Plan A holds one 4x4 slice (job 1 takes it); DWS never has a machine: each request fails as it is answered.
CLOUD = """cloud:
  on-demand-pool: {available: 4, bootTime: 1s}
  dws-pool: {available: 0, queuedDelay: 0s}
  default-pool: {bootTime: 1s}
"""
RETRIES = 3
JOB2 = "rayjob-rayjob-tpu-v6e-dws-2-"
"""The names of job 2's Workload and ProvisioningRequests begin so."""


def _queue(base: int) -> str:
    """The guide's queue, its ProvisioningRequestConfig with a retryStrategy: ``base`` and a cap 60 times it."""
    return guide_text("dws-tpu-queue.yaml").rstrip() + f"""
  retryStrategy:
    backoffLimitCount: {RETRIES}
    backoffBaseSeconds: {base}
    backoffMaxSeconds: {60 * base}
"""


def _requests(url: str) -> dict[str, dict[str, Any]]:
    items = admin.get(url + "/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests",
                      timeout=5).json()["items"]
    return {r["metadata"]["name"]: r for r in items}


def _failed(request: dict[str, Any]) -> bool:
    return any(c["type"] == "Failed" and c["status"] == "True" for c in (request.get("status") or {}).get(
        "conditions") or [])


def test_failed_provisioning_requests_are_retried_after_the_backoff_on_the_real_clock(tmp_path: Path) -> None:
    server = serve_capacity(tmp_path, CLOUD + "provisioningTimeout: 30s\nscaleDownAfter: 60s\n")
    srv = next(server)
    try:
        guide_setup(srv, _queue(base=1), jobs=("1",))
        applied: list[int] = []
        submit = threading.Thread(target=lambda: applied.append(cli(srv, "apply", "-f", "-", input=guide_text(
            "rayjob-tpu-v6e-dws.yaml", JOB_ID="2")).returncode))
        # Watch the requests closely (the test's clock): each attempt's appearance and failure is bracketed by
        # the poll that first shows it and the one before it.
        created: dict[str, tuple[float, float]] = {}
        failed: dict[str, tuple[float, float]] = {}
        before = time.monotonic()
        deadline = before + 20
        submit.start()  # job 2, once the watching has begun
        while len(failed) < RETRIES + 1 and time.monotonic() < deadline:
            sent = time.monotonic()
            requests = _requests(srv.url)
            seen = (before, time.monotonic())
            for name, request in requests.items():
                if not name.startswith(JOB2):
                    continue  # job 1 runs on Plan A
                created.setdefault(name, seen)
                if _failed(request):
                    failed.setdefault(name, seen)
            before = sent
            time.sleep(0.02)
        submit.join()
        assert applied == [0]
        names = sorted(created, key=created.__getitem__)
        assert len(names) == RETRIES + 1 and set(failed) == set(names), (names, failed)
        assert all(n.endswith(f"-dws-prov-{i}") for i, n in enumerate(names, 1)), names
        for prev, after, announced in zip(names[:-1], names[1:], (1, 2, 4), strict=True):
            shortest = created[after][0] - failed[prev][1]
            longest = created[after][1] - failed[prev][0]
            # Not before the announced delay (as far as polling can tell), nor much after it.
            assert longest >= announced and shortest <= announced + 0.5, (announced, shortest, longest)
        time.sleep(0.5)
        assert len([n for n in _requests(srv.url) if n.startswith(JOB2)]) == RETRIES + 1, "none after the last retry"
        events = admin.get(srv.url + "/api/v1/namespaces/default/events", timeout=5).json()["items"]
        messages = [e["message"] for e in events if e["involvedObject"]["name"].startswith(JOB2)]
        for n, delay in ((1, "1s"), (2, "2s"), (3, "4s")):
            assert any(f"retry {n} of {RETRIES} in {delay}" in m for m in messages), messages
    finally:
        server.close()


def test_the_same_backoff_in_virtual_time(tmp_path: Path) -> None:
    queue = tmp_path / "queue.yaml"
    queue.write_text(_queue(base=60))
    path = guide_scenario(tmp_path, """    cloud:
      on-demand-pool: {available: 4, bootTime: 1s}
      dws-pool: {available: 0, queuedDelay: 0s}""", job("1", run_for="1d") + job("2", "2s"), "1h", queue=queue)
    result = run_scenario(load_scenario(path))
    key = next(w.key for w in result.workloads if w.owner.endswith("/rayjob-tpu-v6e-dws-2"))
    notes = [e for e in result.events if e["workload"] == key and e["event"] == "ProvisioningRequest"]
    accepted = [e["t"] for e in notes if e["state"] == "Accepted"]
    failed = [e["t"] for e in notes if e["state"] == "Failed"]
    assert len(accepted) == len(failed) == RETRIES + 1
    assert [a - f for f, a in zip(failed, accepted[1:], strict=False)] == [60, 120, 240], "as on the real clock"
