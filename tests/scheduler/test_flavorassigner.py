"""The flavor assigner's rules, as tables: which flavor is preferred, when the search stops, which flavors a
pod set's nodes could be on, how amounts are written, and what a whole assignment says."""

from __future__ import annotations

import pytest

from flexq.scheduler.flavorassigner import (
    Assignment,
    FlavorTry,
    PodSetResult,
    _preferred,
    _stops,
    assign_flavors,
    compatible,
    format_amount,
)
from flexq.scheduler.model import (
    ClusterQueueSpec,
    FlavorSpec,
    Fungibility,
    Granular,
    Mode,
    NodeSelectorTerm,
    PendingReason,
    PodSet,
    PreemptionPolicy,
    Quota,
    Requirement,
    ResourceGroup,
    Taint,
    Toleration,
    Workload,
)
from flexq.scheduler.quota import QuotaTree

G = Granular


def _try(granular: Granular, borrow: int = 0) -> FlavorTry:
    return FlavorTry("f", granular, borrow, ())


# (a, b, prefer preemption over borrowing, a strictly better than b)
PREFERRED = [
    (_try(G.NO_FIT), _try(G.NO_FIT), False, False),
    (_try(G.NO_FIT), _try(G.FIT), False, False),
    (_try(G.NO_CANDIDATES), _try(G.NO_FIT), False, True),
    (_try(G.NO_CANDIDATES), _try(G.PREEMPT), False, False),
    (_try(G.PREEMPT), _try(G.NO_CANDIDATES), False, True),
    (_try(G.PREEMPT), _try(G.NO_CANDIDATES, 0), True, True),
    (_try(G.FIT), _try(G.PREEMPT), False, True),
    (_try(G.PREEMPT), _try(G.FIT), False, False),
    (_try(G.RECLAIM), _try(G.PREEMPT), False, True),
    (_try(G.FIT, 2), _try(G.FIT, 1), False, False),
    (_try(G.FIT, 1), _try(G.FIT, 2), False, True),
    (_try(G.FIT, 1), _try(G.FIT, 1), False, False),
    (_try(G.FIT, 2), _try(G.PREEMPT, 0), False, True),  # borrowing over preemption by default
    (_try(G.FIT, 2), _try(G.PREEMPT, 0), True, False),  # preemption over borrowing when asked
    (_try(G.PREEMPT, 0), _try(G.FIT, 2), True, True),
    (_try(G.FIT, 1), _try(G.PREEMPT, 1), True, True),
    (_try(G.PREEMPT, 1), _try(G.FIT, 1), True, False),
    (_try(G.FIT, 1), _try(G.FIT, 1), True, False),
    (_try(G.NO_CANDIDATES), _try(G.NO_CANDIDATES), False, False),
]


@pytest.mark.parametrize(("a", "b", "prefer", "want"), PREFERRED)
def test_preferred(a: FlavorTry, b: FlavorTry, prefer: bool, want: bool) -> None:
    assert _preferred(a, b, prefer) is want


def _fungible(borrow: bool, preempt: bool) -> ClusterQueueSpec:
    return ClusterQueueSpec("cq", fungibility=Fungibility(stop_when_borrowing=borrow, stop_when_preempting=preempt))


# (attempt, stop when borrowing, stop when preempting, the search stops)
STOPS = [
    (_try(G.NO_FIT), True, True, False),
    (_try(G.NO_CANDIDATES), True, True, False),
    (_try(G.FIT), False, False, True),
    (_try(G.FIT, 1), True, False, True),
    (_try(G.FIT, 1), False, True, False),
    (_try(G.PREEMPT), False, False, False),
    (_try(G.PREEMPT), False, True, True),
    (_try(G.RECLAIM), False, True, True),
    (_try(G.RECLAIM), True, False, False),
    (_try(G.PREEMPT, 1), False, True, False),
    (_try(G.PREEMPT, 1), True, True, True),
]


@pytest.mark.parametrize(("attempt", "borrow", "preempt", "want"), STOPS)
def test_stops(attempt: FlavorTry, borrow: bool, preempt: bool, want: bool) -> None:
    assert _stops(attempt, _fungible(borrow, preempt)) is want


NOSCHED = Taint("gpu", "yes", "NoSchedule")
FLAVOR = FlavorSpec("f", {"zone": "a", "gen": "5"}, (NOSCHED, Taint("soft", "x", "PreferNoSchedule")))
TOLERATE = (Toleration("gpu", "Exists"),)



def T(*expressions: Requirement, fields: tuple[Requirement, ...] = ()) -> NodeSelectorTerm:
    """A required node affinity term."""
    return NodeSelectorTerm(expressions, fields)


ON_X1 = Requirement("metadata.name", "In", ("x1",))

# (pod set, compatible with FLAVOR)
COMPATIBLE = [
    (PodSet("p", 1, {}), False),  # its NoSchedule taint is not tolerated (PreferNoSchedule does not count)
    (PodSet("p", 1, {}, tolerations=TOLERATE), True),
    (PodSet("p", 1, {}, {"zone": "a"}, TOLERATE), True),
    (PodSet("p", 1, {}, {"zone": "b"}, TOLERATE), False),
    (PodSet("p", 1, {}, {"other": "b"}, TOLERATE), True),  # keys the flavor does not set are not checked
    (PodSet("p", 1, {}, {}, TOLERATE, (T(Requirement("gen", "Gt", ("4",))),)), True),
    (PodSet("p", 1, {}, {}, TOLERATE, (T(Requirement("gen", "Gt", ("5",))),)), False),
    (PodSet("p", 1, {}, {}, TOLERATE, (T(Requirement("gen", "Gt", ("5",))), T(Requirement("zone", "In", ("a",))))),
     True),  # terms are ORed
    (PodSet("p", 1, {}, {}, TOLERATE, (T(Requirement("gen", "Gt", ("4",)), Requirement("zone", "In", ("b",))),)),
     False),  # a term's expressions are ANDed
    (PodSet("p", 1, {}, {}, TOLERATE, (T(Requirement("gen", "Gt", ("5",))), T(Requirement("other", "In", ("x",))))),
     True),  # a term with nothing the flavor sets matches any node of it
    # Kueue's flavorSelector keeps only matchExpressions: matchFields (the node's name) say nothing of a flavor
    (PodSet("p", 1, {}, {}, TOLERATE, (T(fields=(ON_X1,)),)), True),
    (PodSet("p", 1, {}, {}, TOLERATE, (T(Requirement("zone", "In", ("b",)), fields=(ON_X1,)),)), False),
    (PodSet("p", 1, {}, {}, TOLERATE, (T(Requirement("zone", "NotIn", ("b",)), fields=(ON_X1,)),)), True),
]


@pytest.mark.parametrize(("podset", "want"), COMPATIBLE)
def test_compatible(podset: PodSet, want: bool) -> None:
    assert compatible(podset, FLAVOR) is want


def test_a_flavor_toleration_tolerates_its_own_taint() -> None:
    flavor = FlavorSpec("f", {}, (Taint("gpu", "yes", "NoExecute"),), (Toleration("gpu", "Equal", "yes"),))
    assert compatible(PodSet("p", 1, {}), flavor)
    assert not compatible(PodSet("p", 1, {}), FlavorSpec("f", {}, (Taint("gpu", "yes", "NoExecute"),)))


@pytest.mark.parametrize(("resource", "milli", "text"), [
    ("cpu", 0, "0"), ("cpu", 1500, "1500m"), ("cpu", -2000, "-2"), ("cpu", 2_000_000, "2k"),
    ("cpu", 7_000_000_000_000, "7G"), ("cpu", 1_001_000, "1001"), ("memory", 1536 * 2**20 * 1000, "1536Mi"),
    ("memory", 2**30 * 1000, "1Gi"), ("memory", 1000 * 1000, "1000"), ("ephemeral-storage", 2**40 * 1000, "1Ti"),
    ("hugepages-2Mi", 2**21 * 1000, "2Mi"), ("nvidia.com/gpu", 1024 * 1000, "1024"), ("memory", 500, "500m"),
    ("memory", -(2**20) * 1000, "-1Mi"), ("memory", 1536 * 2**20 * 1000 + 500, "1610612736500m"),
    ("hugepages-2Mi", 2500, "2500m"), ("cpu", -1_500_000, "-1500"), ("memory", -1536 * 2**20 * 1000, "-1536Mi"),
])
def test_format_amount(resource: str, milli: int, text: str) -> None:
    assert format_amount(resource, milli) == text


def _result(name: str, granular: Granular, usage: dict[tuple[str, str], int], borrow: int = 0,
            reasons: tuple[str, ...] = (), no_fit: PendingReason | None = None,
            preempt: frozenset[tuple[str, str]] = frozenset()) -> PodSetResult:
    return PodSetResult(name, 1, {}, granular, borrow, usage, (), reasons, preempt, no_fit)


def test_an_assignment_sums_its_pod_sets() -> None:
    a = Assignment((_result("head", G.FIT, {("x", "cpu"): 1}, borrow=1),
                    _result("workers", G.PREEMPT, {("x", "cpu"): 2, ("y", "tpu"): 4}, borrow=2, reasons=("b", "a"),
                            preempt=frozenset({("y", "tpu")}))))
    assert (a.granular, a.mode, a.borrow, a.usage(), a.preempt_resources(), a.no_fit) == (
        G.PREEMPT, Mode.PREEMPT, 2, {("x", "cpu"): 3, ("y", "tpu"): 4}, {("y", "tpu")}, None)
    assert a.message() == "couldn't assign flavors to pod set workers: a, b"


def test_an_incomplete_assignment_does_not_fit() -> None:
    a = Assignment((_result("head", G.NO_FIT, {}, reasons=("r",), no_fit=PendingReason.EXCEEDS_MAX_QUOTA),
                    _result("more", G.NO_FIT, {}, reasons=("s",))), complete=False)
    assert (a.granular, a.mode, a.borrow, a.no_fit) == (G.NO_FIT, Mode.NO_FIT, 0, PendingReason.NO_MATCHING_FLAVOR)
    assert a.message() == "couldn't assign flavors to pod set head: r; couldn't assign flavors to pod set more: s"
    empty = Assignment(())
    assert (empty.granular, empty.borrow, empty.message(), empty.no_fit) == (G.FIT, 0, "", None)
    assert Assignment((), complete=False).granular is G.NO_FIT


def _cq(quotas: dict[str, int], **kwargs: object) -> ClusterQueueSpec:
    group = ResourceGroup(("cpu",), tuple(quotas), {(f, "cpu"): Quota(n) for f, n in quotas.items()})
    return ClusterQueueSpec("cq", None, (group,), **kwargs)  # type: ignore[arg-type]


def _summary(a: Assignment) -> list[tuple[object, ...]]:
    return [(p.name, dict(p.flavors), p.granular, p.borrow, dict(p.usage), p.reasons, p.no_fit, p.preempt)
            for p in a.podsets]


ASSIGNMENTS = [
    ("first flavor fits", {"x": 4000, "y": 4000}, {}, 2000,
     [("main", {"cpu": "x"}, G.FIT, 0, {("x", "cpu"): 2000}, (), None, frozenset())]),
    ("second flavor fits", {"x": 1000, "y": 4000}, {}, 2000,
     [("main", {"cpu": "y"}, G.FIT, 0, {("y", "cpu"): 2000}, (), None, frozenset())]),
    ("waits: quota in use", {"x": 4000}, {"x": 3000}, 2000,
     [("main", {"cpu": "x"}, G.PREEMPT, 0, {("x", "cpu"): 2000},
       ("insufficient unused quota for cpu in flavor x, 1 more needed",), None, frozenset({("x", "cpu")}))]),
    ("more than it could ever hold", {"x": 1000}, {}, 2000,
     [("main", {}, G.NO_FIT, 0, {}, ("insufficient quota for cpu in flavor x, previously considered podsets "
                                     "requests (0) + current podset request (2) > maximum capacity (1)",),
       PendingReason.EXCEEDS_MAX_QUOTA, frozenset())]),
    ("exactly its quota", {"x": 2000}, {}, 2000,
     [("main", {"cpu": "x"}, G.FIT, 0, {("x", "cpu"): 2000}, (), None, frozenset())]),
]


@pytest.mark.parametrize(("quotas", "used", "cpu", "want"), [c[1:] for c in ASSIGNMENTS],
                         ids=[c[0] for c in ASSIGNMENTS])
def test_assign_flavors(quotas: dict[str, int], used: dict[str, int], cpu: int,
                        want: list[tuple[object, ...]]) -> None:
    cq = _cq(quotas, within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY)
    tree = QuotaTree([cq])
    for flavor, amount in used.items():
        tree.add("cq", {(flavor, "cpu"): amount})
    wl = Workload("ns", "w", "lq", "cq", (PodSet("main", 1, {"cpu": cpu}),))
    assert _summary(assign_flavors(wl, cq, tree, {f: FlavorSpec(f) for f in quotas})) == want


def _tried(quota: int) -> PodSetResult:
    cq = _cq({"gone": 4000, "out": 4000, "tainted": 4000, "elsewhere": 4000, "x": quota})
    flavors = {"out": FlavorSpec("out"), "tainted": FlavorSpec("tainted", {}, (Taint("gpu", "yes", "NoSchedule"),)),
               "elsewhere": FlavorSpec("elsewhere", {"zone": "b"}), "x": FlavorSpec("x", {"zone": "a"})}
    wl = Workload("ns", "w", "lq", "cq", (PodSet("main", 2, {"cpu": 1000}, {"zone": "a"}),))
    (result,) = assign_flavors(wl, cq, QuotaTree([cq]), flavors, None, {"out": "stocked out"}).podsets
    return result


REFUSED = (
    FlavorTry("gone", G.NO_FIT, 0, ("flavor gone not found",), (), PendingReason.NO_MATCHING_FLAVOR),
    FlavorTry("out", G.NO_FIT, 0, ("flavor out cannot deliver nodes: stocked out",), (),
              PendingReason.WAITING_FOR_QUOTA),
    FlavorTry("tainted", G.NO_FIT, 0, ("untolerated taint {gpu yes NoSchedule <nil>} in flavor tainted",), (),
              PendingReason.NO_MATCHING_FLAVOR),
    FlavorTry("elsewhere", G.NO_FIT, 0, ("flavor elsewhere doesn't match node affinity",), (),
              PendingReason.NO_MATCHING_FLAVOR),
)


def test_every_flavor_tried_is_told_whole_and_the_first_that_fits_is_taken() -> None:
    result = _tried(4000)
    assert (result.count, dict(result.flavors), result.tried) == (
        2, {"cpu": "x"}, (*REFUSED, FlavorTry("x", G.FIT, 0, (), (), None)))


def test_a_pod_set_no_flavor_takes_keeps_its_count_and_every_flavor_tried() -> None:
    result = _tried(1000)
    over = ("insufficient quota for cpu in flavor x, previously considered podsets requests (0) + current podset "
            "request (2) > maximum capacity (1)")
    assert (result.count, dict(result.flavors), result.granular, result.tried) == (
        2, {}, G.NO_FIT, (*REFUSED, FlavorTry("x", G.NO_FIT, 0, (over,), (), PendingReason.EXCEEDS_MAX_QUOTA)))
    assert result.no_fit is PendingReason.WAITING_FOR_QUOTA, "the least severe of the alternatives"


def test_each_pod_set_counts_what_the_pod_sets_before_it_took_of_a_flavor() -> None:
    # x holds 4 cpus. a (2) and b (1) take 3 of them; c's 2 would make 5: c goes to y.
    cq = _cq({"x": 4000, "y": 4000})
    wl = Workload("ns", "w", "lq", "cq", tuple(PodSet(name, 1, {"cpu": cpu}) for name, cpu in
                                             (("a", 2000), ("b", 1000), ("c", 2000))))
    a = assign_flavors(wl, cq, QuotaTree([cq]), {f: FlavorSpec(f) for f in ("x", "y")})
    assert [(p.name, dict(p.flavors)) for p in a.podsets] == [("a", {"cpu": "x"}), ("b", {"cpu": "x"}),
                                                               ("c", {"cpu": "y"})]
    assert a.usage() == {("x", "cpu"): 3000, ("y", "cpu"): 2000}


def test_a_pod_set_that_fits_no_group_waits_for_the_most_severe_of_the_groups_reasons() -> None:
    # The cpu group fits on big once small (1 cpu at most) could never hold 2. The gpu group's only flavor holds 1
    # gpu and could borrow 2 from the lender, which uses them: 2 would fit once the lender's are free. Kueue's
    # resolveNoFitReason: the most severe across groups of each group's least severe reason, so the workload is told
    # it exceeds a maximum, not that it waits for quota.
    cpu = ResourceGroup(("cpu",), ("small", "big"), {("small", "cpu"): Quota(1000), ("big", "cpu"): Quota(4000)})
    cq = ClusterQueueSpec("cq", "co", (cpu, ResourceGroup(("gpu",), ("g",), {("g", "gpu"): Quota(1000)})))
    lender = ClusterQueueSpec("lender", "co", (ResourceGroup(("gpu",), ("g",), {("g", "gpu"): Quota(2000)}),))
    tree = QuotaTree([cq, lender])
    tree.add("lender", {("g", "gpu"): 2000})
    wl = Workload("ns", "w", "lq", "cq", (PodSet("main", 1, {"cpu": 2000, "gpu": 2000}),))
    a = assign_flavors(wl, cq, tree, {f: FlavorSpec(f) for f in ("small", "big", "g")})
    assert (a.granular, a.no_fit) == (G.NO_FIT, PendingReason.EXCEEDS_MAX_QUOTA)
