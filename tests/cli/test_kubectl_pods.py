"""Plain Pods under the queue, through the real kubectl: gated until admitted, a Workload each (one for a pod
group, made once the group is complete and admitted all together), the flavor's node labels added, the command
run as a local process, the Workload finished with the pods."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Server, start_server, stop_server
from tests.support import eventually_value

SETUP = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: small-nodes}
spec: {nodeLabels: {node-size: small}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: pods}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: small-nodes, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: pod-queue, namespace: default}
spec: {clusterQueue: pods}
"""


def member(role: str, script: str, group: str = "pair", total: str | None = "2") -> str:
    annotation = f"  annotations: {{kueue.x-k8s.io/pod-group-total-count: \"{total}\"}}\n" if total else ""
    return f"""apiVersion: v1
kind: Pod
metadata:
  generateName: {group}-{role}-
  labels: {{kueue.x-k8s.io/queue-name: pod-queue, kueue.x-k8s.io/pod-group-name: {group}}}
{annotation}spec:
  restartPolicy: Never
  containers:
  - name: main
    image: docker.io/library/busybox:1.36
    command: [sh, -c, '{script}']
    resources: {{requests: {{cpu: "2"}}}}
"""


def single(name: str, image: str, cpu: str, command: str = "") -> str:
    line = f"    command: [sh, -c, '{command}']\n" if command else ""
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{kueue.x-k8s.io/queue-name: pod-queue}}
spec:
  restartPolicy: OnFailure
  containers:
  - name: main
    image: {image}
{line}    resources: {{requests: {{cpu: "{cpu}"}}}}
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A server that runs what it admits (pods as local processes; no Ray cluster is started here)."""
    srv = start_server(tmp_path / "home", "--runtime", "ray")
    try:
        yield srv
    finally:
        stop_server(srv)


def _get(kubectl: Any, *what: str) -> Any:
    result = kubectl("get", *what, "-o", "yaml")
    assert result.code == 0, result.err
    return yaml.safe_load(result.out)


def _workloads(kubectl: Any) -> dict[str, dict[str, Any]]:
    return {w["metadata"]["name"]: w for w in _get(kubectl, "workloads")["items"]}


def _condition(obj: dict[str, Any], kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or [])


def test_a_pod_group_is_admitted_together_once_complete(kubectl: Any) -> None:
    assert kubectl("apply", "-f", "-", input=SETUP).code == 0
    made = kubectl("create", "-f", "-", input=member("leader", "echo leader says hello && sleep 1"))
    assert made.code == 0, made.err
    leader = made.out.split()[0].removeprefix("pod/")
    pod = _get(kubectl, "pod", leader)
    assert pod["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert kubectl("get", "pod", leader).out.splitlines()[1].split()[2] == "SchedulingGated"
    assert _workloads(kubectl) == {}, "the group waits for its second pod"

    assert kubectl("create", "-f", "-", input=member("worker", "echo worker says hello")).code == 0

    def finished() -> dict[str, Any] | None:
        wl = _workloads(kubectl).get("pair")
        return wl if wl is not None and _condition(wl, "Finished") else None

    wl = eventually_value(finished, 30)
    assert _condition(wl, "Admitted") or wl["status"]["admission"]["clusterQueue"] == "pods"
    assert sorted(ref["name"].rsplit("-", 1)[0] for ref in wl["metadata"]["ownerReferences"]) == [
        "pair-leader", "pair-worker"]
    assert [p["count"] for p in wl["spec"]["podSets"]] == [1, 1], "two roles: the pods' commands differ"
    pods = _get(kubectl, "pods", "-l", "kueue.x-k8s.io/pod-group-name=pair")["items"]
    assert [p["status"]["phase"] for p in pods] == ["Succeeded", "Succeeded"]
    for pod in pods:
        assert "schedulingGates" not in pod["spec"]
        assert pod["spec"]["nodeSelector"] == {"node-size": "small"}
    assert "leader says hello" in kubectl("logs", leader).out
    # Pods delete, and with the last of them the workload goes.
    assert kubectl("delete", "pods", "-l", "kueue.x-k8s.io/pod-group-name=pair").code == 0
    eventually_value(lambda: _workloads(kubectl) == {}, 10)


def test_single_pods_wait_for_quota_and_run(kubectl: Any) -> None:
    assert kubectl("apply", "-f", "-", input=SETUP).code == 0
    # An application image: not run here, shown Running until deleted; it holds 3 of the 4 CPUs.
    assert kubectl("apply", "-f", "-", input=single("server", "registry.example.com/team/app:2", "3")).code == 0
    eventually_value(lambda: _get(kubectl, "pod", "server")["status"]["phase"] == "Running", 20)
    assert kubectl("apply", "-f", "-", input=single("greeter", "busybox", "3", "echo hello from a pod")).code == 0
    eventually_value(lambda: len(_workloads(kubectl)) == 2, 10)
    greeter = _get(kubectl, "pod", "greeter")
    assert greeter["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}], "no quota: still gated"
    waiting = next(w for n, w in _workloads(kubectl).items() if n.startswith("pod-greeter-"))
    assert not _condition(waiting, "QuotaReserved")

    assert kubectl("delete", "pod", "server").code == 0
    eventually_value(lambda: _get(kubectl, "pod", "greeter")["status"]["phase"] == "Succeeded", 30)
    assert kubectl("logs", "greeter").out.strip() == "hello from a pod"
    done = next(w for n, w in _workloads(kubectl).items() if n.startswith("pod-greeter-"))
    eventually_value(lambda: _condition(next(w for n, w in _workloads(kubectl).items() if n.startswith("pod-greeter-")),
                                   "Finished"), 10)
    assert done["spec"]["podSets"][0]["name"] == "main"
    assert [n for n in _workloads(kubectl) if n.startswith("pod-server-")] == [], "deleted with its pod"


def test_a_group_pod_without_its_total_count_is_refused(kubectl: Any) -> None:
    refused = kubectl("create", "-f", "-", input=member("leader", "true", total=None))
    assert refused.code != 0
    assert "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]" in refused.err, refused.err
    assert "Traceback" not in refused.err
    assert kubectl("create", "-f", "-", input=member("leader", "true", total="two")).code != 0


PREEMPTING = """apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: urgent}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: small-nodes}
spec: {nodeLabels: {node-size: small}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: pods}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: small-nodes, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: pod-queue, namespace: default}
spec: {clusterQueue: pods}
"""


def test_a_preempted_pod_is_stopped_and_deleted(kubectl: Any) -> None:
    assert kubectl("apply", "-f", "-", input=PREEMPTING).code == 0
    assert kubectl("apply", "-f", "-", input=single("batch", "registry.example.com/team/app:2", "3")).code == 0
    eventually_value(lambda: _get(kubectl, "pod", "batch")["status"]["phase"] == "Running", 20)
    urgent = single("urgent", "busybox", "3", "echo first").replace(
        "  restartPolicy: OnFailure\n", "  restartPolicy: OnFailure\n  priorityClassName: urgent\n")
    assert kubectl("apply", "-f", "-", input=urgent).code == 0
    eventually_value(lambda: _get(kubectl, "pod", "urgent")["status"]["phase"] == "Succeeded", 30)
    assert kubectl("get", "pod", "batch").code != 0, "the preempted pod was deleted, as Kueue stops a pod"
    events = _get(kubectl, "events")["items"]
    assert any(e["reason"] == "Stopped" and e["involvedObject"]["name"] == "batch" for e in events)
    urgent_wl = next(w for n, w in _workloads(kubectl).items() if n.startswith("pod-urgent-"))
    assert urgent_wl["spec"]["priority"] == 1000
    assert [n for n in _workloads(kubectl) if n.startswith("pod-batch-")] == []
