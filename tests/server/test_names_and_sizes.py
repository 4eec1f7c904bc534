"""A ConfigMap key or a volume path that would climb out of a job's directory, and an object over the API server's
size limits, are refused on every way in (create, replace, each patch, server-side apply, flexq's apply) with 422
Invalid naming the field, and nothing is written."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from flexq.objects.service import ObjectService
from flexq.server.app import create_app
from flexq.store import Store

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
RAYJOBS = "/apis/ray.io/v1/namespaces/default/rayjobs"
BAD_KEY = "../../x"
KEY_CAUSES = [
    {"field": f"data[{BAD_KEY}]", "message": f'Invalid value: "{BAD_KEY}": a valid config key must consist of '
     "alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for "
     "validation is '[-._a-zA-Z0-9]+')"},
    {"field": f"data[{BAD_KEY}]", "message": f"Invalid value: \"{BAD_KEY}\": must not start with '..'"},
]


@pytest.fixture(scope="module")
def app() -> Iterator[Any]:
    """The whole HTTP surface in this process, on a store in memory: the tests write under names of their own."""
    store = Store()
    try:
        yield create_app(ObjectService(store))
    finally:
        store.close()


def _call(app: Any, method: str, path: str, **kwargs: Any) -> httpx.Response:
    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://flexq") as client:
            return await client.request(method, path, **kwargs)

    return asyncio.run(call())


def _config_map(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def _apply_body(obj: dict[str, Any]) -> dict[str, Any]:
    return {"sources": [{"text": json.dumps(obj), "source": "bad.yaml"}]}


def _causes(answer: httpx.Response) -> list[dict[str, str]]:
    assert answer.status_code == 422 and answer.json()["reason"] == "Invalid", answer.text[:500]
    return [{"field": c["field"], "message": c["message"]} for c in answer.json()["details"]["causes"]]


BAD_DATA = {"good": "1", BAD_KEY: "* * * * * root sh -c id"}
MERGE, JSON_PATCH, STRATEGIC, APPLY = (f"application/{t}" for t in (
    "merge-patch+json", "json-patch+json", "strategic-merge-patch+json", "apply-patch+yaml"))


def _ways_in(name: str) -> dict[str, tuple[str, str, dict[str, Any], bool]]:
    """Each way to write ConfigMap ``name`` with the bad key: method, path, request, whether it exists first."""
    whole = _config_map(name, BAD_DATA)
    one = f"{CONFIGMAPS}/{name}"
    return {
        "create": ("POST", CONFIGMAPS, {"json": whole}, False),
        "replace": ("PUT", one, {"json": whole}, True),
        "merge-patch": ("PATCH", one, {"json": {"data": {BAD_KEY: "1"}}, "headers": {"Content-Type": MERGE}}, True),
        "json-patch": ("PATCH", one, {"json": [{"op": "add", "path": "/data/..~1..~1x", "value": "1"}],
                                      "headers": {"Content-Type": JSON_PATCH}}, True),
        "strategic-patch": ("PATCH", one, {"json": {"data": {BAD_KEY: "1"}}, "headers": {"Content-Type": STRATEGIC}},
                            True),
        "ssa-update": ("PATCH", one, {"json": whole, "headers": {"Content-Type": APPLY}}, True),
        "ssa-create": ("PATCH", one, {"json": whole, "headers": {"Content-Type": APPLY}}, False),
    }


@pytest.mark.parametrize("way", list(_ways_in("x")))
def test_a_key_that_climbs_out_is_refused_on_every_write(app: Any, way: str) -> None:
    name = f"cm-{way}"
    method, path, request_args, existing = _ways_in(name)[way]
    if existing:
        assert _call(app, "POST", CONFIGMAPS, json=_config_map(name, {"good": "0"})).status_code == 201
    answer = _call(app, method, path, **request_args)
    assert _causes(answer) == KEY_CAUSES
    assert answer.json()["message"].startswith(f'ConfigMap "{name}" is invalid: data[{BAD_KEY}]: Invalid value: ')
    stored = _call(app, "GET", f"{CONFIGMAPS}/{name}")
    assert (stored.status_code, stored.json().get("data")) == ((200, {"good": "0"}) if existing else (404, None))


def test_flexq_apply_refuses_the_key_and_writes_nothing(app: Any) -> None:
    body = {"sources": [{"text": json.dumps(_config_map("fine", {"key.name": "1"})), "source": "ok.yaml"},
                        {"text": json.dumps(_config_map("applied", BAD_DATA)), "source": "bad.yaml"}]}
    answer = _call(app, "POST", "/flexq/v1/apply", json=body)
    assert _causes(answer) == KEY_CAUSES
    assert "bad.yaml" in answer.json()["message"]
    for name in ("fine", "applied"):  # all or nothing
        assert _call(app, "GET", f"{CONFIGMAPS}/{name}").status_code == 404


def _rayjob(name: str, volume: dict[str, Any], mount: dict[str, Any]) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray", "volumeMounts": [mount]}],
                    "volumes": [volume]}}
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": name},
            "spec": {"entrypoint": "python /app/x.py", "rayClusterSpec": {"headGroupSpec": {"template": pod}}}}


POD = "spec.rayClusterSpec.headGroupSpec.template.spec"
CODE = {"name": "code", "configMap": {"name": "code"}}


@pytest.mark.parametrize(("volume", "mount", "expected"), [
    pytest.param({"name": "code", "configMap": {"name": "code", "items": [{"key": "k", "path": "../../../etc/x"}]}},
                 {"name": "code", "mountPath": "/app"},
                 [{"field": f"{POD}.volumes[0].configMap.items[0].path",
                   "message": "Invalid value: \"../../../etc/x\": must not contain '..'"}], id="item climbing out"),
    pytest.param({"name": "code", "configMap": {"name": "code", "items": [{"key": "k", "path": "/etc/x"}]}},
                 {"name": "code", "mountPath": "/app"},
                 [{"field": f"{POD}.volumes[0].configMap.items[0].path",
                   "message": 'Invalid value: "/etc/x": must be a relative path'}], id="item absolute"),
    pytest.param(CODE, {"name": "code", "mountPath": "/app", "subPath": "../.."},
                 [{"field": f"{POD}.containers[0].volumeMounts[0].subPath",
                   "message": "Invalid value: \"../..\": must not contain '..'"}], id="subPath climbing out"),
    pytest.param(CODE, {"name": "code", "mountPath": ""},
                 [{"field": f"{POD}.containers[0].volumeMounts[0].mountPath", "message": "Required value"}],
                 id="no mountPath"),
])
@pytest.mark.parametrize("way", ["create", "apply"])
def test_a_volume_path_that_climbs_out_is_refused(app: Any, volume: dict[str, Any], mount: dict[str, Any],
                                                  expected: list[dict[str, str]], way: str) -> None:
    job = _rayjob("escape", volume, mount)
    answer = (_call(app, "POST", RAYJOBS, json=job) if way == "create" else
              _call(app, "POST", "/flexq/v1/apply", json=_apply_body(job)))
    assert _causes(answer) == expected
    assert _call(app, "GET", f"{RAYJOBS}/escape").status_code == 404


TOO_BIG = [{"field": "[]", "message": "Too long: must have at most 1048576 bytes"}]
TOO_ANNOTATED = [{"field": "metadata.annotations", "message": "Too long: must have at most 262144 bytes"}]


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(_config_map("big", {"blob": "x" * 2_400_000}), TOO_BIG, id="a 2.4 MB ConfigMap"),
    pytest.param({**_config_map("noted", {"k": "v"}), "metadata": {"name": "noted",
                                                                   "annotations": {"a": "x" * 300_000}}},
                 TOO_ANNOTATED, id="300 kB of annotations"),
])
@pytest.mark.parametrize("way", ["create", "apply"])
def test_an_object_over_the_api_servers_limits_gets_422(app: Any, obj: dict[str, Any],
                                                        expected: list[dict[str, str]], way: str) -> None:
    answer = (_call(app, "POST", CONFIGMAPS, json=obj) if way == "create" else
              _call(app, "POST", "/flexq/v1/apply", json=_apply_body(obj)))
    assert _causes(answer) == expected
    if way == "create":
        assert answer.json()["message"] == (f'ConfigMap "{obj["metadata"]["name"]}" is invalid: '
                                            f'{expected[0]["field"]}: {expected[0]["message"]}')
    assert _call(app, "GET", f"{CONFIGMAPS}/{obj['metadata']['name']}").status_code == 404


def test_valid_keys_and_a_mebibyte_are_still_taken(app: Any) -> None:
    made = _call(app, "POST", CONFIGMAPS, json=_config_map("full", {"key.name": "x" * (1024 * 1024 - 1),
                                                                     "KEY_NAME-2": "y", ".hidden": ""}))
    assert made.status_code == 201, made.text[:300]
