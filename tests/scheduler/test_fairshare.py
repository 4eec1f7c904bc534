"""Dominant resource shares as Kueue v0.19 computes them (pkg/cache/scheduler/fair_sharing_test.go's table, restated):
for each node, the share rounded up as Kueue writes it to ``status.fairSharing.weightedShare``, the dominant resource,
and whether the node borrows."""

from __future__ import annotations

from typing import Any

import pytest

from flexq.scheduler.build import cluster_queue_spec, cohort_spec
from flexq.scheduler.events import EventKind
from flexq.scheduler.fair_preemption import STRATEGIES
from flexq.scheduler.fairshare import NEGATIVE, Share, compare, share_of
from flexq.scheduler.model import PreemptionPolicy, Workload
from flexq.scheduler.quota import QuotaTree
from flexq.scheduler.scheduler import Scheduler
from tests.support import cluster_queue, scheduler, workload

MAX = 2**63 - 1


def _groups(quotas: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """{flavor: {resource: nominal, or (nominal, borrowingLimit)}} as resource groups (one per resource)."""
    by_resource: dict[str, list[dict[str, Any]]] = {}
    for flavor, resources in quotas.items():
        for name, quota in resources.items():
            nominal, limit = quota if isinstance(quota, tuple) else (quota, None)
            res = {"name": name, "nominalQuota": str(nominal)}
            if limit is not None:
                res["borrowingLimit"] = str(limit)
            by_resource.setdefault(name, []).append({"name": flavor, "resources": [res]})
    return [{"coveredResources": [r], "flavors": f} for r, f in by_resource.items()]


def _tree(case: dict[str, Any]) -> QuotaTree:
    queues = [cluster_queue_spec({"metadata": {"name": q["name"]}, "spec": {
        "cohortName": q["cohort"], "resourceGroups": _groups(q["quotas"]),
        **({"fairSharing": {"weight": q["weight"]}} if "weight" in q else {})}}) for q in case["queues"]]
    cohorts = [cohort_spec({"metadata": {"name": c["name"]}, "spec": {
        **({"parentName": c["parent"]} if "parent" in c else {}), "resourceGroups": _groups(c.get("quotas", {})),
        **({"fairSharing": {"weight": c["weight"]}} if "weight" in c else {})}}) for c in case.get("cohorts", [])]
    tree = QuotaTree(queues, cohorts)
    tree.add("cq", {(flavor, res): int(amount * 1000) for (flavor, res), amount in case["usage"].items()})
    return tree


LENDER_CPU_GPU = {"name": "lending-cq", "cohort": "test-cohort", "quotas": {"default": {"cpu": 8, "gpu": 5}}}
# name -> the tree, the usage of cq, and the shares expected: node -> (rounded share, dominant resource, borrowing)
CASES: dict[str, dict[str, Any]] = {
    "usage above nominal: (7-5)*1000/10 of gpu": {
        "queues": [{"name": "cq", "cohort": "test-cohort", "quotas": {"default": {"cpu": 2, "gpu": 5}}},
                   LENDER_CPU_GPU],
        "usage": {("default", "cpu"): 3, ("default", "gpu"): 7},
        "want": {"cq": (200, "gpu", True), "lending-cq": (0, "", False), "test-cohort": (0, "", False)}},
    "usage below nominal": {
        "queues": [{"name": "cq", "cohort": "test-cohort", "quotas": {"default": {"cpu": 2, "gpu": 5}}},
                   LENDER_CPU_GPU],
        "usage": {("default", "cpu"): 1, ("default", "gpu"): 2},
        "want": {"cq": (0, "", False), "lending-cq": (0, "", False), "test-cohort": (0, "", False)}},
    "multiple flavors: one resource over its flavors, spot within nominal": {
        "queues": [{"name": "cq", "cohort": "test-cohort", "quotas": {"on-demand": {"cpu": 20}, "spot": {"cpu": 80}}},
                   {"name": "lending-cq", "cohort": "test-cohort", "quotas": {"default": {"cpu": 100}}}],
        "usage": {("on-demand", "cpu"): 25, ("spot", "cpu"): 5},
        "want": {"cq": (25, "cpu", True), "lending-cq": (0, "", False)}},
    "weight 2 halves the share": {
        "queues": [{"name": "cq", "cohort": "test-cohort", "weight": "2", "quotas": {"default": {"gpu": 5}}},
                   {"name": "lending-cq", "cohort": "test-cohort", "quotas": {"default": {"gpu": 5}}}],
        "usage": {("default", "gpu"): 7},
        "want": {"cq": (100, "gpu", True)}},
    "weight 0.5 doubles it": {
        "queues": [{"name": "cq", "cohort": "test-cohort", "weight": "500m", "quotas": {"default": {"gpu": 5}}},
                   {"name": "lending-cq", "cohort": "test-cohort", "quotas": {"default": {"gpu": 5}}}],
        "usage": {("default", "gpu"): 7},
        "want": {"cq": (400, "gpu", True)}},
    "weight 0 while borrowing: infinite": {
        "queues": [{"name": "cq", "cohort": "test-cohort", "weight": "0", "quotas": {"default": {"gpu": 5}}},
                   {"name": "lending-cq", "cohort": "test-cohort", "quotas": {"default": {"gpu": 10}}}],
        "usage": {("default", "gpu"): 7},
        "want": {"cq": (MAX, "gpu", True), "lending-cq": (0, "", False)}},
    "a cohort has its own share, with its own weight": {
        "queues": [{"name": "cq", "cohort": "child-cohort", "quotas": {"default": {"gpu": 5}}}],
        "cohorts": [{"name": "child-cohort", "parent": "root", "weight": "2"},
                    {"name": "root", "quotas": {"default": {"gpu": 45}}}],
        "usage": {("default", "gpu"): 10},
        "want": {"cq": (100, "gpu", True), "child-cohort": (50, "gpu", True), "root": (0, "", False)}},
    "resources only the root cohort has": {
        "queues": [{"name": "cq", "cohort": "child-cohort", "quotas": {"default": {"gpu": 0}}}],
        "cohorts": [{"name": "child-cohort", "parent": "root", "weight": "2"},
                    {"name": "root", "quotas": {"default": {"gpu": 50}}}],
        "usage": {("default", "gpu"): 10},
        "want": {"cq": (200, "gpu", True), "child-cohort": (100, "gpu", True), "root": (0, "", False)}},
    "a cohort's borrowing limit bounds what its queues see as lendable": {
        "queues": [{"name": "cq", "cohort": "child-cohort", "quotas": {"default": {"gpu": 0}}}],
        "cohorts": [{"name": "child-cohort", "parent": "root", "quotas": {"default": {"gpu": (0, 10)}}},
                    {"name": "root", "quotas": {"default": {"gpu": 50}}}],
        "usage": {("default", "gpu"): 10},
        "want": {"cq": (1000, "gpu", True), "child-cohort": (200, "gpu", True), "root": (0, "", False)}},
    "two resources borrowed alike: the dominant one is the first by name": {
        "queues": [{"name": "cq", "cohort": "test-cohort", "quotas": {"default": {"gpu": 2, "cpu": 2}}},
                   {"name": "lending-cq", "cohort": "test-cohort", "quotas": {"default": {"gpu": 8, "cpu": 8}}}],
        "usage": {("default", "gpu"): 4, ("default", "cpu"): 4},
        "want": {"cq": (200, "cpu", True)}},
    "the same, the first by name first": {
        "queues": [{"name": "cq", "cohort": "test-cohort", "quotas": {"default": {"cpu": 2, "gpu": 2}}},
                   {"name": "lending-cq", "cohort": "test-cohort", "quotas": {"default": {"cpu": 8, "gpu": 8}}}],
        "usage": {("default", "cpu"): 4, ("default", "gpu"): 4},
        "want": {"cq": (200, "cpu", True)}},
    "a resource nobody could lend (held since its quota was cut) counts for nothing": {
        "queues": [{"name": "cq", "cohort": "test-cohort", "quotas": {"default": {"gpu": 0, "cpu": 2}}},
                   {"name": "lending-cq", "cohort": "test-cohort", "quotas": {"default": {"cpu": 8, "gpu": 0}}}],
        "usage": {("default", "gpu"): 1, ("default", "cpu"): 3},
        "want": {"cq": (100, "cpu", True)}},
    "only a resource nobody could lend borrowed: borrowing, with no dominant resource": {
        "queues": [{"name": "cq", "cohort": "test-cohort", "quotas": {"default": {"gpu": 0, "cpu": 2}}},
                   {"name": "lending-cq", "cohort": "test-cohort", "quotas": {"default": {"cpu": 8, "gpu": 0}}}],
        "usage": {("default", "gpu"): 1},
        "want": {"cq": (0, "", True)}},
    "usage at nominal, and none of a resource with no quota: not borrowing": {
        "queues": [{"name": "cq", "cohort": "test-cohort", "quotas": {"default": {"gpu": 0, "cpu": 2}}},
                   LENDER_CPU_GPU],
        "usage": {("default", "cpu"): 2},
        "want": {"cq": (0, "", False)}},
    "a thousandth over nominal is borrowing": {
        "queues": [{"name": "cq", "cohort": "test-cohort", "quotas": {"default": {"cpu": 2}}},
                   {"name": "lending-cq", "cohort": "test-cohort", "quotas": {"default": {"cpu": 998}}}],
        "usage": {("default", "cpu"): 2.001},
        "want": {"cq": (1, "cpu", True)}},
    "a resource borrowed in two flavors: summed": {
        "queues": [{"name": "cq", "cohort": "test-cohort", "quotas": {"on-demand": {"cpu": 20}, "spot": {"cpu": 10}}},
                   {"name": "lending-cq", "cohort": "test-cohort", "quotas": {"default": {"cpu": 50}}}],
        "usage": {("on-demand", "cpu"): 25, ("spot", "cpu"): 13},
        "want": {"cq": (100, "cpu", True)}},
    "two resources borrowed: the larger share dominates, whichever comes first": {
        "queues": [{"name": "cq", "cohort": "test-cohort", "quotas": {"default": {"cpu": 2, "gpu": 2}}},
                   {"name": "lending-cq", "cohort": "test-cohort", "quotas": {"default": {"cpu": 8, "gpu": 8}}}],
        "usage": {("default", "cpu"): 3, ("default", "gpu"): 5},
        "want": {"cq": (300, "gpu", True)}},
    "the same, the larger first": {
        "queues": [{"name": "cq", "cohort": "test-cohort", "quotas": {"default": {"gpu": 2, "cpu": 2}}},
                   {"name": "lending-cq", "cohort": "test-cohort", "quotas": {"default": {"gpu": 8, "cpu": 8}}}],
        "usage": {("default", "gpu"): 5, ("default", "cpu"): 3},
        "want": {"cq": (300, "gpu", True)}},
}


def test_a_share_names_the_flavors_and_resources_borrowed() -> None:
    tree = _tree(CASES["multiple flavors: one resource over its flavors, spot within nominal"])
    assert share_of(tree, tree.queues["cq"]) == Share(1.0, 25.0, "cpu", True, frozenset({("on-demand", "cpu")}))
    assert share_of(tree, tree.queues["lending-cq"]) == Share(1.0)
    assert share_of(tree, tree.cohorts["test-cohort"]) == Share(1.0)


@pytest.mark.parametrize("name", CASES)
def test_dominant_resource_share_as_kueue_computes_it(name: str) -> None:
    case = CASES[name]
    tree = _tree(case)
    nodes = {**tree.queues, **tree.cohorts}
    got = {}
    for node_name in case["want"]:
        share = share_of(tree, nodes[node_name])
        got[node_name] = (share.rounded, share.dominant, share.borrowing)
    assert got == case["want"]


def test_shares_compare_as_kueue_orders_them() -> None:
    zero = Share()
    low, high = Share(ratio=100.0, borrowing=True), Share(ratio=300.0, borrowing=True)
    heavy = Share(weight=3.0, ratio=600.0, borrowing=True)  # 200 weighted
    infinite, more_infinite = Share(0.0, 10.0, "", True), Share(0.0, 20.0, "", True)
    assert compare(NEGATIVE, zero) < 0 < compare(low, zero)
    assert compare(low, heavy) < 0 < compare(high, heavy)
    assert compare(high, infinite) < 0 < compare(infinite, high)
    assert compare(infinite, more_infinite) < 0 and compare(infinite, infinite) == 0
    assert Share(weight=0.0).weighted == 0.0, "weight 0 within nominal quota is a share of 0"


def _racing_cohort() -> Scheduler:
    """Two ClusterQueues in one cohort, each with 4 cpu of flavors f1 (preferred) and f2; flexq's racing on."""
    queues = (cluster_queue(name).flavor("f1", cpu=4).flavor("f2", cpu=4).cohort("all")
              .preempt(within=PreemptionPolicy.LOWER_PRIORITY, reclaim=PreemptionPolicy.ANY) for name in ("a", "b"))
    return scheduler(*queues, race=True, fair_sharing=STRATEGIES)


def _holder(s: Scheduler, name: str, flavor: str, cpus: int, at: float) -> Workload:
    wl = workload(name, cpu=cpus, on="a").namespace("default").uid(name).build()
    s.add(wl, at)
    s.schedule(at)
    assert wl.admission is not None and wl.admission.podsets[0].flavors["cpu"] == flavor, name
    return wl


def test_racing_variants_under_fair_sharing_preemption_one_variant_preempts_its_own_flavor_only() -> None:
    s = _racing_cohort()
    # a takes all 16 cpu of the cohort: 4 of its own and 4 borrowed from b on each flavor.
    held = [_holder(s, f"a{i}", "f1" if i < 4 else "f2", 2, float(i)) for i in range(8)]
    incoming = workload("b-job", cpu=2, on="b").namespace("default").uid("b-job").build()
    events = s.add(incoming, 10.0) + s.schedule(10.0)
    # b is within its nominal quota: the variant on f1 (the preferred flavor, head first) reclaims what a borrows
    # there, the most recently admitted first, as fair sharing does within nominal quota...
    preempted = [(e.workload, e.extra["preemptionReason"]) for e in events if e.kind is EventKind.PREEMPTED]
    assert preempted == [("default/a3", "InCohortReclamation")]
    # ...and keeps the head of b's queue while it waits: the f2 variant behind it preempts nobody.
    f2 = s.held(s.variants[incoming.key][1])
    assert f2.allowed_flavors() == {"f2"} and f2.key not in s.last_targets
    assert not any(wl.evicting for wl in held if wl.name != "a3")
    events = s.complete_eviction("default/a3", 11.0) + s.schedule(11.0)
    assert not [e for e in events if e.kind is EventKind.PREEMPTED]
    assert incoming.admission is not None and incoming.admission.podsets[0].flavors["cpu"] == "f1"
    assert all(wl.admission is not None for wl in held if wl.name != "a3"), "a's workloads on f2 are untouched"
