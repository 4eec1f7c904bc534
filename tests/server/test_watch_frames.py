"""A watch sends the same frames whether it frames objects from their stored text (no selector, the storage
version) or parses and converts them (a selector, another version): only the namespace asked for, every change."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from flexq.objects.service import ObjectService
from flexq.server.app import create_app
from flexq.store import Key, Store

LQ = "kueue.x-k8s.io"


def _queue(name: str, namespace: str, team: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace, "labels": {"team": team}},
            "spec": {"clusterQueue": "cq"}}


async def _frames(client: httpx.AsyncClient, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
    response = await client.get(path, params={"watch": "true", "timeoutSeconds": "1", **params})
    assert response.status_code == 200
    return [json.loads(line) for line in response.text.splitlines() if line]


def test_stored_text_frames_match_parsed_frames() -> None:
    store = Store()
    for ns in ("a", "b"):
        store.create(Key("", "namespaces", "", ns), {"apiVersion": "v1", "kind": "Namespace", "metadata": {}})
    since = str(store.current_rv())  # not 0: a watch from 0 lists first
    for i, ns in enumerate(["a", "b", "a"]):
        store.create(Key(LQ, "localqueues", ns, f"q{i}"), _queue(f"q{i}", ns, "x"))
    stored = store.get(Key(LQ, "localqueues", "a", "q0"))
    stored["spec"]["clusterQueue"] = "other"
    store.update(Key(LQ, "localqueues", "a", "q0"), stored)
    store.delete(Key(LQ, "localqueues", "a", "q2"))
    asyncio.run(_compare(store, since))


async def _compare(store: Store, since: str) -> None:
    transport = httpx.ASGITransport(app=create_app(ObjectService(store)))
    async with httpx.AsyncClient(transport=transport, base_url="http://flexq") as client:
        for namespace, names in ((None, ["q0", "q1", "q2", "q0", "q2"]), ("a", ["q0", "q2", "q0", "q2"])):
            where = f"/namespaces/{namespace}" if namespace else ""
            path = f"/apis/{LQ}/v1beta2{where}/localqueues"
            plain = await _frames(client, path, {"resourceVersion": since})
            selected = await _frames(client, path, {"resourceVersion": since, "labelSelector": "team=x"})
            assert plain == selected
            assert [(f["type"], f["object"]["metadata"]["name"]) for f in plain] == list(zip(
                ["ADDED"] * (len(names) - 2) + ["MODIFIED", "DELETED"], names, strict=True))
            assert plain[-2]["object"]["spec"]["clusterQueue"] == "other"
            older = await _frames(client, f"/apis/{LQ}/v1beta1{where}/localqueues", {"resourceVersion": since})
            assert [f["object"]["apiVersion"] for f in older] == ["kueue.x-k8s.io/v1beta1"] * len(names)
            assert [f["object"]["metadata"] for f in older] == [f["object"]["metadata"] for f in plain]
