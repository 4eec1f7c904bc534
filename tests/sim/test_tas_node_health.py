"""NotReady and tainted nodes in virtual time, restated from Kueue v0.19's TAS node controller tests
(pkg/controller/tas/node_controller_test.go) and Kubernetes' taint manager: examples/tas's eight hosts in two
sub-blocks, job a (three pods, 30m) on the first sub-block with a free host left there, job b (four, 1h) on the
second; the first of a's hosts goes NotReady or gets a taint at 10m. The job's pods there move to the free host when
Kueue counts the node failed: when its pods have been evicted (a NotReady node's after their toleration of the
not-ready taint, 300 s unless they say otherwise; at once for a NoExecute taint, after its ``tolerationSeconds``
where it has one), or after NodeFailureDelay (30 s) with the gates that do not wait for pods; never for a NotReady
node back in time, a NoSchedule taint or one tolerated for good. Each move's message names its cause."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario

EXAMPLES = Path(__file__).parents[2] / "examples" / "tas"


def _replaced(cause: str) -> tuple[str, str]:
    return ("NodeReplaced", f"node gke-tas-pool-1-0 {cause}: its pods were placed on gke-tas-pool-4-0 in the same "
            "topology domain")


NOT_READY_300 = _replaced("was NotReady for 300s")
NOT_READY_30 = _replaced("was NotReady for 30s")
NO_EXECUTE = {"at": "10m", "key": "maintenance", "effect": "NoExecute"}
NO_SCHEDULE = {"at": "10m", "key": "maintenance", "effect": "NoSchedule"}


def _run(tmp_path: Path, cloud: dict[str, Any], gates: dict[str, bool] | None = None,
         tolerate: bool = False, tolerations: list[dict[str, Any]] | None = None,
         a_at: int = 0) -> list[dict[str, Any]]:
    """The scenario; ``tolerate``: the flavor tolerates the taint ``maintenance``; ``tolerations``: job a's pods';
    ``a_at``: when job a is submitted (b a second after)."""
    job = yaml.safe_load((EXAMPLES / "job-subblock.yaml").read_text())
    job["spec"]["template"]["spec"]["tolerations"] = tolerations or []
    (tmp_path / "job-a.yaml").write_text(yaml.safe_dump(job))
    doc = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "tas-node-health"},
           "spec": {"include": [str(EXAMPLES / "tas-queue.yaml")], "until": "3h",
                    **({"kueueConfig": {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                        "featureGates": gates}} if gates else {}),
                    "capacity": {"pools": [{"name": "tas-pool", "machineType": "n2-standard-16", "numNodes": 8,
                                            "autoscaling": False}],
                                 "cloud": {"tas-pool": cloud}},
                    "submit": [{"at": f"{at}s", "runFor": run_for, "env": {"JOB_NAME": name, "PODS": str(n)},
                                "file": str(tmp_path / "job-a.yaml" if name == "a" else EXAMPLES / "job-subblock.yaml")}
                               for at, name, n, run_for in ((a_at, "a", 3, "30m"), (a_at + 1, "b", 4, "1h"))]}}
    if tolerate:
        doc["spec"]["objects"] = [{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
                                   "metadata": {"name": "tas-flavor"},
                                   "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": "tas-pool"},
                                            "topologyName": "gke-default",
                                            "tolerations": [{"key": "maintenance", "operator": "Exists"}]}}]
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc))
    return run_scenario(load_scenario(path)).events


def _story(events: list[dict[str, Any]]) -> list[tuple[float, str, str]]:
    return [(e["t"], e["event"], e.get("cause") or e["reason"]) for e in events
            if e["event"] in ("NodeNotReady", "NodeReady", "NodeTainted", "NodeReplaced", "Evicted", "Finished")
            and (not e["workload"] or e["workload"].startswith("default/job-a"))]


NOT_READY = (600, "NodeNotReady", "host gke-tas-pool-1-0 of pool tas-pool is NotReady")
TAINTED = (600, "NodeTainted", "node gke-tas-pool-1-0 of pool tas-pool: taints +maintenance:{}")
FINISHED = (1800, "Finished", "JobFinished")

CASES: dict[str, tuple[dict[str, Any], dict[str, bool] | None, list[tuple[float, str, str]]]] = {
    # "node not ready; pods terminated": replaced once its pods are evicted (not-ready toleration, 300 s)
    "not ready, pod termination (default)": ({"hostNotReady": [{"at": "10m"}]}, None,
                                             [NOT_READY, (900, *NOT_READY_300), FINISHED]),
    # "node not ready; NodeFailureDelay elapsed" with TASReplaceNodeOnPodTermination off
    "not ready, pod termination off": ({"hostNotReady": [{"at": "10m"}]},
                                       {"TASReplaceNodeOnPodTermination": False},
                                       [NOT_READY, (630, *NOT_READY_30), FINISHED]),
    "not ready, fixed time": ({"hostNotReady": [{"at": "10m"}]}, {"TASReplaceNodeDueToNotReadyOverFixedTime": True},
                              [NOT_READY, (630, *NOT_READY_30), FINISHED]),
    # "node becomes ready again": nothing replaced
    "ready again in time": ({"hostNotReady": [{"at": "10m", "for": "2m"}]}, None,
                            [NOT_READY, (720, "NodeReady", "host gke-tas-pool-1-0 of pool tas-pool is Ready again"),
                             FINISHED]),
    "ready again after the fixed time": ({"hostNotReady": [{"at": "10m", "for": "2m"}]},
                                         {"TASReplaceNodeDueToNotReadyOverFixedTime": True},
                                         [NOT_READY, (630, *NOT_READY_30),
                                          (720, "NodeReady", "host gke-tas-pool-1-0 of pool tas-pool is Ready again"),
                                          FINISHED]),
    # "untolerated NoExecute taint": its pods evicted at once, the node failed
    "NoExecute taint": ({"hostTaints": [NO_EXECUTE]}, None,
                        [(TAINTED[0], TAINTED[1], TAINTED[2].format("NoExecute")),
                         (600, *_replaced("was tainted maintenance:NoExecute")), FINISHED]),
    # "untolerated NoSchedule taint, pods running": healthy
    "NoSchedule taint": ({"hostTaints": [NO_SCHEDULE]}, None,
                         [(TAINTED[0], TAINTED[1], TAINTED[2].format("NoSchedule")), FINISHED]),
    "NoSchedule taint, pod termination off": ({"hostTaints": [NO_SCHEDULE]},
                                              {"TASReplaceNodeOnPodTermination": False},
                                              [(TAINTED[0], TAINTED[1], TAINTED[2].format("NoSchedule")),
                                               (600, *_replaced("was tainted maintenance:NoSchedule")),
                                               FINISHED]),
    # TASReplaceNodeOnNodeTaints off: the evicted pods are gone, not replaced: requeued, it runs again on the
    # sub-block's three other hosts
    "NoExecute taint, taints gate off": ({"hostTaints": [NO_EXECUTE]}, {"TASReplaceNodeOnNodeTaints": False},
                                         [(TAINTED[0], TAINTED[1], TAINTED[2].format("NoExecute")),
                                          (600, "Evicted", "NodeLost"), (600 + 1800, "Finished", "JobFinished")]),
}


@pytest.mark.parametrize("name", CASES)
def test_a_notready_or_tainted_node_of_a_running_job(tmp_path: Path, name: str) -> None:
    cloud, gates, story = CASES[name]
    assert _story(_run(tmp_path, cloud, gates)) == story


def test_a_tolerated_noexecute_taint_leaves_the_job_where_it_runs(tmp_path: Path) -> None:
    """Kueue's "taint tolerated permanently": the workload is healthy on the node."""
    story = _story(_run(tmp_path, {"hostTaints": [NO_EXECUTE]}, tolerate=True))
    assert story == [(TAINTED[0], TAINTED[1], TAINTED[2].format("NoExecute")), FINISHED]


def test_a_notready_node_takes_no_new_pods(tmp_path: Path) -> None:
    """Kueue's TAS cache leaves a NotReady node out of placement: job b, submitted after the first host of the
    first sub-block went NotReady (hostNotReady at 0s), finds three hosts there, not four, and goes to the
    second sub-block."""
    events = _run(tmp_path, {"hostNotReady": [{"at": "0s"}]})
    started = [e for e in events if e["event"] == "Started"]
    assert all("gke-tas-pool-1-0" not in e["nodes"] for e in started)


def _tolerating(key: str, seconds: int | None) -> list[dict[str, Any]]:
    return [{"key": key, "operator": "Exists", "effect": "NoExecute",
             **({"tolerationSeconds": seconds} if seconds is not None else {})}]


NOT_READY_KEY = "node.kubernetes.io/not-ready"
NO_EXECUTE_TAINTED = (TAINTED[0], TAINTED[1], TAINTED[2].format("NoExecute"))
# Kubernetes' taint manager evicts a pod when its toleration of a NoExecute taint runs out (the not-ready taint of a
# NotReady node too, 300 s where the pod does not tolerate it itself); Kueue's node controller counts the node
# failed for the workload once its pods there have terminated (a taint "tolerated temporarily"), never while they
# run (a taint "tolerated permanently", a NotReady node whose pods stay).
TOLERATION_CASES: dict[str, tuple[dict[str, Any], dict[str, bool] | None, list[dict[str, Any]],
                                  list[tuple[float, str, str]]]] = {
    "NoExecute tolerated for 2m": ({"hostTaints": [NO_EXECUTE]}, None, _tolerating("maintenance", 120),
                                   [NO_EXECUTE_TAINTED,
                                    (720, *_replaced("was tainted maintenance:NoExecute, tolerated for 120s")),
                                    FINISHED]),
    # zero (or less): evicted at once, as by an untolerated taint
    "NoExecute tolerated for 0s": ({"hostTaints": [NO_EXECUTE]}, None, _tolerating("maintenance", 0),
                                   [NO_EXECUTE_TAINTED, (600, *_replaced("was tainted maintenance:NoExecute")),
                                    FINISHED]),
    "NoExecute tolerated for 2m, removed after 1m": ({"hostTaints": [{**NO_EXECUTE, "for": "1m"}]}, None,
                                                     _tolerating("maintenance", 120),
                                                     [NO_EXECUTE_TAINTED,
                                                      (660, "NodeTainted",
                                                       "node gke-tas-pool-1-0 of pool tas-pool: taints "
                                                       "-maintenance:NoExecute"), FINISHED]),
    # a pod scheduled onto a node with the taint already there: counted from when it was bound (job a at 1m)
    "NoExecute there before, tolerated for 2m": ({"hostTaints": [{**NO_EXECUTE, "at": "0s"}]}, None,
                                                 _tolerating("maintenance", 120),
                                                 [(0, *NO_EXECUTE_TAINTED[1:]),
                                                  (180, *_replaced("was tainted maintenance:NoExecute, tolerated "
                                                                   "for 120s")), (1860, "Finished", "JobFinished")]),
    # Kubernetes counts the shortest of the tolerations that match the taint
    "NoExecute tolerated for good and for 2m": ({"hostTaints": [NO_EXECUTE]}, None,
                                                [*_tolerating("maintenance", None), *_tolerating("", 120)],
                                                [NO_EXECUTE_TAINTED,
                                                 (720, *_replaced("was tainted maintenance:NoExecute, tolerated "
                                                                  "for 120s")), FINISHED]),
    # TASReplaceNodeOnNodeTaints off: evicted and requeued; admitted again on the same hosts (the taint tolerated),
    # evicted again 2m later, until the taint is gone (15m)
    "NoExecute tolerated for 2m, taints gate off": ({"hostTaints": [{**NO_EXECUTE, "for": "5m"}]},
                                                    {"TASReplaceNodeOnNodeTaints": False},
                                                    _tolerating("maintenance", 120),
                                                    [NO_EXECUTE_TAINTED, (720, "Evicted", "NodeLost"),
                                                     (840, "Evicted", "NodeLost"),
                                                     (900, "NodeTainted", "node gke-tas-pool-1-0 of pool tas-pool: "
                                                      "taints -maintenance:NoExecute"),
                                                     (840 + 1800, "Finished", "JobFinished")]),
    "not-ready tolerated for 1m": ({"hostNotReady": [{"at": "10m"}]}, None, _tolerating(NOT_READY_KEY, 60),
                                   [NOT_READY, (660, *_replaced("was NotReady for 60s")), FINISHED]),
    "not-ready tolerated for 10m": ({"hostNotReady": [{"at": "10m"}]}, None, _tolerating(NOT_READY_KEY, 600),
                                    [NOT_READY, (1200, *_replaced("was NotReady for 600s")), FINISHED]),
    "not-ready tolerated for good": ({"hostNotReady": [{"at": "10m"}]}, None, _tolerating(NOT_READY_KEY, None),
                                     [NOT_READY, FINISHED]),
    "every taint tolerated for good": ({"hostNotReady": [{"at": "10m"}]}, None,
                                       [{"operator": "Exists"}], [NOT_READY, FINISHED]),
    # with the gates that do not wait for pods, NodeFailureDelay whatever the pods tolerate
    "not-ready tolerated for good, pod termination off": ({"hostNotReady": [{"at": "10m"}]},
                                                          {"TASReplaceNodeOnPodTermination": False},
                                                          _tolerating(NOT_READY_KEY, None),
                                                          [NOT_READY, (630, *NOT_READY_30), FINISHED]),
    "not-ready tolerated for good, fixed time": ({"hostNotReady": [{"at": "10m"}]},
                                                 {"TASReplaceNodeDueToNotReadyOverFixedTime": True},
                                                 _tolerating(NOT_READY_KEY, None),
                                                 [NOT_READY, (630, *NOT_READY_30), FINISHED]),
}


@pytest.mark.parametrize("name", TOLERATION_CASES)
def test_toleration_seconds_of_a_running_job(tmp_path: Path, name: str) -> None:
    cloud, gates, tolerations, story = TOLERATION_CASES[name]
    a_at = 60 if "there before" in name else 0
    assert _story(_run(tmp_path, cloud, gates, tolerations=tolerations, a_at=a_at)) == story
