"""Validation: each bad input names the field path (and the line, from YAML)."""

from __future__ import annotations

from typing import Any

import pytest

from flexq.api.documents import load_documents
from flexq.api.object_errors import InvalidObject
from flexq.api.validation import validate_document, validate_object
from tests.conftest import guide_text


def _errors(text: str) -> list[str]:
    docs = load_documents(text, "f.yaml")
    with pytest.raises(InvalidObject) as info:
        for doc in docs:
            validate_document(doc)
    return [str(e) for e in info.value.errors]


def test_guide_manifests_are_valid() -> None:
    for doc in load_documents(guide_text("dws-tpu-queue.yaml"), "q"):
        validate_document(doc)
    for doc in load_documents(guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID="1"), "j"):
        assert validate_document(doc).kind == "RayJob"


def test_invalid_quantity_names_path_and_line() -> None:
    text = guide_text("dws-tpu-queue.yaml").replace("nominalQuota: 1000000000 #", "nominalQuota: lots #")
    (error,) = _errors(text)
    assert error == ('line 57: spec.resourceGroups[0].flavors[2].resources[2].nominalQuota: '
                     'invalid quantity "lots"')


def test_negative_quantity() -> None:
    text = guide_text("dws-tpu-queue.yaml").replace("nominalQuota: 40", "nominalQuota: -40")
    (error,) = _errors(text)
    assert "spec.resourceGroups[0].flavors[1].resources[0].nominalQuota" in error
    assert "must be greater than or equal to 0" in error


def test_duplicate_flavor_in_cluster_queue() -> None:
    text = guide_text("dws-tpu-queue.yaml").replace('name: "dws" # If', 'name: "on-demand" # If')
    (error,) = _errors(text)
    assert error == 'line 50: spec.resourceGroups[0].flavors[2].name: Duplicate value: "on-demand"'


CQ = """apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: cq
spec:
{spec}
"""


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("  queueingStrategy: Sometimes",
         'spec.queueingStrategy: Unsupported value: "Sometimes": supported values: '
         "'StrictFIFO' or 'BestEffortFIFO'"),
        ("  resourceGroups:\n  - coveredResources: [cpu, memory]\n    flavors:\n    - name: f\n      resources:\n"
         "      - name: cpu\n        nominalQuota: 1",
         "spec.resourceGroups[0].flavors[0].resources: Invalid value: 1: must have the same number of resources "
         "as coveredResources (2)"),
        ("  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: f\n      resources:\n"
         "      - name: memory\n        nominalQuota: 1",
         'spec.resourceGroups[0].flavors[0].resources[0].name: Invalid value: "memory": must match the name '
         'in coveredResources ("cpu")'),
        ("  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: f\n      resources:\n"
         "      - name: cpu\n        nominalQuota: 1\n        borrowingLimit: 1",
         "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: Invalid value: must be nil when cohort "
         "is empty"),
        ("  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: f\n      resources:\n"
         "      - name: cpu",
         "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Required value"),
        ("  preemption:\n    withinClusterQueue: Always",
         'spec.preemption.withinClusterQueue: Unsupported value: "Always"'),
        ("  admissionChecks: [a]\n  admissionChecksStrategy:\n    admissionChecks:\n    - name: a",
         "spec: Invalid value: either admissionChecks or admissionChecksStrategy can be set, but not both"),
        ("  resourceGroups: {}", "spec.resourceGroups: Invalid value: object: must be a list"),
    ],
)
def test_cluster_queue_rules(spec: str, expected: str) -> None:
    errors = _errors(CQ.format(spec=spec))
    assert any(expected in e for e in errors), errors


@pytest.mark.parametrize(
    ("obj", "path", "fragment"),
    [
        ({"kind": "ResourceFlavor", "metadata": {"name": "x"}}, "apiVersion", "Required value"),
        ({"apiVersion": "kueue.x-k8s.io/v1beta1", "metadata": {"name": "x"}}, "kind", "Required value"),
        ({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Gadget", "metadata": {"name": "x"}}, "kind",
         'no kind "Gadget"'),
        ({"apiVersion": "kueue.x-k8s.io/v9", "kind": "ClusterQueue", "metadata": {"name": "x"}}, "kind",
         "served: kueue.x-k8s.io/v1beta2, kueue.x-k8s.io/v1beta1"),
        ({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "q"}, "spec": {}},
         "spec.clusterQueue", "Required value"),
        ({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "Q_1"},
          "spec": {"clusterQueue": "cq"}}, "metadata.name", "RFC 1123"),
        ({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {}}, "metadata.name",
         "Required value"),
        ({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "f"},
          "spec": {"nodeLabels": {"pool": "${POOL}"}}}, "spec.nodeLabels.pool", "label value"),
        ({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "AdmissionCheck", "metadata": {"name": "a"},
          "spec": {}}, "spec.controllerName", "Required value"),
        ({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass", "metadata": {"name": "p"},
          "value": "high"}, "value", "must be an integer"),
        ({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"}, "spec": {"entrypoint": "x"}},
         "spec.rayClusterSpec", "Required value"),
        ({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"},
          "spec": {"entrypoint": "x", "clusterSelector": {"team": "a"}}},
         "spec.clusterSelector[ray.io/cluster]", "Required value"),
        ({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"},
          "spec": {"entrypoint": "x", "clusterSelector": {"ray.io/cluster": "c"}, "suspend": True}},
         "spec.suspend", "cannot be suspended"),
        ({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"},
          "spec": {"entrypoint": "x", "clusterSelector": {"ray.io/cluster": "c"}, "backoffLimit": 2}},
         "spec.backoffLimit", "is not retried"),
        ({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"},
          "spec": {"entrypoint": "x", "clusterSelector": {"ray.io/cluster": "c"}, "submissionMode": "SidecarMode"}},
         "spec.submissionMode", "Unsupported value"),
        ({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
          "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}},
         "spec.template.spec.restartPolicy", "Unsupported value"),
        ({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
          "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
              {"name": "c", "resources": {"requests": {"cpu": "-1"}}}]}}}},
         "spec.template.spec.containers[0].resources.requests.cpu", "must be greater than or equal to 0"),
        ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": 1}},
         "data.a", "must be a string"),
        ({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
          "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}], "tolerations": [
              {"key": "a", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]}}}},
         "spec.template.spec.tolerations[0]", "effect must be 'NoExecute' when `tolerationSeconds` is set"),
        ({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "f"},
          "spec": {"tolerations": [{"key": "a", "operator": "Exists", "tolerationSeconds": 5}]}},
         "spec.tolerations[0]", 'effect: Invalid value: "": effect must be \'NoExecute\''),
    ],
)
def test_objects(obj: dict[str, object], path: str, fragment: str) -> None:
    with pytest.raises(InvalidObject) as info:
        validate_object(obj)
    matching = [e for e in info.value.errors if e.path == path]
    assert matching, [str(e) for e in info.value.errors]
    assert fragment in matching[0].message


def test_a_rayjob_on_an_existing_cluster_is_valid() -> None:
    obj = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"},
           "spec": {"entrypoint": "python x.py", "clusterSelector": {"ray.io/cluster": "notebook"}, "backoffLimit": 0}}
    assert validate_object(obj).kind == "RayJob"


def _groups(n: int) -> list[dict[str, Any]]:
    pod = {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray"}]}}
    return [{"groupName": f"g{i}", "replicas": 1, "template": pod} for i in range(n)]


@pytest.mark.parametrize("kind", ["RayJob", "RayCluster"])
def test_a_ray_cluster_has_at_most_eight_pod_sets(kind: str) -> None:
    """Kueue's webhooks: the head and each worker group are a pod set of the Workload, which has at most 8."""
    def obj(groups: int) -> dict[str, Any]:
        cluster = {"headGroupSpec": {"template": _groups(1)[0]["template"]}, "workerGroupSpecs": _groups(groups)}
        spec = {"entrypoint": "python x.py", "rayClusterSpec": cluster} if kind == "RayJob" else cluster
        return {"apiVersion": "ray.io/v1", "kind": kind, "metadata": {"name": "r"}, "spec": spec}

    assert validate_object(obj(7)).kind == kind
    path = "spec.rayClusterSpec.workerGroupSpecs" if kind == "RayJob" else "spec.workerGroupSpecs"
    for groups in (8, 10_000):
        with pytest.raises(InvalidObject) as info:
            validate_object(obj(groups))
        assert [(e.path, e.message) for e in info.value.errors] == [
            (path, f"Too many: {groups + 1}: must have at most 8 items")]


def test_a_workload_has_at_most_eight_pod_sets() -> None:
    podsets = [{"name": f"p{i}", "count": 1, "template": _groups(1)[0]["template"]} for i in range(9)]
    obj = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w"},
           "spec": {"queueName": "q", "podSets": podsets}}
    with pytest.raises(InvalidObject) as info:
        validate_object(obj)
    assert [(e.path, e.message) for e in info.value.errors] == [
        ("spec.podSets", "Too many: 9: must have at most 8 items")]
    obj["spec"]["podSets"] = podsets[:8]
    assert validate_object(obj).kind == "Workload"


def test_a_workload_pod_sets_topology_request_names_its_group() -> None:
    """Kueue's ``topologyRequest.podSetGroupName``: a string of at most 256 characters."""
    template = _groups(1)[0]["template"]
    podsets = [{"name": name, "count": count, "template": template,
                "topologyRequest": {"required": "rack", "podSetGroupName": "g"}}
               for name, count in (("l", 1), ("w", 4))]
    obj = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w"},
           "spec": {"queueName": "q", "podSets": podsets}}
    assert validate_object(obj).kind == "Workload"
    podsets[1]["topologyRequest"] = {"required": "rack", "podSetGroupName": "g" * 257}
    with pytest.raises(InvalidObject) as info:
        validate_object(obj)
    assert [e.path for e in info.value.errors] == ["spec.podSets[1].topologyRequest.podSetGroupName"]
    assert "at most 256" in info.value.errors[0].message


def test_unknown_fields_are_accepted() -> None:
    obj = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "f"},
           "spec": {"futureField": {"x": 1}}, "extra": True}
    assert validate_object(obj).kind == "ResourceFlavor"


def test_all_problems_of_a_document_reported() -> None:
    obj = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
           "spec": {"queueingStrategy": "X", "stopPolicy": "Y"}}
    with pytest.raises(InvalidObject) as info:
        validate_object(obj)
    assert {e.path for e in info.value.errors} == {"spec.queueingStrategy", "spec.stopPolicy"}
