"""A pod template's required node affinity (``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution``),
as Kueue v0.19 reads it: in flavor assignment against a ResourceFlavor's ``nodeLabels`` on the flavor's own keys
(pkg/scheduler/flavorassigner/flavorassigner.go ``flavorSelector``), and under topology-aware scheduling against each
node where the Topology's lowest level is the hostname (pkg/cache/scheduler/scheduling_simulator_default.go
``FindFeasibleNodes``), with Kubernetes' rules for ``nodeSelectorTerms``. The matching itself is restated from
Kueue's tests in conformance_cases.yaml (the ``node-affinity-*`` and ``tas-node-affinity-*`` cases); here: the rules
of a term, that every way flexq makes a pod set from a template carries the affinity, and both clocks' use of it."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from flexq.controller.object_sync import workload_from_object, workload_object
from flexq.jobs.pods import group_podsets, role
from flexq.jobs.workload import podsets
from flexq.scheduler import node_affinity
from flexq.scheduler.model import NodeSelectorTerm, Requirement, affinity_matches
from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario

TAS = Path(__file__).parents[2] / "examples" / "tas"

AFFINITY: dict[str, Any] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100", "h100"]},
                          {"key": "spot", "operator": "DoesNotExist"}]},
    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["x3"]}]},
]}}}
TERMS = (NodeSelectorTerm((Requirement("gpu", "In", ("a100", "h100")), Requirement("spot", "DoesNotExist"))),
         NodeSelectorTerm((), (Requirement("metadata.name", "In", ("x3",)),)))


@pytest.mark.parametrize(("spec", "want"), [
    ({"affinity": AFFINITY}, TERMS),
    ({}, ()),
    ({"affinity": {"podAffinity": {}}}, ()),
    ({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}}]}}}, ()),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {}]}}}}, (NodeSelectorTerm(),)),
])
def test_the_required_node_affinity_of_a_pod_spec(spec: dict[str, Any], want: tuple[NodeSelectorTerm, ...]) -> None:
    # Preferred affinity is not read: Kueue weighs it only under TASRespectNodeAffinityPreferred (alpha, off).
    assert node_affinity(spec) == want


X1 = ("x1", {"gpu": "a100", "gen": "5"})


@pytest.mark.parametrize(("affinity", "want"), [
    ((), True),  # no affinity: any node
    ((NodeSelectorTerm((Requirement("gpu", "In", ("a100",)),)),), True),
    ((NodeSelectorTerm((Requirement("gpu", "In", ("a100",)), Requirement("gen", "Gt", ("5",)))),), False),  # ANDed
    ((NodeSelectorTerm((Requirement("gen", "Gt", ("5",)),)), NodeSelectorTerm((Requirement("gen", "Lt", ("6",)),))),
     True),  # ORed
    ((NodeSelectorTerm((Requirement("zone", "NotIn", ("a",)), Requirement("zone", "DoesNotExist"))),), True),
    ((NodeSelectorTerm((Requirement("gpu", "Exists"),)),), True),
    ((NodeSelectorTerm(),), False),  # an empty term matches no node
    ((NodeSelectorTerm(), NodeSelectorTerm((Requirement("gpu", "Exists"),))), True),
    ((NodeSelectorTerm((), (Requirement("metadata.name", "In", ("x1",)),)),), True),  # matchFields: the node's name
    ((NodeSelectorTerm((), (Requirement("metadata.name", "NotIn", ("x1",)),)),), False),
    ((NodeSelectorTerm((Requirement("gpu", "Exists"),), (Requirement("metadata.name", "In", ("x2",)),)),), False),
    # what Kubernetes cannot read matches nothing (the API server refuses such a pod)
    ((NodeSelectorTerm((Requirement("zone", "NotIn", ()),)),), False),
    ((NodeSelectorTerm((Requirement("gpu", "Exists", ("a100",)),)),), False),
    ((NodeSelectorTerm((Requirement("gen", "Gt", ("4", "3")),)),), False),
    ((NodeSelectorTerm((Requirement("gen", "Gt", ("4.5",)),)),), False),
    ((NodeSelectorTerm((Requirement("gen", "Gt", ("4_0",)),)),), False),  # Go's ParseInt, not Python's int
    ((NodeSelectorTerm((Requirement("gpu", "Like", ("a100",)),)),), False),
    ((NodeSelectorTerm((), (Requirement("metadata.name", "In", ("x1", "x2")),)),), False),
    ((NodeSelectorTerm((), (Requirement("metadata.name", "Exists"),)),), False),
])
def test_a_node_meets_a_required_node_affinity(affinity: tuple[NodeSelectorTerm, ...], want: bool) -> None:
    assert affinity_matches(affinity, *X1) is want


def _job(affinity: dict[str, Any] | None = AFFINITY) -> dict[str, Any]:
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}
    if affinity is not None:
        spec["affinity"] = affinity
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "default", "uid": "u-1",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"parallelism": 2, "completions": 2, "suspend": True, "template": {"spec": spec}}}


def test_a_jobs_pod_sets_carry_its_templates_affinity() -> None:
    assert [ps.affinity for ps in podsets("Job", _job())] == [TERMS]
    assert [ps.affinity for ps in podsets("Job", _job(None))] == [()]
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r", "namespace": "default"},
               "spec": {"headGroupSpec": {"template": {"spec": {"containers": []}}},
                        "workerGroupSpecs": [{"groupName": "w", "replicas": 2,
                                              "template": _job()["spec"]["template"]}]}}
    assert [(ps.name, ps.affinity) for ps in podsets("RayCluster", cluster)] == [("head", ()), ("w", TERMS)]


def test_a_workload_objects_pod_sets_carry_the_affinity() -> None:
    # The live server schedules from the stored Workload: its pod sets' templates keep the affinity.
    from flexq.controller.job_sync import templates
    from flexq.jobs.workload import Priorities, make_workload
    job = _job()
    wl = make_workload("Job", "batch", job, local_queues={("default", "lq"): "cq"}, priorities=Priorities.of({}),
                       created=0.0)
    obj = workload_object(wl, job, "Job", "batch/v1", templates("Job", job), None)
    again = workload_from_object(obj, {("default", "lq"): "cq"})
    assert [ps.affinity for ps in again.podsets] == [TERMS]


def _pod(name: str, affinity: dict[str, Any] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox",
                                            "resources": {"requests": {"cpu": "1"}}}]}
    if affinity is not None:
        spec["affinity"] = affinity
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


def test_a_pod_groups_roles_differ_by_affinity() -> None:
    plain, near = _pod("a", None), _pod("b", AFFINITY)
    sets, _templates = group_podsets([plain, near, _pod("c", AFFINITY)])
    assert [(s.count, s.affinity) for s in sets] == [(1, ()), (2, TERMS)]
    # a pod without affinity keeps the role it had before affinity counted
    shape = {"containers": [{"image": "busybox", "command": None, "args": None,
                             "resources": {"requests": {"cpu": "1"}}, "ports": None}],
             "init": [], "nodeSelector": None, "tolerations": None, "priorityClassName": None}
    assert role(plain) == hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:8]


def _scenario(tmp_path: Path, objects: list[dict[str, Any]], job: dict[str, Any], pools: list[dict[str, Any]],
              include: bool = False) -> Path:
    if include:
        shutil.copy(TAS / "tas-queue.yaml", tmp_path / "tas-queue.yaml")
    spec: dict[str, Any] = {"capacity": {"pools": pools}, "objects": objects,
                            "submit": [{"at": "0s", "object": job, "runFor": "10m"}], "until": "1h"}
    if include:
        spec["include"] = ["tas-queue.yaml"]
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario",
                                    "metadata": {"name": "affinity"}, "spec": spec}))
    return path


def test_the_simulator_places_topology_pods_by_their_affinity(tmp_path: Path) -> None:
    # examples/tas: eight hosts, four per sub-block. The job's four pods must share a sub-block; its affinity keeps
    # two hosts of the first out, so they go to the second.
    job: dict[str, Any] = yaml.safe_load((TAS / "job-subblock.yaml").read_text().replace("${JOB_NAME}", "a")
                                         .replace("${PODS}", "4"))
    job["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "NotIn",
             "values": ["gke-tas-pool-1-0", "gke-tas-pool-2-0"]}]}]}}}
    path = _scenario(tmp_path, [], job, [{"name": "tas-pool", "machineType": "n2-standard-16", "numNodes": 8,
                                          "autoscaling": False}], include=True)
    events = run_scenario(load_scenario(path)).events
    [reserved] = [e for e in events if e["event"] == "QuotaReserved"]
    assert [d["values"][0] for d in reserved["topologyAssignments"]["main"]["domains"]] == [
        f"gke-tas-pool-{n}-0" for n in (5, 6, 7, 8)]


def test_the_simulator_chooses_a_flavor_by_the_affinity(tmp_path: Path) -> None:
    # The spot flavor comes first; the template's affinity `cloud.google.com/gke-spot DoesNotExist` rules it out
    # (the on-demand flavor does not set that key, so the term says nothing of it).
    flavors = [{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": name},
                "spec": {"nodeLabels": labels}}
               for name, labels in (("spot", {"cloud.google.com/gke-nodepool": "spot",
                                              "cloud.google.com/gke-spot": "true"}),
                                    ("on-demand", {"cloud.google.com/gke-nodepool": "on-demand"}))]
    queue = [{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
              "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                  {"name": f, "resources": [{"name": "cpu", "nominalQuota": "32"}]} for f in ("spot", "on-demand")]}]}},
             {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
              "metadata": {"name": "lq", "namespace": "default"}, "spec": {"clusterQueue": "cq"}}]
    job = _job({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "cloud.google.com/gke-spot", "operator": "DoesNotExist"}]}]}}})
    pools = [{"name": name, "machineType": "n2-standard-16", "numNodes": 2, "autoscaling": False}
             for name in ("spot", "on-demand")]
    events = run_scenario(load_scenario(_scenario(tmp_path, [*flavors, *queue], job, pools))).events
    [reserved] = [e for e in events if e["event"] == "QuotaReserved"]
    assert reserved["podSets"] == {"main": {"cpu": "on-demand"}}
