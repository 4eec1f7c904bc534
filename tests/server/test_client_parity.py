"""What the official Python client (and other clients) send, answered as the API server answers it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from flexq.objects.pages import encode_continue
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


def _configmaps(server: Server, namespace: str, count: int) -> None:
    docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}] + [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i:04d}", "namespace": namespace,
                                                               "labels": {"parity": str(i % 2)}},
         "data": {"i": str(i)}} for i in range(count)]
    text = "\n---\n".join(json.dumps(d) for d in docs)
    made = admin.post(f"{server.url}/flexq/v1/apply", json={"sources": [{"text": text}]})
    assert made.status_code == 200, made.text


def test_lists_come_in_pages_of_one_list(server: Server, api: Any) -> None:
    _configmaps(server, "paged", 250)
    url = f"{server.url}/api/v1/namespaces/paged/configmaps"
    everything = admin.get(url).json()
    assert "continue" not in everything["metadata"] and len(everything["items"]) == 250
    first = admin.get(url, params={"limit": 100}).json()
    assert [o["metadata"]["name"] for o in first["items"]] == [f"cm-{i:04d}" for i in range(100)]
    assert first["metadata"]["remainingItemCount"] == 150 and first["metadata"]["continue"]
    # Writes between the pages do not show in them: the pages are of the list as the first one read it.
    admin.post(url, json={"metadata": {"name": "cm-0150a"}})
    changed = admin.get(f"{url}/cm-0120").json()
    admin.put(f"{url}/cm-0120", json={**changed, "data": {"i": "changed"}})
    admin.delete(f"{url}/cm-0200")
    second = admin.get(url, params={"limit": 100, "continue": first["metadata"]["continue"]}).json()
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert second["metadata"]["remainingItemCount"] == 50
    third = admin.get(url, params={"limit": 100, "continue": second["metadata"]["continue"]}).json()
    assert "continue" not in third["metadata"] and "remainingItemCount" not in third["metadata"]
    pages = first["items"] + second["items"] + third["items"]
    assert [o["metadata"]["name"] for o in pages] == [o["metadata"]["name"] for o in everything["items"]]
    assert next(o for o in pages if o["metadata"]["name"] == "cm-0120")["data"] == {"i": "120"}
    # A selected list's pages do not count what is left (the API server does not either).
    even = admin.get(url, params={"limit": 10, "labelSelector": "parity=0"}).json()
    assert len(even["items"]) == 10 and "remainingItemCount" not in even["metadata"]
    # The Python client's own paging: every object of the list as it is now, once.
    names: list[str] = []
    token = None
    while True:
        page = client.CoreV1Api(api).list_namespaced_config_map("paged", limit=40, _continue=token)
        names += [o.metadata.name for o in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert len(names) == 250 and len(set(names)) == 250 and "cm-0150a" in names and "cm-0200" not in names


def test_continue_tokens_refused(server: Server) -> None:
    _configmaps(server, "paged", 30)
    url = f"{server.url}/api/v1/namespaces/paged/configmaps"
    first = admin.get(url, params={"limit": 10}).json()
    bad = admin.get(url, params={"limit": 10, "continue": "not-a-token"})
    assert bad.status_code == 400 and bad.json()["message"].startswith("invalid continue token: continue key is not "
                                                                       "valid: ")
    with_rv = admin.get(url, params={"limit": 10, "continue": first["metadata"]["continue"],
                                     "resourceVersion": first["metadata"]["resourceVersion"]})
    assert with_rv.status_code == 400
    assert with_rv.json()["message"] == "specifying resource version is not allowed when using continue"
    # A token of a list this server no longer holds, whose objects changed since: 410, and a token that goes on
    # from the same place in the list as it is now.
    admin.delete(f"{url}/cm-0025")
    stale = encode_continue(int(first["metadata"]["resourceVersion"]) - 1, ("paged", "cm-0009"))
    expired = admin.get(url, params={"limit": 10, "continue": stale})
    assert expired.status_code == 410 and expired.json()["reason"] == "Expired"
    assert expired.json()["message"].startswith("The provided continue parameter is too old to display a "
                                                "consistent list result.")
    rest = admin.get(url, params={"continue": expired.json()["metadata"]["continue"]}).json()
    assert [o["metadata"]["name"] for o in rest["items"]] == [f"cm-{i:04d}" for i in range(10, 30) if i != 25]
    # A token of a list not held (another server's, one from before a restart) whose objects have not changed since
    # is served: the list is as it was.
    now = admin.get(url).json()["metadata"]["resourceVersion"]
    held = admin.get(url, params={"limit": 5, "continue": encode_continue(int(now), ("paged", "cm-0019"))}).json()
    assert [o["metadata"]["name"] for o in held["items"]] == ["cm-0020", "cm-0021", "cm-0022", "cm-0023", "cm-0024"]
    assert held["metadata"]["remainingItemCount"] == 4 and held["metadata"]["resourceVersion"] == now


@pytest.mark.kubectl
def test_kubectl_gets_every_page(server: Server, kubectl: Any) -> None:
    _configmaps(server, "paged", 180)
    names = kubectl("get", "configmaps", "-n", "paged", "--chunk-size=50", "-o", "name")
    assert names.code == 0, names.err
    assert names.out.split() == [f"configmap/cm-{i:04d}" for i in range(180)]
    table = kubectl("get", "configmaps", "-n", "paged", "--chunk-size=50")
    assert table.code == 0 and len(table.out.splitlines()) == 181, table.err
