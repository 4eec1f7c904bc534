"""The scheduling model's small rules, each as a table: node-affinity operators, taints and tolerations, the
severity of pending reasons, admissions' totals and workloads' shapes."""

from __future__ import annotations

import pytest

from flexq.scheduler.model import (
    Admission,
    NodeSelectorTerm,
    PendingReason,
    PodSet,
    PodSetAssignment,
    PodSetUpdate,
    Requirement,
    Taint,
    Toleration,
    Workload,
    WorkloadState,
    most_severe,
)

LABELS = {"zone": "a", "gen": "5", "word": "five"}

# (operator, key, values, labels matched) — every operator told apart from every other on the same labels.
MATCHES = [
    ("In", "zone", ("a", "b"), True),
    ("In", "zone", ("b",), False),
    ("In", "missing", ("a",), False),
    ("In", "zone", (), False),
    ("NotIn", "zone", ("a", "b"), False),
    ("NotIn", "zone", ("b",), True),
    ("NotIn", "missing", ("a",), True),
    ("Exists", "zone", (), True),
    ("Exists", "missing", (), False),
    ("DoesNotExist", "zone", (), False),
    ("DoesNotExist", "missing", (), True),
    ("Gt", "gen", ("4",), True),
    ("Gt", "gen", ("5",), False),
    ("Gt", "gen", ("6",), False),
    ("Lt", "gen", ("6",), True),
    ("Lt", "gen", ("5",), False),
    ("Lt", "gen", ("4",), False),
    ("Gt", "gen", ("4", "9"), True),  # only the first value counts
    ("Lt", "gen", ("6", "1"), True),
    ("Gt", "missing", ("4",), False),
    ("Lt", "missing", ("4",), False),
    ("Gt", "gen", (), False),
    ("Lt", "gen", (), False),
    ("Gt", "word", ("4",), False),  # not a number: no match
    ("Lt", "word", ("4",), False),
    ("Gt", "gen", ("x",), False),
    ("Lt", "gen", ("x",), False),
    ("Unknown", "zone", ("a",), False),
    ("in", "zone", ("a",), False),  # operators are case-sensitive
]


@pytest.mark.parametrize(("operator", "key", "values", "want"), MATCHES)
def test_requirement_matches(operator: str, key: str, values: tuple[str, ...], want: bool) -> None:
    assert Requirement(key, operator, values).matches(LABELS) is want


# (toleration, taint, tolerated)
TOLERATIONS = [
    (Toleration("gpu", "Equal", "yes", "NoSchedule"), Taint("gpu", "yes", "NoSchedule"), True),
    (Toleration("gpu", "Equal", "no", "NoSchedule"), Taint("gpu", "yes", "NoSchedule"), False),
    (Toleration("tpu", "Equal", "yes", "NoSchedule"), Taint("gpu", "yes", "NoSchedule"), False),
    (Toleration("gpu", "Equal", "yes", "NoExecute"), Taint("gpu", "yes", "NoSchedule"), False),
    (Toleration("gpu", "Equal", "yes", ""), Taint("gpu", "yes", "NoExecute"), True),  # empty effect: all
    (Toleration("gpu", "Exists", "", "NoSchedule"), Taint("gpu", "anything", "NoSchedule"), True),
    (Toleration("tpu", "Exists", "", ""), Taint("gpu", "yes", "NoSchedule"), False),
    (Toleration("", "Exists", "", ""), Taint("gpu", "yes", "NoSchedule"), True),  # no key: every taint
    (Toleration("", "Exists", "", "NoExecute"), Taint("gpu", "yes", "NoSchedule"), False),
    (Toleration("", "Equal", "", ""), Taint("gpu", "yes", "NoSchedule"), False),
    (Toleration("", "Equal", "", ""), Taint("", "", "NoSchedule"), True),
    (Toleration(), Taint("gpu", "", "NoSchedule"), False),
]


@pytest.mark.parametrize(("toleration", "taint", "want"), TOLERATIONS)
def test_toleration_tolerates(toleration: Toleration, taint: Taint, want: bool) -> None:
    assert toleration.tolerates(taint) is want


Q, E, N = PendingReason.WAITING_FOR_QUOTA, PendingReason.EXCEEDS_MAX_QUOTA, PendingReason.NO_MATCHING_FLAVOR
P = PendingReason.WAITING_FOR_PREEMPTED_WORKLOADS
T = PendingReason.TOPOLOGY_PLACEMENT_FAILED


@pytest.mark.parametrize(("a", "b", "want"), [
    (None, None, None), (Q, None, Q), (None, Q, Q), (Q, E, E), (E, Q, E), (E, N, N), (N, E, N), (Q, N, N),
    (N, Q, N), (Q, Q, Q), (P, Q, Q), (Q, P, Q), (P, PendingReason.SUSPENDED, P), (T, Q, Q), (Q, T, Q), (T, P, T),
    (P, T, T),
])
def test_most_severe(a: PendingReason | None, b: PendingReason | None, want: PendingReason | None) -> None:
    assert most_severe(a, b) is want


def test_severity_orders_the_flavor_search_reasons() -> None:
    """Kueue's reasonSeverity: TopologyPlacementFailed < WaitingForQuota < ExceedsMaxQuota < NoMatchingFlavor."""
    assert {r: r.severity for r in PendingReason} == {
        T: 1, Q: 2, E: 3, N: 4, P: 0, PendingReason.PENDING_EVALUATION: 0, PendingReason.SUSPENDED: 0,
        PendingReason.MISCONFIGURED: 0}


def test_admission_totals_its_pod_sets() -> None:
    admission = Admission.of("cq", (
        PodSetAssignment("head", {"cpu": "cpu-flavor"}, {("cpu-flavor", "cpu"): 2000}, 1),
        PodSetAssignment("workers", {"cpu": "cpu-flavor", "tpu": "v6e"},
                         {("cpu-flavor", "cpu"): 8000, ("v6e", "tpu"): 16000}, 4),
    ))
    assert admission == Admission("cq", admission.podsets, {("cpu-flavor", "cpu"): 10000, ("v6e", "tpu"): 16000})
    assert admission.usage() == {("cpu-flavor", "cpu"): 10000, ("v6e", "tpu"): 16000}
    assert admission.flavors() == {"cpu-flavor", "v6e"}


def _workload(**kwargs: object) -> Workload:
    podsets = (PodSet("head", 1, {"cpu": 1000, "memory": 2000}, {"pool": "x"}),
               PodSet("workers", 2, {"tpu": 4000}))
    return Workload("ns", "w", "lq", "cq", podsets, **kwargs)  # type: ignore[arg-type]


def test_a_workload_is_known_by_namespace_and_name() -> None:
    assert _workload().key == "ns/w"


def test_allowed_flavors_of_a_variant() -> None:
    any_flavor = _workload()
    variant = _workload(allowed=(("head", frozenset({"cpu"})), ("workers", frozenset({"v6e", "v5e"}))))
    assert (any_flavor.allowed_for("head"), any_flavor.allowed_flavors()) == (None, frozenset())
    assert [variant.allowed_for(p) for p in ("head", "workers", "other")] == [
        frozenset({"cpu"}), frozenset({"v6e", "v5e"}), frozenset()]
    assert variant.allowed_flavors() == frozenset({"cpu", "v6e", "v5e"})


def test_shape_is_what_the_flavor_assigner_sees() -> None:
    assert _workload().shape() == (
        ("head", 1, (("cpu", 1000), ("memory", 2000)), (("pool", "x"),), (), (), None),
        ("workers", 2, (("tpu", 4000),), (), (), (), None),
    )
    assert _workload(priority=5, created=3.0).shape() == _workload().shape()


@pytest.mark.parametrize(("state", "holds"), [
    (WorkloadState.PENDING, False), (WorkloadState.QUOTA_RESERVED, True), (WorkloadState.ADMITTED, True),
    (WorkloadState.FINISHED, False), (WorkloadState.INACTIVE, False),
])
def test_holds_quota(state: WorkloadState, holds: bool) -> None:
    assert _workload(state=state).holds_quota is holds


@pytest.mark.parametrize(("created", "ordering", "want"), [(3.0, None, 3.0), (3.0, 7.0, 7.0), (3.0, 0.0, 0.0)])
def test_queue_time(created: float, ordering: float | None, want: float) -> None:
    assert _workload(created=created, ordering_time=ordering).queue_time == want


def test_pod_set_total() -> None:
    podset = PodSet("workers", 3, {"tpu": 4000})
    assert (podset.total("tpu"), podset.total("cpu")) == (12000, 0)


# A node-affinity term on node "node" labelled {"gen": "9223372036854775807"} (the largest 64-bit number):
# (its expressions, its fields, matched).
TERMS: dict[str, tuple[tuple[Requirement, ...], tuple[Requirement, ...], bool]] = {
    "Gt a 64-bit number": ((Requirement("gen", "Gt", ("5",)),), (), True),
    "Lt a number past 64 bits: not read": ((Requirement("gen", "Lt", ("9223372036854775808",)),), (), False),
    "the node's name In": ((), (Requirement("metadata.name", "In", ("node",)),), True),
    "the node's name NotIn": ((), (Requirement("metadata.name", "NotIn", ("other",)),), True),
    "the node's name NotIn, its own": ((), (Requirement("metadata.name", "NotIn", ("node",)),), False),
    "another field reads empty: In its name": ((), (Requirement("metadata.uid", "In", ("node",)),), False),
    "another field reads empty: NotIn empty": ((), (Requirement("metadata.uid", "NotIn", ("",)),), False),
    "a field of two values": ((), (Requirement("metadata.name", "In", ("node", "other")),), False),
    "nothing in it": ((), (), False),
}


@pytest.mark.parametrize("name", TERMS)
def test_a_node_selector_term(name: str) -> None:
    expressions, fields, want = TERMS[name]
    assert NodeSelectorTerm(expressions, fields).matches("node", {"gen": "9223372036854775807"}) is want


@pytest.mark.parametrize("what", ["annotations", "labels", "nodeSelector"])
def test_pod_set_updates_that_clash_name_what_and_the_key(what: str) -> None:
    field = {"annotations": "annotations", "labels": "labels", "nodeSelector": "node_selector"}[what]
    merged = PodSetUpdate(**{field: {"k": "1"}}).merged(PodSetUpdate(**{field: {"k": "2", "other": "3"}}))
    assert merged == (f"invalid admission check PodSetUpdate: conflict for {what}: conflict for key=k, value1=1, "
                      "value2=2")


def test_an_eviction_counted_without_its_cause_has_none() -> None:
    wl = Workload("ns", "w", "lq", "cq", ())
    wl.count_eviction("Preempted")
    wl.count_eviction("DeactivatedDueToMaximumExecutionTimeExceeded")
    assert (wl.evictions, wl.eviction_counts) == (2, {("Preempted", ""): 1,
                                                      ("Deactivated", "MaximumExecutionTimeExceeded"): 1})
