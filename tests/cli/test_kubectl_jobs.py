"""batch/v1 Jobs under the queue run their pods here, through the real kubectl: Kueue's first tutorial (its
``sample-job.yaml`` created four times on a ClusterQueue with room for three) ends with all four complete, and a Job's
status is what Kubernetes' Job controller writes (parallelism, completions, Indexed, backoffLimit,
activeDeadlineSeconds); an evicted Job's pods are deleted and it is suspended until admitted again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import admin
from tests.conftest import Server, start_server, stop_server
from tests.support import eventually_value

# Kueue's site/static/examples/admin/single-clusterqueue-setup.yaml
SETUP = """apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: "default-flavor"
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: "cluster-queue"
spec:
  namespaceSelector: {} # match all.
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: "default-flavor"
      resources:
      - name: "cpu"
        nominalQuota: 9
      - name: "memory"
        nominalQuota: 36Gi
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  namespace: "default"
  name: "user-queue"
spec:
  clusterQueue: "cluster-queue"
"""

# Kueue's site/static/examples/jobs/sample-job.yaml
SAMPLE_JOB = """apiVersion: batch/v1
kind: Job
metadata:
  generateName: sample-job-
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  parallelism: 3
  completions: 3
  suspend: true
  template:
    spec:
      containers:
      - name: dummy-job
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: ["entrypoint-tester", "hello", "world"]
        resources:
          requests:
            cpu: 1
            memory: "200Mi"
      restartPolicy: Never
"""


def job(name: str, script: str, cpu: str = "1", **spec: Any) -> str:
    lines = "".join(f"  {k}: {json.dumps(v)}\n" for k, v in spec.items())
    return f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  labels: {{kueue.x-k8s.io/queue-name: user-queue}}
spec:
{lines}  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox:1.36
        command: [sh, -c, {json.dumps(script)}]
        resources: {{requests: {{cpu: "{cpu}"}}}}
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A server that runs what it admits (pods as local processes; no Ray cluster is started here)."""
    srv = start_server(tmp_path / "home", "--runtime", "ray")
    try:
        yield srv
    finally:
        stop_server(srv)


def _jobs(server: Server) -> dict[str, dict[str, Any]]:
    items = admin.get(f"{server.url}/apis/batch/v1/namespaces/default/jobs").json()["items"]
    return {j["metadata"]["name"]: j for j in items}


def _pods(server: Server, job_name: str) -> list[dict[str, Any]]:
    items = admin.get(f"{server.url}/api/v1/namespaces/default/pods",
                      params={"labelSelector": f"batch.kubernetes.io/job-name={job_name}"}).json()["items"]
    return sorted(items, key=lambda p: str(p["metadata"]["name"]))


def _ended(job: dict[str, Any]) -> bool:
    return any(c["type"] in ("Complete", "Failed") and c["status"] == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def _all_ended(server: Server, count: int) -> dict[str, dict[str, Any]] | None:
    jobs = _jobs(server)
    return jobs if len(jobs) == count and all(map(_ended, jobs.values())) else None


def _conditions(job: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c.get("reason", "")) for c in job["status"].get("conditions") or []]


def test_kueue_tutorial_four_sample_jobs_all_complete(kubectl: Any, server: Server) -> None:
    assert kubectl("apply", "-f", "-", input=SETUP).code == 0
    for _ in range(4):
        made = kubectl("create", "-f", "-", input=SAMPLE_JOB)
        assert made.code == 0, made.err
    jobs = eventually_value(lambda: _all_ended(server, 4), timeout=90)
    for name, done in jobs.items():
        status = done["status"]
        assert _conditions(done) == [("SuccessCriteriaMet", "True", "CompletionsReached"),
                                     ("Complete", "True", "CompletionsReached")], (name, status)
        assert (status["succeeded"], status["active"], status.get("failed", 0)) == (3, 0, 0), status
        assert status["startTime"] <= status["completionTime"]
        assert done["spec"]["suspend"] is False
        pods = _pods(server, name)
        assert [p["status"]["phase"] for p in pods] == ["Succeeded"] * 3, name
        assert all(p["metadata"]["ownerReferences"][0]["uid"] == done["metadata"]["uid"] for p in pods)
    name = sorted(jobs)[0]
    logs = kubectl("logs", f"job/{name}")
    assert logs.code == 0 and logs.out.strip() == "[/agnhost entrypoint-tester hello world]", logs
    listed = kubectl("get", "pods", "-l", f"job-name={name}")
    assert listed.code == 0 and listed.out.count("Completed") == 3, listed.out
    table = kubectl("get", "jobs")
    assert table.out.count("Complete") == 4, table.out
    workloads = admin.get(f"{server.url}/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads").json()["items"]
    finished = [w for w in workloads if any(c["type"] == "Finished" and c["status"] == "True"
                                            for c in w["status"].get("conditions") or [])]
    assert len(finished) == 4


EXPECTED: dict[str, dict[str, Any]] = {
    "indexed": {"succeeded": 3, "failed": 0, "completedIndexes": "0-2", "pods": 3,
                "conditions": [("SuccessCriteriaMet", "True", "CompletionsReached"),
                               ("Complete", "True", "CompletionsReached")]},
    "no-retry": {"succeeded": 0, "failed": 1, "completedIndexes": None, "pods": 1,
                 "conditions": [("FailureTarget", "True", "BackoffLimitExceeded"),
                                ("Failed", "True", "BackoffLimitExceeded")]},
    "one-retry": {"succeeded": 0, "failed": 2, "completedIndexes": None, "pods": 2,
                  "conditions": [("FailureTarget", "True", "BackoffLimitExceeded"),
                                 ("Failed", "True", "BackoffLimitExceeded")]},
    "deadline": {"succeeded": 0, "failed": 1, "completedIndexes": None, "pods": 0,
                 "conditions": [("FailureTarget", "True", "DeadlineExceeded"),
                                ("Failed", "True", "DeadlineExceeded")]},
    "no-completions": {"succeeded": 1, "failed": 0, "completedIndexes": None, "pods": 1,
                       "conditions": [("SuccessCriteriaMet", "True", "CompletionsReached"),
                                      ("Complete", "True", "CompletionsReached")]},
}


def test_job_controller_semantics(kubectl: Any, server: Server) -> None:
    assert kubectl("apply", "-f", "-", input=SETUP).code == 0
    manifests = {
        "indexed": job("indexed", "echo index $JOB_COMPLETION_INDEX", completions=3, parallelism=2,
                       completionMode="Indexed"),
        "no-retry": job("no-retry", "echo failing; exit 3", backoffLimit=0),
        "one-retry": job("one-retry", "exit 1", backoffLimit=1),
        "deadline": job("deadline", "sleep 60", activeDeadlineSeconds=2),
        "no-completions": job("no-completions", "true", parallelism=1, completions=None),
    }
    assert set(manifests) == set(EXPECTED)
    for text in manifests.values():
        made = kubectl("create", "-f", "-", input=text.replace('  completions: null\n', ''))
        assert made.code == 0, made.err
    jobs = eventually_value(lambda: _all_ended(server, len(EXPECTED)), timeout=90)
    for name, done in jobs.items():
        want = EXPECTED[name]  # a job this table does not know fails here
        status = done["status"]
        got = {"succeeded": status.get("succeeded", 0), "failed": status.get("failed", 0),
               "completedIndexes": status.get("completedIndexes"), "pods": len(_pods(server, name)),
               "conditions": _conditions(done)}
        assert got == want, name
        assert status["active"] == 0 and "startTime" in status
        assert ("completionTime" in status) is (want["succeeded"] > 0), name
    indexes = sorted(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
                     for p in _pods(server, "indexed"))
    assert indexes == ["0", "1", "2"]
    for pod in _pods(server, "indexed"):
        index = pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
        logs = kubectl("logs", pod["metadata"]["name"])
        assert logs.out.strip() == f"index {index}", logs
    events = kubectl("get", "events", "--field-selector", "involvedObject.name=no-retry", "-o", "json")
    reasons = {e["reason"]: e["message"] for e in json.loads(events.out)["items"]}
    assert reasons["BackoffLimitExceeded"] == "Job has reached the specified backoff limit", reasons
    assert reasons["SuccessfulCreate"].startswith("Created pod: no-retry-"), reasons


PREEMPTION = """apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default-flavor, resources: [{name: cpu, nominalQuota: 2}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: user-queue, namespace: default}
spec: {clusterQueue: cluster-queue}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
"""


def test_an_evicted_job_is_suspended_and_its_pods_deleted(kubectl: Any, server: Server) -> None:
    assert kubectl("apply", "-f", "-", input=PREEMPTION).code == 0
    assert kubectl("create", "-f", "-", input=job("low", "sleep 60", cpu="2")).code == 0
    eventually_value(lambda: [p for p in _pods(server, "low") if p["status"].get("phase") == "Running"] or None,
                     timeout=30)
    high = job("high", "sleep 2", cpu="2").replace(
        "labels: {kueue.x-k8s.io/queue-name: user-queue}",
        "labels: {kueue.x-k8s.io/queue-name: user-queue, kueue.x-k8s.io/priority-class: high}")
    assert kubectl("create", "-f", "-", input=high).code == 0

    def suspended() -> dict[str, Any] | None:
        low = _jobs(server)["low"]
        conditions = {c["type"]: c for c in low["status"].get("conditions") or []}
        held = conditions.get("Suspended", {})
        return low if low["spec"]["suspend"] and held.get("status") == "True" and not _pods(server, "low") else None

    low = eventually_value(suspended, timeout=60)  # preempted, suspended and its pods stopped, on a busy machine
    held = next(c for c in low["status"]["conditions"] if c["type"] == "Suspended")
    assert (held["reason"], held["message"]) == ("JobSuspended", "Job suspended")
    assert low["status"]["active"] == 0
    eventually_value(lambda: _ended(_jobs(server)["high"]) or None, timeout=30)

    def resumed() -> dict[str, Any] | None:
        again = _jobs(server)["low"]
        conditions = {c["type"]: c for c in again["status"].get("conditions") or []}
        running = [p for p in _pods(server, "low") if p["status"].get("phase") == "Running"]
        return again if not again["spec"]["suspend"] and running and \
            conditions.get("Suspended", {}).get("reason") == "JobResumed" else None

    again = eventually_value(resumed, timeout=30)
    assert next(c for c in again["status"]["conditions"] if c["type"] == "Suspended")["status"] == "False"
    assert kubectl("delete", "job", "low").code == 0
    eventually_value(lambda: not _pods(server, "low") or None, timeout=20)


def test_runtime_none_runs_nothing(tmp_path: Path) -> None:
    srv = start_server(tmp_path / "home")  # --runtime none
    try:
        yaml_body = {"Content-Type": "application/yaml"}
        paths = ["apis/kueue.x-k8s.io/v1beta1/resourceflavors", "apis/kueue.x-k8s.io/v1beta1/clusterqueues",
                 "apis/kueue.x-k8s.io/v1beta1/namespaces/default/localqueues", "apis/batch/v1/namespaces/default/jobs"]
        for path, doc in zip(paths, [*SETUP.split("---"), job("quiet", "true")], strict=True):
            made = admin.post(f"{srv.url}/{path}", content=doc, headers=yaml_body)
            assert made.status_code == 201, made.text
        eventually_value(lambda: _jobs(srv)["quiet"]["spec"]["suspend"] is False or None, timeout=30)
        quiet = _jobs(srv)["quiet"]
        assert not _pods(srv, "quiet") and "startTime" not in (quiet.get("status") or {})
    finally:
        stop_server(srv)


def test_a_running_job_runs_on_after_a_restart(tmp_path: Path) -> None:
    """The server stops under a running Job: the next one deletes its unfinished pod and runs a new one."""
    srv = start_server(tmp_path / "home", "--runtime", "ray")
    try:
        yaml_body = {"Content-Type": "application/yaml"}
        paths = ["apis/kueue.x-k8s.io/v1beta1/resourceflavors", "apis/kueue.x-k8s.io/v1beta1/clusterqueues",
                 "apis/kueue.x-k8s.io/v1beta1/namespaces/default/localqueues", "apis/batch/v1/namespaces/default/jobs"]
        for path, doc in zip(paths, [*SETUP.split("---"), job("long", "sleep 4")], strict=True):
            assert admin.post(f"{srv.url}/{path}", content=doc, headers=yaml_body).status_code == 201
        first = eventually_value(lambda: [p for p in _pods(srv, "long") if p["status"].get("phase") == "Running"]
                                 or None, timeout=30)[0]["metadata"]["name"]
    finally:
        stop_server(srv)
    srv = start_server(tmp_path / "home", "--runtime", "ray")
    try:
        done = eventually_value(lambda: _all_ended(srv, 1), timeout=40)["long"]
        assert _conditions(done)[-1] == ("Complete", "True", "CompletionsReached")
        names = [p["metadata"]["name"] for p in _pods(srv, "long")]
        assert first not in names and len(names) == 1, names
    finally:
        stop_server(srv)
