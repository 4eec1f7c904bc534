"""Node pools backed by an existing Ray cluster (``spec.rayAddress``; ``flexq container node-pools create NAME
--ray-address=http://HOST:8265``).

Such a pool has no machine type and does not scale: its nodes are the Ray cluster's, read from the cluster's
dashboard (Ray's state API, ``GET /api/v0/nodes``) every :data:`REFRESH` seconds by a thread of its own, and each
alive Ray node becomes a node of the pool whose allocatable resources are the Ray node's (``CPU``, ``memory``,
``GPU`` as ``nvidia.com/gpu``, ``TPU`` as ``google.com/tpu``). A node that joins (a worker started by hand, or by
Ray's autoscaler) is the pool's next refresh; one that leaves (or dies) is a node lost: the workloads with pods on
it are evicted and requeued, as for a deleted node (:mod:`flexq.capacity.nodeloss`). A dashboard that does not
answer for :data:`SILENT_LIMIT` seconds counts as a cluster with no nodes.

The address is the dashboard's (``http://HOST:8265``), which serves both the nodes and the Jobs API that jobs
admitted onto the pool are submitted through (:mod:`flexq.runtime.remote`); Ray's client address
(``ray://HOST:10001``) serves neither and is refused with a message saying so.
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import httpx

from flexq.capacity.catalog import MachineType
from flexq.capacity.pools import Node, NodePoolSpec
from flexq.capacity.provisioning import Timers
from flexq.errors import FlexqError

if TYPE_CHECKING:
    from flexq.capacity.driver import CapacityDriver

__all__ = ["RAY_MACHINE", "REFRESH", "RayAddressError", "RayNode", "RayPoolSync", "RayPoolWatcher", "apply_ray_nodes",
           "dashboard_address", "fetch_nodes", "parse_nodes"]

RAY_MACHINE: Final = MachineType("ray-cluster", 0, 0, 0.0, boot_seconds=0.0)
"""The machine type of a pool backed by a Ray cluster: its nodes' resources are read, not looked up; no price."""
REFRESH: Final = 2.0
"""Seconds between two reads of a Ray cluster's nodes."""
SILENT_LIMIT: Final = 15.0
"""Seconds a dashboard may leave the nodes unread before its pool counts none."""
NODES_PATH: Final = "/api/v0/nodes"
RAY_NODE_LABEL: Final = "flexq.dev/ray-node-id"
_RESOURCES: Final = {"CPU": "cpu", "memory": "memory", "GPU": "nvidia.com/gpu", "TPU": "google.com/tpu"}


class RayAddressError(FlexqError, ValueError):
    """The address is not a Ray dashboard's; the message says what to give instead."""


def dashboard_address(value: str, flag: str = "--ray-address") -> str:
    """``value`` as the Ray dashboard's base URL (``http://HOST:PORT``); RayAddressError naming ``flag`` when it is
    not one."""
    text = value.strip()
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme == "ray":
        raise RayAddressError(
            f"{flag}={value} is Ray's client address: flexq reads the cluster's nodes and submits jobs through the "
            f"Ray dashboard's HTTP API, so give the dashboard's address, "
            f"{flag}=http://{parsed.hostname or 'HOST'}:8265 (8265 unless the head was started with another "
            "--dashboard-port)")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise RayAddressError(f"{flag}={value} is not a Ray dashboard address: expected http://HOST:8265 (the "
                              "address `ray job submit --address` takes)")
    try:
        parsed.port  # noqa: B018 -- raises ValueError for a port out of range or not a number
    except ValueError:
        raise RayAddressError(f"{flag}={value} has an invalid port: expected http://HOST:8265") from None
    if parsed.path.strip("/") or parsed.query or parsed.fragment:
        raise RayAddressError(f"{flag}={value} has a path: give the dashboard's base address, http://HOST:PORT")
    return f"{parsed.scheme}://{parsed.netloc}"


@dataclass(frozen=True, slots=True)
class RayNode:
    """An alive node of a Ray cluster, as its dashboard describes it."""

    node_id: str
    ip: str
    head: bool
    resources: Mapping[str, float]

    def allocatable(self) -> dict[str, int]:
        """The node's Ray resources as a node's allocatable resources, in thousandths."""
        out = {"pods": 110_000}
        for ray_name, resource in _RESOURCES.items():
            amount = self.resources.get(ray_name)
            if amount:
                out[resource] = round(float(amount) * 1000)
        return out


def parse_nodes(answer: Any) -> list[RayNode]:
    """The alive nodes in an answer of ``GET /api/v0/nodes`` (the head first, then by node id); ValueError when the
    answer is not one."""
    try:
        rows = answer["data"]["result"]["result"]
    except (KeyError, TypeError):
        raise ValueError("not an answer of Ray's state API (GET /api/v0/nodes)") from None
    if not isinstance(rows, list):
        raise ValueError("not an answer of Ray's state API (GET /api/v0/nodes)")
    nodes = []
    for row in rows:
        if not isinstance(row, dict) or row.get("state") != "ALIVE" or not row.get("node_id"):
            continue
        resources = row.get("resources_total") or {}
        nodes.append(RayNode(str(row["node_id"]), str(row.get("node_ip") or ""), bool(row.get("is_head_node")),
                             {str(k): float(v) for k, v in resources.items() if isinstance(v, (int, float))}))
    return sorted(nodes, key=lambda n: (not n.head, n.node_id))


def fetch_nodes(url: str, timeout: float = 5.0) -> list[RayNode]:
    """The alive nodes of the Ray cluster whose dashboard is at ``url``; httpx.HTTPError or ValueError when it does
    not answer as one."""
    response = httpx.get(f"{url}{NODES_PATH}", params={"detail": "1", "limit": "10000"}, timeout=timeout)
    response.raise_for_status()
    return parse_nodes(response.json())


def node_name(pool: str, node: RayNode) -> str:
    return f"ray-{pool}-{node.node_id[:12]}"


class RayPoolWatcher:
    """One thread per Ray cluster address, reading its nodes every :data:`REFRESH` seconds; :meth:`nodes` gives the
    latest read (None while none succeeded yet)."""

    def __init__(self, refresh: float = REFRESH, fetch: Any = fetch_nodes) -> None:
        self.refresh = refresh
        self.fetch = fetch
        self._lock = threading.Lock()
        self._found: dict[str, tuple[list[RayNode], float]] = {}
        """address -> the nodes last read and when (monotonic)."""
        self._errors: dict[str, str] = {}
        self._threads: dict[str, threading.Event] = {}

    def watch(self, addresses: Iterable[str]) -> None:
        """Read exactly ``addresses`` from now on (threads start for new ones, stop for those not named)."""
        wanted = set(addresses)
        with self._lock:
            for address in set(self._threads) - wanted:
                self._threads.pop(address).set()
                self._found.pop(address, None)
            for address in wanted - set(self._threads):
                stop = threading.Event()
                self._threads[address] = stop
                threading.Thread(target=self._loop, args=(address, stop), name=f"raypool-{address}",
                                 daemon=True).start()

    def stop(self) -> None:
        self.watch(())

    def _loop(self, address: str, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                found = self.fetch(address)
            except (httpx.HTTPError, ValueError) as exc:
                with self._lock:
                    self._errors[address] = str(exc) or type(exc).__name__
            else:
                with self._lock:
                    if not stop.is_set():
                        self._found[address] = (found, time.monotonic())
                        self._errors.pop(address, None)
            stop.wait(self.refresh)

    def nodes(self, address: str) -> list[RayNode] | None:
        """The nodes last read at ``address``: None before the first read; none when the dashboard has been silent
        for longer than :data:`SILENT_LIMIT`."""
        with self._lock:
            found = self._found.get(address)
        if found is None:
            return None
        nodes, at = found
        return [] if time.monotonic() - at > SILENT_LIMIT else list(nodes)

    def error(self, address: str) -> str:
        with self._lock:
            return self._errors.get(address, "")


def apply_ray_nodes(driver: CapacityDriver, pool: NodePoolSpec, found: list[RayNode]) -> bool:
    """Make ``pool``'s nodes in the driver the Ray cluster's ``found`` nodes: a node gone is lost (its workloads
    evicted, as for a deleted node), a new one is ready at once and the workloads waiting for nodes try again.
    Returns whether anything changed."""
    now = driver.kernel.now()
    mine = {n.name: n for n in driver.cluster.nodes.values() if n.pool == pool.name}
    wanted = {node_name(pool.name, n): n for n in found}
    changed = False
    for name in sorted(set(mine) - set(wanted)):
        driver.node_deleted(name, f"Ray node {mine[name].labels.get(RAY_NODE_LABEL, name)} left the Ray cluster "
                                  f"of node pool {pool.name}")
        changed = True
    added = False
    for name, ray_node in wanted.items():
        allocatable = ray_node.allocatable()
        node = mine.get(name)
        if node is None:
            labels = {**pool.labels(), RAY_NODE_LABEL: ray_node.node_id}
            driver.cluster.add(Node(name, pool.name, name, now, now, labels, pool.taints(), allocatable,
                                    idle_since=now))
            changed = added = True
        elif dict(node.allocatable) != allocatable:
            node.allocatable = allocatable
            changed = added = True
    if added:
        driver.retry_waiting()
    return changed


class RayPoolSync:
    """The live server's Ray-cluster pools: their clusters watched (:class:`RayPoolWatcher`), and what was read
    applied to the capacity driver every half :data:`REFRESH` on the controller's timers (so on its thread)."""

    def __init__(self, timers: Timers, watcher: RayPoolWatcher | None = None) -> None:
        self.timers = timers
        self.watcher = watcher or RayPoolWatcher()
        self.pools: dict[str, NodePoolSpec] = {}
        self.driver: CapacityDriver | None = None
        self._planned = False

    def configure(self, pools: Iterable[NodePoolSpec], driver: CapacityDriver | None) -> None:
        self.pools = {p.name: p for p in pools if p.ray_address}
        self.driver = driver if self.pools else None
        self.watcher.watch(p.ray_address for p in self.pools.values())
        if self.pools and not self._planned:
            self._plan()

    def _plan(self) -> None:
        self._planned = True
        self.timers.schedule(self.timers.now() + REFRESH / 2, self.refresh)

    def refresh(self) -> None:
        self._planned = False
        if self.driver is None or not self.pools:
            return
        for pool in self.pools.values():
            found = self.watcher.nodes(pool.ray_address)
            if found is not None:
                apply_ray_nodes(self.driver, pool, found)
        self._plan()

    def stop(self) -> None:
        self.watcher.stop()
