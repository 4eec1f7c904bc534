"""ClusterQueue ``spec.concurrentAdmissionPolicy`` (Kueue v0.18+, alpha, v1beta2 only): Kueue's webhook rules,
its messages, the field paths and lines; v1beta1 has no such field."""

from __future__ import annotations

import pytest

from flexq.api.documents import load_documents
from flexq.api.object_errors import InvalidObject
from flexq.api.validation import validate_document

# A setup of the shape Kueue documents for Concurrent Admission: three v1beta2 flavors, most preferred first, one
# ClusterQueue racing them (TryPreferredFlavors), and a LocalQueue.
KUEUE_EXAMPLE = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: reserved
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: standard
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: preemptible
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: research-cq
spec:
  namespaceSelector: {}
  concurrentAdmissionPolicy:
    migration:
      mode: TryPreferredFlavors
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: reserved
      resources:
      - name: cpu
        nominalQuota: 6
      - name: memory
        nominalQuota: 24Gi
    - name: standard
      resources:
      - name: cpu
        nominalQuota: 12
      - name: memory
        nominalQuota: 48Gi
    - name: preemptible
      resources:
      - name: cpu
        nominalQuota: 24
      - name: memory
        nominalQuota: 96Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: default
  name: research
spec:
  clusterQueue: research-cq
"""

WITH_LAST_ACCEPTABLE = KUEUE_EXAMPLE.replace(
    "      mode: TryPreferredFlavors\n",
    "      mode: TryPreferredFlavors\n      constraints:\n        lastAcceptableFlavorName: reserved\n",
)

PREFERRED = "{migration: {mode: TryPreferredFlavors}}"
THREE = [(["cpu", "memory"], ["reserved", "standard", "preemptible"])]
Groups = list[tuple[list[str], list[str]]]


def cluster_queue(policy: str | None, groups: Groups | None = None, *, strategy: str | None = None,
                  version: str = "v1beta2") -> str:
    """A ClusterQueue: line 6 holds the policy (flow style), line 7 the strategy, then the resource groups.

    A field's line is its key's (a missing field's, its parent's): ``spec`` is line 5.
    """
    lines = [f"apiVersion: kueue.x-k8s.io/{version}", "kind: ClusterQueue", "metadata:",
             "  name: research-cq", "spec:"]
    if policy is not None:
        lines.append(f"  concurrentAdmissionPolicy: {policy}")
    if strategy is not None:
        lines.append(f"  queueingStrategy: {strategy}")
    if groups:
        lines.append("  resourceGroups:")
    for covered, flavors in groups or []:
        lines.append(f"  - coveredResources: [{', '.join(covered)}]")
        lines.append("    flavors:")
        for flavor in flavors:
            lines += [f"    - name: {flavor}", "      resources:"]
            lines += [f"      - {{name: {resource}, nominalQuota: 1}}" for resource in covered]
    return "\n".join(lines) + "\n"


def _errors(text: str) -> list[str]:
    """Every error of the first invalid document of ``text`` (none when all are valid)."""
    try:
        for doc in load_documents(text, "f.yaml"):
            validate_document(doc)
    except InvalidObject as exc:
        return [str(e) for e in exc.errors]
    return []


ONE_GROUP = "must have exactly one ResourceGroup when ConcurrentAdmissionPolicy is defined"
NOT_A_FLAVOR = "must be one of the flavors defined in the ClusterQueue: [reserved standard preemptible]"
FORBIDDEN = 'Forbidden: may only be set when migration.mode is "TryPreferredFlavors" (got "RetainFirstAdmission")'
STRICT = "StrictFIFO queueing strategy cannot be used when ConcurrentAdmissionPolicy is defined"
SEVENTEEN = [(["cpu"], [f"f{i}" for i in range(17)])]
CONSTRAINTS = "spec.concurrentAdmissionPolicy.migration.constraints"

REFUSED: dict[str, tuple[str, list[str]]] = {
    "no resource group": (
        cluster_queue(PREFERRED, None),
        [f"line 5: spec.resourceGroups: Invalid value: 0: {ONE_GROUP}"]),
    "two resource groups": (
        cluster_queue(PREFERRED, [*THREE, (["example.com/gpu"], ["gpu"])]),
        [f"line 7: spec.resourceGroups: Invalid value: 2: {ONE_GROUP}"]),
    "seventeen flavors": (
        cluster_queue(PREFERRED, SEVENTEEN),
        ["line 9: spec.resourceGroups[0].flavors: Invalid value: 17: cannot have more than 16 resource flavors in "
         "the ResourceGroup when ConcurrentAdmissionPolicy is defined"]),
    "constraints with RetainFirstAdmission": (
        cluster_queue("{migration: {mode: RetainFirstAdmission, constraints: {lastAcceptableFlavorName: preemptible}}}",
                      THREE),
        [f"line 6: {CONSTRAINTS}: {FORBIDDEN}"]),
    "empty constraints with RetainFirstAdmission": (
        cluster_queue("{migration: {mode: RetainFirstAdmission, constraints: {}}}", THREE),
        [f"line 6: {CONSTRAINTS}: {FORBIDDEN}"]),
    "lastAcceptableFlavorName not a flavor of the queue": (
        cluster_queue("{migration: {mode: TryPreferredFlavors, constraints: {lastAcceptableFlavorName: gold}}}",
                      THREE),
        [f'line 6: {CONSTRAINTS}.lastAcceptableFlavorName: Invalid value: "gold": {NOT_A_FLAVOR}']),
    "StrictFIFO": (
        cluster_queue(PREFERRED, THREE, strategy="StrictFIFO"),
        [f'line 7: spec.queueingStrategy: Invalid value: "StrictFIFO": {STRICT}']),
    "every rule at once, in Kueue's order": (
        cluster_queue("{migration: {mode: RetainFirstAdmission, constraints: {}}}", None, strategy="StrictFIFO"),
        [f"line 5: spec.resourceGroups: Invalid value: 0: {ONE_GROUP}",
         f"line 6: {CONSTRAINTS}: {FORBIDDEN}",
         f'line 7: spec.queueingStrategy: Invalid value: "StrictFIFO": {STRICT}']),
    "migration missing": (
        cluster_queue("{}", THREE),
        ["line 6: spec.concurrentAdmissionPolicy.migration: Required value"]),
    "mode missing": (
        cluster_queue("{migration: {}}", THREE),
        ["line 6: spec.concurrentAdmissionPolicy.migration.mode: Required value"]),
    "mode not supported": (
        cluster_queue("{migration: {mode: HoldFirstAdmission}}", THREE),
        ['line 6: spec.concurrentAdmissionPolicy.migration.mode: Unsupported value: "HoldFirstAdmission": '
         "supported values: 'TryPreferredFlavors' or 'RetainFirstAdmission'"]),
    "lastAcceptableFlavorName not a flavor name": (
        cluster_queue("{migration: {mode: TryPreferredFlavors, constraints: {lastAcceptableFlavorName: Spot_1}}}",
                      THREE),
        [f'line 6: {CONSTRAINTS}.lastAcceptableFlavorName: "Spot_1": a lowercase RFC 1123 subdomain must consist '
         "of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"]),
    "policy not an object": (
        cluster_queue("TryPreferredFlavors", THREE),
        ['line 6: spec.concurrentAdmissionPolicy: Invalid value: "TryPreferredFlavors": must be an object']),
    "v1beta1 has no such field": (
        cluster_queue(PREFERRED, THREE, version="v1beta1"),
        ["line 6: spec.concurrentAdmissionPolicy: Unknown field: ClusterQueue kueue.x-k8s.io/v1beta1 has no such "
         "field (it is in kueue.x-k8s.io/v1beta2)"]),
    "v1beta1 has no such field, even when it is malformed": (
        cluster_queue("{migration: {}}", None, strategy="StrictFIFO", version="v1beta1"),
        ["line 6: spec.concurrentAdmissionPolicy: Unknown field: ClusterQueue kueue.x-k8s.io/v1beta1 has no such "
         "field (it is in kueue.x-k8s.io/v1beta2)"]),
    "documented example, lastAcceptableFlavorName misspelled": (
        WITH_LAST_ACCEPTABLE.replace("lastAcceptableFlavorName: reserved", "lastAcceptableFlavorName: reserve"),
        [f'line 26: {CONSTRAINTS}.lastAcceptableFlavorName: Invalid value: "reserve": {NOT_A_FLAVOR}']),
    "documented example, StrictFIFO": (
        KUEUE_EXAMPLE.replace("  namespaceSelector: {}\n", "  namespaceSelector: {}\n  queueingStrategy: StrictFIFO\n"),
        [f'line 22: spec.queueingStrategy: Invalid value: "StrictFIFO": {STRICT}']),
    "documented example in v1beta1": (
        KUEUE_EXAMPLE.replace("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1"),
        ["line 22: spec.concurrentAdmissionPolicy: Unknown field: ClusterQueue kueue.x-k8s.io/v1beta1 has no such "
         "field (it is in kueue.x-k8s.io/v1beta2)"]),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused(case: str) -> None:
    text, expected = REFUSED[case]
    assert _errors(text) == expected


ACCEPTED: dict[str, str] = {
    "documented example": KUEUE_EXAMPLE,
    "documented example with lastAcceptableFlavorName": WITH_LAST_ACCEPTABLE,
    "TryPreferredFlavors": cluster_queue(PREFERRED, THREE),
    "RetainFirstAdmission": cluster_queue("{migration: {mode: RetainFirstAdmission}}", THREE),
    "empty constraints with TryPreferredFlavors": cluster_queue(
        "{migration: {mode: TryPreferredFlavors, constraints: {}}}", THREE),
    "lastAcceptableFlavorName the least preferred flavor": cluster_queue(
        "{migration: {mode: TryPreferredFlavors, constraints: {lastAcceptableFlavorName: preemptible}}}", THREE),
    "sixteen flavors": cluster_queue(PREFERRED, [(["cpu"], [f"f{i}" for i in range(16)])]),
    "BestEffortFIFO": cluster_queue(PREFERRED, THREE, strategy="BestEffortFIFO"),
    "null policy": cluster_queue("null", [*THREE, (["example.com/gpu"], ["gpu"])], strategy="StrictFIFO"),
    "no policy, two groups, StrictFIFO": cluster_queue(None, [*THREE, (["example.com/gpu"], ["gpu"])],
                                                       strategy="StrictFIFO"),
    "v1beta1 without the field": cluster_queue(None, THREE, version="v1beta1"),
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_accepted(case: str) -> None:
    assert _errors(ACCEPTED[case]) == []


def test_documented_example_kinds() -> None:
    kinds = [validate_document(doc).kind for doc in load_documents(KUEUE_EXAMPLE, "f.yaml")]
    assert kinds == ["ResourceFlavor", "ResourceFlavor", "ResourceFlavor", "ClusterQueue", "LocalQueue"]
