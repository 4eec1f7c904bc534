"""`flexq import`: a flexq server stands in for a real cluster, reached over HTTPS through a kubeconfig context
whose CA is the server's and whose token comes from an exec plugin (as gke-gcloud-auth-plugin hands kubectl
one); its queues and Workloads become a scenario that `flexq simulate` replays."""

from __future__ import annotations

import base64
import datetime
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from flexq.importer.replay import workload_job
from flexq.server.tls import ensure_certificates
from tests import admin, forks
from tests.conftest import Result, Server, free_port, guide_text, start_server, stop_server

CAPACITY = """
pools:
  - {name: default-pool, machineType: n2-standard-16, numNodes: 3, autoscaling: false}
  - {name: on-demand-pool, machineType: ct6e-standard-4t, tpuTopology: 4x4, minNodes: 0, maxNodes: 4}
  - {name: dws-pool, machineType: ct6e-standard-4t, tpuTopology: 4x4, minNodes: 0, maxNodes: 4,
     flexStart: true, queuedProvisioning: true}
cloud:
  on-demand-pool: {available: 4, bootTime: 3m}
  dws-pool: {queuedDelay: 30m}
"""

CPU_JOB = """
apiVersion: batch/v1
kind: Job
metadata: {name: small, labels: {kueue.x-k8s.io/queue-name: user-queue}}
spec:
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {cloud.google.com/gke-nodepool: default-pool}
      containers: [{name: c, image: busybox, command: [sleep, "60"], resources: {requests: {cpu: "1"}}}]
"""

PLUGIN = """import json, os, pathlib, sys
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
pathlib.Path(sys.argv[1]).write_text(info["apiVersion"] + " " + os.environ["PLUGIN_ENV"])
print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential",
                  "status": {"token": os.environ["PLUGIN_TOKEN"]}}))
"""


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[Server, int]]:
    port = free_port()
    srv = start_server(tmp_path / "home", "--tls-port", str(port))
    try:
        yield srv, port
    finally:
        stop_server(srv)


def _flexq(server: Server, *args: str, input: str | None = None, cwd: Path | None = None) -> Result:
    proc = forks.run(args, input=input, text=True, env=server.env(), cwd=cwd, timeout=120)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _kubeconfig(tmp_path: Path, server: Server, port: int, ca: bytes, folder: str = "kube") -> Path:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(PLUGIN)
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "other",
        "clusters": [{"name": "gke", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                 "certificate-authority-data": base64.b64encode(ca).decode()}},
                     {"name": "plain", "cluster": {"server": server.url}}],
        "users": [{"name": "gke-user", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": sys.executable,
            "args": [str(plugin), str(tmp_path / "plugin-ran")], "env": [{"name": "PLUGIN_ENV", "value": "set"},
                                                         {"name": "PLUGIN_TOKEN", "value": server.token}],
            "interactiveMode": "Never", "provideClusterInfo": True}}},
                  {"name": "plain-user", "user": {"token": server.token}}],
        "contexts": [{"name": "gke_demo_us-east5-b_tpu-cluster", "context": {"cluster": "gke", "user": "gke-user"}},
                     {"name": "other", "context": {"cluster": "plain", "user": "plain-user"}}],
    }
    path = tmp_path / folder / "config"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(config))
    return path


def test_import_replays_the_cluster(tls_server: tuple[Server, int], tmp_path: Path) -> None:
    server, port = tls_server
    assert _flexq(server, "apply", "-f", "-", input=guide_text("dws-tpu-queue.yaml")).code == 0
    for job in ("1", "2"):
        assert _flexq(server, "apply", "-f", "-", input=guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID=job)).code == 0
        time.sleep(1.1)  # creation times a second apart: the replay keeps their order and spacing
    assert _flexq(server, "apply", "-f", "-", input=CPU_JOB).code == 0
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(CAPACITY)
    config = _kubeconfig(tmp_path, server, port, (server.home / "tls" / "ca.crt").read_bytes())
    out = tmp_path / "whatif.yaml"

    made = _flexq(server, "import", "--from-context", "gke_demo_us-east5-b_tpu-cluster", "--kubeconfig",
                  str(config), "--capacity", str(capacity), "--out", str(out), "--run-for", "2h")
    assert made.code == 0, made.err
    assert (tmp_path / "plugin-ran").read_text() == "client.authentication.k8s.io/v1beta1 set"
    assert "7 objects and 3 jobs (0 finished)" in made.err

    scenario = yaml.safe_load(out.read_text())
    kinds = sorted(o["kind"] for o in scenario["spec"]["objects"])
    assert kinds == ["AdmissionCheck", "ClusterQueue", "LocalQueue", "ProvisioningRequestConfig"] + \
        ["ResourceFlavor"] * 3
    assert all("status" not in o and "uid" not in o["metadata"] for o in scenario["spec"]["objects"])
    submits = scenario["spec"]["submit"]
    assert [s["object"]["metadata"]["name"] for s in submits] == \
        ["rayjob-tpu-v6e-dws-1", "rayjob-tpu-v6e-dws-2", "small"]
    assert [s["at"] >= 1 for s in submits] == [False, True, True] and submits[1]["at"] < submits[2]["at"]
    assert {s["runFor"] for s in submits} == {7200}
    small = submits[2]["object"]
    assert small["kind"] == "Job" and small["spec"]["parallelism"] == 2
    assert small["spec"]["template"]["spec"]["containers"] == [
        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]

    # The replay: the same workloads, with the pod sets and queues the cluster gave them.
    simulated = _flexq(server, "simulate", str(out), "-o", "json")
    assert simulated.code == 0, simulated.err
    rows = json.loads(simulated.out)["workloads"]
    live = admin.get(f"{server.url}/apis/kueue.x-k8s.io/v1beta2/workloads").json()["items"]
    live = [w for w in live if not any(o["kind"] == "Workload" for o in w["metadata"].get("ownerReferences", []))]
    assert sorted(r["workload"].split("/")[1].rsplit("-", 1)[0] for r in rows) == \
        sorted(w["metadata"]["name"].rsplit("-", 1)[0] for w in live)
    assert {r["clusterQueue"] for r in rows} == {"cluster-queue"}
    assert all(r["state"] == "Finished" for r in rows)


def test_import_refusals(tls_server: tuple[Server, int], tmp_path: Path) -> None:
    server, port = tls_server
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(CAPACITY)
    config = _kubeconfig(tmp_path, server, port, b"-----BEGIN CERTIFICATE-----\nbm9wZQ==\n-----END CERTIFICATE-----\n")
    out = tmp_path / "whatif.yaml"
    base = ["import", "--kubeconfig", str(config), "--capacity", str(capacity), "--out", str(out)]

    cases = {
        "no-such": "no context named 'no-such'",
        "gke_demo_us-east5-b_tpu-cluster": "certificate-authority(-data) holds no usable PEM",
    }
    for context, message in cases.items():
        result = _flexq(server, *base, "--context", context)
        assert result.code == 1 and message in result.err and "Traceback" not in result.err, result.err
    # A real CA, but not the one that signed the server's certificate: the connection is refused.
    other_ca = ensure_certificates(tmp_path / "other").ca.read_bytes()
    config = _kubeconfig(tmp_path, server, port, other_ca, "kube2")
    wrong = _flexq(server, "import", "--kubeconfig", str(config), "--capacity", str(capacity), "--out", str(out),
                   "--context", "gke_demo_us-east5-b_tpu-cluster")
    assert wrong.code == 1 and "CERTIFICATE_VERIFY_FAILED" in wrong.err and "Traceback" not in wrong.err, wrong.err
    bad = tmp_path / "bad.yaml"
    bad.write_text("pools:\n  - {name: p, machineType: ct6e-standard-4t, maxNodes: lots}\n")
    refused = _flexq(server, "import", "--kubeconfig", str(config), "--capacity", str(bad), "--out", str(out))
    assert refused.code == 1 and "line 2" in refused.err and "maxNodes" in refused.err, refused.err
    assert not out.exists()
    # The current context reaches the plain HTTP address with the administrator's token: it works.
    plain = _flexq(server, *base)
    assert plain.code == 0 and "0 jobs" in plain.err, plain.err


def test_workload_job_from_a_finished_workload() -> None:
    workload: dict[str, Any] = {
        "metadata": {"name": "job-train-abcde", "namespace": "ml", "ownerReferences": [
            {"kind": "RayJob", "name": "train", "uid": "u"}]},
        "spec": {"queueName": "q", "priorityClassRef": {"group": "kueue.x-k8s.io", "name": "high"}, "podSets": [
            {"name": "head", "count": 1, "template": {"spec": {"containers": [
                {"name": "h", "image": "ray", "command": ["${NOT_SUBSTITUTED}"],
                 "resources": {"requests": {"cpu": 1}}}]}}},
            {"name": "gpu", "count": 8, "template": {"spec": {"nodeSelector": {"pool": "a"}, "containers": [
                {"name": "w", "resources": {"requests": {"nvidia.com/gpu": 8}}}]}}}]},
    }
    job = workload_job(workload)
    assert job is not None and job["kind"] == "RayJob"
    assert job["metadata"] == {"name": "train", "namespace": "ml", "labels": {
        "kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/priority-class": "high"}}
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert head == {"containers": [{"name": "h", "image": "ray", "resources": {"requests": {"cpu": 1}}}]}
    [group] = job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert (group["groupName"], group["replicas"], group["numOfHosts"]) == ("gpu", 8, 1)
    assert group["template"]["spec"]["nodeSelector"] == {"pool": "a"}
    assert workload_job({"metadata": {"name": "x"}, "spec": {"podSets": [{"name": "a", "count": 2},
                                                                          {"name": "b", "count": 2}]}}) is None


def test_finished_workload_runs_as_long_as_it_ran() -> None:
    from flexq.importer.cluster_read import ClusterState
    from flexq.importer.replay import build_scenario

    def wl(name: str, created: str, admitted: str | None, finished: str | None) -> dict[str, Any]:
        conditions = [{"type": t, "status": "True", "lastTransitionTime": at}
                      for t, at in (("Admitted", admitted), ("Finished", finished)) if at]
        return {"metadata": {"name": name, "namespace": "default", "creationTimestamp": created},
                "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {}}}]},
                "status": {"conditions": conditions}}

    state = ClusterState("https://x", "v1beta2", [], [
        wl("late", "2026-01-02T00:00:30Z", None, None),
        wl("done", "2026-01-02T00:00:00Z", "2026-01-02T00:01:00Z", "2026-01-02T01:31:00Z"),
        wl("old", "2025-12-01T00:00:00Z", None, None)])
    now = datetime.datetime(2026, 1, 3, tzinfo=datetime.UTC)
    imported = build_scenario(state, {}, name="n", context="c", now=now, since=7 * 86400, run_for=600)
    submit = yaml.safe_load(imported.text)["spec"]["submit"]
    assert [(s["object"]["metadata"]["name"], s["at"], s["runFor"]) for s in submit] == \
        [("done", 0, 5400), ("late", 30, 600)]
    assert imported.finished == 1


TAS = Path(__file__).parents[2] / "examples" / "tas"
TAS_CAPACITY = "pools:\n  - {name: tas-pool, machineType: n2-standard-16, numNodes: 8, autoscaling: false}\n"


def test_topology_round_trip(server: Server, tmp_path: Path) -> None:
    """Export, then import of the same cluster: the same Topology, flavor and queues; the job's topology request
    comes back as its pod template's annotation, and the replay places it by topology."""
    for args in (("container", "clusters", "create", "tas-cluster", "--location=us-east5-b"),
                 ("container", "node-pools", "create", "tas-pool", "--cluster=tas-cluster",
                  "--machine-type=n2-standard-16", "--num-nodes=8")):
        made = _flexq(server, *args)
        assert made.code == 0, made.err
    assert _flexq(server, "apply", "-f", str(TAS / "tas-queue.yaml")).code == 0
    job = (TAS / "job-subblock.yaml").read_text().replace("${JOB_NAME}", "a").replace("${PODS}", "4")
    assert _flexq(server, "apply", "-f", "-", input=job).code == 0
    exported = _flexq(server, "export", "gke", "--out", str(tmp_path / "gke"), "--kueue-version", "v1beta2")
    assert exported.code == 0, exported.err
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(TAS_CAPACITY)
    config = _kubeconfig(tmp_path, server, free_port(), b"")
    out = tmp_path / "whatif.yaml"
    made = _flexq(server, "import", "--kubeconfig", str(config), "--capacity", str(capacity), "--out", str(out))
    assert made.code == 0, made.err

    scenario = yaml.safe_load(out.read_text())
    kueue = [o for o in yaml.safe_load_all((tmp_path / "gke" / "kueue.yaml").read_text())
             if o["apiVersion"].startswith("kueue.x-k8s.io/")]
    imported = [o for o in scenario["spec"]["objects"] if o["apiVersion"].startswith("kueue.x-k8s.io/")]
    assert sorted(o["kind"] for o in imported) == ["ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology"]
    assert imported == kueue
    [submit] = scenario["spec"]["submit"]
    assert submit["object"]["spec"]["template"]["metadata"] == {
        "annotations": {"kueue.x-k8s.io/podset-required-topology": "cloud.google.com/gce-topology-subblock"}}

    events = tmp_path / "events.jsonl"
    simulated = _flexq(server, "simulate", str(out), "--events", str(events))
    assert simulated.code == 0, simulated.err
    reserved = [e for e in map(json.loads, events.read_text().splitlines()) if e["event"] == "QuotaReserved"]
    assert len(reserved) == 1 and reserved[0]["topologyAssignments"], reserved
