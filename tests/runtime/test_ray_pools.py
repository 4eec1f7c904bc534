"""A node pool of an existing Ray cluster, for real: a second Ray cluster of two nodes (a head of 1 CPU and a worker
of 2, each in a process session of its own, on ports of their own) stands for a remote cluster; a pool made with
``flexq container node-pools create --ray-address`` shows its nodes; a RayJob queued to a flavor of that pool runs
on that cluster (its files uploaded as its working dir) and its log is read through flexq; a server restarted
cleanly follows a running job again; a RayCluster admitted onto the pool is that cluster, and a RayJob selecting it
runs there; a Pod admitted onto it runs its command there as a Ray job; the worker killed mid-job takes the pool
down to one node and the job is evicted as on a lost node, its Ray job stopped there; a RayJob deleted while it runs
is stopped there too. No Ray process of the test outlives it (:mod:`tests.runtime.ray_leaks`)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from flexq.runtime.emulation import Accelerators
from flexq.runtime.ray_cluster import LocalRayCluster
from tests import admin
from tests.conftest import Server, start_server, stop_server
from tests.queues import queue_yaml
from tests.runtime.ray_leaks import RayProcesses, clusters_of
from tests.runtime.test_raycluster import SELECTING
from tests.support import cli_ok, eventually, get_rayjob

PROBE = """import os, time, ray
ray.init()
print("gcs", ray.get_runtime_context().gcs_address, flush=True)
print("nodes", json.dumps(sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])), flush=True)
print("files here", os.path.exists("app/probe.py"), os.environ.get("GREETING"), flush=True)
time.sleep(float(os.environ.get("SLEEP", "0")))
print("probe done", flush=True)
""".replace("import os", "import json, os")

QUEUE = queue_yaml(("ray-a", "ray-a"))


def _rayjob(name: str, sleep: int) -> str:
    pod = """          spec:
            containers:
            - name: ray
              image: x
              resources: {requests: {cpu: "1", memory: 1Gi}}
              volumeMounts: [{name: code, mountPath: /app}]
            volumes: [{name: code, configMap: {name: probe}}]"""
    return f"""apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: {name}
  labels: {{kueue.x-k8s.io/queue-name: q}}
spec:
  entrypoint: python /app/probe.py
  runtimeEnvYAML: |
    env_vars: {{GREETING: hello, SLEEP: "{sleep}"}}
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {{}}
      template:
{pod}
    workerGroupSpecs:
    - groupName: w
      replicas: 1
      rayStartParams: {{}}
      template:
{pod}
"""


SHARED = """apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: shared
  labels: {kueue.x-k8s.io/queue-name: q}
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray
          image: x
          resources: {requests: {cpu: "1", memory: 1Gi}}
"""


POD = """apiVersion: v1
kind: Pod
metadata:
  name: hello
  labels: {kueue.x-k8s.io/queue-name: q}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: python:3.11
    command: [python, -c, "import os; print('pod says', 6 * 7, os.environ['WHO'])"]
    env: [{name: WHO, value: remote}]
    resources: {requests: {cpu: "1", memory: 1Gi}}
"""


def _pod_phase(srv: Server, name: str) -> str:
    pod = admin.get(f"{srv.url}/api/v1/namespaces/default/pods/{name}").json()
    phase = str((pod.get("status") or {}).get("phase", ""))
    assert phase in ("Succeeded", "Failed"), pod.get("status")
    return phase


def _ready(srv: Server, name: str) -> dict[str, Any]:
    cluster: dict[str, Any] = admin.get(f"{srv.url}/apis/ray.io/v1/namespaces/default/rayclusters/{name}").json()
    assert (cluster.get("status") or {}).get("state") == "ready", cluster.get("status")
    return cluster


def _pool_nodes(srv: Server) -> dict[str, str]:
    """The pool's Node objects: Ray node id -> allocatable CPU."""
    items = admin.get(f"{srv.url}/api/v1/nodes").json()["items"]
    return {n["metadata"]["labels"]["flexq.dev/ray-node-id"]: n["status"]["allocatable"]["cpu"] for n in items
            if n["metadata"]["labels"].get("cloud.google.com/gke-nodepool") == "ray-a"}


def _ray_node_ids(url: str) -> dict[bool, str]:
    rows = admin.get(f"{url}/api/v0/nodes", params={"detail": "1"}).json()["data"]["result"]["result"]
    return {bool(r["is_head_node"]): r["node_id"] for r in rows if r["state"] == "ALIVE"}


@pytest.mark.long
def test_a_pool_of_an_existing_ray_cluster_runs_its_jobs_and_loses_its_nodes(
        tmp_path: Path, ray_processes: RayProcesses) -> None:
    remote = LocalRayCluster(Accelerators(num_cpus=1, description="the remote cluster's head"))
    srv: Server | None = None
    try:
        remote.start()
        remote.add_worker("w", num_cpus=2, resources={})
        ids = eventually(lambda: _two(_ray_node_ids(remote.dashboard_url)), timeout=60)
        srv = start_server(tmp_path / "home", "--runtime", "ray")
        cli_ok(srv, "container", "clusters", "create", "c", "--num-nodes=0")
        made = cli_ok(srv, "container", "node-pools", "create", "ray-a", "--cluster=c",
                      f"--ray-address={remote.dashboard_url}")
        assert "Created [ray-a]" in made.stderr

        def two_nodes() -> None:
            assert _pool_nodes(srv) == {ids[True]: "1", ids[False]: "2"}
            pool = admin.get(f"{srv.url}/apis/flexq.dev/v1alpha1/nodepools/ray-a").json()
            assert pool["status"]["nodeCount"] == 2

        eventually(two_nodes, timeout=30)
        cli_ok(srv, "apply", "-f", "-", input=QUEUE)
        cli_ok(srv, "create", "configmap", "probe", f"--from-file=probe.py={_write(tmp_path, PROBE)}")
        cli_ok(srv, "apply", "-f", "-", input=_rayjob("probe", 0))
        eventually(lambda: _assert_status(get_rayjob(srv, "probe"), "Complete"), timeout=90)
        status = get_rayjob(srv, "probe")["status"]
        assert status["jobStatus"] == "SUCCEEDED", status
        on_remote = admin.get(f"{remote.dashboard_url}/api/jobs/{status['jobId']}").json()
        assert on_remote["status"] == "SUCCEEDED", "the job ran on the pool's cluster"
        log = cli_ok(srv, "logs", "job/probe").stdout
        assert re.search(rf"^gcs \S+:{remote.gcs_port}$", log, re.MULTILINE), log
        assert f"nodes {json.dumps(sorted(ids.values()))}" in log, log
        assert "files here True hello" in log and "probe done" in log and "succeeded" in log, log
        assert f"the job runs on the Ray cluster of node pool ray-a (its dashboard {remote.dashboard_url})" in log

        # A RayCluster admitted onto the pool is that cluster: nothing starts here, and a job selecting it runs there.
        cli_ok(srv, "apply", "-f", "-", input=SHARED)
        eventually(lambda: _ready(srv, "shared"), timeout=60)
        assert not clusters_of(srv.process.pid), "no local Ray cluster for it"
        cli_ok(srv, "apply", "-f", "-", input=SELECTING.format(name="picky", cluster="shared"))
        eventually(lambda: _assert_status(get_rayjob(srv, "picky"), "Complete"), timeout=90)
        picky = get_rayjob(srv, "picky")["status"]
        assert picky["jobStatus"] == "SUCCEEDED", picky
        assert admin.get(f"{remote.dashboard_url}/api/jobs/{picky['jobId']}").json()["status"] == "SUCCEEDED"
        log = cli_ok(srv, "logs", "job/picky").stdout
        assert "42 from picky" in log and "RayCluster shared, the Ray cluster of node pool ray-a" in log, log
        assert "reach its dashboard at " + remote.dashboard_url in _forward_error(srv, "service/shared-head-svc")
        cli_ok(srv, "delete", "raycluster", "shared")
        assert _two(_ray_node_ids(remote.dashboard_url)) == ids, "let go, not stopped: the cluster is not flexq's"

        # A Pod admitted onto the pool runs there too: its container's command as a Ray job.
        cli_ok(srv, "apply", "-f", "-", input=POD)
        assert eventually(lambda: _pod_phase(srv, "hello"), timeout=90) == "Succeeded"
        log = admin.get(f"{srv.url}/api/v1/namespaces/default/pods/hello/log").text  # what kubectl logs reads
        assert "pod says 42 remote" in log and "the pod runs on the Ray cluster of node pool ray-a" in log, log
        assert any(j["submission_id"].startswith("flexq-pod-hello-main-") and j["status"] == "SUCCEEDED"
                   for j in admin.get(f"{remote.dashboard_url}/api/jobs/").json())
        cli_ok(srv, "delete", "pod", "hello")

        # A job that sleeps; its worker pod is on the worker node (the head node's 1 CPU holds its head pod).
        cli_ok(srv, "apply", "-f", "-", input=_rayjob("sleeper", 300))
        eventually(lambda: _assert_running(srv, "sleeper"), timeout=90)
        submission = get_rayjob(srv, "sleeper")["status"]["jobId"]

        # A server stopped cleanly leaves the job running on the cluster; the next one follows it again.
        stop_server(srv)
        assert admin.get(f"{remote.dashboard_url}/api/jobs/{submission}").json()["status"] == "RUNNING"
        srv = start_server(tmp_path / "home", "--runtime", "ray")

        def followed_again() -> None:
            log = cli_ok(srv, "logs", "job/sleeper").stdout
            assert "the server restarted; the job is followed again" in log and log.count("files here") == 1, log
            assert get_rayjob(srv, "sleeper")["status"]["jobId"] == submission
            _assert_running(srv, "sleeper")

        eventually(followed_again, timeout=60)
        eventually(lambda: _assert_pod_nodes(srv, 2), timeout=30)
        assert "runs on the Ray cluster of node pool ray-a: reach its dashboard at " \
            f"{remote.dashboard_url}" in _forward_error(srv, "rayjob/sleeper")
        process, _temp = remote.workers["w"]
        os.killpg(process.pid, signal.SIGKILL)  # the worker node dies (the cloud took its VM)

        def lost() -> None:
            assert _pool_nodes(srv) == {ids[True]: "1"}
            assert get_rayjob(srv, "sleeper")["status"]["jobDeploymentStatus"] == "Suspended"
            events = admin.get(f"{srv.url}/api/v1/namespaces/default/events").json()["items"]
            assert any("left the Ray cluster of node pool ray-a" in e.get("message", "") for e in events), \
                [e.get("message") for e in events]
            assert admin.get(f"{remote.dashboard_url}/api/jobs/{submission}").json()["status"] == "STOPPED"

        eventually(lost, timeout=60)
        pool = admin.get(f"{srv.url}/apis/flexq.dev/v1alpha1/nodepools/ray-a").json()
        assert pool["status"]["nodeCount"] == 1

        # A job of one pod fits the node left; deleted while it runs, its Ray job is stopped there.
        cli_ok(srv, "apply", "-f", "-", input=_rayjob("solo", 300).split("    workerGroupSpecs:")[0])
        eventually(lambda: _assert_running(srv, "solo"), timeout=90)
        solo = get_rayjob(srv, "solo")["status"]["jobId"]
        cli_ok(srv, "delete", "rayjob", "solo", "probe", "sleeper")
        eventually(lambda: _assert_remote(remote, solo, "STOPPED"), timeout=30)
    finally:
        if srv is not None:
            stop_server(srv)
        with contextlib.suppress(Exception):
            remote.stop()


def _two(found: dict[bool, str]) -> dict[bool, str]:
    assert len(found) == 2, found
    return found


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "probe.py"
    path.write_text(text)
    return path


def _assert_status(job: dict[str, Any], deployment: str) -> None:
    assert (job.get("status") or {}).get("jobDeploymentStatus") in (deployment, "Failed"), job.get("status")


def _assert_running(srv: Server, name: str) -> None:
    job = get_rayjob(srv, name)
    assert (job.get("status") or {}).get("jobStatus") == "RUNNING", job.get("status")
    assert "files here" in cli_ok(srv, "logs", f"job/{name}").stdout


def _assert_pod_nodes(srv: Server, count: int) -> None:
    """The pool's nodes are read again and the restarted server's capacity places the job's pods on ``count`` nodes."""
    assert len(_pool_nodes(srv)) == 2
    wls = admin.get(f"{srv.url}/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads").json()["items"]
    mine = [w for w in wls if w["metadata"]["ownerReferences"][0]["name"] == "sleeper"]
    assert mine and any(c["type"] == "Admitted" and c["status"] == "True" for c in mine[0]["status"]["conditions"])
    pods = admin.get(f"{srv.url}/api/v1/namespaces/default/pods").json()["items"]
    nodes = {p["spec"].get("nodeName") for p in pods if p["metadata"]["name"].startswith("sleeper-")}
    assert len(nodes - {None, ""}) == count, [(p["metadata"]["name"], p["spec"].get("nodeName")) for p in pods]


def _assert_remote(remote: LocalRayCluster, submission: str, state: str) -> None:
    assert admin.get(f"{remote.dashboard_url}/api/jobs/{submission}").json()["status"] == state


def _forward_error(srv: Server, target: str) -> str:
    """What ``flexq port-forward TARGET :8265`` says when a connection comes to it."""
    forward = subprocess.Popen([sys.executable, "-m", "flexq.cli.main", "port-forward", target, ":8265"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=srv.env())
    try:
        assert forward.stdout is not None
        line = forward.stdout.readline()
        port = int(re.search(r"127\.0\.0\.1:(\d+)", line).group(1))  # type: ignore[union-attr]
        with contextlib.suppress(httpx.HTTPError):
            admin.get(f"http://127.0.0.1:{port}/api/version", timeout=10)
    finally:
        forward.terminate()
        _out, err = forward.communicate(timeout=10)
    return err
