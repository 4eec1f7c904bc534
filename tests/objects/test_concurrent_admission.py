"""ClusterQueue ``spec.concurrentAdmissionPolicy`` through the object service: stored in v1beta2 and read back,
dropped in v1beta1 as Kueue's conversion does, immutable on update (Kueue's ValidateImmutableField)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from flexq.api.documents import load_documents
from flexq.api.kinds import resolve
from flexq.api.object_errors import FieldError, InvalidObject
from flexq.objects.service import ObjectService
from flexq.store import Store
from tests.api.test_concurrent_admission import KUEUE_EXAMPLE, WITH_LAST_ACCEPTABLE

CQ, LQ, RF = resolve("cq"), resolve("lq"), resolve("rf")
NAME = "research-cq"
PREFERRED = {"migration": {"mode": "TryPreferredFlavors"}}
IMMUTABLE = [FieldError("spec.concurrentAdmissionPolicy", "Invalid value: field is immutable")]


@pytest.fixture
def svc() -> ObjectService:
    return ObjectService(Store())


def _apply(svc: ObjectService, text: str) -> list[str]:
    return [str(o) for o in svc.apply(load_documents(text, "f.yaml"))]


def _active(obj: dict[str, Any]) -> tuple[str, str]:
    (cond,) = [c for c in obj["status"]["conditions"] if c["type"] == "Active"]
    return cond["status"], cond["reason"]


def test_documented_example_applies_and_round_trips(svc: ObjectService) -> None:
    assert _apply(svc, KUEUE_EXAMPLE) == [
        "resourceflavor.kueue.x-k8s.io/reserved created",
        "resourceflavor.kueue.x-k8s.io/standard created",
        "resourceflavor.kueue.x-k8s.io/preemptible created",
        f"clusterqueue.kueue.x-k8s.io/{NAME} created",
        "localqueue.kueue.x-k8s.io/research created",
    ]
    stored = svc.store.get(svc.key(CQ, None, NAME))
    assert stored["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert stored["spec"]["concurrentAdmissionPolicy"] == PREFERRED
    cq = svc.get(CQ, None, NAME, "v1beta2")
    assert cq["spec"]["concurrentAdmissionPolicy"] == PREFERRED
    assert [f["name"] for f in cq["spec"]["resourceGroups"][0]["flavors"]] == ["reserved", "standard", "preemptible"]
    assert _active(cq) == ("True", "Ready")
    assert _active(svc.get(LQ, "default", "research")) == ("True", "Ready")
    assert _apply(svc, KUEUE_EXAMPLE)[3] == f"clusterqueue.kueue.x-k8s.io/{NAME} unchanged"


def test_last_acceptable_flavor_round_trips(svc: ObjectService) -> None:
    _apply(svc, WITH_LAST_ACCEPTABLE)
    policy = {"migration": {"mode": "TryPreferredFlavors", "constraints": {"lastAcceptableFlavorName": "reserved"}}}
    assert svc.get(CQ, None, NAME, "v1beta2")["spec"]["concurrentAdmissionPolicy"] == policy
    assert [cq["spec"]["concurrentAdmissionPolicy"] for cq in svc.list_objects(CQ, None, "v1beta2")[0]] == [policy]


def test_v1beta1_reads_have_no_policy(svc: ObjectService) -> None:
    _apply(svc, KUEUE_EXAMPLE)
    old = svc.get(CQ, None, NAME, "v1beta1")
    assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert "concurrentAdmissionPolicy" not in old["spec"]
    assert svc.get(CQ, None, NAME, "v1beta2")["spec"]["concurrentAdmissionPolicy"] == PREFERRED


def test_v1beta1_create_is_refused_and_nothing_stored(svc: ObjectService) -> None:
    (cq,) = [d.obj for d in load_documents(KUEUE_EXAMPLE, "f.yaml") if d.obj["kind"] == "ClusterQueue"]
    cq = dict(cq, apiVersion="kueue.x-k8s.io/v1beta1")
    with pytest.raises(InvalidObject) as info:
        svc.create(CQ, None, cq, "v1beta1")
    assert [(e.path, e.message) for e in info.value.errors] == [(
        "spec.concurrentAdmissionPolicy",
        "Unknown field: ClusterQueue kueue.x-k8s.io/v1beta1 has no such field (it is in kueue.x-k8s.io/v1beta2)")]
    assert svc.list_objects(CQ, None)[0] == []


def _policy(value: Any) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        if value is None:
            spec.pop("concurrentAdmissionPolicy", None)
        else:
            spec["concurrentAdmissionPolicy"] = value
    return change


def _quota(spec: dict[str, Any]) -> None:
    spec["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 7


UPDATES: dict[str, tuple[dict[str, Any] | None, Callable[[dict[str, Any]], None], list[FieldError] | None]] = {
    "mode changed": (PREFERRED, _policy({"migration": {"mode": "RetainFirstAdmission"}}), IMMUTABLE),
    "constraints added": (
        PREFERRED,
        _policy({"migration": {"mode": "TryPreferredFlavors",
                               "constraints": {"lastAcceptableFlavorName": "preemptible"}}}),
        IMMUTABLE),
    "policy removed": (PREFERRED, _policy(None), IMMUTABLE),
    "policy added": (None, _policy(PREFERRED), IMMUTABLE),
    "policy unchanged, quota changed": (PREFERRED, _quota, None),
    "no policy, quota changed": (None, _quota, None),
}


@pytest.mark.parametrize("case", sorted(UPDATES))
def test_policy_is_immutable(svc: ObjectService, case: str) -> None:
    initial, change, expected = UPDATES[case]
    text = KUEUE_EXAMPLE if initial is not None else KUEUE_EXAMPLE.replace(
        "  concurrentAdmissionPolicy:\n    migration:\n      mode: TryPreferredFlavors\n", "")
    _apply(svc, text)
    before = svc.get(CQ, None, NAME, "v1beta2")
    body = copy.deepcopy(before)
    change(body["spec"])
    if expected is None:
        after = svc.replace(CQ, None, NAME, body, "v1beta2")
        assert after["spec"] == body["spec"]
        assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
        return
    with pytest.raises(InvalidObject) as info:
        svc.replace(CQ, None, NAME, body, "v1beta2")
    assert (info.value.kind, info.value.name, info.value.errors) == ("ClusterQueue", NAME, expected)
    assert svc.get(CQ, None, NAME, "v1beta2") == before


def test_immutable_through_a_merge_patch(svc: ObjectService) -> None:
    _apply(svc, KUEUE_EXAMPLE)
    with pytest.raises(InvalidObject) as info:
        svc.patch(CQ, None, NAME, "application/merge-patch+json", {"spec": {"concurrentAdmissionPolicy": None}})
    assert info.value.errors == IMMUTABLE


def test_immutable_through_apply_names_the_line(svc: ObjectService) -> None:
    _apply(svc, KUEUE_EXAMPLE)
    with pytest.raises(InvalidObject) as info:
        _apply(svc, WITH_LAST_ACCEPTABLE)
    assert (info.value.source, info.value.document, [str(e) for e in info.value.errors]) == (
        "f.yaml", 3, ["line 22: spec.concurrentAdmissionPolicy: Invalid value: field is immutable"])
    assert svc.get(CQ, None, NAME, "v1beta2")["spec"]["concurrentAdmissionPolicy"] == PREFERRED


def test_v1beta1_update_drops_the_policy_and_is_refused(svc: ObjectService) -> None:
    """As in Kueue: v1beta1 cannot carry the field, so a v1beta1 update removes it, which is immutable."""
    _apply(svc, KUEUE_EXAMPLE)
    old = svc.get(CQ, None, NAME, "v1beta1")
    old["spec"]["stopPolicy"] = "Hold"
    with pytest.raises(InvalidObject) as info:
        svc.replace(CQ, None, NAME, old, "v1beta1")
    assert info.value.errors == IMMUTABLE


def test_v1beta1_status_write_keeps_the_policy(svc: ObjectService) -> None:
    _apply(svc, KUEUE_EXAMPLE)
    old = svc.get(CQ, None, NAME, "v1beta1")
    old["status"]["pendingWorkloads"] = 2
    after = svc.replace(CQ, None, NAME, old, "v1beta1", subresource="status")
    assert after["status"]["pendingWorkloads"] == 2
    assert svc.get(CQ, None, NAME, "v1beta2")["spec"]["concurrentAdmissionPolicy"] == PREFERRED
