"""A RayCluster under the queue, through the real kubectl: suspended until admitted, a Workload with the head and
worker groups as pod sets, admitted with its flavor's node labels, never finished, gone with the cluster."""

from __future__ import annotations

import time
from typing import Any

import yaml

from tests.support import eventually_value

SETUP = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: cpu-nodes}
spec: {nodeLabels: {pool: cpu}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: interactive}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors: [{name: cpu-nodes, resources: [{name: cpu, nominalQuota: 4}, {name: memory, nominalQuota: 16Gi}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: notebooks, namespace: default}
spec: {clusterQueue: interactive}
"""


def cluster(name: str, workers: int, priority_class: str = "") -> str:
    priority = f"        priorityClassName: {priority_class}\n" if priority_class else ""
    return f"""apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: {name}
  labels: {{kueue.x-k8s.io/queue-name: notebooks}}
spec:
  rayVersion: '2.40.0'
  headGroupSpec:
    serviceType: ClusterIP
    rayStartParams: {{dashboard-host: 0.0.0.0}}
    template:
      spec:
{priority}        containers:
        - name: head
          image: rayproject/ray:2.40.0
          ports: [{{containerPort: 8265, name: dashboard}}]
          lifecycle: {{preStop: {{exec: {{command: [/bin/sh, -c, ray stop]}}}}}}
          resources: {{requests: {{cpu: "1", memory: 2Gi}}}}
  workerGroupSpecs:
  - groupName: small
    replicas: {workers}
    minReplicas: 1
    maxReplicas: 4
    rayStartParams: {{}}
    template:
      spec:
        containers:
        - name: worker
          image: rayproject/ray:2.40.0
          resources: {{requests: {{cpu: "1", memory: 1Gi}}}}
"""


def test_a_raycluster_is_queued_admitted_and_released(kubectl: Any) -> None:
    assert kubectl("apply", "-f", "-", input=SETUP).code == 0
    applied = kubectl("apply", "-f", "-", input=cluster("notebook-a", 2))
    assert applied.code == 0, applied.err
    assert "raycluster.ray.io/notebook-a created" in applied.out

    def workloads() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = yaml.safe_load(kubectl("get", "workloads", "-o", "yaml").out)["items"]
        return items

    def admitted(name: str) -> dict[str, Any] | None:
        for wl in workloads():
            owner = wl["metadata"]["ownerReferences"][0]
            if owner["name"] == name and any(c["type"] == "Admitted" and c["status"] == "True"
                                             for c in (wl.get("status") or {}).get("conditions") or []):
                return wl
        return None

    wl = eventually_value(lambda: admitted("notebook-a"))
    assert wl["metadata"]["name"].startswith("raycluster-notebook-a-")
    assert wl["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("head", 1), ("small", 2)]
    assert {p["name"]: p["resourceUsage"]["cpu"] for p in wl["status"]["admission"]["podSetAssignments"]} == {
        "head": "1", "small": "2"}
    obj = yaml.safe_load(kubectl("get", "raycluster", "notebook-a", "-o", "yaml").out)
    assert obj["spec"]["suspend"] is False, "admitted: un-suspended"
    assert obj["spec"]["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {"pool": "cpu"}
    assert obj["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] == {"pool": "cpu"}

    # A second cluster does not fit the 4 CPUs left over (3 in use): it waits, suspended, for the first to go.
    assert kubectl("apply", "-f", "-", input=cluster("notebook-b", 2)).code == 0
    eventually_value(lambda: len(workloads()) == 2)
    time.sleep(1.0)
    assert admitted("notebook-b") is None
    waiting = yaml.safe_load(kubectl("get", "raycluster", "notebook-b", "-o", "yaml").out)
    assert waiting["spec"]["suspend"] is True, "queued: created suspended"
    assert "nodeSelector" not in waiting["spec"]["headGroupSpec"]["template"]["spec"]
    # A RayCluster never finishes on its own: the first stays admitted until it is deleted.
    assert admitted("notebook-a") is not None
    deleted = kubectl("delete", "raycluster", "notebook-a")
    assert deleted.code == 0, deleted.err
    eventually_value(lambda: admitted("notebook-b"))
    assert [w["metadata"]["ownerReferences"][0]["name"] for w in workloads()] == ["notebook-b"]


def test_a_raycluster_without_a_queue_is_refused_by_name(kubectl: Any) -> None:
    unqueued = cluster("loose", 1).replace("  labels: {kueue.x-k8s.io/queue-name: notebooks}\n", "")
    refused = kubectl("apply", "-f", "-", input=unqueued)
    assert refused.code != 0
    assert "metadata.labels" in refused.err and "kueue.x-k8s.io/queue-name" in refused.err
    assert "Traceback" not in refused.err


def test_a_preempted_raycluster_is_suspended_and_restored(kubectl: Any) -> None:
    setup = SETUP.replace("  namespaceSelector: {}\n", "  namespaceSelector: {}\n  preemption: {withinClusterQueue: "
                          "LowerPriority}\n")
    urgent = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: urgent}\nvalue: 100\n"
    assert kubectl("apply", "-f", "-", input=setup + "---\n" + urgent).code == 0
    assert kubectl("apply", "-f", "-", input=cluster("batch", 2)).code == 0

    def suspended(name: str) -> bool:
        return bool(yaml.safe_load(kubectl("get", "raycluster", name, "-o", "yaml").out)["spec"]["suspend"])

    eventually_value(lambda: not suspended("batch"))
    assert kubectl("apply", "-f", "-", input=cluster("urgent", 2, "urgent")).code == 0
    eventually_value(lambda: not suspended("urgent"))
    batch = yaml.safe_load(kubectl("get", "raycluster", "batch", "-o", "yaml").out)
    assert batch["spec"]["suspend"] is True, "evicted: suspended again"
    assert "nodeSelector" not in batch["spec"]["headGroupSpec"]["template"]["spec"], "templates restored"
    events = yaml.safe_load(kubectl("get", "events", "-o", "yaml").out)["items"]
    assert any(e["reason"] == "Stopped" and e["involvedObject"]["name"] == "batch" for e in events)


def test_an_elastic_raycluster_grows_by_a_workload_slice(kubectl: Any) -> None:
    assert kubectl("apply", "-f", "-", input=SETUP).code == 0
    elastic = cluster("growing", 1).replace(
        "  labels: {kueue.x-k8s.io/queue-name: notebooks}\n",
        "  labels: {kueue.x-k8s.io/queue-name: notebooks}\n  annotations: {kueue.x-k8s.io/elastic-job: \"true\"}\n")
    assert kubectl("apply", "-f", "-", input=elastic).code == 0

    def admitted() -> list[dict[str, Any]]:
        """The admitted slices that have not finished."""
        items = yaml.safe_load(kubectl("get", "workloads", "-o", "yaml").out)["items"]
        true = [{c["type"] for c in (w.get("status") or {}).get("conditions") or [] if c["status"] == "True"}
                for w in items]
        return [w for w, conditions in zip(items, true, strict=True)
                if "Admitted" in conditions and "Finished" not in conditions]

    first = eventually_value(lambda: admitted())[0]
    patched = kubectl("patch", "raycluster", "growing", "--type", "json", "-p",
                      '[{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3}]')
    assert patched.code == 0, patched.err

    def grown() -> dict[str, Any] | None:
        now = admitted()
        return now[0] if len(now) == 1 and now[0]["metadata"]["name"] != first["metadata"]["name"] else None

    grown_wl = eventually_value(grown)
    assert grown_wl["metadata"]["annotations"]["kueue.x-k8s.io/workload-slice-replacement-for"] == (
        f"default/{first['metadata']['name']}")
    assert {p["name"]: p["count"] for p in grown_wl["spec"]["podSets"]} == {"head": 1, "small": 3}
    old = yaml.safe_load(kubectl("get", "workload", first["metadata"]["name"], "-o", "yaml").out)
    assert any(c["type"] == "Finished" and c["reason"] == "WorkloadSliceReplaced" for c in old["status"]["conditions"])
