"""From stored objects to the scheduler's configuration, as tables of whole objects: every field read, every
default, every spelling the API accepts."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from flexq.scheduler.build import (
    build_config,
    cluster_queue_spec,
    cohort_spec,
    flavor_spec,
    pod_set_update_objects,
    pod_set_updates,
    taint,
    toleration,
    toleration_object,
)
from flexq.scheduler.model import (
    ClusterQueueSpec,
    CohortSpec,
    ConcurrentPolicy,
    FlavorSpec,
    Fungibility,
    LabelSelector,
    PodSetUpdate,
    PreemptionPolicy,
    Quota,
    Requirement,
    ResourceGroup,
    Strategy,
    Taint,
    Toleration,
)
from flexq.scheduler.scheduler import Config

GROUP = {"coveredResources": ["cpu", "memory"], "flavors": [
    {"name": "a", "resources": [{"name": "cpu", "nominalQuota": "2", "borrowingLimit": "1", "lendingLimit": 0},
                                {"name": "memory", "nominalQuota": "1Gi"}]},
    {"name": "b", "resources": [{"name": "cpu", "nominalQuota": "500m", "borrowingLimit": None}]},
]}
GROUPS = (ResourceGroup(("cpu", "memory"), ("a", "b"), {
    ("a", "cpu"): Quota(2000, 1000, 0), ("a", "memory"): Quota(1024 ** 3 * 1000), ("b", "cpu"): Quota(500)}),)


def _cq(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "cq"}, "spec": spec}


CLUSTER_QUEUES = [
    ("defaults", {}, ClusterQueueSpec("cq")),
    ("no spec at all", None, ClusterQueueSpec("cq")),
    ("groups and cohort", {"cohortName": "co", "resourceGroups": [GROUP]}, ClusterQueueSpec("cq", "co", GROUPS)),
    ("cohort spelled as v1beta2", {"cohort": "co"}, ClusterQueueSpec("cq", "co")),
    ("empty cohort is none", {"cohortName": ""}, ClusterQueueSpec("cq", None)),
    ("strict fifo", {"queueingStrategy": "StrictFIFO"}, ClusterQueueSpec("cq", strategy=Strategy.STRICT_FIFO)),
    ("fungibility v1beta1", {"flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "Preempt"}},
     ClusterQueueSpec("cq", fungibility=Fungibility(False, True, False))),
    ("fungibility v1beta2", {"flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "MayStopSearch",
                                                   "preference": "PreemptionOverBorrowing"}},
     ClusterQueueSpec("cq", fungibility=Fungibility(True, True, True))),
    ("fungibility other preference", {"flavorFungibility": {"preference": "BorrowingOverPreemption"}},
     ClusterQueueSpec("cq", fungibility=Fungibility(True, False, False))),
    ("preemption", {"preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                                   "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 5}}},
     ClusterQueueSpec("cq", within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY,
                      reclaim_within_cohort=PreemptionPolicy.ANY, borrow_within_cohort=PreemptionPolicy.LOWER_PRIORITY,
                      borrow_within_cohort_threshold=5)),
    ("preemption nulls", {"preemption": {"withinClusterQueue": None, "borrowWithinCohort": None}},
     ClusterQueueSpec("cq")),
    ("checks", {"admissionChecks": ["x"], "admissionChecksStrategy": {"admissionChecks": [
        {"name": "y", "onFlavors": ["a"]}, {"name": "z", "onFlavors": []}, {"name": "w"}]}},
     ClusterQueueSpec("cq", checks=(("x", None), ("y", frozenset({"a"})), ("z", None), ("w", None)))),
    ("concurrent admission defaults", {"concurrentAdmissionPolicy": {}},
     ClusterQueueSpec("cq", concurrent=ConcurrentPolicy(migrate=True, last_acceptable=None))),
    ("concurrent admission retained", {"concurrentAdmissionPolicy": {"migration": {
        "mode": "RetainFirstAdmission", "constraints": {"lastAcceptableFlavorName": "b"}}}},
     ClusterQueueSpec("cq", concurrent=ConcurrentPolicy(migrate=False, last_acceptable="b"))),
    ("concurrent admission migrating", {"concurrentAdmissionPolicy": {"migration": {
        "mode": "TryPreferredFlavors", "constraints": {"lastAcceptableFlavorName": ""}}}},
     ClusterQueueSpec("cq", concurrent=ConcurrentPolicy(migrate=True, last_acceptable=None))),
    ("concurrent admission not a mapping", {"concurrentAdmissionPolicy": "yes"}, ClusterQueueSpec("cq")),
    ("groups with their lists left out", {"resourceGroups": [{}, {"coveredResources": ["tpu"],
                                                                  "flavors": [{"name": "v6e"}]}]},
     ClusterQueueSpec("cq", groups=(ResourceGroup((), (), {}), ResourceGroup(("tpu",), ("v6e",), {})))),
]


@pytest.mark.parametrize(("spec", "want"), [(c[1], c[2]) for c in CLUSTER_QUEUES], ids=[c[0] for c in CLUSTER_QUEUES])
def test_cluster_queue_spec(spec: dict[str, Any] | None, want: ClusterQueueSpec) -> None:
    got = cluster_queue_spec(_cq(spec) if spec is not None else {"metadata": {"name": "cq"}})
    assert got.namespace_selector is None, "no namespaceSelector selects no namespace, as Kueue reads it"
    assert dataclasses.replace(got, namespace_selector=LabelSelector()) == want


SELECTORS = [
    ("absent: nothing", None, None, {"kubernetes.io/metadata.name": "team-a"}, False),
    ("empty: everything", {}, LabelSelector(), {"kubernetes.io/metadata.name": "team-a"}, True),
    ("match labels", {"matchLabels": {"team": "a"}}, LabelSelector((("team", "a"),)), {"team": "a"}, True),
    ("match labels, other value", {"matchLabels": {"team": "a"}}, LabelSelector((("team", "a"),)), {"team": "b"},
     False),
    ("expression In", {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                             "values": ["team-a", "team-b"]}]},
     LabelSelector((), (Requirement("kubernetes.io/metadata.name", "In", ("team-a", "team-b")),)),
     {"kubernetes.io/metadata.name": "team-b"}, True),
    ("expression NotIn, label missing", {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]},
     LabelSelector((), (Requirement("team", "NotIn", ("a",)),)), {}, True),
    ("labels and expressions both", {"matchLabels": {"team": "a"}, "matchExpressions": [
        {"key": "tier", "operator": "Exists"}]},
     LabelSelector((("team", "a"),), (Requirement("tier", "Exists"),)), {"team": "a"}, False),
]


@pytest.mark.parametrize(("raw", "want", "labels", "admits"), [c[1:] for c in SELECTORS], ids=[c[0] for c in SELECTORS])
def test_namespace_selector(raw: dict[str, Any] | None, want: LabelSelector | None, labels: dict[str, str],
                            admits: bool) -> None:
    spec = cluster_queue_spec(_cq({} if raw is None else {"namespaceSelector": raw}))
    assert spec.namespace_selector == want
    assert spec.admits_namespace(labels) is admits


def test_namespaces_and_stopped_local_queues() -> None:
    config = build_config({
        "Namespace": [{"metadata": {"name": "team-a", "labels": {"team": "a"}}}],
        "LocalQueue": [{"metadata": {"name": "held", "namespace": "team-a"}, "spec": {"stopPolicy": "Hold"}},
                       {"metadata": {"name": "open", "namespace": "team-a"}, "spec": {"stopPolicy": "None"}},
                       {"metadata": {"name": "drained", "namespace": "x"}, "spec": {"stopPolicy": "HoldAndDrain"}}]})
    assert config.namespace_labels("team-a") == {"team": "a", "kubernetes.io/metadata.name": "team-a"}
    assert config.namespace_labels("unknown") == {"kubernetes.io/metadata.name": "unknown"}
    assert config.stopped_queues == {("team-a", "held"): "Hold", ("x", "drained"): "HoldAndDrain"}


def test_an_inactive_cluster_queue() -> None:
    assert cluster_queue_spec(_cq({"namespaceSelector": {}}), active=False) == ClusterQueueSpec("cq", active=False)


@pytest.mark.parametrize(("spec", "want"), [
    ({}, CohortSpec("co")),
    ({"parentName": "p", "resourceGroups": [GROUP]}, CohortSpec("co", "p", GROUPS)),
    ({"parent": "p"}, CohortSpec("co", "p")),
    ({"parentName": ""}, CohortSpec("co", None)),
])
def test_cohort_spec(spec: dict[str, Any], want: CohortSpec) -> None:
    assert cohort_spec({"metadata": {"name": "co"}, "spec": spec}) == want


@pytest.mark.parametrize(("spec", "want"), [
    ({}, FlavorSpec("f")),
    ({"nodeLabels": {"pool": "p"}, "nodeTaints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
      "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]},
     FlavorSpec("f", {"pool": "p"}, (Taint("k", "v", "NoSchedule"),), (Toleration("k", "Exists", "", "NoSchedule"),))),
])
def test_flavor_spec(spec: dict[str, Any], want: FlavorSpec) -> None:
    assert flavor_spec({"metadata": {"name": "f"}, "spec": spec}) == want


@pytest.mark.parametrize(("raw", "want"), [
    ({}, Taint("", "", "")), ({"key": "k", "value": None, "effect": "NoExecute"}, Taint("k", "", "NoExecute")),
])
def test_taint(raw: dict[str, Any], want: Taint) -> None:
    assert taint(raw) == want


@pytest.mark.parametrize(("raw", "want"), [
    ({}, Toleration("", "Equal", "", "")),
    ({"key": None, "operator": None, "value": None, "effect": None}, Toleration("", "Equal", "", "")),
    ({"key": "k", "operator": "Exists", "value": "v", "effect": "NoSchedule"},
     Toleration("k", "Exists", "v", "NoSchedule")),
])
def test_toleration(raw: dict[str, Any], want: Toleration) -> None:
    assert toleration(raw) == want


@pytest.mark.parametrize(("given", "want"), [
    (Toleration(), {"operator": "Equal"}),
    (Toleration("k", "Exists"), {"key": "k", "operator": "Exists"}),
    (Toleration("k", "Equal", "v", "NoExecute", 0), {"key": "k", "operator": "Equal", "value": "v",
                                                    "effect": "NoExecute", "tolerationSeconds": 0}),
    (Toleration("", "Exists", "", "NoSchedule", 30), {"operator": "Exists", "effect": "NoSchedule",
                                                     "tolerationSeconds": 30}),
])
def test_a_toleration_as_a_pod_spec_lists_it(given: Toleration, want: dict[str, Any]) -> None:
    assert toleration_object(given) == want
    assert toleration(want) == given, "read back as it was"


def test_pod_set_updates_as_a_workload_s_status_lists_them() -> None:
    updates = {
        "workers": PodSetUpdate({"a": "1"}, {"l": "2"}, {"pool": "dws"},
                                (Toleration("k", "Exists", "", "NoSchedule"),)),
        "head": PodSetUpdate(),
        "driver": PodSetUpdate(labels={"only": "labels"}),
    }
    objects = pod_set_update_objects(updates)
    assert objects == [
        {"name": "driver", "labels": {"only": "labels"}},
        {"name": "head"},
        {"name": "workers", "labels": {"l": "2"}, "annotations": {"a": "1"}, "nodeSelector": {"pool": "dws"},
         "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]},
    ]
    assert pod_set_updates(objects) == updates, "read back as they were"


@pytest.mark.parametrize(("mine", "more", "tolerations"), [
    ((Toleration("k", "Equal", "v", "NoSchedule"),), (Toleration("k", "", "v", "NoSchedule"),), 1),
    ((Toleration("k", "Equal", "v", "NoSchedule"),), (Toleration("k", "Equal", "v", "NoSchedule", 60),), 1),
    ((Toleration("k", "Equal", "v", "NoSchedule"),), (Toleration("j", "Equal", "v", "NoSchedule"),), 2),
    ((Toleration("k", "Equal", "v", "NoSchedule"),), (Toleration("k", "Exists", "v", "NoSchedule"),), 2),
    ((Toleration("k", "Equal", "v", "NoSchedule"),), (Toleration("k", "Equal", "w", "NoSchedule"),), 2),
    ((Toleration("k", "Equal", "v", "NoSchedule"),), (Toleration("k", "Equal", "v", "NoExecute"),), 2),
    ((Toleration("k", "", "v"),), (Toleration("k", "Equal", "v"),), 1),
])
def test_merged_pod_set_updates_hold_each_toleration_once(mine: tuple[Toleration, ...],
                                                          more: tuple[Toleration, ...], tolerations: int) -> None:
    """Kueue's MatchToleration: the same key, operator (empty is Equal), value and effect; the seconds are not
    compared."""
    merged = PodSetUpdate(tolerations=mine).merged(PodSetUpdate(tolerations=more))
    assert isinstance(merged, PodSetUpdate)
    assert merged.tolerations == (mine + more)[:tolerations]
    assert mine[0].same(more[0]) is (tolerations == 1) and more[0].same(mine[0]) is (tolerations == 1)


def test_build_config() -> None:
    objects: dict[str, list[dict[str, Any]]] = {
        "ResourceFlavor": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}, "spec": {}}],
        "ProvisioningRequestConfig": [{"metadata": {"name": "prc"}}],
        "AdmissionCheck": [
            {"metadata": {"name": "prov"}, "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                                                    "parameters": {"apiGroup": "kueue.x-k8s.io",
                                                                   "kind": "ProvisioningRequestConfig", "name": "prc"}},
             "retryDelayMinutes": 99},
            {"metadata": {"name": "manual"}, "spec": {"retryDelayMinutes": 2}},
            {"metadata": {"name": "broken"}, "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                                                      "parameters": {"apiGroup": "kueue.x-k8s.io",
                                                                     "kind": "ProvisioningRequestConfig",
                                                                     "name": "gone"},
                                                      "retryDelayMinutes": 0.5}},
        ],
        "ClusterQueue": [
            _cq({"cohortName": "co", "resourceGroups": [GROUP], "admissionChecks": ["prov", "manual"],
                 "namespaceSelector": {}}),
            {"metadata": {"name": "bad"}, "spec": {"admissionChecks": ["broken"], "namespaceSelector": {}}},
        ],
        "Cohort": [{"metadata": {"name": "co"}, "spec": {"parentName": "top"}}],
    }
    assert build_config(objects) == Config(
        {"a": FlavorSpec("a"), "b": FlavorSpec("b")},
        {"cq": ClusterQueueSpec("cq", "co", GROUPS, checks=(("prov", None), ("manual", None))),
         "bad": ClusterQueueSpec("bad", checks=(("broken", None),), active=False)},
        {"co": CohortSpec("co", "top")},
        {"manual": 120.0, "broken": 30.0},
        frozenset({"prov", "broken"}),  # the ProvisioningRequest controller's: they delay topology placement
    )


def test_nothing_stored() -> None:
    assert build_config({}) == Config({}, {}, {}, {})


def test_a_cluster_queue_with_a_missing_flavor_is_inactive() -> None:
    config = build_config({"ClusterQueue": [_cq({"resourceGroups": [GROUP], "namespaceSelector": {}})]})
    assert config.cluster_queues["cq"] == ClusterQueueSpec("cq", None, GROUPS, active=False)
    assert (config.flavors, config.cohorts, config.check_retry_delay, config.race) == ({}, {}, {}, False)
