from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from flexq.api.documents import load_documents
from flexq.api.fields import FieldCheck, FieldValidation, UnknownFields
from flexq.api.kinds import resolve
from flexq.api.object_errors import InvalidObject
from flexq.objects.service import BadRequest, ObjectService
from flexq.store import Conflict, Key, Store
from tests.conftest import guide_text

CQ, LQ, RF, AC = resolve("cq"), resolve("lq"), resolve("rf"), resolve("ac")


@pytest.fixture
def svc() -> ObjectService:
    return ObjectService(Store())


def _apply(svc: ObjectService, text: str) -> list[str]:
    return [str(o) for o in svc.apply(load_documents(text, "f.yaml"))]


def _active(obj: dict[str, Any]) -> tuple[str, str, str]:
    (cond,) = [c for c in obj["status"]["conditions"] if c["type"] == "Active"]
    return cond["status"], cond["reason"], cond["message"]


def test_guide_apply_creates_seven_then_unchanged(svc: ObjectService) -> None:
    text = guide_text("dws-tpu-queue.yaml")
    assert [o.split()[-1] for o in _apply(svc, text)] == ["created"] * 7
    assert [o.split()[-1] for o in _apply(svc, text)] == ["unchanged"] * 7
    cq = svc.get(CQ, None, "cluster-queue", "v1beta1")
    flavors = cq["spec"]["resourceGroups"][0]["flavors"]
    assert [f["name"] for f in flavors] == ["default-cpu", "on-demand", "dws"]
    assert flavors[1]["resources"] == [{"name": "cpu", "nominalQuota": 40}, {"name": "memory", "nominalQuota": "75Gi"},
                                       {"name": "google.com/tpu", "nominalQuota": 16}]
    assert cq["spec"]["queueingStrategy"] == "BestEffortFIFO"
    assert cq["spec"]["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    assert cq["spec"]["preemption"]["withinClusterQueue"] == "Never"
    assert _active(cq) == ("True", "Ready", "Can admit new workloads")
    assert _active(svc.get(LQ, "default", "user-queue"))[1] == "Ready"
    prc = svc.get(resolve("prc"), None, "dws-config")
    assert prc["spec"]["retryStrategy"] == {"backoffLimitCount": 3, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800}


def test_reapply_with_a_change_configures(svc: ObjectService) -> None:
    text = guide_text("dws-tpu-queue.yaml")
    _apply(svc, text)
    changed = text.replace("nominalQuota: 16", "nominalQuota: 32")
    results = _apply(svc, changed)
    assert "clusterqueue.kueue.x-k8s.io/cluster-queue configured" in results
    cq = svc.get(CQ, None, "cluster-queue")
    assert cq["spec"]["resourceGroups"][0]["flavors"][1]["resources"][2]["nominalQuota"] == 32
    assert cq["metadata"]["generation"] == 2


def test_apply_is_all_or_nothing(svc: ObjectService) -> None:
    text = guide_text("dws-tpu-queue.yaml").replace("clusterQueue: \"cluster-queue\"", "clusterQueue: 7")
    with pytest.raises(InvalidObject) as info:
        _apply(svc, text)
    assert info.value.kind == "LocalQueue" and info.value.errors[0].path == "spec.clusterQueue"
    assert svc.list_objects(RF, None)[0] == [] and svc.list_objects(CQ, None)[0] == []


def test_apply_rolls_back_when_a_later_write_fails(svc: ObjectService) -> None:
    text = guide_text("dws-tpu-queue.yaml") + "\n---\n" + (
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata:\n  name: q\n  namespace: nowhere\n"
        "spec:\n  clusterQueue: cluster-queue\n")
    with pytest.raises(BadRequest, match='namespaces "nowhere" not found'):
        _apply(svc, text)
    assert svc.list_objects(RF, None)[0] == []


def test_dangling_references_reported_then_resolved(svc: ObjectService) -> None:
    lq_text = ("apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata:\n  name: user-queue\n"
               "  namespace: default\nspec:\n  clusterQueue: cluster-queue\n")
    _apply(svc, lq_text)
    assert _active(svc.get(LQ, "default", "user-queue")) == (
        "False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")
    docs = guide_text("dws-tpu-queue.yaml").split("---")
    cq_text = docs[3]
    _apply(svc, cq_text)
    assert _active(svc.get(CQ, None, "cluster-queue")) == (
        "False", "FlavorNotFound",
        "Can't admit new workloads: references missing ResourceFlavor(s): default-cpu,on-demand,dws, "
        "references missing AdmissionCheck(s): dws-prov.")
    assert _active(svc.get(LQ, "default", "user-queue"))[1] == "ClusterQueueIsInactive"
    _apply(svc, "---".join(docs[:3]))
    assert _active(svc.get(CQ, None, "cluster-queue"))[1] == "AdmissionCheckNotFound"
    _apply(svc, docs[5])  # the AdmissionCheck, whose ProvisioningRequestConfig is still missing
    assert _active(svc.get(AC, None, "dws-prov"))[:2] == ("False", "BadParametersRef")
    assert _active(svc.get(CQ, None, "cluster-queue"))[1] == "AdmissionCheckInactive"
    _apply(svc, docs[6])
    assert _active(svc.get(CQ, None, "cluster-queue"))[0] == "True"
    assert _active(svc.get(LQ, "default", "user-queue"))[0] == "True"
    svc.delete(RF, None, "dws")
    assert _active(svc.get(CQ, None, "cluster-queue"))[2] == (
        "Can't admit new workloads: references missing ResourceFlavor(s): dws.")


def test_versions_convert_both_ways(svc: ObjectService) -> None:
    obj = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
           "spec": {"cohort": "team", "admissionChecks": ["a"],
                    "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}}}
    svc.create(CQ, None, obj, "v1beta1")
    stored = svc.get(CQ, None, "cq", "v1beta2")
    assert stored["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert stored["spec"]["cohortName"] == "team" and "cohort" not in stored["spec"]
    assert stored["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "a"}]}
    assert stored["spec"]["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}
    old = svc.get(CQ, None, "cq", "v1beta1")
    assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1" and old["spec"]["cohort"] == "team"


def test_patches_and_conflicts(svc: ObjectService) -> None:
    _apply(svc, guide_text("dws-tpu-queue.yaml"))
    patched = svc.patch(CQ, None, "cluster-queue", "application/merge-patch+json",
                        {"spec": {"queueingStrategy": "StrictFIFO"}})
    assert patched["spec"]["queueingStrategy"] == "StrictFIFO"
    patched = svc.patch(CQ, None, "cluster-queue", "application/json-patch+json",
                        [{"op": "replace", "path": "/spec/stopPolicy", "value": "Hold"}])
    assert _active(patched) == ("False", "Stopped", "Can't admit new workloads: is stopped.")
    stale = copy.deepcopy(patched)
    patched["spec"]["queueingStrategy"] = "BestEffortFIFO"
    svc.replace(CQ, None, "cluster-queue", patched)
    with pytest.raises(Conflict):
        svc.replace(CQ, None, "cluster-queue", stale)
    with pytest.raises(InvalidObject, match="immutable"):
        svc.patch(LQ, "default", "user-queue", "application/merge-patch+json", {"spec": {"clusterQueue": "other"}})
    with pytest.raises(BadRequest, match="strategic merge patch is not supported"):
        svc.patch(CQ, None, "cluster-queue", "application/strategic-merge-patch+json", {"spec": {}})


def test_status_subresource_keeps_spec(svc: ObjectService) -> None:
    _apply(svc, guide_text("dws-tpu-queue.yaml"))
    cq = svc.get(CQ, None, "cluster-queue")
    cq["spec"]["queueingStrategy"] = "StrictFIFO"
    cq["status"]["pendingWorkloads"] = 3
    after = svc.replace(CQ, None, "cluster-queue", cq, subresource="status")
    assert after["status"]["pendingWorkloads"] == 3
    assert after["spec"]["queueingStrategy"] == "BestEffortFIFO"


def test_a_patch_reads_its_object_once_and_still_conflicts(svc: ObjectService) -> None:
    """A patch reads the object it patches once, in its transaction, and writes over exactly that version: a
    resourceVersion in the patch that is not the stored one is still refused."""
    svc.create(resolve("job.batch"), "default", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                                                        "containers": [{"name": "c", "image": "busybox"}]}}}})
    reads: list[str] = []
    get = svc.store.get

    def counting(key: Key) -> dict[str, Any]:
        reads.append(key.name)
        return get(key)

    svc.store.get = counting  # type: ignore[method-assign]
    job = resolve("job.batch")
    done = {"status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}}
    patched = svc.patch(job, "default", "j", "application/merge-patch+json", done, subresource="status")
    assert reads == ["j"]
    assert patched["status"]["succeeded"] == 1 and patched["spec"]["suspend"] is True
    reads.clear()
    patched = svc.patch(job, "default", "j", "application/merge-patch+json", {"spec": {"suspend": False}})
    assert reads == ["j"] and patched["spec"]["suspend"] is False
    assert patched["status"]["succeeded"] == 1, "a main-resource patch keeps the status"
    stale = {"metadata": {"resourceVersion": "1"}, "spec": {"suspend": True}}
    with pytest.raises(Conflict):
        svc.patch(job, "default", "j", "application/merge-patch+json", stale)
    assert svc.get(job, "default", "j")["spec"]["suspend"] is False


def test_namespaced_objects_need_their_namespace(svc: ObjectService) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}
    with pytest.raises(BadRequest, match='namespaces "team-a" not found'):
        svc.create(resolve("cm"), "team-a", cm)
    svc.create(resolve("ns"), None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    svc.create(resolve("cm"), "team-a", cm)
    svc.delete(resolve("ns"), None, "team-a")
    assert svc.list_objects(resolve("cm"), "team-a")[0] == []


def test_queue_state_changes_are_events(svc: ObjectService) -> None:
    lq_text = ("apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata:\n  name: q\n  namespace: default\n"
               "spec:\n  clusterQueue: cluster-queue\n")
    _apply(svc, lq_text)
    _apply(svc, guide_text("dws-tpu-queue.yaml"))
    lq = svc.get(LQ, "default", "q")
    events, _ = svc.list_objects(resolve("events"), "default", fields=f"involvedObject.uid={lq['metadata']['uid']}")
    # One apply is one step: the LocalQueue goes from missing-ClusterQueue straight to Ready.
    assert sorted((e["type"], e["reason"]) for e in events) == [
        ("Normal", "Ready"), ("Warning", "ClusterQueueDoesNotExist")]


def test_unknown_fields_are_refused_with_their_line_or_dropped(svc: ObjectService) -> None:
    text = guide_text("dws-tpu-queue.yaml").replace(
        "  namespaceSelector: {}\n", "  namespaceSelector: {}\n  resourceGroup:\n    level: 3\n")
    line = text.splitlines().index("  resourceGroup:") + 1
    with pytest.raises(InvalidObject) as refused:
        _apply(svc, text)
    assert [(e.path, e.line) for e in refused.value.errors] == [("spec.resourceGroup", line)]
    assert 'unknown field "spec.resourceGroup"' in str(refused.value)
    assert svc.list_objects(CQ, None)[0] == [], "strict by default, and nothing written"

    warn = FieldCheck(FieldValidation.WARN)
    svc.apply(load_documents(text, "f.yaml"), fields=warn)
    assert warn.warnings == ['f.yaml: ClusterQueue: unknown field "spec.resourceGroup"']
    assert "resourceGroup" not in svc.get(CQ, None, "cluster-queue", "v1beta1")["spec"], "dropped, as CRDs prune"

    ignore = FieldCheck(FieldValidation.IGNORE)
    svc.apply(load_documents(text.replace("level: 3", "level: 4"), "f.yaml"), fields=ignore)
    assert ignore.warnings == []


@pytest.mark.parametrize(("mode", "outcome"), [
    (FieldValidation.STRICT, 'strict decoding error: unknown field "spec.typo", '
                             'unknown field "spec.resourceGroups[0].flavorz"'),
    (FieldValidation.WARN, ['unknown field "spec.typo"', 'unknown field "spec.resourceGroups[0].flavorz"']),
    (FieldValidation.IGNORE, []),
])
def test_field_validation_of_requests(svc: ObjectService, mode: FieldValidation, outcome: str | list[str]) -> None:
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
          "spec": {"typo": 1, "resourceGroups": [{"coveredResources": ["cpu"], "flavorz": [], "flavors": [
              {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]}}
    check = FieldCheck(mode)
    if isinstance(outcome, str):
        with pytest.raises(UnknownFields, match=re.escape(outcome)):
            svc.create(CQ, None, cq, fields=check)
        return
    stored = svc.create(CQ, None, cq, fields=check)
    assert check.warnings == outcome
    assert "typo" not in stored["spec"] and "flavorz" not in stored["spec"]["resourceGroups"][0]
    # A patch is checked too.
    patched = FieldCheck(mode)
    svc.patch(CQ, None, "cq", "application/merge-patch+json", {"spec": {"stopPolicy": "Hold", "typo2": 1}},
              fields=patched)
    assert patched.warnings == ([] if mode is FieldValidation.IGNORE else ['unknown field "spec.typo2"'])


def _cq(name: str, flavor: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]}}


def test_queues_written_one_by_one_follow_their_references(svc: ObjectService) -> None:
    svc.create(RF, None, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}})
    for lq, cq in (("a", "x"), ("b", "y")):
        svc.create(LQ, "default", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                                   "metadata": {"name": lq}, "spec": {"clusterQueue": cq}})
        assert _active(svc.get(LQ, "default", lq))[1] == "ClusterQueueDoesNotExist"
    svc.create(CQ, None, _cq("x", "f"))
    assert _active(svc.get(CQ, None, "x"))[0] == "True"
    assert _active(svc.get(LQ, "default", "a"))[:2] == ("True", "Ready")
    assert _active(svc.get(LQ, "default", "b"))[1] == "ClusterQueueDoesNotExist"
    svc.create(CQ, None, _cq("y", "g"))
    assert _active(svc.get(CQ, None, "y"))[1] == "FlavorNotFound"
    assert _active(svc.get(LQ, "default", "b"))[1] == "ClusterQueueIsInactive"
    assert _active(svc.get(LQ, "default", "a"))[:2] == ("True", "Ready")
    svc.delete(CQ, None, "x")
    assert _active(svc.get(LQ, "default", "a"))[1] == "ClusterQueueDoesNotExist"
    assert _active(svc.get(LQ, "default", "b"))[1] == "ClusterQueueIsInactive"
    svc.create(RF, None, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "g"}})
    assert _active(svc.get(CQ, None, "y"))[0] == "True" and _active(svc.get(LQ, "default", "b"))[0] == "True"


@pytest.mark.parametrize(("rows", "path", "words"), [
    ("[{key: a/b, valueFromProvisioningClassDetail: X}, {key: a/b, valueFromProvisioningClassDetail: Y}]",
     "spec.podSetUpdates.nodeSelector", "each key may appear once"),
    ("[{key: a/b}]", "spec.podSetUpdates.nodeSelector[0].valueFromProvisioningClassDetail", "Required value"),
    ("[{key: 'not a key', valueFromProvisioningClassDetail: X}]", "spec.podSetUpdates.nodeSelector[0].key", ""),
])
def test_a_provisioning_configs_node_selector_updates_are_checked(svc: ObjectService, rows: str, path: str,
                                                                   words: str) -> None:
    text = guide_text("dws-tpu-queue.yaml").replace(
        "  managedResources:\n    - google.com/tpu\n",
        f"  managedResources:\n    - google.com/tpu\n  podSetUpdates:\n    nodeSelector: {rows}\n")
    with pytest.raises(InvalidObject) as info:
        _apply(svc, text)
    (error,) = info.value.errors
    assert (info.value.kind, error.path) == ("ProvisioningRequestConfig", path)
    assert words in str(error)
