"""NotReady and tainted nodes in virtual time, restated from Kueue v0.19's TAS node controller tests
(pkg/controller/tas/node_controller_test.go): examples/tas's eight hosts in two sub-blocks, job a (three pods, 30m)
on the first sub-block with a free host left there, job b (four, 1h) on the second; the first of a's hosts goes
NotReady or gets a taint at 10m. The job's pods there move to the free host when Kueue counts the node failed:
when its pods have been evicted (300 s NotReady, at once for a NoExecute taint), or after NodeFailureDelay (30 s)
with the gates that do not wait for pods; never for a NotReady node back in time, a NoSchedule taint or a tolerated
one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario

EXAMPLES = Path(__file__).parents[2] / "examples" / "tas"
REPLACED = ("NodeReplaced", "node gke-tas-pool-1-0 was lost: its pods were placed on gke-tas-pool-4-0 in the same "
            "topology domain")
NO_EXECUTE = {"at": "10m", "key": "maintenance", "effect": "NoExecute"}
NO_SCHEDULE = {"at": "10m", "key": "maintenance", "effect": "NoSchedule"}


def _run(tmp_path: Path, cloud: dict[str, Any], gates: dict[str, bool] | None = None,
         tolerate: bool = False) -> list[dict[str, Any]]:
    doc = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "tas-node-health"},
           "spec": {"include": [str(EXAMPLES / "tas-queue.yaml")], "until": "3h",
                    **({"kueueConfig": {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                        "featureGates": gates}} if gates else {}),
                    "capacity": {"pools": [{"name": "tas-pool", "machineType": "n2-standard-16", "numNodes": 8,
                                            "autoscaling": False}],
                                 "cloud": {"tas-pool": cloud}},
                    "submit": [{"at": f"{at}s", "file": str(EXAMPLES / "job-subblock.yaml"), "runFor": run_for,
                                "env": {"JOB_NAME": name, "PODS": str(n)}}
                               for at, name, n, run_for in ((0, "a", 3, "30m"), (1, "b", 4, "1h"))]}}
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
                                             [NOT_READY, (900, *REPLACED), FINISHED]),
    # "node not ready; NodeFailureDelay elapsed" with TASReplaceNodeOnPodTermination off
    "not ready, pod termination off": ({"hostNotReady": [{"at": "10m"}]},
                                       {"TASReplaceNodeOnPodTermination": False},
                                       [NOT_READY, (630, *REPLACED), FINISHED]),
    "not ready, fixed time": ({"hostNotReady": [{"at": "10m"}]}, {"TASReplaceNodeDueToNotReadyOverFixedTime": True},
                              [NOT_READY, (630, *REPLACED), FINISHED]),
    # "node becomes ready again": nothing replaced
    "ready again in time": ({"hostNotReady": [{"at": "10m", "for": "2m"}]}, None,
                            [NOT_READY, (720, "NodeReady", "host gke-tas-pool-1-0 of pool tas-pool is Ready again"),
                             FINISHED]),
    "ready again after the fixed time": ({"hostNotReady": [{"at": "10m", "for": "2m"}]},
                                         {"TASReplaceNodeDueToNotReadyOverFixedTime": True},
                                         [NOT_READY, (630, *REPLACED),
                                          (720, "NodeReady", "host gke-tas-pool-1-0 of pool tas-pool is Ready again"),
                                          FINISHED]),
    # "untolerated NoExecute taint": its pods evicted at once, the node failed
    "NoExecute taint": ({"hostTaints": [NO_EXECUTE]}, None,
                        [(TAINTED[0], TAINTED[1], TAINTED[2].format("NoExecute")), (600, *REPLACED), FINISHED]),
    # "untolerated NoSchedule taint, pods running": healthy
    "NoSchedule taint": ({"hostTaints": [NO_SCHEDULE]}, None,
                         [(TAINTED[0], TAINTED[1], TAINTED[2].format("NoSchedule")), FINISHED]),
    "NoSchedule taint, pod termination off": ({"hostTaints": [NO_SCHEDULE]},
                                              {"TASReplaceNodeOnPodTermination": False},
                                              [(TAINTED[0], TAINTED[1], TAINTED[2].format("NoSchedule")),
                                               (600, *REPLACED), FINISHED]),
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
