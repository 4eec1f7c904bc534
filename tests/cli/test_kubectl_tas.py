"""Topology-aware scheduling through the real kubectl: the Topology of examples/tas applied and listed, a job of four
pods that must share a sub-block admitted with its topologyAssignment (v1beta2's slices, v1beta1's domains), and one
of five pods that no sub-block holds pending with Kueue's TopologyPlacementFailed; on DWS's nodes, a job's topology
request delayed until its ProvisioningRequest is provisioned; a job evicted with its TPU slice admitted again once
the repaired slice is ready."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Server, start_server, stop_server
from tests.support import eventually, eventually_value, serve_capacity, serve_kueue_config
from tests.support.tas import TPU_SLICE

EXAMPLES = Path(__file__).parents[2] / "examples" / "tas"


DWS_CAPACITY = """cloud:
  dws-pool: {queuedDelay: 8s}
"""
REPAIR_CAPACITY = """cloud:
  tpu-pool: {bootTime: 5s}
"""
FAIR_SHARING = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
fairSharing: {preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]}
"""
NO_FAIL_FAST = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
featureGates: {TASFailedNodeReplacementFailFast: false}
"""


@pytest.fixture
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    """A fresh server; ``"fair sharing"`` as the test's parameter: one under Kueue's fair sharing; ``"no fail fast"``:
    one with TASFailedNodeReplacementFailFast off."""
    if getattr(request, "param", None) in ("fair sharing", "no fail fast"):
        yield from serve_kueue_config(tmp_path, FAIR_SHARING if request.param == "fair sharing" else NO_FAIL_FAST)
        return
    if getattr(request, "param", None) in ("dws", "repair"):
        yield from serve_capacity(tmp_path, DWS_CAPACITY if request.param == "dws" else REPAIR_CAPACITY)
        return
    srv = start_server(tmp_path / "home")
    try:
        yield srv
    finally:
        stop_server(srv)


def _job(name: str, pods: int) -> str:
    return (EXAMPLES / "job-subblock.yaml").read_text().replace("${JOB_NAME}", name).replace("${PODS}", str(pods))


def _workload(kubectl: Any, job: str, version: str = "") -> dict[str, Any]:
    resource = f"workloads.{version}.kueue.x-k8s.io" if version else "workloads"
    listed = kubectl("get", resource, "-o", "yaml")
    assert listed.code == 0, listed.err
    (wl,) = [w for w in yaml.safe_load(listed.out)["items"] if w["metadata"]["ownerReferences"][0]["name"] == job]
    return dict(wl)


def test_topology_assignment_with_real_kubectl(kubectl: Any, flexq: Any) -> None:
    for args in (("container", "clusters", "create", "tas-cluster", "--machine-type=n2-standard-16", "--num-nodes=1"),
                 ("container", "node-pools", "create", "tas-pool", "--cluster=tas-cluster",
                  "--machine-type=n2-standard-16", "--num-nodes=8")):
        made = flexq(*args)
        assert made.code == 0, made.err
    applied = kubectl("apply", "-f", str(EXAMPLES / "tas-queue.yaml"))
    assert applied.code == 0, applied.err
    assert "topology.kueue.x-k8s.io/gke-default created" in applied.out
    again = flexq("apply", "-f", str(EXAMPLES / "tas-queue.yaml"))
    assert again.code == 0 and "topology.kueue.x-k8s.io/gke-default" in again.out, again.err
    listed = kubectl("get", "topologies")
    assert listed.code == 0 and "gke-default" in listed.out, listed.err
    shown = yaml.safe_load(kubectl("get", "topo", "gke-default", "-o", "yaml").out)
    assert [level["nodeLabel"] for level in shown["spec"]["levels"]] == [
        "cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock", "kubernetes.io/hostname"]
    fewer = {**shown, "spec": {"levels": shown["spec"]["levels"][1:]}}
    changed = kubectl("apply", "-f", "-", input=yaml.safe_dump(fewer))
    assert changed.code != 0 and "immutable" in changed.err, "a Topology's levels do not change"
    nodes = yaml.safe_load(kubectl("get", "nodes", "-l", "cloud.google.com/gke-nodepool=tas-pool", "-o", "yaml").out)
    subblocks = {n["metadata"]["name"]: n["metadata"]["labels"]["cloud.google.com/gce-topology-subblock"]
                 for n in nodes["items"]}
    assert sorted(subblocks.values()) == ["tas-pool-b0-s0"] * 4 + ["tas-pool-b0-s1"] * 4

    for name, pods in (("a", 4), ("d", 5)):
        made = kubectl("apply", "-f", "-", input=_job(name, pods))
        assert made.code == 0, made.err

    def placed() -> dict[str, Any]:
        wl = _workload(kubectl, "a")
        return dict(wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"])

    assignment = eventually(placed)
    (piece,) = assignment["slices"]
    hosts = piece["valuesPerLevel"][0]["individual"]["roots"]
    assert assignment["levels"] == ["kubernetes.io/hostname"] and piece["domainCount"] == 4
    assert piece["podCounts"] == {"universal": 1} and len({subblocks[h] for h in hosts}) == 1
    old = _workload(kubectl, "a", "v1beta1")["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert old == {"levels": ["kubernetes.io/hostname"], "domains": [{"values": [h], "count": 1} for h in hosts]}

    def refused() -> dict[str, Any]:
        wl = _workload(kubectl, "d")
        (reserved,) = [c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved"]
        assert reserved["reason"] == "TopologyPlacementFailed"
        return dict(reserved)

    assert eventually(refused)["message"].startswith(
        'couldn\'t assign flavors to pod set main: topology "gke-default" allows to fit only 4 out of 5 pod(s)')


def test_required_node_affinity_with_real_kubectl(kubectl: Any, flexq: Any) -> None:
    # The job's template leaves two hosts of the first sub-block out by name (matchFields on metadata.name, as
    # Kueue's per-node check reads the required node affinity): its four pods take the other sub-block.
    subblocks = _tas_pool(kubectl, flexq)
    out = sorted(h for h, sub in subblocks.items() if sub == "tas-pool-b0-s0")[:2]
    job = yaml.safe_load(_job("a", 4))
    job["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "NotIn", "values": [h]} for h in out]}]}}}
    made = kubectl("apply", "-f", "-", input=yaml.safe_dump(job))
    assert made.code == 0, made.err

    def placed() -> list[str]:
        wl = _workload(kubectl, "a", "v1beta1")
        assignment = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
        return [d["values"][0] for d in assignment["domains"]]

    hosts = eventually(placed)
    assert len(hosts) == 4 and {subblocks[h] for h in hosts} == {"tas-pool-b0-s1"}


# Kueue's site/static/examples/tas/sample-queues.yaml (v0.19) and sample-job-required.yaml, as they are written.
SAMPLE_QUEUES = """apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata:
  name: "default"
spec:
  levels:
  - nodeLabel: "cloud.provider.com/topology-block"
  - nodeLabel: "cloud.provider.com/topology-rack"
  - nodeLabel: "kubernetes.io/hostname"
---
kind: ResourceFlavor
apiVersion: kueue.x-k8s.io/v1beta2
metadata:
  name: "tas-flavor"
spec:
  nodeLabels:
    cloud.provider.com/node-group: "tas-group"
  topologyName: "default"
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: "tas-cluster-queue"
spec:
  namespaceSelector: {} # match all.
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: "tas-flavor"
      resources:
      - name: "cpu"
        nominalQuota: 100
      - name: "memory"
        nominalQuota: 100Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: "default"
  name: "tas-user-queue"
spec:
  clusterQueue: "tas-cluster-queue"
"""
SAMPLE_JOB_REQUIRED = """apiVersion: batch/v1
kind: Job
metadata:
  generateName: tas-sample-required
  labels:
    kueue.x-k8s.io/queue-name: tas-user-queue
spec:
  parallelism: 10
  completions: 10
  completionMode: Indexed
  template:
    metadata:
      annotations:
        kueue.x-k8s.io/podset-required-topology: "cloud.provider.com/topology-rack"
    spec:
      containers:
      - name: dummy-job
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: ["pause"]
        resources:
          requests:
            cpu: "1"
            memory: "200Mi"
      restartPolicy: Never
"""


def test_kueue_tas_examples_with_real_kubectl(kubectl: Any) -> None:
    """Kueue's TAS example queues apply whole; its required-topology job, with no node of the flavor's group yet,
    waits with TopologyPlacementFailed, as Kueue's does on a cluster without such nodes."""
    applied = kubectl("apply", "-f", "-", input=SAMPLE_QUEUES)
    assert applied.code == 0, applied.err
    assert applied.out.splitlines() == ["topology.kueue.x-k8s.io/default created",
                                        "resourceflavor.kueue.x-k8s.io/tas-flavor created",
                                        "clusterqueue.kueue.x-k8s.io/tas-cluster-queue created",
                                        "localqueue.kueue.x-k8s.io/tas-user-queue created"]
    made = kubectl("create", "-f", "-", input=SAMPLE_JOB_REQUIRED)
    assert made.code == 0, made.err

    def waiting() -> dict[str, Any]:
        listed = yaml.safe_load(kubectl("get", "workloads", "-o", "yaml").out)["items"]
        (wl,) = listed
        assert wl["spec"]["podSets"][0]["topologyRequest"] == {"required": "cloud.provider.com/topology-rack"}
        (reserved,) = [c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved"]
        assert reserved["reason"] == "TopologyPlacementFailed"
        return dict(reserved)

    assert eventually(waiting)["message"] == ("couldn't assign flavors to pod set main: no topology domains at "
                                              "level: cloud.provider.com/topology-rack")


def _hosts(wl: dict[str, Any]) -> list[str]:
    assignment = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    return list(assignment["slices"][0]["valuesPerLevel"][0]["individual"]["roots"])


def _admitted(kubectl: Any, job: str) -> dict[str, Any] | None:
    try:
        wl = _workload(kubectl, job)
    except ValueError:
        return None  # not made yet
    admitted = [c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] == "Admitted"]
    return wl if admitted and admitted[0]["status"] == "True" else None


@pytest.mark.parametrize("server", ["classical", "fair sharing"], indirect=True)
def test_a_higher_priority_job_preempts_to_free_a_sub_block_with_real_kubectl(kubectl: Any, flexq: Any) -> None:
    """The live half of tests/sim/test_topology_scenario.py's preemption: two low-priority jobs hold the two
    sub-blocks; an urgent one, whose quota fits, preempts the later of them and is placed on the hosts it freed; the
    evicted workload's status counts the eviction. The same under fair sharing."""
    for args in (("container", "clusters", "create", "tas-cluster", "--machine-type=n2-standard-16", "--num-nodes=1"),
                 ("container", "node-pools", "create", "tas-pool", "--cluster=tas-cluster",
                  "--machine-type=n2-standard-16", "--num-nodes=8")):
        made = flexq(*args)
        assert made.code == 0, made.err
    docs = list(yaml.safe_load_all((EXAMPLES / "tas-queue.yaml").read_text()))
    for doc in docs:
        if doc["kind"] == "ClusterQueue":
            doc["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    docs += [{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass", "metadata": {"name": name},
              "value": value} for name, value in (("low", 1), ("high", 100))]
    applied = kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    assert applied.code == 0, applied.err
    held: dict[str, list[str]] = {}
    for name, priority in (("low-a", "low"), ("low-b", "low"), ("urgent", "high")):
        job = yaml.safe_load(_job(name, 4))
        job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = priority
        job["spec"]["template"]["spec"]["containers"][0]["command"] = ["sleep", "600"]
        made = kubectl("apply", "-f", "-", input=yaml.safe_dump(job))
        assert made.code == 0, made.err
        held[name] = _hosts(eventually_value(lambda n=name: _admitted(kubectl, n), timeout=60))  # type: ignore[misc]
    assert held["urgent"] == held["low-b"] and set(held["low-a"]).isdisjoint(held["low-b"])
    evicted = _workload(kubectl, "low-b")["status"]
    assert evicted["schedulingStats"] == {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]}
    assert [c["reason"] for c in evicted["conditions"] if c["type"] == "Preempted"] == ["InClusterQueue"]
    assert _admitted(kubectl, "low-a") is not None, "the other sub-block's job runs on"


def _rayjob_admitted(kubectl: Any) -> dict[str, list[str]] | None:
    """The hosts of the RayJob's pod sets, by pod set, once its workload is admitted."""
    if _admitted(kubectl, "ray") is None:
        return None
    wl = _workload(kubectl, "ray", "v1beta1")  # its topology assignments by domain
    return {ps["name"]: [d["values"][0] for d in ps["topologyAssignment"]["domains"]]
            for ps in wl["status"]["admission"]["podSetAssignments"]}


def test_a_ray_head_grouped_with_its_workers_goes_to_their_sub_block_with_real_kubectl(
        kubectl: Any, flexq: Any) -> None:
    """The live half of tests/sim/test_topology_scenario.py's pod set group: job a holds three hosts of the first
    sub-block, the RayJob's workers fit only the second, and its head, their group's pod set of one pod, goes with
    them; the Workload's pod sets name the group (``topologyRequest.podSetGroupName``)."""
    _tas_pool(kubectl, flexq)
    made = kubectl("apply", "-f", "-", input=_job("a", 3))
    assert made.code == 0, made.err
    eventually_value(lambda: _admitted(kubectl, "a"), timeout=60)
    ray = (EXAMPLES / "rayjob-grouped.yaml").read_text().replace("${JOB_NAME}", "ray")
    made = kubectl("apply", "-f", "-", input=ray)
    assert made.code == 0, made.err
    hosts = eventually_value(lambda: _rayjob_admitted(kubectl), timeout=60)
    nodes = yaml.safe_load(kubectl("get", "nodes", "-l", "cloud.google.com/gke-nodepool=tas-pool", "-o", "yaml").out)
    subblocks = {n["metadata"]["name"]: n["metadata"]["labels"]["cloud.google.com/gce-topology-subblock"]
                 for n in nodes["items"]}
    held = {subblocks[d["values"][0]] for d in _workload(kubectl, "a", "v1beta1")["status"]["admission"][
        "podSetAssignments"][0]["topologyAssignment"]["domains"]}
    second = sorted(host for host, subblock in subblocks.items() if subblock not in held)[:2]
    assert len(held) == 1 and hosts == {"head": second[:1], "workers": second}
    wl = _workload(kubectl, "ray", "v1beta2")
    assert [ps["topologyRequest"] for ps in wl["spec"]["podSets"]] == [
        {"required": "cloud.google.com/gce-topology-subblock", "podSetGroupName": "ray"}] * 2


@pytest.mark.parametrize("server", ["dws"], indirect=True)
def test_topology_request_delayed_until_dws_provisions_with_real_kubectl(kubectl: Any, flexq: Any) -> None:
    """examples/tas/scenario-tas-dws.yaml's jobs a and c on the live server (tests/sim/test_topology_scenario.py runs
    the scenario): a is reserved with ``delayedTopologyRequest: Pending`` and no placement while its
    ProvisioningRequest waits; once provisioned, placed in one sub-block of its new nodes (``Ready``) and admitted. c's
    nodes hold no sub-block of five: it waits, PendingDelayedTopologyRequests, with SecondPassFailed events."""
    for args in (("container", "clusters", "create", "tas-cluster", "--machine-type=n2-standard-16", "--num-nodes=1"),
                 ("container", "node-pools", "create", "dws-pool", "--cluster=tas-cluster",
                  "--machine-type=n2-standard-16", "--enable-queued-provisioning", "--enable-autoscaling",
                  "--num-nodes=0", "--min-nodes=0", "--max-nodes=16")):
        made = flexq(*args)
        assert made.code == 0, made.err
    applied = kubectl("apply", "-f", str(EXAMPLES / "tas-dws-queue.yaml"))
    assert applied.code == 0, applied.err
    for name, pods in (("a", 4), ("c", 5)):
        made = kubectl("apply", "-f", "-", input=_job(name, pods))
        assert made.code == 0, made.err

    def reserved() -> dict[str, Any]:
        wl = _workload(kubectl, "a")
        (psa,) = wl["status"]["admission"]["podSetAssignments"]
        return dict(psa)

    pending = eventually(reserved)
    assert pending["delayedTopologyRequest"] == "Pending" and "topologyAssignment" not in pending

    def admitted() -> dict[str, Any]:
        wl = _workload(kubectl, "a")
        (cond,) = [c for c in wl["status"]["conditions"] if c["type"] == "Admitted"]
        assert cond["status"] == "True"
        return wl

    wl = eventually(admitted, timeout=60)
    (psa,) = wl["status"]["admission"]["podSetAssignments"]
    assert psa["delayedTopologyRequest"] == "Ready"
    nodes = yaml.safe_load(kubectl("get", "nodes", "-l", "cloud.google.com/gke-nodepool=dws-pool", "-o", "yaml").out)
    subblocks = {n["metadata"]["name"]: n["metadata"]["labels"]["cloud.google.com/gce-topology-subblock"]
                 for n in nodes["items"]}
    hosts = _hosts(wl)
    mine = {h: subblocks[h] for h in hosts}
    assert len(mine) == 4 and len(set(mine.values())) == 1, "placed in one sub-block of the nodes it brought"
    old = _workload(kubectl, "a", "v1beta1")["status"]["admission"]["podSetAssignments"][0]
    assert old["delayedTopologyRequest"] == "Ready" and len(old["topologyAssignment"]["domains"]) == 4

    def second_pass_failed() -> dict[str, Any]:
        # c's five nodes span two sub-blocks: it keeps its quota, waiting, and says why (Kueue's Warning event)
        wl = _workload(kubectl, "c")
        (cond,) = [c for c in wl["status"]["conditions"] if c["type"] == "Admitted"]
        assert cond["reason"] == "PendingDelayedTopologyRequests" and "allows to fit only 4 out of 5" in cond["message"]
        events = yaml.safe_load(kubectl("get", "events", "-o", "yaml").out)["items"]
        (event,) = {e["reason"]: e for e in events if e["reason"] == "SecondPassFailed"}.values()
        return dict(event)

    event = eventually(second_pass_failed, timeout=60)
    assert event["type"] == "Warning" and "allows to fit only 4 out of 5 pod(s)" in event["message"]
    assert _workload(kubectl, "c")["status"]["admission"]["podSetAssignments"][0]["delayedTopologyRequest"] == \
        "Pending"


def _v1beta1_hosts(kubectl: Any, job: str) -> list[str]:
    wl = _workload(kubectl, job, "v1beta1")
    return [d["values"][0] for d in wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["domains"]]


def test_a_deleted_node_is_replaced_in_the_sub_block_with_real_kubectl(kubectl: Any, flexq: Any) -> None:
    """The live half of tests/sim/test_tas_node_replacement.py (Kueue's TASFailedNodeReplacement): job a's three pods
    hold three hosts of a sub-block; one of them is deleted; its pod goes to the sub-block's fourth host, and the
    workload stays admitted with its topologyAssignment rewritten."""
    hosts, spare = _running_beside_a_spare(kubectl, _tas_pool(kubectl, flexq))
    deleted = kubectl("delete", "node", hosts[0])
    assert deleted.code == 0, deleted.err
    _moved_to_spare(kubectl, hosts, spare)
    assert _admitted(kubectl, "a") is not None, "admitted all along"
    events = yaml.safe_load(kubectl("get", "events", "-o", "yaml").out)["items"]
    (replaced,) = [e for e in events if e["reason"] == "NodeReplaced"]
    assert replaced["message"] == (f"node {hosts[0]} was deleted: its pods were placed on {spare} in the same topology "
                                   "domain")
    assert "schedulingStats" not in _workload(kubectl, "a")["status"], "no eviction"


def _pods_ready(status: dict[str, Any]) -> tuple[str, str]:
    (ready,) = [c for c in status.get("conditions") or [] if c["type"] == "PodsReady"]
    return ready["status"], ready["reason"]


@pytest.mark.parametrize("server", ["no fail fast"], indirect=True)
def test_without_fail_fast_a_workload_waits_for_a_free_host_with_real_kubectl(kubectl: Any, flexq: Any) -> None:
    """The live half of tests/sim/test_tas_node_replacement.py's TASFailedNodeReplacementFailFast off: job b holds the
    sub-block's fourth host when one of job a's hosts is deleted; a stays admitted, a SecondPassFailed Warning on
    it, and once b is deleted its pod goes to the host b left."""
    hosts, spare = _running_beside_a_spare(kubectl, _tas_pool(kubectl, flexq))
    job = yaml.safe_load(_job("b", 1))
    job["spec"]["template"]["spec"]["containers"][0]["command"] = ["sleep", "600"]
    assert kubectl("apply", "-f", "-", input=yaml.safe_dump(job)).code == 0
    eventually_value(lambda: _admitted(kubectl, "b"), timeout=60)
    assert _v1beta1_hosts(kubectl, "b") == [spare]
    deleted = kubectl("delete", "node", hosts[0])
    assert deleted.code == 0, deleted.err

    def waiting() -> None:
        events = yaml.safe_load(kubectl("get", "events", "-o", "yaml").out)["items"]
        assert any(e["reason"] == "SecondPassFailed" and e["message"] == "cannot find replacement assignment for "
                   f"unhealthy node: {hosts[0]}" for e in events)

    eventually(waiting)
    assert _admitted(kubectl, "a") is not None, "admitted all along"
    for version in ("", "v1beta1"):  # Kueue's status.unhealthyNodes, in both versions
        assert _workload(kubectl, "a", version)["status"]["unhealthyNodes"] == [{"name": hosts[0]}]
    assert kubectl("delete", "job", "b").code == 0
    _moved_to_spare(kubectl, hosts, spare)
    eventually(lambda: _is_not_in("unhealthyNodes", _workload(kubectl, "a")["status"]))
    events = yaml.safe_load(kubectl("get", "events", "-o", "yaml").out)["items"]
    (replaced,) = [e for e in events if e["reason"] == "NodeReplaced"]
    assert replaced["message"] == (f"node {hosts[0]} was deleted: its pods were placed on {spare} in the same topology "
                                   "domain")
    assert "schedulingStats" not in _workload(kubectl, "a")["status"], "no eviction"


@pytest.mark.parametrize("server", ["no fail fast"], indirect=True)
def test_without_fail_fast_a_node_ready_again_ends_the_wait_with_real_kubectl(kubectl: Any, flexq: Any) -> None:
    """The live half of tests/sim/test_tas_node_replacement.py's node back: job a's pods tolerate a NotReady node for
    2 s, job b holds the sub-block's fourth host; one of a's hosts goes NotReady, and a waits for a replacement, the
    host its unhealthy node (``status.unhealthyNodes``); the host Ready again, the wait ends there: a's pods stay
    where they were, unevicted, and its status names no unhealthy node."""
    tolerations = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                    "tolerationSeconds": 2}]
    hosts, spare = _running_beside_a_spare(kubectl, _tas_pool(kubectl, flexq), tolerations)
    job = yaml.safe_load(_job("b", 1))
    job["spec"]["template"]["spec"]["containers"][0]["command"] = ["sleep", "600"]
    assert kubectl("apply", "-f", "-", input=yaml.safe_dump(job)).code == 0
    eventually_value(lambda: _admitted(kubectl, "b"), timeout=60)
    assert _v1beta1_hosts(kubectl, "b") == [spare], "no host of the sub-block is free"
    patch = copy.deepcopy(NOT_READY)
    assert kubectl("patch", "node", hosts[0], "--subresource=status", "--type=merge", "-p",
                   yaml.safe_dump(patch)).code == 0

    def unhealthy() -> None:
        status = _workload(kubectl, "a")["status"]
        assert status.get("unhealthyNodes") == [{"name": hosts[0]}]
        # Its pods there are gone until bound again (nothing here runs a batch Job's pods to say otherwise).
        assert _pods_ready(status) == ("False", "WaitForRecovery")

    eventually(unhealthy)
    patch["status"]["conditions"][0].update(status="True", reason="KubeletReady", message="kubelet is ready")
    assert kubectl("patch", "node", hosts[0], "--subresource=status", "--type=merge", "-p",
                   yaml.safe_dump(patch)).code == 0
    eventually(lambda: _is_not_in("unhealthyNodes", _workload(kubectl, "a")["status"]))
    assert _pods_ready(_workload(kubectl, "a")["status"]) == ("True", "Recovered")
    assert _v1beta1_hosts(kubectl, "a") == hosts and _admitted(kubectl, "a") is not None
    assert "schedulingStats" not in _workload(kubectl, "a")["status"], "no eviction"


@pytest.mark.parametrize("server", ["repair"], indirect=True)
def test_a_job_evicted_with_its_slice_is_admitted_again_once_the_slice_is_ready_with_real_kubectl(
        kubectl: Any, flexq: Any) -> None:
    """The live half of tests/sim/test_tas_node_replacement.py's repaired slice: a job holding a 4x4 TPU slice's four
    hosts loses one (deleted); the slice goes whole and is recreated, booting 5 s; the job, evicted and pending for
    want of a sub-block, is admitted again once the new nodes are ready."""
    for args in (("container", "clusters", "create", "tpu-cluster", "--machine-type=n2-standard-16", "--num-nodes=1"),
                 ("container", "node-pools", "create", "tpu-pool", "--cluster=tpu-cluster",
                  "--machine-type=ct6e-standard-4t", "--tpu-topology=4x4", "--num-nodes=4")):
        made = flexq(*args)
        assert made.code == 0, made.err
    applied = kubectl("apply", "-f", "-", input=TPU_SLICE)
    assert applied.code == 0, applied.err
    eventually_value(lambda: _admitted(kubectl, "slice"), timeout=60)
    hosts = _v1beta1_hosts(kubectl, "slice")
    assert len(hosts) == 4
    deleted = kubectl("delete", "node", hosts[0])
    assert deleted.code == 0, deleted.err

    def evicted() -> None:
        assert "schedulingStats" in _workload(kubectl, "slice")["status"]

    eventually(evicted)
    eventually_value(lambda: _admitted(kubectl, "slice"), timeout=60)
    assert sorted(_v1beta1_hosts(kubectl, "slice")) == sorted(hosts), "the recreated slice, under its names"


def _tas_pool(kubectl: Any, flexq: Any) -> dict[str, str]:
    """examples/tas's eight hosts made and its queue applied: the hosts' sub-blocks, by host."""
    for args in (("container", "clusters", "create", "tas-cluster", "--machine-type=n2-standard-16", "--num-nodes=1"),
                 ("container", "node-pools", "create", "tas-pool", "--cluster=tas-cluster",
                  "--machine-type=n2-standard-16", "--num-nodes=8")):
        made = flexq(*args)
        assert made.code == 0, made.err
    assert kubectl("apply", "-f", str(EXAMPLES / "tas-queue.yaml")).code == 0

    def made() -> dict[str, str] | None:  # the pool's Node objects are written by the server's next step
        nodes = yaml.safe_load(kubectl("get", "nodes", "-l", "cloud.google.com/gke-nodepool=tas-pool", "-o",
                                       "yaml").out)["items"]
        return {n["metadata"]["name"]: n["metadata"]["labels"]["cloud.google.com/gce-topology-subblock"]
                for n in nodes} if len(nodes) == 8 else None

    return eventually_value(made, timeout=30, what="the pool's 8 nodes")


def test_a_noexecute_taint_moves_the_pods_to_the_sub_blocks_free_host_with_real_kubectl(kubectl: Any,
                                                                                         flexq: Any) -> None:
    """The live half of tests/sim/test_tas_node_health.py's NoExecute taint (Kueue's TASReplaceNodeOnNodeTaints):
    ``kubectl taint node`` on one of job a's three hosts evicts its pod there, which goes to the sub-block's fourth
    host; the workload stays admitted. The taint removed, the node shows none again."""
    subblocks = _tas_pool(kubectl, flexq)
    hosts, spare = _running_beside_a_spare(kubectl, subblocks)
    tainted = kubectl("taint", "node", hosts[0], "maintenance=now:NoExecute")
    assert tainted.code == 0, tainted.err
    _moved_to_spare(kubectl, hosts, spare)
    assert "schedulingStats" not in _workload(kubectl, "a")["status"], "no eviction"
    events = yaml.safe_load(kubectl("get", "events", "-o", "yaml").out)["items"]
    assert [e["message"] for e in events if e["reason"] == "NodeTainted"] == [
        f"node {hosts[0]} of pool tas-pool: taints +maintenance=now:NoExecute"]
    assert kubectl("taint", "node", hosts[0], "maintenance=now:NoExecute-").code == 0
    node = yaml.safe_load(kubectl("get", "node", hosts[0], "-o", "yaml").out)
    assert not node["spec"].get("taints")


NOT_READY = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                        "message": "PLEG is not healthy"}]}}


TOLERATED_KEYS = {"tainted": "maintenance", "NotReady": "node.kubernetes.io/not-ready",
                  "Unknown": "node.kubernetes.io/unreachable"}


@pytest.mark.parametrize("down", TOLERATED_KEYS)
def test_pods_tolerating_for_two_seconds_move_to_the_spare_host_then_with_real_kubectl(kubectl: Any, flexq: Any,
                                                                                      down: str) -> None:
    """The live half of tests/sim/test_tas_node_health.py's tolerationSeconds: job a's pods tolerate a NoExecute
    taint (``maintenance``; ``node.kubernetes.io/not-ready`` of a NotReady node; ``node.kubernetes.io/unreachable``
    of one whose Ready condition is Unknown) for 2 s; when one of its hosts gets the taint (``kubectl taint node``)
    or goes NotReady (its Ready condition patched False or Unknown), its pod there is evicted when the toleration
    runs out and goes to the sub-block's fourth host, the message naming the cause. (Tolerating the other of
    not-ready and unreachable would leave it there for Kubernetes' default 300 s.)"""
    tolerations = [{"key": TOLERATED_KEYS[down], "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2}]
    hosts, spare = _running_beside_a_spare(kubectl, _tas_pool(kubectl, flexq), tolerations)
    if down == "tainted":
        done = kubectl("taint", "node", hosts[0], "maintenance=now:NoExecute")
    else:
        patch = copy.deepcopy(NOT_READY)
        patch["status"]["conditions"][0]["status"] = "False" if down == "NotReady" else "Unknown"
        done = kubectl("patch", "node", hosts[0], "--subresource=status", "--type=merge", "-p", yaml.safe_dump(patch))
    assert done.code == 0, done.err
    _moved_to_spare(kubectl, hosts, spare)
    assert "schedulingStats" not in _workload(kubectl, "a")["status"], "no eviction"
    events = yaml.safe_load(kubectl("get", "events", "-o", "yaml").out)["items"]
    (replaced,) = [e for e in events if e["reason"] == "NodeReplaced"]
    cause = "was tainted maintenance=now:NoExecute, tolerated for 2s" if down == "tainted" else "was NotReady for 2s"
    assert replaced["message"] == (f"node {hosts[0]} {cause}: its pods were placed on {spare} in the same topology "
                                   "domain")


def test_a_notready_node_is_not_offered_to_a_new_job_with_real_kubectl(kubectl: Any, flexq: Any) -> None:
    """A node's Ready condition patched False (as the node lifecycle controller does) shows NotReady (and flexq top
    counts it not ready, not booting), and a job of four pods that must share a sub-block goes to the sub-block whose
    four hosts are all Ready; Ready again, the node shows Ready."""
    subblocks = _tas_pool(kubectl, flexq)
    down = sorted(subblocks)[0]
    patch = copy.deepcopy(NOT_READY)
    patched = kubectl("patch", "node", down, "--subresource=status", "--type=merge", "-p", yaml.safe_dump(patch))
    assert patched.code == 0, patched.err

    def not_ready() -> None:
        listed = kubectl("get", "node", down)
        assert listed.code == 0 and "NotReady" in listed.out, listed.out

    eventually(not_ready)

    def counted_not_ready() -> None:  # flexq top: nodes, ready, booting, not ready
        top = flexq("top", "--once")
        pool = next((line.split() for line in top.out.splitlines() if line.split()[:1] == ["tas-pool"]), [])
        assert pool[2:6] == ["8", "7", "0", "1"], top.out

    eventually(counted_not_ready)
    node = yaml.safe_load(kubectl("get", "node", down, "-o", "yaml").out)
    (ready,) = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert (ready["status"], ready["message"]) == ("False", "PLEG is not healthy"), "the condition as written"
    assert _lifecycle_taints(node) == [("node.kubernetes.io/not-ready", "NoSchedule", False),
                                       ("node.kubernetes.io/not-ready", "NoExecute", True)]
    assert kubectl("apply", "-f", "-", input=_job("b", 4)).code == 0
    eventually_value(lambda: _admitted(kubectl, "b"), timeout=60)
    hosts = _v1beta1_hosts(kubectl, "b")
    assert down not in hosts and len({subblocks[h] for h in hosts}) == 1
    assert subblocks[down] not in {subblocks[h] for h in hosts}
    patch["status"]["conditions"][0].update(status="True", reason="KubeletReady", message="kubelet is ready")
    assert kubectl("patch", "node", down, "--subresource=status", "--type=merge", "-p", yaml.safe_dump(patch)).code == 0
    eventually(lambda: _is(" Ready ", kubectl("get", "node", down).out))
    eventually_value(lambda: not yaml.safe_load(kubectl("get", "node", down, "-o", "yaml").out)["spec"].get("taints"))


def test_a_node_whose_kubelet_is_not_heard_from_shows_unknown_and_the_unreachable_taints_with_real_kubectl(
        kubectl: Any, flexq: Any) -> None:
    """The node lifecycle controller's view of a node: its Ready condition patched Unknown stays Unknown (not written
    back as False) and the node is tainted ``node.kubernetes.io/unreachable`` (NoSchedule, and NoExecute with the
    time it was added); False then, ``not-ready`` instead; True, no taint left, those it was given kept."""
    host = sorted(_tas_pool(kubectl, flexq))[0]
    assert kubectl("taint", "node", host, "maintenance=soon:NoSchedule").code == 0
    patch = copy.deepcopy(NOT_READY)

    def becomes(status: str, reason: str, taints: list[tuple[str, str, bool]]) -> None:
        patch["status"]["conditions"][0].update(status=status, reason=reason)
        done = kubectl("patch", "node", host, "--subresource=status", "--type=merge", "-p", yaml.safe_dump(patch))
        assert done.code == 0, done.err

        def shown() -> None:
            node = yaml.safe_load(kubectl("get", "node", host, "-o", "yaml").out)
            (ready,) = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
            assert ready["status"] == status and ready["reason"] == reason, ready
            given = [t for t in node["spec"].get("taints") or [] if not t["key"].startswith("node.kubernetes.io/")]
            assert given == [{"key": "maintenance", "value": "soon", "effect": "NoSchedule"}], node["spec"]
            assert _lifecycle_taints(node) == taints, node["spec"]

        eventually(shown)

    becomes("Unknown", "NodeStatusUnknown", [("node.kubernetes.io/unreachable", "NoSchedule", False),
                                             ("node.kubernetes.io/unreachable", "NoExecute", True)])
    becomes("False", "KubeletNotReady", [("node.kubernetes.io/not-ready", "NoSchedule", False),
                                         ("node.kubernetes.io/not-ready", "NoExecute", True)])
    becomes("True", "KubeletReady", [])
    assert " Ready " in kubectl("get", "node", host).out


def _lifecycle_taints(node: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """The node lifecycle controller's taints of a Node object: key, effect, and whether it has its timeAdded."""
    return [(t["key"], t["effect"], "timeAdded" in t) for t in node["spec"].get("taints") or []
            if t["key"].startswith("node.kubernetes.io/")]


def _is_not_in(key: str, where: dict[str, Any]) -> None:
    assert key not in where, where[key]


def _is(part: str, text: str) -> None:
    assert part in text, text


def test_multi_layer_slices_with_real_kubectl(kubectl: Any, flexq: Any) -> None:
    """Kueue's multi-layer slices: eight pods of 5 cpus (three fit a 16-cpu host) required in a block, in slices of
    four per sub-block, each in groups of two per host (``podset-slice-required-topology-constraints``). The
    Workload's topologyRequest carries the layers, and every host takes one group of two: four hosts of one
    sub-block, where slices of four alone would fill three hosts 3, 3 and 2."""
    subblocks = _tas_pool(kubectl, flexq)
    job = yaml.safe_load(_job("layers", 8))
    template = job["spec"]["template"]
    template["metadata"]["annotations"] = {
        "kueue.x-k8s.io/podset-required-topology": "cloud.google.com/gce-topology-block",
        "kueue.x-k8s.io/podset-slice-required-topology-constraints":
            '[{"topology": "cloud.google.com/gce-topology-subblock", "size": 4},'
            ' {"topology": "kubernetes.io/hostname", "size": 2}]'}
    template["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "5"
    applied = kubectl("apply", "-f", "-", input=yaml.safe_dump(job))
    assert applied.code == 0, applied.err
    wl = eventually_value(lambda: _admitted(kubectl, "layers"), timeout=60)
    assert wl["spec"]["podSets"][0]["topologyRequest"]["podsetSliceRequiredTopologyConstraints"] == [
        {"topology": "cloud.google.com/gce-topology-subblock", "size": 4},
        {"topology": "kubernetes.io/hostname", "size": 2}]
    domains = _workload(kubectl, "layers", "v1beta1")["status"]["admission"]["podSetAssignments"][0][
        "topologyAssignment"]["domains"]
    assert [d["count"] for d in domains] == [2, 2, 2, 2]
    assert len({subblocks[d["values"][0]] for d in domains}) == 1


def _running_beside_a_spare(kubectl: Any, subblocks: dict[str, str],
                            tolerations: list[dict[str, Any]] | None = None) -> tuple[list[str], str]:
    """Job "a" (three pods, running, with ``tolerations``) admitted on three hosts of a sub-block, and that
    sub-block's fourth host."""
    job = yaml.safe_load(_job("a", 3))
    job["spec"]["template"]["spec"]["containers"][0]["command"] = ["sleep", "600"]
    job["spec"]["template"]["spec"]["tolerations"] = tolerations or []
    assert kubectl("apply", "-f", "-", input=yaml.safe_dump(job)).code == 0
    eventually_value(lambda: _admitted(kubectl, "a"), timeout=60)
    hosts = _v1beta1_hosts(kubectl, "a")
    (subblock,) = {subblocks[h] for h in hosts}
    (spare,) = [h for h, s in subblocks.items() if s == subblock and h not in hosts]
    return hosts, spare


def _moved_to_spare(kubectl: Any, hosts: list[str], spare: str) -> None:
    """Wait until job "a"'s pod on the first of ``hosts`` is on ``spare``, the others where they were."""
    def moved() -> list[str]:
        now = _v1beta1_hosts(kubectl, "a")
        assert now == sorted([*hosts[1:], spare])
        return now

    eventually(moved)
