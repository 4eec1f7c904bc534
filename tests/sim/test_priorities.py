"""Priorities from WorkloadPriorityClass labels, and preemption, end to end in a scenario."""

from __future__ import annotations

from pathlib import Path

from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario

SCENARIO = """
apiVersion: flexq.dev/v1alpha1
kind: Scenario
metadata: {name: priorities}
spec:
  objects:
    - {apiVersion: kueue.x-k8s.io/v1beta1, kind: ResourceFlavor, metadata: {name: default}}
    - apiVersion: kueue.x-k8s.io/v1beta1
      kind: ClusterQueue
      metadata: {name: cq}
      spec:
        namespaceSelector: {}
        preemption: {withinClusterQueue: LowerPriority}
        resourceGroups:
          - coveredResources: [cpu]
            flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
    - {apiVersion: kueue.x-k8s.io/v1beta1, kind: LocalQueue, metadata: {name: q, namespace: default},
       spec: {clusterQueue: cq}}
    - {apiVersion: kueue.x-k8s.io/v1beta1, kind: WorkloadPriorityClass, metadata: {name: urgent}, value: 100}
  submit:
    - at: 0s
      count: 2
      every: 1s
      runFor: 1h
      object:
        apiVersion: batch/v1
        kind: Job
        metadata: {name: "batch-${INDEX}", labels: {kueue.x-k8s.io/queue-name: q}}
        spec:
          parallelism: 2
          template:
            spec:
              restartPolicy: Never
              containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
    - at: 10m
      runFor: 10m
      object:
        apiVersion: batch/v1
        kind: Job
        metadata:
          name: hot
          labels: {kueue.x-k8s.io/queue-name: q, kueue.x-k8s.io/priority-class: urgent}
        spec:
          parallelism: 2
          template:
            spec:
              restartPolicy: Never
              containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
  until: 3h
"""


def test_urgent_job_preempts_the_newest_batch_job(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    result = run_scenario(load_scenario(path))
    by_job = {w.owner.split("/")[-1]: w.key for w in result.workloads}
    log = [(e["t"], e["event"], e["workload"]) for e in result.events]
    assert (600, "Preempted", by_job["batch-1"]) in log, "the most recently admitted lower-priority job goes"
    assert (600, "Admitted", by_job["hot"]) in log
    assert not any(e == "Preempted" and w == by_job["batch-0"] for _, e, w in log)
    # batch-1 runs again once hot finishes (10m later), and completes its full hour.
    readmitted = [t for t, e, w in log if e == "Admitted" and w == by_job["batch-1"]]
    assert readmitted == [1, 1200]
    assert (4800, "Finished", by_job["batch-1"]) in log


def test_pending_on_quota_says_when_quota_frees_next(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.replace("kueue.x-k8s.io/priority-class: urgent", "kueue.x-k8s.io/queue-name: q")
                    .replace("labels: {kueue.x-k8s.io/queue-name: q, kueue.x-k8s.io/queue-name: q}",
                             "labels: {kueue.x-k8s.io/queue-name: q}"))
    result = run_scenario(load_scenario(path))
    hot = next(w.key for w in result.workloads if w.owner.endswith("/hot"))
    pending = next(e for e in result.events if e["workload"] == hot and e["event"] == "Pending")
    assert pending["t"] == 600 and pending["eta"] == 3600, "batch-0 finishes first, at 1h"
    assert "quota frees next at t=1h" in pending["reason"]


POD_CLASSES = """    - {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: high}, value: 1000}
    - {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: everyday}, value: 10,
       globalDefault: true}
"""


_HOT_PODS = ("              restartPolicy: Never\n              containers: [{name: c, image: x, resources: {requests: "
             "{cpu: \"1\"}}}]\n  until")


def _hot_pods_class(text: str, name: str) -> str:
    """``text`` with the last job's (hot's) pods naming PriorityClass ``name``."""
    return text.replace(_HOT_PODS, "              restartPolicy: Never\n              priorityClassName: " + name +
                        "\n              containers: [{name: c, image: x, resources: {requests: {cpu: \"1\"}}}]\n"
                        "  until")


def _run(tmp_path: Path, text: str) -> dict[str, int]:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    result = run_scenario(load_scenario(path))
    return {w.owner.split("/")[-1]: w.priority for w in result.workloads}


def test_pods_priority_class_gives_the_priority_and_decides_preemption(tmp_path: Path) -> None:
    # The urgent job carries no WorkloadPriorityClass: its pods' PriorityClass gives its priority, as in Kueue.
    text = _hot_pods_class(SCENARIO.replace("  submit:\n", POD_CLASSES + "  submit:\n", 1).replace(
        "labels: {kueue.x-k8s.io/queue-name: q, kueue.x-k8s.io/priority-class: urgent}",
        "labels: {kueue.x-k8s.io/queue-name: q}"), "high")
    path = tmp_path / "pods.yaml"
    path.write_text(text)
    result = run_scenario(load_scenario(path))
    priorities = {w.owner.split("/")[-1]: w.priority for w in result.workloads}
    assert priorities == {"batch-0": 10, "batch-1": 10, "hot": 1000}, "globalDefault for pods that name no class"
    by_job = {w.owner.split("/")[-1]: w.key for w in result.workloads}
    log = [(e["t"], e["event"], e["workload"]) for e in result.events]
    assert (600, "Preempted", by_job["batch-1"]) in log and (600, "Admitted", by_job["hot"]) in log


def test_workload_priority_class_wins_over_the_pods_class(tmp_path: Path) -> None:
    text = _hot_pods_class(SCENARIO.replace("  submit:\n", POD_CLASSES + "  submit:\n", 1), "high")
    assert _run(tmp_path, text)["hot"] == 100, "the WorkloadPriorityClass label (urgent, 100) decides"


def test_a_missing_pod_priority_class_is_refused_with_its_name(tmp_path: Path) -> None:
    text = _hot_pods_class(SCENARIO.replace(
        "labels: {kueue.x-k8s.io/queue-name: q, kueue.x-k8s.io/priority-class: urgent}",
        "labels: {kueue.x-k8s.io/queue-name: q}"), "nowhere")
    path = tmp_path / "missing.yaml"
    path.write_text(text)
    result = run_scenario(load_scenario(path))
    refused = [e for e in result.events if e["event"] == "Refused"]
    assert [e["reason"] for e in refused] == ["Job default/hot: PriorityClass 'nowhere' not found"]
