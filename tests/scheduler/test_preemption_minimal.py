"""The minimal set of victims: victims put back, latest first, where the request still fits without them.

The search reads the quota tree only where a bound of what is missing cannot tell (a victim of the queue's own
changes its own quota exactly; one that does not fit back leaves the tree as it was). These tests compare it with a
put-back that reads the tree at every step, and name the cases where the bounds must not decide alone."""

from __future__ import annotations

import random

import pytest

from flexq.scheduler.model import (
    Admission,
    ClusterQueueSpec,
    FlavorResource,
    PodSet,
    PodSetAssignment,
    Quota,
    ResourceGroup,
    Workload,
    WorkloadState,
)
from flexq.scheduler.preemption import Target, Variant, minimal
from flexq.scheduler.quota import QuotaTree

FR: FlavorResource = ("f", "cpu")


def _workload(name: str, cq: str, cpu: int) -> Workload:
    return Workload("ns", name, "lq", cq, (PodSet("main", 1, {"cpu": cpu}),), uid=name, state=WorkloadState.ADMITTED,
                    admission=Admission.of(cq, (PodSetAssignment("main", {"cpu": "f"}, {FR: cpu}, 1),)))


Limits = tuple[int, int | None] | tuple[int, int | None, int | None]
"""A queue's nominal quota, borrowing limit and (optionally) lending limit."""


def _tree(queues: dict[str, Limits]) -> QuotaTree:
    """Queues of one cohort: name -> (nominal, borrowing limit[, lending limit])."""
    return QuotaTree([ClusterQueueSpec(name, "co", (ResourceGroup(("cpu",), ("f",), {FR: Quota(*limits)}),))
                      for name, limits in queues.items()])


def _fits(tree: QuotaTree, cq: str, want: int, borrowing: bool) -> bool:
    return tree.available(cq, FR) >= want and (borrowing or tree.usage(cq, FR) + want <= tree.nominal(cq, FR))


def _reference(tree: QuotaTree, cq: str, want: int, removed: list[Workload], borrowing: bool) -> list[str]:
    """Kueue's fill back, reading the tree at every step (the victims are out of the tree when it is called)."""
    kept = list(removed)
    for i in range(len(kept) - 2, -1, -1):
        wl = kept[i]
        tree.add(wl.cluster_queue, {FR: wl.podsets[0].requests["cpu"]})
        if _fits(tree, cq, want, borrowing):
            kept.pop(i)
        else:
            tree.remove(wl.cluster_queue, {FR: wl.podsets[0].requests["cpu"]})
    for wl in kept:
        tree.add(wl.cluster_queue, {FR: wl.podsets[0].requests["cpu"]})
    return [wl.name for wl in kept]


def _minimal(tree: QuotaTree, cq: str, want: int, removed: list[Workload], borrowing: bool) -> list[str]:
    """The victims :func:`minimal` keeps, asked with and without a topology that places the request anywhere (both
    must agree); the trial holds the victims put back (only those kept are out of the tree)."""
    before = {name: dict(node.usage) for name, node in tree.queues.items()}
    got = []
    for topology in (None, lambda _: True):
        with tree.trial() as trial:
            for wl in removed:
                trial.remove(wl.cluster_queue, {FR: wl.podsets[0].requests["cpu"]})
            assert _fits(tree, cq, want, borrowing)
            targets = [Target(wl, Variant.WITHIN_CLUSTER_QUEUE if wl.cluster_queue == cq
                              else Variant.RECLAIM_WITHOUT_BORROWING) for wl in removed]
            kept = [t.workload for t in minimal(trial, tree, cq, {FR: want}, targets, borrowing, topology=topology)]
            out = {name: dict(usage) for name, usage in before.items()}
            for wl in kept:
                out[wl.cluster_queue][FR] -= wl.podsets[0].requests["cpu"]
            assert {name: dict(node.usage) for name, node in tree.queues.items()} == out
            got.append([wl.name for wl in kept])
    assert got[0] == got[1]
    return got[0]


def _compare(queues: dict[str, Limits], held: list[tuple[str, int]], victims: list[int], want: int,
             borrowing: bool) -> list[str]:
    tree = _tree(queues)
    workloads = [_workload(f"w{i}", cq, cpu) for i, (cq, cpu) in enumerate(held)]
    for wl in workloads:
        tree.add(wl.cluster_queue, {FR: wl.podsets[0].requests["cpu"]})
    before = {name: dict(node.usage) for name, node in tree.queues.items()}
    removed = [workloads[i] for i in victims]
    got = _minimal(tree, "a", want, removed, borrowing)
    assert {name: dict(node.usage) for name, node in tree.queues.items()} == before
    for wl in removed:
        tree.remove(wl.cluster_queue, {FR: wl.podsets[0].requests["cpu"]})
    assert got == _reference(tree, "a", want, removed, borrowing)
    return got


@pytest.mark.parametrize(("name", "queues", "held", "victims", "want", "borrowing", "expected"), [
    # Its own victim put back while it may borrow: its own quota does not count, the room decides.
    ("own victim back while borrowing", {"a": (2, None), "b": (6, None)}, [("a", 2), ("a", 2), ("b", 4)], [0, 1],
     2, True, ["w1"]),
    # Without borrowing, its own victim goes back where its own quota still has room for it.
    ("own victim back within its quota", {"a": (6, None), "b": (2, None)}, [("a", 1), ("a", 3), ("b", 4)], [0, 1],
     2, False, ["w1"]),
    # A victim that does not fit back leaves the tree as it was: a smaller one before it still goes back.
    ("smaller one back after a bigger one stays out", {"a": (6, None), "b": (0, None)},
     [("b", 1), ("b", 3), ("b", 4)], [0, 1, 2], 4, True, ["w1", "w2"]),
    # Its own victim that its own quota cannot take back stays out; the cohort's before it still go back.
    ("own victim stays out, the cohort's go back", {"a": (3, None), "b": (0, None), "c": (4, None)},
     [("b", 2), ("a", 2), ("a", 2)], [0, 1, 2], 2, False, ["w1", "w2"]),
    # A borrowing limit, not the cohort, bounds the room: the bound is not exact, the tree decides.
    ("a borrowing limit bounds the room", {"a": (2, 1), "b": (12, None)},
     [("b", 10), ("b", 1), ("b", 1), ("b", 1)], [1, 2, 3], 3, True, ["w1", "w3"]),
    # Its own victim goes back where its own quota has room for it (once: its usage counts once).
    ("own victim back into exactly its own quota", {"a": (4, None)}, [("a", 2), ("a", 2)], [0, 1], 2, False,
     ["w1"]),
    # Its own victim that its own quota cannot take back stays out, and its quota is as before: a smaller one of
    # its own before it still goes back.
    ("own victim stays out, a smaller own one goes back", {"a": (4, None), "b": (4, None)},
     [("a", 1), ("a", 3), ("a", 2)], [0, 1, 2], 3, False, ["w1", "w2"]),
    # Its own victim that the cohort has no room for stays out, its own quota as before: a smaller one of its own
    # before it still goes back.
    ("own victim stays out for want of room, a smaller own one goes back", {"a": (6, None), "b": (0, None)},
     [("b", 1), ("a", 1), ("a", 3), ("a", 1)], [1, 2, 3], 3, False, ["w2", "w3"]),
    # Where a victim of one queue did not fit back, one as large of a queue that passes all its usage to the cohort
    # does not either: all of a queue's quota lent, the others' victims stay out without asking the tree again.
    ("victims as large of queues that lend all stay out together", {"a": (0, None), "b": (2, None), "c": (2, None)},
     [("b", 2), ("c", 1), ("b", 1), ("c", 2), ("b", 1)], [0, 1, 2, 3, 4], 4, True, ["w0", "w1", "w2", "w3", "w4"]),
    # But a queue that keeps part of its quota (a lending limit) passes up only what it uses above that: a victim of
    # it goes back where one as large of another queue did not.
    ("a queue below its guaranteed quota takes its victim back", {"a": (0, None), "b": (4, None, 2),
                                                                 "c": (4, None, 2)},
     [("b", 2), ("b", 1), ("b", 1), ("c", 1)], [3, 1, 2], 4, True, ["w1", "w2"]),
    # Nor does its own victim that its borrowing limit keeps out keep out one as large of the cohort's.
    ("own victim kept out by its borrowing limit, the cohort's goes back", {"a": (2, 1), "b": (6, None)},
     [("a", 1), ("a", 2), ("b", 1), ("b", 4)], [2, 0, 1], 3, True, ["w0", "w1"]),
])
def test_put_back(name: str, queues: dict[str, Limits], held: list[tuple[str, int]],
                  victims: list[int], want: int, borrowing: bool, expected: list[str]) -> None:
    assert _compare(queues, held, victims, want, borrowing) == expected, name


@pytest.mark.parametrize("seed", range(40))
def test_put_back_agrees_with_reading_the_tree_every_step(seed: int) -> None:
    rng = random.Random(seed)
    queues: dict[str, Limits] = {name: (rng.randint(0, 6), rng.choice([None, None, rng.randint(0, 6)]),
                                        rng.choice([None, None, rng.randint(0, 6)])) for name in "abcd"}
    held = [(rng.choice("aabcd"), rng.choice([1, 1, 2, 3, 5])) for _ in range(rng.randint(2, 14))]
    borrowing = rng.random() < 0.5
    tree = _tree(queues)
    for cq, cpu in held:
        tree.add(cq, {FR: cpu})
    order = list(range(len(held)))
    rng.shuffle(order)
    want = rng.randint(1, 8)
    with tree.trial() as trial:  # Kueue's first step: victims taken out, in order, until the request fits
        victims = []
        for i in order:
            trial.remove(held[i][0], {FR: held[i][1]})
            victims.append(i)
            if _fits(tree, "a", want, borrowing):
                break
        else:
            victims = []
    if victims:
        _compare(queues, held, victims, want, borrowing)


GPU: FlavorResource = ("f", "gpu")


def test_a_victim_without_a_resource_another_did_not_fit_back_on_is_still_put_back() -> None:
    """Two resources: a victim that did not fit back for want of gpu keeps out no victim that holds no gpu (not "at
    least as large" there), and that one fits back."""
    quotas = {FR: Quota(4, None), GPU: Quota(2, None)}
    tree = QuotaTree([ClusterQueueSpec("a", "co", (ResourceGroup(("cpu", "gpu"), ("f",),
                                                                 {FR: Quota(0, None), GPU: Quota(0, None)}),)),
                      ClusterQueueSpec("b", "co", (ResourceGroup(("cpu", "gpu"), ("f",), quotas),))])

    def holder(name: str, usage: dict[FlavorResource, int]) -> Workload:
        requests = {fr[1]: n for fr, n in usage.items()}
        return Workload("ns", name, "lq", "b", (PodSet("main", 1, requests),), uid=name, state=WorkloadState.ADMITTED,
                        admission=Admission.of("b", (PodSetAssignment("main", dict.fromkeys(requests, "f"), usage,
                                                                       1),)))

    removed = [holder("cpu-only", {FR: 2}), holder("both", {FR: 1, GPU: 1}), holder("last", {FR: 1, GPU: 1})]
    for wl in removed:  # b's whole quota held
        tree.add("b", wl.admission.usage() if wl.admission is not None else {})
    with tree.trial() as trial:
        for wl in removed:
            trial.remove("b", wl.admission.usage() if wl.admission is not None else {})
        targets = [Target(wl, Variant.RECLAIM_WITHOUT_BORROWING) for wl in removed]
        kept = minimal(trial, tree, "a", {FR: 2, GPU: 2}, targets, True)
        assert [t.workload.name for t in kept] == ["both", "last"]
