"""A pod template's topology annotations, the Workload's ``topologyRequest`` made of them, and back: each form of
request survives the trip both ways (the importer makes a job's annotations from a real cluster's Workload)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flexq.api.kinds import resolve
from flexq.api.object_errors import InvalidObject
from flexq.jobs import (
    JobError,
    TopologyRequestError,
    podsets,
    request_annotations,
    request_from_object,
    request_object,
    topology_request,
)
from flexq.jobs.webhook import job_webhook
from flexq.jobs.workload import QUEUE_LABEL
from flexq.objects.service import ObjectService
from flexq.store import NotFound, Store

LEVEL = "cloud.google.com/gce-topology-subblock"

CASES: dict[str, tuple[dict[str, str], dict[str, object]]] = {
    "required": ({"kueue.x-k8s.io/podset-required-topology": LEVEL}, {"required": LEVEL}),
    "preferred": ({"kueue.x-k8s.io/podset-preferred-topology": LEVEL}, {"preferred": LEVEL}),
    "unconstrained": ({"kueue.x-k8s.io/podset-unconstrained-topology": "true"}, {"unconstrained": True}),
    "slices": ({"kueue.x-k8s.io/podset-required-topology": "cloud.google.com/gce-topology-block",
                "kueue.x-k8s.io/podset-slice-required-topology": LEVEL, "kueue.x-k8s.io/podset-slice-size": "4"},
               {"required": "cloud.google.com/gce-topology-block", "podSetSliceRequiredTopology": LEVEL,
                "podSetSliceSize": 4}),
    "group": ({"kueue.x-k8s.io/podset-required-topology": LEVEL, "kueue.x-k8s.io/podset-group-name": "lws"},
              {"required": LEVEL, "podSetGroupName": "lws"}),
    "multi-layer slices": ({"kueue.x-k8s.io/podset-required-topology": "cloud.google.com/gce-topology-block",
                            "kueue.x-k8s.io/podset-slice-required-topology-constraints":
                                '[{"topology": "cloud.google.com/gce-topology-subblock", "size": 8}, '
                                '{"topology": "kubernetes.io/hostname", "size": 4}]'},
                           {"required": "cloud.google.com/gce-topology-block",
                            "podsetSliceRequiredTopologyConstraints": [{"topology": LEVEL, "size": 8},
                                                                       {"topology": "kubernetes.io/hostname",
                                                                        "size": 4}]}),
}


def test_annotations_and_topology_request_both_ways() -> None:
    seen = {}
    for name, (written, _) in CASES.items():
        request = topology_request(written)
        assert request is not None, name
        back = request_from_object(request_object(request))
        seen[name] = (request_object(request), back == request, request_annotations(request))
    assert seen == {name: (obj, True, written) for name, (written, obj) in CASES.items()}
    assert topology_request({}) is None and request_from_object({"podIndexLabel": "x"}) is None


GROUP, REQUIRED = "kueue.x-k8s.io/podset-group-name", "kueue.x-k8s.io/podset-required-topology"
PREFERRED, SLICE = "kueue.x-k8s.io/podset-preferred-topology", "kueue.x-k8s.io/podset-slice-required-topology"


def _ray_job(head: dict[str, str], *workers: tuple[str, int, dict[str, str]]) -> dict[str, object]:
    def template(annotations: dict[str, str]) -> dict[str, object]:
        return {"metadata": {"annotations": annotations}, "spec": {"containers": [{"name": "c"}]}}

    return {"spec": {"rayClusterSpec": {
        "headGroupSpec": {"template": template(head)},
        "workerGroupSpecs": [{"groupName": name, "replicas": replicas, "template": template(annotations)}
                             for name, replicas, annotations in workers]}}}


# Kueue's webhook refusals of the annotation (jobframework/tas_validation.go, v0.19.2: ValidateTASPodSetRequest and
# ValidatePodSetGroupingTopology), each named by the pod set and annotation at fault.
REFUSED = {
    "a number": (
        _ray_job({REQUIRED: LEVEL, GROUP: "1"}, ("w", 2, {REQUIRED: LEVEL, GROUP: "1"})),
        f"pod set head: metadata.annotations[{GROUP}]: must not be a number (got '1')"),
    "beside a slice request": (
        _ray_job({REQUIRED: LEVEL, GROUP: "g"}, ("w", 2, {REQUIRED: LEVEL, GROUP: "g", SLICE: LEVEL,
                                                          "kueue.x-k8s.io/podset-slice-size": "2"})),
        f"pod set w: metadata.annotations[{GROUP}]: may not be set when 'kueue.x-k8s.io/podset-slice-size' is "
        "specified"),
    "without a required or preferred level": (
        _ray_job({GROUP: "g"}, ("w", 2, {REQUIRED: LEVEL, GROUP: "g"})),
        f"pod set head: metadata.annotations[{GROUP}]: may not be set when neither '{PREFERRED}' nor '{REQUIRED}' "
        "is specified"),
    "a group of one": (
        _ray_job({REQUIRED: LEVEL, GROUP: "g"}, ("w", 2, {REQUIRED: LEVEL})),
        f"pod set head: metadata.annotations[{GROUP}]: can only define groups of exactly 2 pod sets, got: 1 pod "
        "set(s) in group 'g'"),
    "a group of three": (
        _ray_job({REQUIRED: LEVEL, GROUP: "g"}, ("w", 2, {REQUIRED: LEVEL, GROUP: "g"}),
                 ("v", 2, {REQUIRED: LEVEL, GROUP: "g"})),
        f"pod set head: metadata.annotations[{GROUP}]: can only define groups of exactly 2 pod sets, got: 3 pod "
        "set(s) in group 'g'"),
    "no pod set of a single pod": (
        _ray_job({}, ("w", 2, {REQUIRED: LEVEL, GROUP: "g"}), ("v", 3, {REQUIRED: LEVEL, GROUP: "g"})),
        f"pod set w: metadata.annotations[{GROUP}]: can only define groups where at least one pod set has only 1 "
        "replica, got: 2 replica(s) and 3 replica(s) in group 'g'"),
    "levels that differ": (
        _ray_job({REQUIRED: LEVEL, GROUP: "g"}, ("w", 2, {PREFERRED: LEVEL, GROUP: "g"})),
        f"pod set head: metadata.annotations: must specify '{REQUIRED}' or '{PREFERRED}' topology consistent with "
        "pod set w in group 'g'"),
}


LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
# Kueue's validateSliceRequiredTopologyConstraintsAnnotation (jobframework/tas_validation.go, v0.19.2).
LAYERS_REFUSED = {
    "beside podset-slice-size": ({REQUIRED: LEVEL, LAYERS: '[{"topology": "a", "size": 2}]',
                                  "kueue.x-k8s.io/podset-slice-size": "2", SLICE: LEVEL},
                                 f"template: metadata.annotations[{LAYERS}]: may not be set when '{SLICE}' is "
                                 "specified"),
    "beside a group": ({REQUIRED: LEVEL, GROUP: "g", LAYERS: '[{"topology": "a", "size": 2}]'},
                       f"template: metadata.annotations[{GROUP}]: may not be set when '{LAYERS}' is specified"),
    "not JSON": ({LAYERS: "[{"}, f"template: metadata.annotations[{LAYERS}]: must be a valid JSON array: "
                                 "Expecting property name enclosed in double quotes: line 1 column 3 (char 2)"),
    "four layers": ({LAYERS: '[' + ", ".join(f'{{"topology": "l{i}", "size": 1}}' for i in range(4)) + ']'},
                    f"template: metadata.annotations[{LAYERS}]: must have between 1 and 3 topology constraint "
                    "layers"),
    "a size of 0": ({LAYERS: '[{"topology": "a", "size": 0}]'},
                    f"template: metadata.annotations[{LAYERS}][0].size: must be greater than or equal to 1"),
    "a level twice": ({LAYERS: '[{"topology": "a", "size": 4}, {"topology": "a", "size": 2}]'},
                      f"template: metadata.annotations[{LAYERS}][1].topology: Duplicate value: 'a'"),
    "a size that does not divide": ({LAYERS: '[{"topology": "a", "size": 4}, {"topology": "b", "size": 3}]'},
                                    f"template: metadata.annotations[{LAYERS}][1].size: must evenly divide the "
                                    "parent layer size 4"),
    "not a label": ({LAYERS: '[{"topology": "not a label", "size": 4}]'},
                    f"template: metadata.annotations[{LAYERS}][0].topology: must be a label name (got 'not a "
                    "label')"),
}


@pytest.mark.parametrize("name", sorted(LAYERS_REFUSED))
def test_slice_layers_kueue_refuses_are_refused_naming_the_field(name: str) -> None:
    annotations, message = LAYERS_REFUSED[name]
    with pytest.raises(TopologyRequestError) as caught:
        topology_request(annotations)
    assert str(caught.value) == message


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_pod_set_group_kueue_refuses_is_refused_naming_the_field(name: str) -> None:
    job, message = REFUSED[name]
    with pytest.raises(JobError) as caught:
        podsets("RayJob", job)
    assert str(caught.value) == message


def test_a_head_and_its_workers_form_a_group() -> None:
    head, workers = podsets("RayJob", _ray_job({REQUIRED: LEVEL, GROUP: "g"}, ("w", 4, {REQUIRED: LEVEL, GROUP: "g"}),
                                               ("other", 2, {})))[:2]
    assert (head.topology, workers.topology) == (topology_request({REQUIRED: LEVEL, GROUP: "g"}),) * 2
    assert head.topology is not None and head.topology.group == "g"


@pytest.fixture
def service() -> Iterator[ObjectService]:
    store = Store()
    try:
        yield ObjectService(store, hooks=[job_webhook])
    finally:
        store.close()


def test_the_webhook_refuses_a_job_kueue_refuses_naming_the_template_field(service: ObjectService) -> None:
    """Kueue's webhooks refuse such a job on creation (the error's field is the template's, as Kueue names it);
    nothing is stored. Fixed, it is created suspended."""
    ray = _ray_job({REQUIRED: LEVEL, GROUP: "g"}, ("w", 2, {REQUIRED: LEVEL, GROUP: "g"}), ("v", 2, {PREFERRED: LEVEL}))
    cluster = ray["spec"]["rayClusterSpec"]  # type: ignore[index]
    cluster["workerGroupSpecs"][1]["template"]["metadata"]["annotations"][GROUP] = "7"
    obj = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "r", "namespace": "default",
                                                                    "labels": {QUEUE_LABEL: "lq"}},
           "spec": {"entrypoint": "python x.py", **ray["spec"]}}  # type: ignore[dict-item]
    with pytest.raises(InvalidObject) as caught:
        service.create(resolve("rayjob"), "default", obj)
    assert [(e.path, e.message) for e in caught.value.errors] == [
        (f"spec.rayClusterSpec.workerGroupSpecs[1].template.metadata.annotations[{GROUP}]",
         "must not be a number (got '7')")]
    with pytest.raises(NotFound):
        service.store.get(service.key(resolve("rayjob"), "default", "r"))
    del cluster["workerGroupSpecs"][1]["template"]["metadata"]["annotations"][GROUP]
    assert service.create(resolve("rayjob"), "default", obj)["spec"]["suspend"] is True
