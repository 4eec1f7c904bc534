"""Watches against a compacted change log: 410 Gone, then a list and a watch from its resourceVersion."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from flexq.objects.service import ObjectService
from flexq.server.app import create_app
from flexq.store import Key, Store

FLAVORS = "/apis/kueue.x-k8s.io/v1beta2/resourceflavors"


def _flavor(name: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}}


async def _frames(client: httpx.AsyncClient, params: dict[str, str]) -> list[dict[str, Any]]:
    response = await client.get(FLAVORS, params={"watch": "true", **params})  # the stream ends: read it whole
    assert response.status_code == 200
    return [json.loads(line) for line in response.text.splitlines() if line]


def test_watch_from_a_compacted_version_is_gone_and_a_relist_resumes() -> None:
    store = Store(history=20)
    for i in range(1000):  # the log is compacted after the 1,000th change, to its newest 20
        store.create(Key("", "configmaps", "default", f"c{i}"), {"apiVersion": "v1", "kind": "ConfigMap",
                                                                 "metadata": {"name": f"c{i}"}})
    store.create(Key("kueue.x-k8s.io", "resourceflavors", "", "old"), _flavor("old"))
    asyncio.run(_watch(store))


async def _watch(store: Store) -> None:
    transport = httpx.ASGITransport(app=create_app(ObjectService(store)))
    async with httpx.AsyncClient(transport=transport, base_url="http://flexq") as client:
        gone = await _frames(client, {"resourceVersion": "5", "timeoutSeconds": "1"})
        assert [f["type"] for f in gone] == ["ERROR"]
        assert gone[0]["object"]["code"] == 410 and gone[0]["object"]["reason"] == "Expired"
        listed = (await client.get(FLAVORS)).json()
        assert [i["metadata"]["name"] for i in listed["items"]] == ["old"]
        store.create(Key("kueue.x-k8s.io", "resourceflavors", "", "new"), _flavor("new"))
        for i in range(30):  # changes to other resources in between: the watch moves past them
            store.create(Key("", "configmaps", "default", f"d{i}"), {"metadata": {}})
        store.create(Key("kueue.x-k8s.io", "resourceflavors", "", "newer"), _flavor("newer"))
        since = listed["metadata"]["resourceVersion"]
        resumed = await _frames(client, {"resourceVersion": since, "timeoutSeconds": "1"})
        assert [(f["type"], f["object"]["metadata"]["name"]) for f in resumed] == [("ADDED", "new"),
                                                                                ("ADDED", "newer")]
