"""Kueue's on-demand visibility API: a ClusterQueue's and a LocalQueue's pending workloads, in the order the
ClusterQueue would try them, paged by ``limit`` and ``offset``, authorized as Kueue's roles authorize them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from flexq.api.kinds import resolve
from flexq.controller import InLine
from flexq.server.app import create_app
from flexq.server.visibility import cluster_queue_page, local_queue_page
from tests import admin
from tests.conftest import Result, Server
from tests.support import controller_on_store, eventually, job, queued_job

GROUP = "visibility.kueue.x-k8s.io"
CQ_VIEW = f"/apis/{GROUP}/v1beta1/clusterqueues/cluster-queue/pendingworkloads"
LQ_A_VIEW = f"/apis/{GROUP}/v1beta1/namespaces/default/localqueues/lq-a/pendingworkloads"

SETUP = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources: [{name: cpu, nominalQuota: 2}, {name: memory, nominalQuota: 8Gi}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq-a, namespace: default}
spec: {clusterQueue: cluster-queue}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq-b, namespace: default}
spec: {clusterQueue: cluster-queue}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 100
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: low}
value: 10
"""

RUNNING = (("r1", "lq-a", None), ("r2", "lq-b", None))
"""Two one-cpu jobs that fill the ClusterQueue's quota."""
WAITING = (("p-a1", "lq-a", "low"), ("p-b1", "lq-b", None), ("p-a2", "lq-a", "high"), ("p-b2", "lq-b", "high"),
           ("p-a3", "lq-a", "low"))
"""Jobs beyond the quota, made in this order (ties of priority and time: in the order they came, which is also the
order of their names)."""
LINE = [("p-a2", 100, "lq-a", 0), ("p-b2", 100, "lq-b", 0), ("p-a1", 10, "lq-a", 1), ("p-a3", 10, "lq-a", 2),
        ("p-b1", 0, "lq-b", 1)]
"""The ClusterQueue's line: job, priority, LocalQueue, position in it; higher priority first, then earlier."""





def _apply(server: Server, text: str) -> None:
    applied = admin.post(f"{server.url}/flexq/v1/apply", json={"sources": [{"text": text}]})
    assert applied.status_code == 200, applied.text


def _queued(name: str, queue: str, priority: str | None) -> str:
    return job(name, queue=queue, cpu=1).priority_class(priority).yaml()


def _reserved(server: Server) -> set[str]:
    """The jobs whose workloads hold quota."""
    items = admin.get(f"{server.url}/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads").json()["items"]
    return {w["metadata"]["ownerReferences"][0]["name"] for w in items
            if any(c["type"] == "QuotaReserved" and c["status"] == "True"
                   for c in w.get("status", {}).get("conditions", []))}


def _queue_up(server: Server) -> None:
    """The queues, two running jobs filling them, then the waiting ones (all in line before this returns)."""
    _apply(server, SETUP + "---\n" + "---\n".join(_queued(*line) for line in RUNNING))

    def running() -> None:
        assert _reserved(server) == {"r1", "r2"}

    eventually(running, timeout=30)
    _apply(server, "---\n".join(_queued(*line) for line in WAITING))

    def in_line() -> None:
        assert len(admin.get(server.url + CQ_VIEW).json()["items"]) == len(WAITING)

    eventually(in_line, timeout=30)


def _rows(summary: dict[str, Any]) -> list[tuple[str, int, str, int, int]]:
    """(job, priority, LocalQueue, position in the ClusterQueue, position in the LocalQueue) of each item."""
    return [(i["metadata"]["ownerReferences"][0]["name"], i["priority"], i["localQueueName"],
             i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in summary["items"]]


def _expected(jobs: list[tuple[str, int, str, int]], start: int = 0) -> list[tuple[str, int, str, int, int]]:
    return [(job, priority, queue, start + n, in_lq) for n, (job, priority, queue, in_lq) in enumerate(jobs)]


def test_pending_workloads_in_the_queues_order(server: Server) -> None:
    url = server.url
    _queue_up(server)

    summary = admin.get(url + CQ_VIEW).json()
    assert (summary["kind"], summary["apiVersion"]) == ("PendingWorkloadsSummary", f"{GROUP}/v1beta1")
    assert _rows(summary) == _expected(LINE), "the running jobs hold quota: they are not in line"
    first = summary["items"][0]["metadata"]
    assert first["namespace"] == "default" and first["name"].startswith("job-p-a2-")
    assert first["creationTimestamp"].endswith("Z")
    [owner] = first["ownerReferences"]
    assert set(owner) == {"apiVersion", "kind", "name", "uid"}
    assert (owner["apiVersion"], owner["kind"]) == ("batch/v1", "Job")
    newer = admin.get(url + CQ_VIEW.replace("v1beta1", "v1beta2")).json()
    assert newer["apiVersion"] == f"{GROUP}/v1beta2" and _rows(newer) == _rows(summary)

    # limit and offset: positions stay the queue's own.
    paged = admin.get(url + CQ_VIEW, params={"limit": "2", "offset": "1"}).json()
    assert _rows(paged) == _expected(LINE[1:3], start=1)
    assert _rows(admin.get(url + CQ_VIEW, params={"offset": "9"}).json()) == []
    assert _rows(admin.get(url + CQ_VIEW, params={"limit": "0"}).json()) == _expected(LINE), "0: Kueue's default"
    bad = admin.get(url + CQ_VIEW, params={"limit": "many"})
    assert bad.status_code == 400 and bad.json()["reason"] == "BadRequest"

    # A LocalQueue's view: its workloads in the ClusterQueue's line; the offset counts the LocalQueue's own.
    lq_a = admin.get(url + LQ_A_VIEW).json()
    assert [(job, cq_pos, lq_pos) for job, _, _, cq_pos, lq_pos in _rows(lq_a)] == [
        ("p-a2", 0, 0), ("p-a1", 2, 1), ("p-a3", 3, 2)]
    one = admin.get(url + LQ_A_VIEW, params={"limit": "1", "offset": "1"}).json()
    assert [(job, cq_pos, lq_pos) for job, _, _, cq_pos, lq_pos in _rows(one)] == [("p-a1", 2, 1)]

    # Unknown queues: 404, in Kueue's words.
    gone = admin.get(url + CQ_VIEW.replace("cluster-queue", "nope"))
    assert gone.status_code == 404
    assert gone.json()["message"] == f'clusterqueue.{GROUP} "nope" not found'
    for path in (LQ_A_VIEW.replace("lq-a", "nope"), LQ_A_VIEW.replace("default", "team-a")):
        missing = admin.get(url + path)
        assert missing.status_code == 404 and missing.json()["reason"] == "NotFound", path
        assert missing.json()["details"] == {"name": path.split("/")[-2], "group": GROUP, "kind": "localqueue"}
    assert admin.get(url + f"/apis/{GROUP}/v1beta1/clusterqueues/cluster-queue").status_code == 404
    assert admin.get(url + f"/apis/{GROUP}/v1/clusterqueues/cluster-queue/pendingworkloads").status_code == 404

    # Discovery: the group, its versions, and the two subresources.
    group = next(g for g in admin.get(url + "/apis").json()["groups"] if g["name"] == GROUP)
    assert [v["version"] for v in group["versions"]] == ["v1beta2", "v1beta1"]
    resources = admin.get(url + f"/apis/{GROUP}/v1beta1").json()["resources"]
    assert {(r["name"], r["namespaced"], tuple(r["verbs"])) for r in resources} == {
        ("clusterqueues/pendingworkloads", False, ("get",)), ("localqueues/pendingworkloads", True, ("get",))}

    # A developer reads their namespace's LocalQueues' line, not the ClusterQueue's (Kueue's batch-user role).
    created = server.cli("token", "create", "--role", "developer", "--namespace", "default", "--name", "dev")
    assert created.code == 0, created.err
    as_dev = {"Authorization": f"Bearer {created.out.strip()}"}
    mine = httpx.get(url + LQ_A_VIEW, headers=as_dev)
    assert mine.status_code == 200 and _rows(mine.json()) == _rows(lq_a)
    refused = httpx.get(url + CQ_VIEW, headers=as_dev)
    assert refused.status_code == 403 and refused.json()["reason"] == "Forbidden"
    assert refused.json()["message"] == (
        f'clusterqueues.{GROUP} "cluster-queue" is forbidden: User "dev" cannot get resource '
        f'"clusterqueues/pendingworkloads" in API group "{GROUP}" at the cluster scope')
    elsewhere = httpx.get(url + LQ_A_VIEW.replace("default", "team-a"), headers=as_dev)
    assert elsewhere.status_code == 403
    assert elsewhere.json()["message"].endswith('in API group "visibility.kueue.x-k8s.io" in the namespace "team-a"')


@pytest.mark.kubectl
def test_kubectl_get_raw(server: Server, kubectl: Any) -> None:
    _queue_up(server)
    shown: Result = kubectl("get", "--raw", CQ_VIEW)
    assert shown.code == 0, shown.err
    assert _rows(json.loads(shown.out)) == _expected(LINE)
    paged = kubectl("get", "--raw", f"{LQ_A_VIEW}?limit=1&offset=2")
    assert paged.code == 0, paged.err
    assert [(job, cq_pos, lq_pos) for job, _, _, cq_pos, lq_pos in _rows(json.loads(paged.out))] == [("p-a3", 3, 2)]
    missing = kubectl("get", "--raw", CQ_VIEW.replace("cluster-queue", "nope"))
    assert missing.code != 0 and "not found" in missing.err, missing.err


def _get(app: Any, path: str, method: str = "GET") -> httpx.Response:
    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://flexq") as client:
            return await client.request(method, path)

    return asyncio.run(call())


def test_answered_by_the_controller_only(tmp_path: Path) -> None:
    """The line is the controller's: an application with none behind it (a server that does not lead) answers 503;
    with one, the line as it holds it, the set-aside workloads in their place."""
    store, service, controller = controller_on_store(tmp_path, cpu=1)
    try:
        for name in ("a", "b", "c"):
            service.create(resolve("job.batch"), "default", queued_job(name))
        controller.sync()
        view = f"/apis/{GROUP}/v1beta2/clusterqueues/cq/pendingworkloads"
        alone = _get(create_app(service), view)
        assert alone.status_code == 503 and alone.json()["reason"] == "ServiceUnavailable"
        app = create_app(service, leader=lambda: controller)
        items = _get(app, view).json()["items"]
        assert [(i["metadata"]["ownerReferences"][0]["name"], i["positionInClusterQueue"]) for i in items] == [
            ("b", 0), ("c", 1)]
        assert _get(app, view, "POST").status_code == 405
        assert _get(app, f"/apis/{GROUP}/v1beta2/namespaces/default/localqueues/q/pendingworkloads").json()[
            "items"][1]["positionInLocalQueue"] == 1
    finally:
        store.close()


def test_pages_as_kueue_pages() -> None:
    """Positions count the whole line, whatever the page; a LocalQueue's offset counts its own workloads."""
    line = [InLine("ns", name, queue, 0, 0.0) for name, queue in
            (("w0", "a"), ("w1", "b"), ("w2", "a"), ("w3", "a"), ("w4", "b"))]
    assert [(wl.name, cq, lq) for wl, cq, lq in cluster_queue_page(line, 2, 2)] == [("w2", 2, 1), ("w3", 3, 2)]
    assert cluster_queue_page(line, 0, 0) == []
    assert [(wl.name, cq, lq) for wl, cq, lq in local_queue_page(line, "ns", "a", 5, 1)] == [("w2", 2, 1),
                                                                                            ("w3", 3, 2)]
    assert local_queue_page(line, "other", "a", 5, 0) == []
