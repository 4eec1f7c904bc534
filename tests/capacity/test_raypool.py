"""Node pools of an existing Ray cluster, without Ray: the dashboard's answers (recorded from Ray 2.60's state API,
``GET /api/v0/nodes`` on a head of 1 CPU and a worker of 2 CPUs, then with the worker killed) read as nodes; the
address checked; the nodes applied to the capacity driver (a node gone is a node lost)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flexq.api.kinds import resolve
from flexq.api.object_errors import InvalidObject
from flexq.capacity.cloud import EmulatedCloud
from flexq.capacity.driver import CapacityDriver
from flexq.capacity.gke_pools import node_pool_spec, node_pool_webhook
from flexq.capacity.pools import NodePoolSpec
from flexq.capacity.raypool import (
    RAY_MACHINE,
    RAY_NODE_LABEL,
    RayAddressError,
    RayNode,
    RayPoolSync,
    apply_ray_nodes,
    dashboard_address,
    parse_nodes,
)
from flexq.capacity.settings import CapacityConfig
from flexq.clock import VirtualClock
from flexq.scheduler.scheduler import Config, Scheduler
from flexq.timers import Kernel
from tests.controller.test_capacity_clock import START

DATA = Path(__file__).resolve().parents[1] / "data" / "raypool"


def _answer(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def test_the_dashboards_answer_reads_as_alive_nodes_head_first() -> None:
    nodes = parse_nodes(_answer("nodes-two.json"))
    assert [(n.head, n.allocatable()["cpu"]) for n in nodes] == [(True, 1000), (False, 2000)]
    assert nodes[0].node_id.startswith("345442d5") and nodes[0].allocatable()["memory"] == 17149044327000
    assert "nvidia.com/gpu" not in nodes[0].allocatable()
    dead = parse_nodes(_answer("nodes-worker-dead.json"))
    assert [n.node_id for n in dead] == [nodes[0].node_id], "a DEAD node is no node"


def test_accelerators_are_read_as_kubernetes_resources() -> None:
    node = RayNode("ab" * 28, "10.0.0.2", False, {"CPU": 8.0, "GPU": 2.0, "TPU": 4.0, "memory": 2.0**30})
    assert node.allocatable() == {"pods": 110_000, "cpu": 8000, "nvidia.com/gpu": 2000, "google.com/tpu": 4000,
                                  "memory": 2**30 * 1000}


@pytest.mark.parametrize("answer", [{}, {"data": {"result": {"result": "x"}}}, [], "nope"])
def test_an_answer_that_is_not_the_state_apis_is_refused(answer: Any) -> None:
    with pytest.raises(ValueError, match="not an answer of Ray's state API"):
        parse_nodes(answer)


def test_the_address_is_the_dashboards() -> None:
    assert dashboard_address("http://10.1.2.3:8265/") == "http://10.1.2.3:8265"
    assert dashboard_address(" https://ray.example.com ") == "https://ray.example.com"
    with pytest.raises(RayAddressError, match=r"--ray-address=ray://h:10001 is Ray's client address.*"
                                              r"--ray-address=http://h:8265"):
        dashboard_address("ray://h:10001")
    for bad, why in (("h:8265", "not a Ray dashboard address"), ("http://h:99999", "invalid port"),
                     ("http://h:8265/api/jobs", "has a path"), ("", "not a Ray dashboard address")):
        with pytest.raises(RayAddressError, match=why):
            dashboard_address(bad)


def _pool_object(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "flexq.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": "ray-a"},
            "spec": {"cluster": "c", **spec}}


def test_a_node_pool_object_with_a_ray_address() -> None:
    pool = node_pool_spec(_pool_object(rayAddress="http://127.0.0.1:8265/"))
    assert pool.ray_address == "http://127.0.0.1:8265" and pool.machine is RAY_MACHINE and not pool.autoscaling
    assert pool.labels()["cloud.google.com/gke-nodepool"] == "ray-a"
    info = resolve("nodepool")
    with pytest.raises(InvalidObject) as bad:
        node_pool_webhook(None, info, _pool_object(rayAddress="ray://127.0.0.1:10001"), None)
    assert [e.path for e in bad.value.errors] == ["spec.rayAddress"]
    assert "spec.rayAddress=ray://127.0.0.1:10001 is Ray's client address" in bad.value.errors[0].message
    with pytest.raises(InvalidObject, match="--enable-autoscaling does not apply"):
        node_pool_webhook(None, info, _pool_object(rayAddress="http://h:8265", autoscaling={"enabled": True}), None)
    node_pool_webhook(None, info, _pool_object(rayAddress="http://h:8265"), None)


def _driver(pool: NodePoolSpec, log: list[dict[str, Any]]) -> tuple[CapacityDriver, Kernel]:
    timers = Kernel(VirtualClock(START))
    driver = CapacityDriver(CapacityConfig((pool,), EmulatedCloud()), Scheduler(Config({}, {}, {})), timers,
                            lambda events: log.extend(e.to_json() for e in events), lambda _key, _t: None, {})
    return driver, timers


def test_the_clusters_nodes_become_the_pools_and_a_node_gone_is_lost() -> None:
    pool = NodePoolSpec("ray-a", RAY_MACHINE, autoscaling=False, ray_address="http://h:8265")
    log: list[dict[str, Any]] = []
    driver, _timers = _driver(pool, log)
    assert not driver.cluster.nodes, "no node until the cluster is read"
    two = parse_nodes(_answer("nodes-two.json"))
    assert apply_ray_nodes(driver, pool, two)
    nodes = sorted(driver.cluster.nodes.values(), key=lambda n: n.allocatable["cpu"])
    assert [n.allocatable["cpu"] for n in nodes] == [1000, 2000] and all(n.ready(START) for n in nodes)
    assert nodes[0].labels[RAY_NODE_LABEL] == two[0].node_id
    assert nodes[0].labels["cloud.google.com/gke-nodepool"] == "ray-a"
    assert not apply_ray_nodes(driver, pool, two), "nothing changed"
    assert apply_ray_nodes(driver, pool, parse_nodes(_answer("nodes-worker-dead.json")))
    assert [n.allocatable["cpu"] for n in driver.cluster.nodes.values()] == [1000]
    lost = [e for e in log if e["event"] == "NodeDeleted"]
    assert len(lost) == 1 and lost[0]["reason"].startswith(f"Ray node {two[1].node_id} left the Ray cluster")


class _Watcher:
    def __init__(self) -> None:
        self.found: dict[str, list[RayNode] | None] = {}
        self.watched: list[str] = []

    def watch(self, addresses: Any) -> None:
        self.watched = sorted(addresses)

    def nodes(self, address: str) -> list[RayNode] | None:
        return self.found.get(address)

    def stop(self) -> None:
        self.watched = []


def test_the_live_sync_reads_the_pools_on_the_controllers_timers() -> None:
    pool = NodePoolSpec("ray-a", RAY_MACHINE, autoscaling=False, ray_address="http://h:8265")
    other = NodePoolSpec("plain", RAY_MACHINE, autoscaling=False)
    driver, timers = _driver(pool, [])
    watcher = _Watcher()
    sync = RayPoolSync(timers, watcher)  # type: ignore[arg-type]
    sync.configure([pool, other], driver)
    assert watcher.watched == ["http://h:8265"]
    timers.advance(START + 1)
    assert not driver.cluster.nodes, "not read yet"
    watcher.found["http://h:8265"] = parse_nodes(_answer("nodes-two.json"))
    timers.advance(START + 2)
    assert len(driver.cluster.nodes) == 2
    sync.configure([other], driver)
    assert watcher.watched == []


def test_the_gke_export_makes_no_node_pool_of_a_ray_cluster() -> None:
    from flexq.export.gcloud import pool_command

    line = pool_command(_pool_object(rayAddress="http://h:8265"), "us-east5-b")
    assert line == ("# node pool ray-a is the existing Ray cluster at http://h:8265 (flexq's --ray-address): no GKE "
                    "node pool is made for it")


def test_a_ray_pool_without_room_says_so_and_never_scales() -> None:
    pool = NodePoolSpec("ray-a", RAY_MACHINE, autoscaling=False, ray_address="http://h:8265")
    driver, _timers = _driver(pool, [])
    apply_ray_nodes(driver, pool, parse_nodes(_answer("nodes-two.json")))
    created, why = driver.cluster.scale_up("ray-a", 1, START)
    assert not created and why == ("node pool ray-a is the Ray cluster at http://h:8265, whose 2 node(s) have no "
                                   "room for it (1 more needed)")


def test_the_entrypoint_runs_in_the_uploaded_working_dir(tmp_path: Path) -> None:
    from flexq.runtime.remote import relative_entrypoint

    files = tmp_path / "working_dir"
    assert relative_entrypoint(f"python {files}/app/train.py --data {files}/app", files) == \
        "python app/train.py --data app"
    assert relative_entrypoint("python -c 'print(1)'", files) == "python -c 'print(1)'"


def test_the_watcher_reads_each_address_on_its_thread_and_a_silent_dashboard_counts_no_node(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    import httpx

    from flexq.capacity import raypool

    answers = {"http://a:8265": parse_nodes(_answer("nodes-two.json"))}
    calls: list[str] = []
    broken = threading.Event()

    def fetch(url: str) -> list[RayNode]:
        calls.append(url)
        if broken.is_set():
            raise httpx.ConnectError("refused")
        return answers[url]

    monkeypatch.setattr(raypool, "SILENT_LIMIT", 1.0)
    watcher = raypool.RayPoolWatcher(refresh=0.05, fetch=fetch)
    try:
        assert watcher.nodes("http://a:8265") is None
        watcher.watch(["http://a:8265"])
        deadline = time.monotonic() + 5
        while watcher.nodes("http://a:8265") is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(watcher.nodes("http://a:8265") or []) == 2
        broken.set()
        deadline = time.monotonic() + 5  # the thread's first refused read (however busy the machine)
        while watcher.error("http://a:8265") != "refused" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert watcher.error("http://a:8265") == "refused"
        assert len(watcher.nodes("http://a:8265") or []) == 2, "a dashboard silent for a moment keeps its nodes"
        time.sleep(1.1)
        assert watcher.nodes("http://a:8265") == [], "silent for longer: no node"
        watcher.watch([])
        assert watcher.nodes("http://a:8265") is None
        before = len(calls)
        time.sleep(0.2)
        assert len(calls) <= before + 1, "the thread stopped"
    finally:
        watcher.stop()
