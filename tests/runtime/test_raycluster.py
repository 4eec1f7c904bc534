"""A RayCluster for real: admitted, ready as KubeRay reports it, a job submitted through the real kubectl's
port-forward to its head Service succeeds, so does a RayJob that names it in ``clusterSelector``, and deleting
the RayCluster stops exactly its Ray processes."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests import admin, forks
from tests.cli.test_kubectl_raycluster import SETUP, cluster
from tests.conftest import free_port, start_server, stop_server
from tests.runtime.ray_leaks import clusters_of
from tests.support import eventually_value


def _alive(sessions: set[int]) -> list[int]:
    """The live (not zombie) processes of those sessions."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if stat[0] != "Z" and int(stat[3]) in sessions:
            alive.append(int(entry.name))
    return alive


SELECTING = """
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: {name}
spec:
  entrypoint: python -c 'print(6 * 7, "from", "{name}")'
  clusterSelector:
    ray.io/cluster: {cluster}
"""


def _runs_rayjobs_by_cluster_selector(kubectl: Callable[..., str], clusters: dict[int, Path]) -> None:
    """A RayJob naming the cluster (``clusterSelector``) runs on it at once, with no workload of its own; the
    cluster outlives it. One naming a cluster that is not there waits for it, and stops when deleted."""
    kubectl("apply", "-f", "-", input=SELECTING.format(name="on-notebook", cluster="notebook"))
    kubectl("apply", "-f", "-", input=SELECTING.format(name="on-nothing", cluster="nothing"))

    def finished() -> dict[str, Any] | None:
        status: dict[str, Any] = yaml.safe_load(kubectl("get", "rayjob", "on-notebook", "-o", "yaml")).get(
            "status") or {}
        assert status.get("jobDeploymentStatus") != "Failed", status
        return status if status.get("jobDeploymentStatus") == "Complete" else None

    status = eventually_value(finished, 120)
    assert status["jobStatus"] == "SUCCEEDED" and status["rayClusterName"] == "notebook", status
    assert "42 from on-notebook" in kubectl("logs", "job/on-notebook")
    workloads = kubectl("get", "workloads", "-o", "name")
    assert "on-notebook" not in workloads and "on-nothing" not in workloads, workloads
    shown = kubectl("get", "rayclusters", "-o", "name").split()
    assert sorted(shown) == ["raycluster.ray.io/notebook", "raycluster.ray.io/waiting"], shown
    assert _alive(set(clusters)), "the cluster runs on after the job"
    waiting = yaml.safe_load(kubectl("get", "rayjob", "on-nothing", "-o", "yaml"))
    assert waiting["status"]["jobDeploymentStatus"] == "Initializing", waiting["status"]
    assert waiting["spec"].get("suspend") is not True, "not Kueue's: never suspended"
    kubectl("delete", "rayjob", "on-notebook", "on-nothing")


def test_a_raycluster_runs_jobs_through_a_port_forward(tmp_path: Path) -> None:
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip("kubectl is not installed")
    srv = start_server(tmp_path / "home", "--runtime", "ray")
    config = tmp_path / "kubeconfig"
    env = {**srv.env(), "KUBECONFIG": str(config), "HOME": str(tmp_path)}
    forward: subprocess.Popen[str] | None = None
    clusters: dict[int, Path] = {}

    def kubectl(*args: str, input: str | None = None) -> str:
        proc = subprocess.run([binary, *args], input=input, capture_output=True, text=True, env=env, timeout=60,
                              check=False)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    try:
        assert forks.run(["kubeconfig", "--write", str(config)], env=srv.env()).returncode == 0
        kubectl("apply", "-f", "-", input=SETUP)
        kubectl("apply", "-f", "-", input=cluster("notebook", 1))
        kubectl("apply", "-f", "-", input=cluster("waiting", 3))  # 1 + 3 CPUs on top of 2: over the 4 there are

        def ready() -> dict[str, Any] | None:
            obj = yaml.safe_load(kubectl("get", "raycluster", "notebook", "-o", "yaml"))
            status: dict[str, Any] = obj.get("status") or {}
            assert status.get("state") != "failed", status
            return status if status.get("state") == "ready" else None

        status = eventually_value(ready, 120)
        assert status["endpoints"]["dashboard"] == "8265" and status["head"]["serviceName"] == "notebook-head-svc"
        assert status["availableWorkerReplicas"] == 1 and status["desiredCPU"] == "2"
        states = {line.split()[0]: line.split()[-2] for line in kubectl("get", "rayclusters").splitlines()[1:]}
        assert states == {"notebook": "ready", "waiting": "suspended"}, "a queued cluster shows suspended"
        pods = kubectl("get", "pods", "-l", "ray.io/cluster=notebook", "-o", "name").split()
        assert len(pods) == 2, pods
        assert "Running" in kubectl("get", "pods")
        clusters = clusters_of(srv.process.pid)
        assert len(clusters) == 1 and _alive(set(clusters)), "one local Ray cluster, in a session of its own"

        local = free_port()
        forward = subprocess.Popen([binary, "port-forward", "service/notebook-head-svc", f"{local}:8265"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        url = f"http://127.0.0.1:{local}"

        def submitted() -> str | None:
            assert forward is not None and forward.poll() is None, forward.communicate() if forward else ""
            try:
                response = admin.post(f"{url}/api/jobs/", json={"entrypoint": "python -c 'print(6 * 7)'"},
                                      timeout=30)
            except httpx.HTTPError:
                return None
            if response.status_code != 200:
                assert "No available agent" in response.text, response.text
                return None
            return str(response.json()["submission_id"])

        submission = eventually_value(submitted, 90)

        def succeeded() -> bool:
            state = admin.get(f"{url}/api/jobs/{submission}", timeout=30).json()["status"]
            assert state not in ("FAILED", "STOPPED"), state
            return bool(state == "SUCCEEDED")

        eventually_value(succeeded, 90)
        assert "42" in admin.get(f"{url}/api/jobs/{submission}/logs", timeout=30).json()["logs"]
        forward.terminate()
        forward.communicate(timeout=30)
        forward = None

        _runs_rayjobs_by_cluster_selector(kubectl, clusters)

        kubectl("delete", "raycluster", "notebook", "waiting")

        def gone() -> bool:
            return not _alive(set(clusters)) and not kubectl("get", "pods,services,workloads", "-o", "name").strip()

        eventually_value(gone, 60)
    finally:
        if forward is not None:
            forward.terminate()
            forward.communicate(timeout=30)
        stop_server(srv)
    assert not any(temp.exists() for temp in clusters.values()), "the cluster's temp dir is removed"
