"""A flat cohort's usage kept apart from the quota tree (:class:`_Flat`), as the search that takes a cohort's victims
as a whole reads it: for random cohorts and changes, it reads as the tree does once the same changes are made there,
and the searches that use it choose the victims that a search through the tree chooses."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from flexq.scheduler import preemption
from flexq.scheduler.model import (
    Admission,
    ClusterQueueSpec,
    FlavorResource,
    PodSet,
    PodSetAssignment,
    PreemptionPolicy,
    Quota,
    ResourceGroup,
    Workload,
    WorkloadState,
)
from flexq.scheduler.preemption import CohortScan, Target, _Flat, find_targets
from flexq.scheduler.quota import QuotaTree

FRS: tuple[FlavorResource, ...] = (("f", "cpu"), ("f", "memory"))
QUEUES = ("a", "b", "c", "d", "e")


def _tree(rng: random.Random, policies: bool = False) -> tuple[dict[str, ClusterQueueSpec], QuotaTree]:
    """Queues right under one cohort, some lending only part of their quota, some with a borrowing limit."""
    specs = {}
    for name in QUEUES:
        quotas = {fr: Quota(rng.randrange(0, 8), rng.choice([None, None, 0, 3]), rng.choice([None, None, 0, 2, 5]))
                  for fr in FRS}
        extra = {"within_cluster_queue": rng.choice([PreemptionPolicy.NEVER, PreemptionPolicy.LOWER_PRIORITY]),
                 "reclaim_within_cohort": rng.choice([PreemptionPolicy.ANY, PreemptionPolicy.LOWER_PRIORITY])} \
            if policies else {}
        specs[name] = ClusterQueueSpec(name, "co", (ResourceGroup(("cpu", "memory"), ("f",), quotas),), **extra)
    return specs, QuotaTree(specs.values())


def _usage(rng: random.Random) -> dict[FlavorResource, int]:
    return {fr: rng.randrange(0, 4) for fr in rng.sample(FRS, rng.randrange(1, 3))}


def _reads(tree: QuotaTree | _Flat) -> list[int]:
    return [f(cq, fr) for cq in QUEUES for fr in FRS for f in (tree.available, tree.usage, tree.nominal)]


def test_a_flat_cohorts_usage_apart_reads_as_the_tree_with_the_same_changes() -> None:
    for seed in range(300):
        rng = random.Random(seed)
        _, tree = _tree(rng)
        for _ in range(rng.randrange(0, 12)):
            tree.add(rng.choice(QUEUES), _usage(rng))
        changed = copy.deepcopy(tree)  # the same changes made in the tree itself
        before = _reads(tree)
        flat = _Flat(tree)
        assert _reads(flat) == before
        if rng.random() < 0.5:  # some usage taken out from the start, as a segment's victims are
            apart = {cq: _usage(rng) for cq in rng.sample(QUEUES, rng.randrange(1, 4))}
            probe = _Flat(tree)
            probe.add_all(apart, -1)
            changed.add_all(apart, -1)
            flat = _Flat(tree, apart, probe.root_change())
            assert _reads(flat) == _reads(probe) == _reads(changed), seed
        for _ in range(rng.randrange(1, 10)):
            cq, usage = rng.choice(QUEUES), _usage(rng)
            if rng.random() < 0.5:
                flat.remove(cq, usage)
                changed.remove(cq, usage)
            else:
                sign = rng.choice([1, -1])
                flat.add_all({cq: usage}, sign)
                changed.add_all({cq: usage}, sign)
            assert _reads(flat) == _reads(changed), seed
        assert _reads(tree) == before  # the flat cohort apart changed nothing in the tree


def _holder(rng: random.Random, n: int, cq: str) -> Workload:
    usage = {fr: rng.randrange(1, 4) for fr in FRS}
    return Workload("ns", f"w{n}", "lq", cq, (PodSet("main", 1, {r: v for (_, r), v in usage.items()}),),
                    priority=rng.randrange(0, 3), created=float(n), uid=f"w{n}", state=WorkloadState.ADMITTED,
                    reserved_at=float(rng.randrange(0, 20)),
                    admission=Admission.of(cq, (PodSetAssignment("main", {"cpu": "f", "memory": "f"}, usage, 1),)))


def test_a_phases_preemptors_find_through_the_scan_what_they_find_through_the_tree(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each queue's preemptor, with a random request, gets from a search that reads the phase's cohort scan (and
    takes the cohort's victims as a whole, apart from the tree) the victims a search of its own finds."""
    apart: list[object] = []
    take_own = preemption._take_own

    def counted(tree: Any, *args: Any) -> list[Target]:
        apart.append(tree)
        return take_own(tree, *args)

    monkeypatch.setattr(preemption, "_take_own", counted)
    whole = 0
    for seed in range(600):
        rng = random.Random(seed)
        specs, tree = _tree(rng, policies=True)
        holders: dict[str, dict[str, Workload]] = {}
        for n in range(rng.randrange(4, 30)):
            wl = _holder(rng, n, rng.choice(QUEUES))
            assert wl.admission is not None
            holders.setdefault(wl.cluster_queue, {})[wl.key] = wl
            tree.add(wl.cluster_queue, wl.admission.usage())
        scan = CohortScan()
        before = {name: dict(node.usage) for name, node in tree.queues.items()}
        for name in [*QUEUES, *QUEUES]:
            requests = {fr: rng.randrange(0, 6) for fr in rng.sample(FRS, rng.randrange(1, 3))}
            incoming = Workload("ns", "in", name, name, (PodSet("main", 1, {"cpu": 1}),), priority=3, uid="in")
            alone = find_targets(incoming, specs[name], tree, holders, set(requests), requests)
            scanned = find_targets(incoming, specs[name], tree, holders, set(requests), requests, scan=scan)
            assert [(t.workload.key, t.variant) for t in scanned] == [(t.workload.key, t.variant) for t in alone], seed
            whole += any(isinstance(flat, _Flat) for flat in apart) and len(alone) > 1
            apart.clear()
        assert {name: dict(node.usage) for name, node in tree.queues.items()} == before
    assert whole > 100, whole  # the cohort's victims taken as a whole, apart from the tree, many times
