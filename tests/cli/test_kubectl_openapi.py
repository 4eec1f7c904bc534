"""kubectl's client-side validation reads ``/openapi/v2``: a kind flexq does not serve gets Kubernetes' own
"no matches for kind" (not "failed to download openapi"), and a served kind is still validated strictly."""

from __future__ import annotations

from typing import Any

import pytest

from tests import admin
from tests.conftest import Server


@pytest.fixture
def server(module_server: Server) -> Server:
    """The tests here share one server: each writes under names of its own, or reads what every server serves."""
    return module_server

# A JobSet (not served: flexq has no jobset.x-k8s.io) beside a flavor.
UNSERVED = """apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: "default"
spec:
  replicatedJobs: []
---
kind: ResourceFlavor
apiVersion: kueue.x-k8s.io/v1beta1
metadata:
  name: "tas-flavor"
spec:
  nodeLabels:
    cloud.provider.com/node-group: "tas-node-group"
"""

MISSPELLED = """apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: typo-flavor
spec:
  nodeLabel:
    pool: a
"""


def test_an_unknown_kind_gets_no_matches_for_kind(kubectl: Any, server: Server) -> None:
    result = kubectl("apply", "-f", "-", input=UNSERVED)
    assert result.code != 0
    assert "failed to download openapi" not in result.err, result.err
    assert ('resource mapping not found for name: "default" namespace: "" from "STDIN": no matches for kind '
            '"JobSet" in version "jobset.x-k8s.io/v1alpha2"') in result.err, result.err
    assert "ensure CRDs are installed first" in result.err
    assert 'resourceflavor.kueue.x-k8s.io/tas-flavor created' in result.out, "the served kind beside it is applied"
    got = admin.get(f"{server.url}/apis/kueue.x-k8s.io/v1beta1/resourceflavors/tas-flavor")
    assert got.status_code == 200


def test_a_served_kind_is_still_validated_strictly(kubectl: Any, server: Server) -> None:
    refused = kubectl("apply", "-f", "-", input=MISSPELLED)
    assert refused.code != 0
    assert 'strict decoding error: unknown field "spec.nodeLabel"' in refused.err, refused.err
    assert admin.get(f"{server.url}/apis/kueue.x-k8s.io/v1beta1/resourceflavors/typo-flavor").status_code == 404


def test_openapi_v2_as_json_and_as_protobuf(server: Server) -> None:
    doc = admin.get(f"{server.url}/openapi/v2").json()
    assert doc["swagger"] == "2.0"
    patch = doc["paths"]["/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "kueue.x-k8s.io", "version": "v1beta2",
                                                        "kind": "ClusterQueue"}
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    for name, schema in doc["definitions"].items():
        for ref in _refs(schema):
            assert ref.removeprefix("#/definitions/") in doc["definitions"], f"{name} refers to {ref}"
    pb = admin.get(f"{server.url}/openapi/v2",
                   headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"})
    assert pb.headers["content-type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    assert pb.content.startswith(b"\n\x032.0"), "field 1 (swagger) first"
    assert b"io.x-k8s.kueue.v1beta2.ClusterQueue" in pb.content


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [node["$ref"]] if "$ref" in node else [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_the_crd_list_names_the_custom_kinds_only(server: Server) -> None:
    """kubectl lists CRDs to tell a custom kind from one nobody serves: the list is flexq's own custom kinds."""
    got = admin.get(f"{server.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions").json()
    names = {item["metadata"]["name"]: item["spec"] for item in got["items"]}
    assert names["clusterqueues.kueue.x-k8s.io"]["names"]["kind"] == "ClusterQueue"
    assert names["rayjobs.ray.io"]["scope"] == "Namespaced"
    assert not [n for n in names if n.endswith((".batch", ".scheduling.k8s.io")) or "." not in n], names
    one = admin.get(f"{server.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/rayjobs.ray.io")
    assert one.status_code == 200 and one.json()["spec"]["group"] == "ray.io"
    assert admin.get(f"{server.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x.y").status_code == 404
    refused = admin.post(f"{server.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json={})
    assert refused.status_code == 405
