"""Input built to hurt: an alias bomb and a lone surrogate are refused with 400 and leave the server as it was."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flexq.api import InputError, load_documents
from tests import admin
from tests.conftest import Server

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def _bomb(levels: int = 9) -> str:
    """A 400-byte ConfigMap whose anchors expand to ``9 ** levels`` strings."""
    lines = ['a0: &a0 "lol"']
    for n in range(1, levels + 1):
        lines.append(f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 9) + "]")
    body = "\n  ".join(lines)
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: bomb}}\ndata:\n  {body}\n"


def test_the_manifest_reader_refuses_excessive_aliasing_and_keeps_a_few_aliases() -> None:
    with pytest.raises(InputError, match="excessive aliasing"):
        load_documents(_bomb(), "bomb.yaml")
    (doc,) = load_documents("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok, labels: &l {a: b}}\n"
                            "data: {x: y}\nextra: *l\n", "fine.yaml")
    assert doc.obj["extra"] == {"a": "b"}, "ordinary anchors still read"


@pytest.mark.parametrize("how", ["apply", "yaml-body"])
def test_an_alias_bomb_gets_400_and_nothing_is_stored(server: Server, how: str) -> None:
    if how == "apply":
        answer = admin.post(server.url + "/flexq/v1/apply", json={"sources": [{"text": _bomb(), "source": "b.yaml"}]})
    else:
        answer = admin.post(server.url + CONFIGMAPS, content=_bomb(), headers={"Content-Type": "application/yaml"})
    assert answer.status_code == 400, answer.text
    assert "excessive aliasing" in answer.json()["message"]
    assert admin.get(server.url + CONFIGMAPS + "/bomb").status_code == 404


def test_a_lone_surrogate_gets_400_and_every_list_still_answers(server: Server) -> None:
    raw = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": "\\ud800"}}'
    answer = admin.post(server.url + CONFIGMAPS, content=raw, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400 and "surrogate" in answer.json()["message"], answer.text
    paired = raw.replace("\\ud800", "\\ud83d\\udca5")
    assert admin.post(server.url + CONFIGMAPS, content=paired,
                      headers={"Content-Type": "application/json"}).status_code == 201, "a pair is a character"
    stored: dict[str, Any] = admin.get(server.url + CONFIGMAPS + "/x").json()
    assert stored["data"]["k"] == "\U0001f4a5"
    for path in (CONFIGMAPS, "/api/v1/configmaps"):
        assert admin.get(server.url + path).status_code == 200
    assert json.loads(admin.get(server.url + "/api/v1/configmaps").text)["items"]


@pytest.mark.parametrize(("query", "field"), [("timeoutSeconds=abc", "timeoutSeconds"),
                                              ("resourceVersion=abc", "resourceVersion"),
                                              ("timeoutSeconds=-5", "timeoutSeconds")])
def test_a_watch_with_a_malformed_parameter_gets_400(server: Server, query: str, field: str) -> None:
    answer = admin.get(f"{server.url}{CONFIGMAPS}?watch=true&{query}")
    assert answer.status_code == 400, answer.text
    assert answer.json()["message"].startswith(f"{field}: Invalid value")


def test_more_pod_sets_than_a_workload_holds_get_422_naming_the_field(server: Server) -> None:
    """A RayJob's head and worker groups are its Workload's pod sets, of which Kueue allows 8."""
    pod = {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray"}]}}
    groups = [{"groupName": f"g{i}", "replicas": 1, "template": pod} for i in range(10_000)]
    job = {"apiVersion": "ray.io/v1", "kind": "RayJob",
           "metadata": {"name": "wide", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
           "spec": {"entrypoint": "python x.py",
                    "rayClusterSpec": {"headGroupSpec": {"template": pod}, "workerGroupSpecs": groups}}}
    rayjobs = server.url + "/apis/ray.io/v1/namespaces/default/rayjobs"
    answer = admin.post(rayjobs, json=job)
    assert answer.status_code == 422 and answer.json()["reason"] == "Invalid", answer.text[:500]
    assert answer.json()["message"] == ('RayJob.ray.io "wide" is invalid: spec.rayClusterSpec.workerGroupSpecs: '
                                        "Too many: 10001: must have at most 8 items")
    assert admin.get(rayjobs + "/wide").status_code == 404
    workload = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "wide"},
                "spec": {"queueName": "user-queue",
                         "podSets": [{"name": f"p{i}", "count": 1, "template": pod} for i in range(9)]}}
    answer = admin.post(server.url + "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads", json=workload)
    assert answer.status_code == 422, answer.text
    assert "spec.podSets: Too many: 9: must have at most 8 items" in answer.json()["message"]
