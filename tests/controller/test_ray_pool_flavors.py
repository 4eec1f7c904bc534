"""Plan A / Plan B across Ray clusters, on a live server without Ray: two node pools of existing Ray clusters (two
dashboards faked in the test, answering Ray's state API as recorded), one ResourceFlavor each, in one ClusterQueue
in order. A job too large for cluster A's nodes runs on cluster B; once a larger node joins cluster A, the next job
runs there; a node that leaves takes the pool's count down."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests import admin
from tests.conftest import Server
from tests.controller.test_live import WL
from tests.queues import queue_yaml
from tests.support import eventually, job

RECORDED = json.loads((Path(__file__).resolve().parents[1] / "data" / "raypool" / "nodes-two.json").read_text())

QUEUE = queue_yaml(("plan-a", "ray-a"), ("plan-b", "ray-b"), cpu=16, memory="64Gi")





class FakeDashboard:
    """A Ray dashboard's state API answering with the nodes it is given (``CPU`` per node id)."""

    def __init__(self, cpus: dict[str, float]) -> None:
        self.cpus = dict(cpus)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if not self.path.startswith("/api/v0/nodes"):
                    self.send_error(404)
                    return
                template = RECORDED["data"]["result"]["result"][0]
                rows = [{**template, "node_id": node_id, "is_head_node": i == 0,
                         "resources_total": {"CPU": cpu, "memory": 16 * 2.0**30}}
                        for i, (node_id, cpu) in enumerate(sorted(fake.cpus.items()))]
                body = json.dumps({**RECORDED, "data": {"result": {**RECORDED["data"]["result"],
                                                                   "result": rows}}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def dashboards() -> Iterator[tuple[FakeDashboard, FakeDashboard]]:
    a, b = FakeDashboard({"a" * 56: 1.0}), FakeDashboard({"b" * 56: 8.0})
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def _count(server: Server, pool: str) -> int | None:
    obj = admin.get(f"{server.url}/apis/flexq.dev/v1alpha1/nodepools/{pool}").json()
    return (obj.get("status") or {}).get("nodeCount")


def _flavor_of(server: Server, job: str) -> str:
    items = admin.get(server.url + WL).json()["items"]
    mine = [w for w in items if w["metadata"]["ownerReferences"][0]["name"] == job
            and w["metadata"]["ownerReferences"][0]["kind"] == "Job"]
    assert mine, [w["metadata"]["name"] for w in items]
    started = [c for c in mine[0].get("status", {}).get("conditions", []) if c["type"] == "Admitted"]
    assert started and started[0]["status"] == "True", mine[0].get("status")
    return str(next(iter(mine[0]["status"]["admission"]["podSetAssignments"][0]["flavors"].values())))


def _sleeper(name: str) -> str:
    """A Job of 4 cpu that sleeps ten minutes, in LocalQueue ``q`` of the server's default namespace."""
    return job(name, queue="q", cpu=4).namespace(None).memory("1Gi").command("sleep", "600").yaml()


def test_plan_a_then_plan_b_across_ray_clusters(flexq: Any, server: Server,
                                                dashboards: tuple[FakeDashboard, FakeDashboard]) -> None:
    a, b = dashboards
    assert flexq("container", "clusters", "create", "c", "--num-nodes=0").code == 0
    for name, dash in (("ray-a", a), ("ray-b", b)):
        made = flexq("container", "node-pools", "create", name, "--cluster=c", f"--ray-address={dash.url}")
        assert made.code == 0, made.err
    eventually(lambda: _assert_counts(server, 1, 1), timeout=20)
    nodes = {n["metadata"]["name"]: n["status"]["allocatable"]["cpu"]
             for n in admin.get(f"{server.url}/api/v1/nodes").json()["items"]}
    assert nodes == {"ray-ray-a-aaaaaaaaaaaa": "1", "ray-ray-b-bbbbbbbbbbbb": "8"}
    assert flexq("apply", "-f", "-", input=QUEUE).code == 0
    assert flexq("apply", "-f", "-", input=_sleeper("big")).code == 0
    assert eventually(lambda: _flavor_of(server, "big"), timeout=30) == "plan-b", "cluster A's node is too small"
    a.cpus["c" * 56] = 8.0  # a larger node joins cluster A (by hand, or Ray's autoscaler)
    eventually(lambda: _assert_counts(server, 2, 1), timeout=20)
    assert flexq("apply", "-f", "-", input=_sleeper("next")).code == 0
    assert eventually(lambda: _flavor_of(server, "next"), timeout=30) == "plan-a"
    del a.cpus["a" * 56]  # a node leaves cluster A
    eventually(lambda: _assert_counts(server, 1, 1), timeout=20)


def _assert_counts(server: Server, a: int, b: int) -> None:
    assert (_count(server, "ray-a"), _count(server, "ray-b")) == (a, b)
