"""Kueue conformance: every case of conformance_cases.yaml, run through flexq's scheduler.

Each case builds flavors, cohorts, ClusterQueues and the workloads already holding quota, queues the
incoming workloads, runs the given number of scheduling cycles and compares the outcome with what
Kueue does in the same situation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from flexq.api import parse_kueue_config
from flexq.api.quantity import parse_quantity
from flexq.jobs import request_from_object
from flexq.scheduler.build import cluster_queue_spec, cohort_spec, flavor_spec, node_affinity, taint, topology_levels
from flexq.scheduler.events import EventKind
from flexq.scheduler.fair_usage import UsageLedger
from flexq.scheduler.model import (
    Admission,
    CheckState,
    NodeSelectorTerm,
    PodSet,
    PodSetAssignment,
    Requirement,
    Taint,
    Toleration,
    TopologyAssignment,
    Workload,
    WorkloadState,
)
from flexq.scheduler.scheduler import Config, Scheduler

CASES: list[dict[str, Any]] = yaml.safe_load((Path(__file__).parent / "conformance_cases.yaml").read_text())


def _milli(value: Any) -> int:
    return parse_quantity(value).milli()


def _cq(raw: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"namespaceSelector": {}}  # every namespace: the cases' workloads come from any
    spec.update({k: v for k, v in raw.items() if k not in ("name", "cohort", "admissionChecksStrategy")})
    if raw.get("cohort"):
        spec["cohortName"] = raw["cohort"]
    if raw.get("admissionChecksStrategy"):
        spec["admissionChecksStrategy"] = {"admissionChecks": raw["admissionChecksStrategy"]}
    return {"metadata": {"name": raw["name"]}, "spec": spec}


def _config(case: dict[str, Any]) -> Config:
    topologies = topology_levels({"metadata": {"name": t["name"]}, "spec": {"levels": [
        {"nodeLabel": level} for level in t["levels"]]}} for t in case.get("topologies", []))
    flavors = {f["name"]: flavor_spec({"metadata": {"name": f["name"]}, "spec": f}, topologies)
               for f in case.get("flavors", [])}
    queues = {q["name"]: cluster_queue_spec(_cq(q)) for q in case.get("clusterQueues", [])}
    cohorts = {c["name"]: cohort_spec({"metadata": {"name": c["name"]},
                                       "spec": {k: v for k, v in c.items() if k != "name"}})
               for c in case.get("cohorts", [])}
    weights = {("default", lq["name"]): float(parse_quantity(lq["weight"]).value)
               for lq in case.get("localQueues", []) if "weight" in lq}
    fair = case.get("fairSharing")
    gates = case.get("featureGates") or {}
    unknown = set(gates) - set(GATES)
    assert not unknown, f"{case['name']}: feature gates this test does not know how to set: {sorted(unknown)}"
    return Config(flavors, queues, cohorts, queue_weights=weights,
                  fair_sharing=tuple(fair["preemptionStrategies"]) if fair else None,
                  **{GATES[gate]: bool(on) for gate, on in gates.items()})


GATES = {"TASBalancedPlacement": "balanced_placement", "TASFailedNodeReplacement": "replace_failed_nodes",
         "TASReplaceNodeOnPodTermination": "replace_on_pod_termination",
         "TASReplaceNodeOnNodeTaints": "replace_on_taints",
         "TASReplaceNodeDueToNotReadyOverFixedTime": "not_ready_fixed_time",
         "TASRecomputeAssignmentWithinSchedulingCycle": "recompute_tas"}
"""Kueue's feature gates a case may set (its ``featureGates``) -> the scheduler's Config field of each; a gate not
here fails the case."""


def _ledger(case: dict[str, Any]) -> UsageLedger | None:
    """The case's ``admissionFairSharing`` read as Kueue's Configuration has it, with the LocalQueues' usage so far
    (their ``consumedResources``, last updated at the first cycle's moment)."""
    if "admissionFairSharing" not in case:
        return None
    config = parse_kueue_config(yaml.safe_dump({
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "integrations": {"frameworks": ["batch/job"]}, "admissionFairSharing": case["admissionFairSharing"]}), "case")
    assert config.admission_fair_sharing is not None
    ledger = UsageLedger(config.admission_fair_sharing)
    for lq in case.get("localQueues", []):
        consumed = {r: float(parse_quantity(q).value) for r, q in (lq.get("consumedResources") or {}).items()}
        ledger.seed(("default", lq["name"]), consumed, 1000.0)
    return ledger


def _tolerations(raw: list[dict[str, Any]] | None) -> tuple[Toleration, ...]:
    return tuple(Toleration(t.get("key", ""), t.get("operator", "Equal"), t.get("value", ""), t.get("effect", ""))
                 for t in raw or [])


@dataclass
class _Node:
    """A node of a case's ``nodes`` (topology-aware cases)."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]
    taints: tuple[Taint, ...] = ()
    pods: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    is_ready: bool = True

    def ready(self, now: float) -> bool:
        return self.is_ready


def _node(raw: dict[str, Any]) -> _Node:
    return _Node(raw["name"], {"kubernetes.io/hostname": raw["name"], **(raw.get("labels") or {})},
                 {r: _milli(q) for r, q in raw["allocatable"].items()},
                 tuple(taint(t) for t in raw.get("taints") or []),
                 {f"default/{k}": {r: _milli(q) for r, q in v.items()} for k, v in (raw.get("pods") or {}).items()},
                 bool(raw.get("ready", True)))


def _topology(raw: Any) -> TopologyAssignment | None:
    if raw is None:
        return None
    return TopologyAssignment(tuple(raw["levels"]), tuple((tuple(d["values"]), int(d["count"]))
                                                          for d in raw["domains"]))


def _holder(raw: dict[str, Any]) -> Workload:
    usage = {(flavor, res): _milli(q) for flavor, resources in raw["usage"].items() for res, q in resources.items()}
    flavors = {res: flavor for flavor, resources in raw["usage"].items() for res in resources}
    created = float(raw.get("createdAt", 0))
    count = int(raw.get("count", 1))
    podset = PodSet("main", count, {r: _milli(q) for r, q in (raw.get("podRequests") or {}).items()})
    wl = Workload("default", raw["name"], raw.get("localQueue", "lq"), raw["clusterQueue"], (podset,),
                  priority=int(raw.get("priority", 0)), created=created, uid=raw["name"],
                  state=WorkloadState.ADMITTED,
                  admission=Admission.of(raw["clusterQueue"], (PodSetAssignment(
                      "main", flavors, usage, count, _topology(raw.get("topologyAssignment"))),)),
                  reserved_at=float(raw.get("admittedAt", created)))
    wl.evicting = bool(raw.get("evicted", False))
    return wl


def _affinity(raw: dict[str, Any]) -> tuple[NodeSelectorTerm, ...]:
    """A pod set's ``affinity`` (terms of expressions), or its ``nodeAffinity`` as a pod template writes it, read as
    flexq reads a job's pod template."""
    if "nodeAffinity" in raw:
        return node_affinity({"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": raw["nodeAffinity"]}}})
    return tuple(NodeSelectorTerm(tuple(Requirement(e["key"], e["operator"], tuple(e.get("values") or ()))
                                        for e in term))
                 for term in raw.get("affinity") or [])


def _incoming(raw: dict[str, Any]) -> Workload:
    podsets = tuple(
        PodSet(p["name"], int(p.get("count", 1)), {r: _milli(q) for r, q in p.get("requests", {}).items()},
               dict(p.get("nodeSelector") or {}), _tolerations(p.get("tolerations")),
               _affinity(p),
               topology=request_from_object(p.get("topologyRequest")))
        for p in raw["podSets"])
    wl = Workload("default", raw["name"], raw.get("localQueue", "lq"), raw["clusterQueue"], podsets,
                  priority=int(raw.get("priority", 0)),
                  created=float(raw.get("createdAt", 0)), uid=raw["name"])
    wl.checks = {k: CheckState(v) for k, v in (raw.get("admissionChecks") or {}).items()}
    return wl


KNOWN = frozenset({"mode", "flavors", "borrowing", "admitted", "queue", "message", "pendingReason", "victims",
                   "victimReasons", "requiredChecks", "admittedCondition", "reasonContains", "topologyAssignment"})
"""Every expectation a case may give: each is compared, and a key not here fails the case."""


def _where(sched: Scheduler, wl: Workload) -> str:
    if wl.holds_quota:
        return "none"
    if sched.aside(wl):
        return "inadmissible"
    return "active"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case(case: dict[str, Any]) -> None:
    sched = Scheduler(_config(case))
    nodes = [_node(raw) for raw in case.get("nodes", [])]
    sched.nodes = lambda: nodes
    sched.use_fair_sharing(_ledger(case))
    for raw in case.get("admitted", []):
        sched.add(_holder(raw), 0.0)
    incoming = [_incoming(raw) for raw in case.get("incoming", [])]
    for wl in incoming:
        sched.add(wl, wl.created)
    events = []
    for n in range(int(case.get("cycles", 1))):
        cycle_events, _ = sched.cycle(1000.0 + n)
        events += cycle_events
    preempted = {e.workload: e for e in events if e.kind is EventKind.PREEMPTED}
    problems = []
    for name, want in (case.get("expect") or {}).items():
        unknown = set(want) - KNOWN
        assert not unknown, f"{name}: expectations this test does not know how to check: {sorted(unknown)}"
        wl = sched.held(f"default/{name}")
        assignment = sched.last_assignment.get(wl.key)
        got: dict[str, Any] = {}
        if "mode" in want:
            got["mode"] = {0: "NoFit", 1: "Preempt", 2: "Fit"}[int(assignment.mode)] if assignment else None
        if "flavors" in want:
            got["flavors"] = {p.name: dict(p.flavors) for p in assignment.podsets if p.flavors} if assignment else {}
        if "borrowing" in want:
            got["borrowing"] = bool(assignment and assignment.borrow > 0)
        if "admitted" in want:
            got["admitted"] = wl.holds_quota
        if "queue" in want:
            got["queue"] = _where(sched, wl)
        if "message" in want:
            got["message"] = wl.pending_reason
        if "pendingReason" in want:
            got["pendingReason"] = wl.pending.value if wl.pending is not None else None
        targets = sched.last_targets.get(wl.key, [])
        if "victims" in want:
            got["victims"] = sorted(t.workload.name for t in targets)
            want = {**want, "victims": sorted(want["victims"])}
            issued = {e.workload for e in preempted.values() if e.extra.get("preemptor") == wl.key}
            assert issued <= {t.workload.key for t in targets}
        if "victimReasons" in want:
            got["victimReasons"] = {t.workload.name: t.reason for t in targets}
        if "requiredChecks" in want:
            got["requiredChecks"] = sorted(wl.checks)
            want = {**want, "requiredChecks": sorted(want["requiredChecks"])}
        if "topologyAssignment" in want:
            got["topologyAssignment"] = {
                ps.name: {"levels": list(ps.topology.levels),
                          "domains": [{"values": list(v), "count": c} for v, c in ps.topology.domains]}
                for ps in (wl.admission.podsets if wl.admission else ()) if ps.topology is not None}
        if "admittedCondition" in want:
            got["admittedCondition"] = wl.state is WorkloadState.ADMITTED
        for fragment in want.get("reasonContains") or []:
            text = wl.pending_reason or (assignment.message() if assignment else "")
            if fragment not in text:
                problems.append(f"{name}: reason {text!r} lacks {fragment!r}")
        for key, value in got.items():
            if want[key] != value:
                problems.append(f"{name}.{key}: expected {want[key]!r}, got {value!r}")
    for cq, names in (case.get("line") or {}).items():
        got_line = [wl.name for wl in sched.in_line(cq) or []]
        if got_line != names:
            problems.append(f"line of {cq}: expected {names!r}, got {got_line!r}")
    assert not problems, "\n".join(problems)
