"""Kueue's Concurrent Admission through the real kubectl: a v1beta2 setup of the shape Kueue documents, batch Jobs
racing its flavors, the parent and variant Workloads as Kueue shows them."""

from __future__ import annotations

from typing import Any

import yaml

from tests.api.test_concurrent_admission import KUEUE_EXAMPLE
from tests.support import eventually, job

PARENT = "kueue.x-k8s.io/concurrent-admission-parent"
ALLOWED = "kueue.x-k8s.io/workload-allowed-resource-flavors"





def _workloads(kubectl: Any, *selector: str) -> list[dict[str, Any]]:
    listed = kubectl("get", "workloads", *selector, "-o", "yaml")
    assert listed.code == 0, listed.err
    return list(yaml.safe_load(listed.out)["items"])


def test_concurrent_admission_with_real_kubectl(kubectl: Any) -> None:
    applied = kubectl("apply", "-f", "-", input=KUEUE_EXAMPLE)
    assert applied.code == 0, applied.err
    assert "clusterqueue.kueue.x-k8s.io/research-cq created" in applied.out
    # Kueue's constraint: the policy cannot change once the ClusterQueue exists.
    changed = kubectl("apply", "-f", "-", input=KUEUE_EXAMPLE.replace(
        "mode: TryPreferredFlavors", "mode: RetainFirstAdmission"))
    assert changed.code != 0 and "spec.concurrentAdmissionPolicy" in changed.err and "immutable" in changed.err

    # The first job fills the preferred flavor; the second races and starts on the next flavor that holds it.
    for name, cpus in (("first", 6), ("second", 6)):
        made = kubectl("apply", "-f", "-", input=job(name, queue="research", cpu=cpus).memory("1Gi")
                       .command("sleep", "60").suspended().yaml())
        assert made.code == 0, made.err

    def placed() -> dict[str, dict[str, Any]]:
        parents = {w["metadata"]["ownerReferences"][0]["name"]: w for w in _workloads(kubectl, "-l", f"{PARENT}=true")}
        assert set(parents) == {"first", "second"}
        for w in parents.values():
            assert any(c["type"] == "Admitted" and c["status"] == "True" for c in w["status"]["conditions"])
        return parents

    parents = eventually(placed, timeout=20)
    flavors = {name: w["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"] for name, w in parents.items()}
    assert flavors == {"first": "reserved", "second": "standard"}
    # TryPreferredFlavors: the second job's variant for the preferred flavor goes on racing, a Workload of its own.
    variants = [w for w in _workloads(kubectl) if w["metadata"]["ownerReferences"][0]["kind"] == "Workload"]
    assert [(w["metadata"]["ownerReferences"][0]["name"], w["metadata"]["annotations"][ALLOWED])
            for w in variants] == [(parents["second"]["metadata"]["name"], "reserved")]
    assert variants[0]["metadata"]["name"].startswith("job-second-variant-reserved-")
    table = kubectl("get", "workloads")
    assert table.code == 0 and "job-second-variant-reserved-" in table.out, table.err
    described = kubectl("describe", "workload", parents["second"]["metadata"]["name"])
    assert "The variant job-second-variant-standard-" in described.out and "is admitted" in described.out

    # The preferred flavor frees: the second job migrates to it, as Kueue's TryPreferredFlavors does.
    assert kubectl("delete", "job", "first").code == 0

    def migrated() -> None:
        second = next(w for w in _workloads(kubectl, "-l", f"{PARENT}=true")
                      if w["metadata"]["ownerReferences"][0]["name"] == "second")
        assert second["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"] == "reserved"

    eventually(migrated, timeout=20)
    events = kubectl("get", "events", "-o", "yaml")
    messages = [e["message"] for e in yaml.safe_load(events.out)["items"]]
    assert any("due to migration to more favorable resource flavor reserved" in m for m in messages)
