"""An assignment that fitted, given again while it fits again: for random quota trees, usages and workloads, whether
:func:`fits_again` says so is whether :func:`assign_flavors` finds the very same assignment again."""

from __future__ import annotations

import random

from flexq.scheduler.flavorassigner import Assignment, assign_flavors, fits_again, reusable
from flexq.scheduler.model import (
    ClusterQueueSpec,
    CohortSpec,
    FlavorSpec,
    Fungibility,
    Granular,
    Quota,
    ResourceGroup,
    Taint,
    Workload,
)
from flexq.scheduler.quota import QuotaTree
from tests.support import cluster_queue, scheduler, workload

QUEUES = ("a", "b", "c")
FLAVORS = {"f1": FlavorSpec("f1"), "f2": FlavorSpec("f2"), "g": FlavorSpec("g"),
           "tainted": FlavorSpec("tainted", {}, (Taint("x", "y", "NoSchedule"),))}


def _group(rng: random.Random, covered: tuple[str, ...], flavors: tuple[str, ...]) -> ResourceGroup:
    quotas = {(f, r): Quota(rng.randrange(0, 9) * 1000, rng.choice([None, 0, 2000, 6000])) for f in flavors
              for r in covered}
    return ResourceGroup(covered, flavors, quotas)


def _setup(rng: random.Random) -> tuple[dict[str, ClusterQueueSpec], QuotaTree]:
    specs = {}
    for name in QUEUES:
        first = rng.sample(["f1", "f2", "tainted"], rng.randrange(1, 4))
        groups = (_group(rng, ("cpu", "memory"), tuple(first)), _group(rng, ("gpu",), ("g",)))
        fungibility = Fungibility(stop_when_borrowing=rng.random() < 0.5)
        cohort = "inner" if name != "c" else "top"
        specs[name] = ClusterQueueSpec(name, cohort, groups, fungibility=fungibility)
    cohorts = [CohortSpec("inner", "top", (_group(rng, ("cpu", "memory"), ("f1", "f2")),)), CohortSpec("top")]
    tree = QuotaTree(specs.values(), cohorts)
    _use(rng, tree, specs)
    return specs, tree


def _use(rng: random.Random, tree: QuotaTree, specs: dict[str, ClusterQueueSpec]) -> None:
    """Some usage added to (or taken from, where there is some) random queues' flavors."""
    for _ in range(rng.randrange(1, 4)):
        name = rng.choice(QUEUES)
        fr = (rng.choice(["f1", "f2", "g", "tainted"]), rng.choice(["cpu", "memory", "gpu"]))
        amount = rng.randrange(1, 4) * 1000
        if rng.random() < 0.4 and tree.usage(name, fr) >= amount:
            tree.remove(name, {fr: amount})
        else:
            tree.add(name, {fr: amount})


def _workload(rng: random.Random, cq: str) -> Workload:
    made = workload("w", on=cq)
    for i in range(rng.randrange(1, 3)):
        made.podset(f"p{i}", rng.randrange(0, 3),
                    **{r: rng.randrange(1, 3) for r in rng.sample(["cpu", "memory", "gpu"], rng.randrange(1, 4))})
    return made.build()


def _assign(wl: Workload, cq: ClusterQueueSpec, tree: QuotaTree) -> Assignment:
    return assign_flavors(wl, cq, tree, FLAVORS)


def test_an_assignment_that_fitted_fits_again_exactly_when_it_is_found_again() -> None:
    seen = {True: 0, False: 0}
    for seed in range(25):
        rng = random.Random(seed)
        for _ in range(30):
            specs, tree = _setup(rng)
            cq = specs[rng.choice(QUEUES)]
            wl = _workload(rng, cq.name)
            first = _assign(wl, cq, tree)
            if not reusable(first):
                continue
            assert fits_again(first, cq, tree)
            for _ in range(4):
                _use(rng, tree, specs)
                again = fits_again(first, cq, tree)
                assert again == (_assign(wl, cq, tree) == first), (seed, first)
                seen[again] += 1
    assert min(seen.values()) > 30, seen  # both answers, many times


def test_an_assignment_that_tried_another_flavor_first_is_not_reused() -> None:
    """A group that tried a flavor before the one it took (here one whose taint the pods do not tolerate) read more
    than whether that one fits: it is not given again."""
    cq = cluster_queue("a").flavor("tainted", cpu=4).flavor("f1", cpu=4).spec()
    first = _assign(workload("w", on="a").podset("p", 1, cpu=1).build(), cq, QuotaTree([cq]))
    assert [(t.flavor, t.granular.name) for ps in first.podsets for t in ps.tried] == [
        ("tainted", "NO_FIT"), ("f1", "FIT")]
    assert not reusable(first)


def test_a_workload_given_an_earlier_answer_again_has_it_as_its_last_assignment() -> None:
    # w1 and w2 are of one shape and fit: w2 is given w1's assignment again. big1 and big2 (3 cpus of a queue of 2)
    # are of one shape and find no way in: big2 is given big1's answer again. Either way the workload's last assignment
    # (what the controller writes in its status) is that answer.
    s = scheduler(cluster_queue("a").flavor("f1", cpu=2))
    made = [workload(name, cpu=cpu, on="a").created(float(n)).build()
            for n, (name, cpu) in enumerate((("w1", 1), ("w2", 1), ("big1", 3), ("big2", 3)))]
    for n, wl in enumerate(made):
        s.add(wl, float(n))
        s.cycle(float(n))
    w1, w2, big1, big2 = made
    assert w1.holds_quota and w2.holds_quota and not big1.holds_quota and not big2.holds_quota
    assert s.last_assignment[w2.key] == s.last_assignment[w1.key]
    assert [dict(p.flavors) for p in s.last_assignment[w2.key].podsets] == [{"cpu": "f1"}]
    assert s.last_assignment[big2.key] == s.last_assignment[big1.key]
    assert s.last_assignment[big2.key].granular is Granular.NO_FIT
