"""A pod set group's flavors, chosen as Kueue chooses them: the pod sets that name one ``podSetGroupName`` take one
flavor per resource group, for their summed requests, and share the flavors tried; through the scheduler, a group
whose leader alone would take another topology-aware flavor is placed with its workers on theirs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from flexq.scheduler.domains import HOSTNAME
from flexq.scheduler.flavorassigner import FlavorTry, assign_flavors, reusable
from flexq.scheduler.model import (
    ClusterQueueSpec,
    FlavorSpec,
    Granular,
    PendingReason,
    PodSet,
    Quota,
    ResourceGroup,
    Taint,
    Toleration,
    TopologyRequest,
    Workload,
    WorkloadState,
)
from flexq.scheduler.quota import QuotaTree
from tests.support import cluster_queue, scheduler

G = Granular
CPU = 1000
GPU = "example.com/gpu"
GROUPED = TopologyRequest(group="group1")


def _over(resource: str, flavor: str, request: int, capacity: int) -> str:
    return (f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests (0) + "
            f"current podset request ({request}) > maximum capacity ({capacity})")


def _cq(covered: tuple[str, ...], quotas: Mapping[str, Mapping[str, int]]) -> ClusterQueueSpec:
    group = ResourceGroup(covered, tuple(quotas),
                          {(f, r): Quota(n) for f, per in quotas.items() for r, n in per.items()})
    return ClusterQueueSpec("cq", None, (group,))


def _workload(worker: Mapping[str, int], leader: Mapping[str, int], grouped: bool) -> Workload:
    request = GROUPED if grouped else None
    return Workload("ns", "w", "lq", "cq", (PodSet("worker", 4, worker, topology=request),
                                            PodSet("leader", 1, leader, topology=request)))


def _summary(wl: Workload, cq: ClusterQueueSpec) -> dict[str, object]:
    flavors = {f: FlavorSpec(f) for g in cq.groups for f in g.flavors}
    a = assign_flavors(wl, cq, QuotaTree([cq]), flavors)
    return {"granular": a.granular, "reusable": reusable(a),
            "podsets": [(p.name, dict(p.flavors), p.granular, dict(p.usage), p.tried, p.no_fit) for p in a.podsets]}


_FIT_ONE = FlavorTry("one", G.NO_FIT, 0, (_over("cpu", "one", 9, 4),), (), PendingReason.EXCEEDS_MAX_QUOTA)
_NO_GPU = FlavorTry("one", G.NO_FIT, 0, (_over(GPU, "one", 4, 0),), (), PendingReason.EXCEEDS_MAX_QUOTA)
_TWO = FlavorTry("two", G.FIT, 0, (), (), None)
_NEITHER = (FlavorTry("one", G.NO_FIT, 0, (_over("cpu", "one", 5, 4),), (), PendingReason.EXCEEDS_MAX_QUOTA),
            FlavorTry("two", G.NO_FIT, 0, (_over(GPU, "two", 4, 0),), (), PendingReason.EXCEEDS_MAX_QUOTA))

# (name, covered resources, quotas (flavor -> resource -> whole units), worker's per-pod requests, leader's, grouped,
#  want)
CASES = [
    # Kueue: "multiple flavors, leader worker set, leader and workers request the same resources fits" (9 cpus in
    # all: one holds 4, so both take two).
    ("same resources", ("cpu",), {"one": {"cpu": 4}, "two": {"cpu": 9}}, {"cpu": 2 * CPU}, {"cpu": CPU}, True,
     {"granular": G.FIT, "reusable": False, "podsets": [
         ("worker", {"cpu": "two"}, G.FIT, {("two", "cpu"): 8 * CPU}, (_FIT_ONE, _TWO), None),
         ("leader", {"cpu": "two"}, G.FIT, {("two", "cpu"): CPU}, (_FIT_ONE, _TWO), None)]}),
    # Kueue: "multiple flavors, leader worker set, workers request GPU, leader does not request GPU, fits": the
    # leader takes the flavor its workers' GPUs need, though one has room for its cpu and memory.
    ("workers' GPU", ("cpu", "memory", GPU),
     {"one": {"cpu": 10, "memory": 10}, "two": {"cpu": 5, "memory": 5, GPU: 4}},
     {"cpu": CPU, "memory": CPU, GPU: CPU}, {"cpu": CPU, "memory": CPU}, True,
     {"granular": G.FIT, "reusable": False, "podsets": [
         ("worker", {"cpu": "two", "memory": "two", GPU: "two"}, G.FIT,
          {("two", "cpu"): 4 * CPU, ("two", "memory"): 4 * CPU, ("two", GPU): 4 * CPU}, (_NO_GPU, _TWO), None),
         ("leader", {"cpu": "two", "memory": "two"}, G.FIT,
          {("two", "cpu"): CPU, ("two", "memory"): CPU}, (_NO_GPU, _TWO), None)]}),
    # Kueue: "multiple flavors, leader worker set, workers request GPU, leader does not request GPU, does not fit,
    # without group it would fit": 5 cpus and 4 GPUs in all, one short of cpu, two of GPUs.
    ("grouped, fits neither", ("cpu", GPU), {"one": {"cpu": 4, GPU: 4}, "two": {"cpu": 5, GPU: 0}},
     {"cpu": CPU, GPU: CPU}, {"cpu": CPU}, True,
     {"granular": G.NO_FIT, "reusable": False, "podsets": [
         ("worker", {}, G.NO_FIT, {}, _NEITHER, PendingReason.EXCEEDS_MAX_QUOTA),
         ("leader", {}, G.NO_FIT, {}, _NEITHER, PendingReason.EXCEEDS_MAX_QUOTA)]}),
    # The same without the group: the workers fill one, the leader takes two.
    ("alone, each its own", ("cpu", GPU), {"one": {"cpu": 4, GPU: 4}, "two": {"cpu": 5, GPU: 0}},
     {"cpu": CPU, GPU: CPU}, {"cpu": CPU}, False,
     {"granular": G.FIT, "reusable": False, "podsets": [
         ("worker", {"cpu": "one", GPU: "one"}, G.FIT, {("one", "cpu"): 4 * CPU, ("one", GPU): 4 * CPU},
          (FlavorTry("one", G.FIT, 0, (), (), None),), None),
         ("leader", {"cpu": "two"}, G.FIT, {("two", "cpu"): CPU},
          (FlavorTry("one", G.NO_FIT, 0, (
              "insufficient quota for cpu in flavor one, previously considered podsets requests (4) + current "
              "podset request (1) > maximum capacity (4)",), (), PendingReason.EXCEEDS_MAX_QUOTA), _TWO), None)]}),
]


@pytest.mark.parametrize(("covered", "quotas", "worker", "leader", "grouped", "want"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_a_pod_set_group_takes_one_flavor_for_its_summed_requests(
        covered: tuple[str, ...], quotas: Mapping[str, Mapping[str, int]], worker: Mapping[str, int],
        leader: Mapping[str, int], grouped: bool, want: dict[str, object]) -> None:
    scaled = {f: {r: n * CPU for r, n in per.items()} for f, per in quotas.items()}
    got = _summary(_workload(worker, leader, grouped), _cq(covered, scaled))
    assert set(got) == set(want)
    for key, value in want.items():
        assert got[key] == value, key


def test_a_group_flavor_is_refused_when_it_cannot_take_one_of_its_pod_sets() -> None:
    """A taint the leader does not tolerate refuses the flavor for the whole group."""
    cq = _cq(("cpu",), {"tainted": {"cpu": 10 * CPU}, "plain": {"cpu": 10 * CPU}})
    flavors = {"tainted": FlavorSpec("tainted", {}, (Taint("gpu", "yes", "NoSchedule"),)),
               "plain": FlavorSpec("plain")}
    tolerant = (Toleration("gpu", "Equal", "yes", "NoSchedule"),)
    wl = Workload("ns", "w", "lq", "cq", (
        PodSet("worker", 2, {"cpu": CPU}, tolerations=tolerant, topology=GROUPED),
        PodSet("leader", 1, {"cpu": CPU}, topology=GROUPED)))
    a = assign_flavors(wl, cq, QuotaTree([cq]), flavors)
    assert [dict(p.flavors) for p in a.podsets] == [{"cpu": "plain"}, {"cpu": "plain"}]
    assert [t.reasons for t in a.podsets[0].tried] == [
        ("untolerated taint {gpu yes NoSchedule <nil>} in flavor tainted",), ()]


RACK = "cloud.com/topology-rack"
POOL = "pool"


@dataclass
class _Node:
    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int] = field(default_factory=lambda: {"cpu": 5 * CPU, "pods": 110_000})
    taints: tuple[Taint, ...] = ()
    pods: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def ready(self, now: float) -> bool:
        return True


# (leader's cpus, grouped, the leader's flavors and hosts)
PLACED = [
    ("grouped", 1, True, ({"cpu": "big"}, ("b1",))),
    ("alone", 1, False, ({"cpu": "small"}, ("s1",))),
    ("grouped, the leader asks nothing", 0, True, ({"cpu": "big"}, ("b1",))),
]


@pytest.mark.parametrize(("leader_cpus", "grouped", "leader"), [c[1:] for c in PLACED], ids=[c[0] for c in PLACED])
def test_a_group_is_placed_together_on_the_flavor_its_sum_takes(
        leader_cpus: int, grouped: bool, leader: tuple[dict[str, str], tuple[str, ...]]) -> None:
    """Flavor ``small`` has quota for 2 cpus, ``big`` for 50: alone, the 1-cpu leader takes ``small`` and is
    placed on its own nodes; grouped (9 cpus in all), both take ``big`` and the leader goes to its workers' rack.
    A leader that asks nothing keeps the group's topology-aware flavor (Kueue's ``resolvePodSetFlavors``)."""
    levels = (RACK, HOSTNAME)
    flavors = [FlavorSpec(f, {POOL: f}, topology="default", levels=levels) for f in ("small", "big")]
    s = scheduler(cluster_queue().flavor("small", cpu=2).flavor("big", cpu=50), flavors=flavors, instant_eviction=True)
    hosts = {"s1": ("small", "r0"), "b1": ("big", "r1"), "b2": ("big", "r1"), "b3": ("big", "r2")}
    nodes = [_Node(h, {POOL: pool, RACK: rack, HOSTNAME: h}) for h, (pool, rack) in hosts.items()]
    s.nodes = lambda: nodes
    request = TopologyRequest(RACK, required=True, group="lws" if grouped else "")
    wl = Workload("default", "lws", "lq", "cq", (PodSet("leader", 1, {"cpu": leader_cpus * CPU}, topology=request),
                                                PodSet("workers", 2, {"cpu": 4 * CPU}, topology=request)), uid="lws")
    s.add(wl, 0.0)
    s.schedule(0.0)
    assert wl.state is WorkloadState.ADMITTED and wl.admission is not None
    got = {ps.name: (dict(ps.flavors), tuple(values[-1] for values, _ in ps.topology.domains))
           for ps in wl.admission.podsets if ps.topology is not None}
    assert got == {"leader": leader, "workers": ({"cpu": "big"}, ("b1", "b2"))}
    want_usage = {("big", "cpu"): (8 + leader_cpus) * CPU} if grouped else \
        {("big", "cpu"): 8 * CPU, ("small", "cpu"): CPU}
    assert dict(wl.admission.usage()) == want_usage
