"""What the official Python client (and other clients) send, answered as the API server answers it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests import admin
from tests.conftest import Server

kubernetes = pytest.importorskip("kubernetes", reason="the kubernetes client is not installed: pip install -e '.[dev]'")
from kubernetes import client  # noqa: E402


@pytest.fixture
def api(server: Server) -> Iterator[Any]:
    """An ``ApiClient`` of the official Python client, configured for ``server`` as its administrator."""
    config = client.Configuration(host=server.url, api_key={"authorization": server.token},
                                  api_key_prefix={"authorization": "Bearer"})
    with client.ApiClient(config) as api_client:
        yield api_client


def test_typed_models_are_created_without_api_version_or_kind(api: Any) -> None:
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta1", "default", "localqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "user-queue"},
            "spec": {"clusterQueue": "cluster-queue"}})
    # The client's models leave apiVersion and kind out of the body: the URL says them.
    container = client.V1Container(name="c", image="busybox", command=["true"])
    queued = client.V1ObjectMeta(name="pi", labels={"kueue.x-k8s.io/queue-name": "user-queue"})
    job = client.V1Job(metadata=queued, spec=client.V1JobSpec(
        suspend=True, template=client.V1PodTemplateSpec(spec=client.V1PodSpec(
            containers=[container], restart_policy="Never"))))
    created = client.BatchV1Api(api).create_namespaced_job("default", job)
    assert (created.api_version, created.kind, created.metadata.name) == ("batch/v1", "Job", "pi")
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map("default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="settings"), data={"a": "1"}))
    current = core.read_namespaced_config_map("settings", "default")
    replaced = core.replace_namespaced_config_map("settings", "default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="settings", resource_version=current.metadata.resource_version),
        data={"a": "2"}))
    assert replaced.kind == "ConfigMap" and replaced.data == {"a": "2"}


def test_a_body_of_another_version_or_kind_is_refused(server: Server) -> None:
    flavors = f"{server.url}/apis/kueue.x-k8s.io/v1beta1/resourceflavors"
    other = admin.post(flavors, json={"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                      "metadata": {"name": "f"}})
    assert other.status_code == 400 and other.json()["reason"] == "BadRequest"
    assert other.json()["message"] == ("the API version in the data (kueue.x-k8s.io/v1beta2) does not match the "
                                       "expected API version (kueue.x-k8s.io/v1beta1)")
    wrong_kind = admin.post(flavors, json={"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
                                           "metadata": {"name": "f"}})
    assert wrong_kind.status_code == 422
    assert wrong_kind.json()["message"] == ('ClusterQueue.kueue.x-k8s.io "f" is invalid: kind: Invalid value: '
                                            '"ClusterQueue": must be ResourceFlavor')
    configmaps = f"{server.url}/api/v1/namespaces/default/configmaps"
    pod = admin.post(configmaps, json={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
    assert pod.status_code == 400 and pod.json()["message"] == (
        'Pod in version "v1" cannot be handled as a ConfigMap: converting (v1.Pod) to (core.ConfigMap): '
        "unknown conversion")
    v2 = admin.post(configmaps, json={"apiVersion": "v2", "kind": "ConfigMap", "metadata": {"name": "p"}})
    assert v2.status_code == 400 and v2.json()["message"] == (
        'ConfigMap in version "v2" cannot be handled as a ConfigMap: no kind "ConfigMap" is registered for '
        'version "v2" in scheme "pkg/api/legacyscheme/scheme.go:30"')
    # Left out, they are the URL's, on an update too.
    created = admin.post(configmaps, json={"metadata": {"name": "c"}, "data": {"a": "1"}})
    assert created.status_code == 201 and created.json()["kind"] == "ConfigMap"
    updated = admin.put(f"{configmaps}/c", json={"metadata": created.json()["metadata"], "data": {"a": "2"}})
    assert updated.status_code == 200 and updated.json()["data"] == {"a": "2"}
    flavor = admin.post(flavors, json={"metadata": {"name": "f"}})
    assert flavor.status_code == 201 and flavor.json()["apiVersion"] == "kueue.x-k8s.io/v1beta1"
