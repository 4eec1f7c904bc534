"""The Kubernetes API surface, over HTTP against a real server process."""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any

from tests import admin
from tests.conftest import Server, guide_text

CQ_PATH = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues"


def _apply(server: Server, text: str) -> None:
    r = admin.post(f"{server.url}/flexq/v1/apply", json={"sources": [{"text": text}]})
    assert r.status_code == 200, r.text


def test_version_and_discovery(server: Server) -> None:
    assert admin.get(f"{server.url}/version").json()["major"] == "1"
    groups = admin.get(f"{server.url}/apis").json()
    kueue = next(g for g in groups["groups"] if g["name"] == "kueue.x-k8s.io")
    assert kueue["preferredVersion"]["version"] == "v1beta2"
    assert [v["version"] for v in kueue["versions"]] == ["v1beta2", "v1beta1"]
    resources = admin.get(f"{server.url}/apis/kueue.x-k8s.io/v1beta1").json()["resources"]
    cq = next(r for r in resources if r["name"] == "clusterqueues")
    assert cq["shortNames"] == ["cq"] and cq["namespaced"] is False and "watch" in cq["verbs"]
    assert any(r["name"] == "clusterqueues/status" for r in resources)
    lq = next(r for r in resources if r["name"] == "localqueues")
    assert lq["namespaced"] is True and "lq" in lq["shortNames"]
    core = admin.get(f"{server.url}/api/v1").json()["resources"]
    assert {"configmaps", "namespaces", "events"} <= {r["name"] for r in core}


def test_openapi_v3(server: Server) -> None:
    root = admin.get(f"{server.url}/openapi/v3").json()["paths"]
    assert {"api/v1", "apis/kueue.x-k8s.io/v1beta1", "apis/kueue.x-k8s.io/v1beta2", "apis/ray.io/v1"} <= set(root)
    doc = admin.get(server.url + root["apis/kueue.x-k8s.io/v1beta1"]["serverRelativeURL"]).json()
    patch = doc["paths"]["/apis/kueue.x-k8s.io/v1beta1/clusterqueues/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "kueue.x-k8s.io", "version": "v1beta1",
                                                        "kind": "ClusterQueue"}
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    schema = doc["components"]["schemas"]["io.x-k8s.kueue.v1beta1.ClusterQueue"]
    assert schema["x-kubernetes-group-version-kind"][0]["kind"] == "ClusterQueue"
    assert "spec" in schema["properties"]


def test_crud_conflict_and_status_errors(server: Server) -> None:
    base = server.url
    body = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    created = admin.post(f"{base}/apis/kueue.x-k8s.io/v1beta1/resourceflavors", json=body)
    assert created.status_code == 201
    obj = created.json()
    assert obj["metadata"]["uid"] and obj["metadata"]["resourceVersion"]
    dup = admin.post(f"{base}/apis/kueue.x-k8s.io/v1beta1/resourceflavors", json=body)
    assert dup.status_code == 409 and dup.json()["reason"] == "AlreadyExists"
    url = f"{base}/apis/kueue.x-k8s.io/v1beta1/resourceflavors/f"
    updated = admin.put(url, json={**obj, "spec": {"nodeLabels": {"a": "b"}}})
    assert updated.status_code == 200 and updated.json()["metadata"]["generation"] == 2
    stale = admin.put(url, json={**obj, "spec": {"nodeLabels": {"a": "c"}}})
    assert stale.status_code == 409 and stale.json()["reason"] == "Conflict"
    invalid = admin.put(url, json={**updated.json(), "spec": {"nodeLabels": {"a": "${X}"}}})
    status = invalid.json()
    assert invalid.status_code == 422 and status["kind"] == "Status" and status["reason"] == "Invalid"
    assert status["details"]["causes"][0]["field"] == "spec.nodeLabels.a"
    missing = admin.get(f"{base}/apis/kueue.x-k8s.io/v1beta1/resourceflavors/none")
    assert missing.status_code == 404
    assert missing.json()["message"] == 'resourceflavors.kueue.x-k8s.io "none" not found'
    unknown = admin.get(f"{base}/apis/kueue.x-k8s.io/v1beta1/widgets")
    assert unknown.status_code == 404
    patched = admin.patch(url, content=json.dumps({"metadata": {"labels": {"x": "y"}}}),
                          headers={"content-type": "application/merge-patch+json"})
    assert patched.json()["metadata"]["labels"] == {"x": "y"}
    deleted = admin.delete(url)
    assert deleted.status_code == 200 and admin.get(url).status_code == 404


def test_table_output(server: Server) -> None:
    _apply(server, guide_text("dws-tpu-queue.yaml"))
    table = admin.get(f"{server.url}{CQ_PATH}",
                      headers={"accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name", "Cohort", "Strategy", "Pending Workloads", "Admitted Workloads", "Active", "Reason"]
    assert table["rows"][0]["cells"] == ["cluster-queue", None, "BestEffortFIFO", 0, 0, "True", "Ready"]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


def test_watch_streams_changes_and_resumes(server: Server) -> None:
    _apply(server, guide_text("dws-tpu-queue.yaml"))
    listed = admin.get(f"{server.url}/apis/kueue.x-k8s.io/v1beta2/resourceflavors").json()
    rv = listed["metadata"]["resourceVersion"]
    events: list[dict[str, Any]] = []

    def watch() -> None:
        params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "5"}
        with admin.stream("GET", f"{server.url}/apis/kueue.x-k8s.io/v1beta2/resourceflavors", params=params,
                          timeout=10) as response:
            for line in response.iter_lines():
                if line:
                    events.append(json.loads(line))
                if len(events) == 2:
                    return

    thread = threading.Thread(target=watch)
    thread.start()
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "spot"}}
    admin.post(f"{server.url}/apis/kueue.x-k8s.io/v1beta1/resourceflavors", json=flavor)
    admin.delete(f"{server.url}/apis/kueue.x-k8s.io/v1beta1/resourceflavors/on-demand")
    thread.join(timeout=15)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "spot"),
                                                                             ("DELETED", "on-demand")]
    # From the start (no resourceVersion): the current objects first, as ADDED.
    params = {"watch": "true", "timeoutSeconds": "1", "fieldSelector": "metadata.name=dws"}
    with admin.stream("GET", f"{server.url}/apis/kueue.x-k8s.io/v1beta2/resourceflavors", params=params,
                      timeout=10) as response:
        initial = [json.loads(line) for line in response.iter_lines() if line]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in initial] == [("ADDED", "dws")]


def test_events_field_selector_for_describe(server: Server) -> None:
    r = admin.get(f"{server.url}/api/v1/namespaces/default/events",
                  params={"fieldSelector": "involvedObject.name=x,involvedObject.kind=ClusterQueue"})
    assert r.status_code == 200 and r.json()["items"] == []
    bad = admin.get(f"{server.url}/api/v1/namespaces/default/events", params={"fieldSelector": "nonsense"})
    assert bad.status_code == 400


def test_deeply_nested_bodies_are_refused_not_crashed_on(server: Server) -> None:
    deep = "[" * 5000 + "]" * 5000
    for url, body in (
            (server.url + "/api/v1/namespaces/default/configmaps",
             '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deep"}, "data": {"x": ' + deep + "}}"),
            (server.url + "/v1/projects/p/locations/us-east5-b/clusters", '{"cluster": ' + deep + "}")):
        response = admin.post(url, content=body, headers={"Content-Type": "application/json"}, timeout=30)
        assert response.status_code == 400, (url, response.status_code, response.text[:300])
        assert "nest" in response.text.lower() or "invalid json" in response.text.lower()
    # Within the limit: an ordinary object (a few levels) still goes through, and the server still serves.
    ok = admin.post(server.url + "/api/v1/namespaces/default/configmaps",
                    json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shallow"}, "data": {"x": "1"}})
    assert ok.status_code == 201, ok.text
    nested = {"a": 1}
    for _ in range(60):
        nested = {"a": nested}
    assert '"a"' in json.dumps(nested)  # 60 levels: under the limit
    response = admin.post(server.url + "/api/v1/namespaces/default/configmaps",
                          json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n", "labels": nested}})
    assert response.status_code in (400, 422), "refused as an invalid object, not as too deep"
    assert "nests deeper" not in response.text
    for _ in range(90):  # 150 levels: parsed (the JSON reader's own limit is far deeper), then refused as too deep
        nested = {"a": nested}
    response = admin.post(server.url + "/api/v1/namespaces/default/configmaps",
                          json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n", "labels": nested}})
    assert response.status_code == 400 and "nests deeper than 100 levels" in response.text, response.text[:300]


def test_a_delete_whose_options_are_not_an_object_is_refused_and_deletes_nothing(server: Server) -> None:
    url = f"{server.url}/apis/kueue.x-k8s.io/v1beta1/resourceflavors"
    assert admin.post(url, json={"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
                                 "metadata": {"name": "kept"}}).status_code == 201
    for body in (b"true", b"[1]", b'{"preconditions": "x"}'):
        r = admin.request("DELETE", f"{url}/kept", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400, (body, r.text)
        assert r.json()["reason"] == "BadRequest" and "DeleteOptions" in r.json()["message"]
    assert admin.get(f"{url}/kept").status_code == 200
    assert admin.request("DELETE", f"{url}/kept", content=b'{"preconditions": {}}',
                         headers={"content-type": "application/json"}).status_code == 200


def test_an_idle_connection_stays_open_past_a_pause(server: Server) -> None:
    """A client that pools its connections (client-go, aiohttp) reuses one after a pause: the server keeps it open as
    the Kubernetes API server does (90 s), not closing it under the client's next request after five seconds."""
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", "/healthz")
        assert conn.getresponse().read() == b"ok"
        sock = conn.sock
        time.sleep(6)
        conn.request("GET", "/healthz")
        answer = conn.getresponse()
        assert (answer.status, conn.sock) == (200, sock)
        answer.read()
    finally:
        conn.close()
