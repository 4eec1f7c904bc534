"""The guide's flow for real: pools, queues, two RayJobs training the unmodified train.py on Ray."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import admin
from tests.conftest import GUIDE, Server, guide_text, start_server, stop_server
from tests.queues import queue_yaml
from tests.support import assert_done, cli_ok, eventually, get_rayjob

CAPACITY = """cloud:
  on-demand-pool: {available: 4, bootTime: 1s}
  dws-pool: {queuedDelay: 4s}
  default-pool: {bootTime: 1s}
scaleDownAfter: 3s
"""


def _ray_processes() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if state != "Z" and ("raylet" in cmd or "gcs_server" in cmd):
            found.append(cmd[:120])
    return found


@pytest.fixture
def ray_server(tmp_path: Path) -> Any:
    assert not _ray_processes(), "a Ray cluster was left running before this test"
    before = _temp_dirs()
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(CAPACITY)
    srv = start_server(tmp_path / "home", "--runtime", "ray", "--capacity", str(capacity))
    try:
        yield srv
    finally:
        stop_server(srv)
        assert not _ray_processes(), "the server left Ray processes behind"
        assert _temp_dirs() <= before, f"temp dirs left behind: {sorted(_temp_dirs() - before)}"


def _temp_dirs() -> set[str]:
    """Ray clusters' and workers' temp dirs, and what multiprocessing in their processes makes, in /tmp."""
    return {p.name for pattern in ("fqr-*", "fqw-*", "pymp-*") for p in Path("/tmp").glob(pattern)}


def test_two_rayjobs_train_for_real(ray_server: Server) -> None:
    srv = ray_server
    cli_ok(srv, "container", "clusters", "create", "tpu-cluster", "--machine-type=n2-standard-16", "--num-nodes=1")
    for pool, extra in (("on-demand-pool", []), ("dws-pool", ["--enable-queued-provisioning", "--flex-start"])):
        cli_ok(srv, "container", "node-pools", "create", pool, "--cluster=tpu-cluster",
               "--machine-type=ct6e-standard-4t", "--tpu-topology=4x4", "--enable-autoscaling", *extra,
               "--num-nodes=0", "--min-nodes=0", "--max-nodes=4")
    cli_ok(srv, "apply", "-f", "-", input=guide_text("dws-tpu-queue.yaml"))
    cli_ok(srv, "create", "configmap", "jax-train-script", f"--from-file={GUIDE / 'train.py'}")
    for job_id in ("1", "2"):
        cli_ok(srv, "apply", "-f", "-", input=guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID=job_id))

    def finished() -> None:
        for job_id in ("1", "2"):
            assert get_rayjob(srv, f"rayjob-tpu-v6e-dws-{job_id}").get("status", {}).get("jobDeploymentStatus") in (
                "Complete", "Failed")

    eventually(finished, timeout=420)
    for job_id, pool in (("1", "on-demand-pool"), ("2", "dws-pool")):
        name = f"rayjob-tpu-v6e-dws-{job_id}"
        status = get_rayjob(srv, name)["status"]
        log = cli_ok(srv, "logs", f"job/{name}").stdout
        assert status["jobStatus"] == "SUCCEEDED", log[-3000:]
        assert "Training Complete!" in log
        assert log.rstrip().splitlines()[-2].startswith(f"Job '{name}-") and log.rstrip().splitlines()[-2].endswith(
            "' succeeded")
        assert status["trainingMetrics"]["epoch"] == 40 and status["trainingMetrics"]["loss"] < 1e-3
        workload = next(w for w in admin.get(srv.url + "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads")
                        .json()["items"] if w["metadata"]["ownerReferences"][0]["name"] == name)
        assert workload["status"]["trainingMetrics"]["epoch"] == 40, "metrics reach the Workload (and describe)"
        assert workload["status"]["cost"]["usd"] > 0
        events = admin.get(f"{srv.url}/api/v1/namespaces/default/events").json()["items"]
        started = [e["message"] for e in events if e["reason"] == "Started" and name in e["involvedObject"]["name"]]
        assert started, "the workload's pods were bound to nodes"
        assert any(pool in str(e.get("message")) for e in events if e["reason"] in ("ScaledUp", "ProvisioningRequest")
                   and name in e["involvedObject"]["name"]) or job_id == "1"

    def scaled_down() -> None:
        pools = [n["metadata"]["labels"]["cloud.google.com/gke-nodepool"]
                 for n in admin.get(srv.url + "/api/v1/nodes").json()["items"]]
        assert pools == ["default-pool"]

    eventually(scaled_down, timeout=60)
    # shutdownAfterJobFinishes: each job's cluster goes once its end is written (its teardown may take a moment).
    eventually(_assert_no_ray, timeout=30)
    # The jobs are elastic (maxReplicas 2), but a slice on the head takes all train.py asks: none grew.
    events = admin.get(f"{srv.url}/api/v1/namespaces/default/events").json()["items"]
    assert [e["message"] for e in events if e["reason"] == "AutoscalerScaling"] == []
    assert len(admin.get(srv.url + "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads").json()["items"]) == 2
    # The guide's manifests race by default: job 1 also asked DWS, and that request was withdrawn unprovisioned
    # when Plan A started it; job 2 raced Plan A (busy with job 1) and DWS won.
    withdrawn = [e["message"] for e in events if e["reason"] == "ProvisioningRequest" and "withdrawn" in e["message"]]
    assert len(withdrawn) == 1 and "rayjob-rayjob-tpu-v6e-dws-1-" in withdrawn[0] and "no cost" in withdrawn[0]
    won = [e["message"] for e in events if e["reason"] == "RaceWon"]
    assert sorted(m.split()[1] for m in won) == ["dws", "on-demand"]
    # What kubectl sees, as with KubeRay: the submitter Job and its pod stay, the cluster's pods are gone.
    jobs = admin.get(srv.url + "/apis/batch/v1/namespaces/default/jobs").json()["items"]
    assert sorted(j["metadata"]["name"] for j in jobs) == ["rayjob-tpu-v6e-dws-1", "rayjob-tpu-v6e-dws-2"]
    assert all(j["status"]["succeeded"] == 1 for j in jobs)
    pods = admin.get(srv.url + "/api/v1/namespaces/default/pods").json()["items"]
    assert len(pods) == 2 and all(p["status"]["phase"] == "Succeeded" for p in pods)
    if shutil.which("kubectl"):
        config = srv.home / "kc"
        cli_ok(srv, "kubeconfig", "--write", str(config))
        logged = subprocess.run(["kubectl", "logs", "job/rayjob-tpu-v6e-dws-1"], capture_output=True, text=True,
                                env={**srv.env(), "KUBECONFIG": str(config)}, timeout=60, check=False)
        assert logged.returncode == 0, logged.stderr
        assert "Training Complete!" in logged.stdout and "' succeeded" in logged.stdout


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


def test_nodes_lost_mid_run_stop_the_cluster_and_requeue(ray_server: Server) -> None:
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
    eventually(lambda: _assert_no_ray(), timeout=60)


def _assert_no_ray() -> None:
    assert not _ray_processes()
