"""The Container API's Operations: one that creates or deletes nodes stays RUNNING until its Node objects are there
(or gone), is answered at once when they come within the settle time, and is DONE all the same past its limit."""

from __future__ import annotations

import asyncio
import json

import pytest
from fastapi.responses import JSONResponse

from flexq.server import gke
from tests import admin
from tests.conftest import Server


def _body(answer: object) -> dict[str, object]:
    assert isinstance(answer, JSONResponse)
    return dict(json.loads(answer.body))


def test_an_operation_without_work_is_done_at_once() -> None:
    ops = gke._Operations()
    op = ops.start("p", "z", "SET_NODE_POOL_SIZE", "clusters/c/nodePools/np")
    assert (op["status"], op["operationType"]) == ("DONE", "SET_NODE_POOL_SIZE")
    assert op["targetLink"].endswith("/projects/p/locations/z/clusters/c/nodePools/np") and "endTime" in op


def test_an_operation_runs_until_its_work_is_done(monkeypatch: pytest.MonkeyPatch) -> None:
    ops = gke._Operations()
    nodes: list[str] = []
    op = ops.start("p", "z", "CREATE_NODE_POOL", "clusters/c/nodePools/np", lambda: len(nodes) == 2)
    assert op["status"] == "RUNNING" and "endTime" not in op
    nodes.append("n0")
    assert ops.get(op["name"]) == op and op["status"] == "RUNNING"
    nodes.append("n1")
    assert ops.get(op["name"])["status"] == "DONE" and "endTime" in op  # type: ignore[index]
    nodes.clear()
    assert ops.get(op["name"])["status"] == "DONE", "a DONE operation stays DONE"  # type: ignore[index]
    assert ops.get("operation-0") is None


def test_work_that_is_already_done_answers_done() -> None:
    assert gke._Operations().start("p", "z", "DELETE_NODE_POOL", "t", lambda: True)["status"] == "DONE"


def test_an_operation_whose_work_never_comes_is_done_past_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(gke.time, "monotonic", lambda: now[0])
    ops = gke._Operations()
    op = ops.start("p", "z", "CREATE_CLUSTER", "clusters/c", lambda: False)
    now[0] += gke._GIVE_UP - 0.01
    assert ops.get(op["name"])["status"] == "RUNNING"  # type: ignore[index]
    now[0] += 0.01
    assert ops.get(op["name"])["status"] == "DONE"  # type: ignore[index]


@pytest.mark.parametrize("ready_after, status", [(0, "DONE"), (3, "DONE"), (None, "RUNNING")])
def test_a_create_is_answered_once_settled_or_still_running(monkeypatch: pytest.MonkeyPatch,
                                                          ready_after: int | None, status: str) -> None:
    monkeypatch.setattr(gke, "_SETTLE", 0.5)
    asked = [0]

    def finished() -> bool:
        asked[0] += 1
        return ready_after is not None and asked[0] > ready_after

    ops = gke._Operations()
    answer = _body(asyncio.run(ops.settled(ops.start("p", "z", "CREATE_NODE_POOL", "t", finished))))
    assert answer["status"] == status
    if ready_after is not None:
        assert asked[0] == ready_after + 1, "answered as soon as the work was done"
    else:
        assert asked[0] > 3, "it kept asking for the settle time"


def test_a_pool_created_and_deleted_through_the_api_has_its_nodes_when_answered(server: Server) -> None:
    base = f"{server.url}/v1/projects/p/locations/z"
    made = admin.post(f"{base}/clusters", json={"cluster": {"name": "c", "initialNodeCount": 1,
                                                            "nodeConfig": {"machineType": "n2-standard-16"}}})
    assert made.status_code == 200 and made.json()["status"] == "DONE", made.text
    assert _pool_nodes(server, "default-pool") == 1
    made = admin.post(f"{base}/clusters/c/nodePools", json={"nodePool": {
        "name": "np", "initialNodeCount": 3, "config": {"machineType": "n2-standard-16"}}})
    assert made.status_code == 200 and made.json()["status"] == "DONE", made.text
    assert _pool_nodes(server, "np") == 3, "the create was answered once the pool's nodes were there"
    op = admin.get(f"{base}/operations/{made.json()['name']}").json()
    assert (op["status"], op["operationType"]) == ("DONE", "CREATE_NODE_POOL")
    gone = admin.delete(f"{base}/clusters/c/nodePools/np")
    assert gone.status_code == 200 and gone.json()["status"] == "DONE", gone.text
    assert _pool_nodes(server, "np") == 0, "the delete was answered once they were gone"
    assert all(o["status"] == "DONE" for o in admin.get(f"{base}/operations").json()["operations"])


def _pool_nodes(server: Server, pool: str) -> int:
    nodes = admin.get(f"{server.url}/api/v1/nodes").json()["items"]
    return sum(1 for n in nodes if n["metadata"]["labels"].get("cloud.google.com/gke-nodepool") == pool)
