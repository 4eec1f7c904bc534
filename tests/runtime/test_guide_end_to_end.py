"""The guide's flow for real: pools, queues, two RayJobs training the unmodified train.py on Ray."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import admin
from tests.conftest import GUIDE, Server, guide_text, start_server, stop_server
from tests.queues import queue_yaml
from tests.runtime import guide_run
from tests.runtime.ray_leaks import RayProcesses
from tests.support import assert_done, cli_ok, eventually, get_rayjob

CAPACITY = """cloud:
  on-demand-pool: {available: 4, bootTime: 1s}
  dws-pool: {queuedDelay: 4s}
  default-pool: {bootTime: 1s}
scaleDownAfter: 3s
"""


@pytest.fixture
def ray_server(tmp_path: Path, ray_processes: RayProcesses) -> Any:
    """A server on real Ray; ray_processes fails the test if any of its Ray processes or their temp dirs is left."""
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(CAPACITY)
    srv = start_server(tmp_path / "home", "--runtime", "ray", "--capacity", str(capacity))
    try:
        yield srv
    finally:
        stop_server(srv)


@pytest.mark.skipif(guide_run.CLUSTER_SH, reason="test_cluster_sh runs the guide's flow and checks all this")
def test_two_rayjobs_train_for_real(tmp_path: Path, ray_processes: RayProcesses) -> None:
    srv = start_server(tmp_path / "home", "--runtime", "ray", "--capacity", str(guide_run.capacity(tmp_path)))
    try:
        guide_run.set_up(srv)

        def submit() -> None:
            for job_id in ("1", "2"):
                guide_run.submit(srv, job_id)

        guide_run.run(srv, ray_processes, submit)
    finally:
        stop_server(srv)


FAILING = queue_yaml(("default", None)) + """---
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: broken
  labels: {kueue.x-k8s.io/queue-name: q}
spec:
  shutdownAfterJobFinishes: true
  backoffLimit: 1
  entrypoint: python -c "import sys; print('something went wrong'); sys.exit(3)"
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers: [{name: head, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"""


@pytest.mark.long
def test_a_failing_script_fails_the_job_and_frees_the_quota(ray_server: Server) -> None:
    srv = ray_server
    cli_ok(srv, "apply", "-f", "-", input=FAILING)
    eventually(lambda: assert_done(get_rayjob(srv, "broken")), timeout=180)
    status = get_rayjob(srv, "broken")["status"]
    assert status["jobStatus"] == "FAILED" and status["reason"] == "AppFailed"
    assert "exit code 3" in status["message"]
    assert (status["failed"], status["succeeded"]) == (2, 0), "backoffLimit 1: tried twice"
    log = cli_ok(srv, "logs", "rayjob/broken").stdout
    assert "something went wrong" in log and log.rstrip().splitlines()[-2].endswith("' failed")
    assert "retrying, attempt 2 of 2" in log
    workload = admin.get(srv.url + "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads").json()["items"][0]

    def freed() -> None:
        cq = admin.get(srv.url + "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq").json()
        assert cq["status"]["reservingWorkloads"] == 0

    eventually(freed)
    assert workload["metadata"]["name"].startswith("rayjob-broken-")


def test_a_ray_cluster_that_cannot_start_fails_the_job_with_a_reason(ray_server: Server) -> None:
    srv = ray_server
    broken = FAILING.replace("      rayStartParams: {}", '      rayStartParams: {num-cpus: "lots"}').replace(
        "  backoffLimit: 1\n", "")
    cli_ok(srv, "apply", "-f", "-", input=broken)
    eventually(lambda: assert_done(get_rayjob(srv, "broken")), timeout=120)
    status = get_rayjob(srv, "broken")["status"]
    assert status["jobStatus"] == "FAILED" and status["reason"] == "SubmissionFailed"
    assert "ray start exited" in status["message"]

    def freed() -> None:
        cq = admin.get(srv.url + "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq").json()
        assert cq["status"]["reservingWorkloads"] == 0

    eventually(freed)


def dws_pools(max_nodes: int, extra: str = "") -> str:
    """The guide's cluster with only its default pool and a flex-start DWS pool (``extra``: more of its spec)."""
    return f"""apiVersion: flexq.dev/v1alpha1
kind: Cluster
metadata: {{name: tpu-cluster}}
---
apiVersion: flexq.dev/v1alpha1
kind: NodePool
metadata: {{name: default-pool}}
spec: {{cluster: tpu-cluster, machineType: n2-standard-16, initialNodeCount: 1}}
---
apiVersion: flexq.dev/v1alpha1
kind: NodePool
metadata: {{name: dws-pool}}
spec:
  cluster: tpu-cluster
  machineType: ct6e-standard-4t
  tpuTopology: 4x4
  autoscaling: {{enabled: true, minNodeCount: 0, maxNodeCount: {max_nodes}}}
  flexStart: true
  queuedProvisioning: true
{extra}"""


LOSSY_POOLS = dws_pools(4, "  maxRunDurationSeconds: 12\n")


def test_nodes_lost_mid_run_stop_the_cluster_and_requeue(ray_server: Server, ray_processes: RayProcesses) -> None:
    srv = ray_server
    cli_ok(srv, "apply", "-f", "-", input=LOSSY_POOLS)
    # Plan A has no TPU quota here, so the job goes to dws, whose flex-start nodes live 12 seconds.
    queue = guide_text("dws-tpu-queue.yaml").replace("nominalQuota: 16", "nominalQuota: 0")
    cli_ok(srv, "apply", "-f", "-", input=queue)
    cli_ok(srv, "create", "configmap", "jax-train-script", f"--from-file={GUIDE / 'train.py'}")
    cli_ok(srv, "apply", "-f", "-", input=guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID="1"))
    name = "rayjob-tpu-v6e-dws-1"

    def evicted() -> None:
        events = admin.get(srv.url + "/api/v1/namespaces/default/events").json()["items"]
        assert any(e["reason"] == "Evicted" and "maxRunDuration" in e["message"] for e in events)

    eventually(evicted, timeout=120)

    def requeued_and_restarted() -> None:
        events = admin.get(srv.url + "/api/v1/namespaces/default/events").json()["items"]
        accepted = [e for e in events if e["reason"] == "ProvisioningRequest" and "-dws-prov-2" in e["message"]]
        assert accepted, "a fresh ProvisioningRequest for the requeued workload"

    eventually(requeued_and_restarted, timeout=120)
    log = cli_ok(srv, "logs", f"rayjob/{name}").stdout
    assert "starting a Ray cluster" in log
    cli_ok(srv, "delete", "rayjob", name)
    eventually(lambda: guide_run.assert_no_ray(ray_processes), timeout=60)


