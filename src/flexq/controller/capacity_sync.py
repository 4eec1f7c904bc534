"""Capacity in the live server: the same driver as the simulator, on the real clock, mirrored in the store.

Node pools come from NodePool objects (made by ``flexq container`` or the real gcloud); the emulated
cloud's behaviour from the server's capacity file. What the driver does is written back so that the
tools show it: ``v1`` Node objects for every node (labels, taints, allocatable, Ready), NodePool
``status.nodeCount``, ``autoscaling.x-k8s.io/v1`` ProvisioningRequests with their conditions, and Events
on the workloads (ScaledUp, ProvisioningRequest, Fallback, NodesUnavailable, Started, ...).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from flexq.api import Quantity
from flexq.capacity import (
    LIFECYCLE_TAINT_KEYS,
    CapacityConfig,
    CapacityDriver,
    Node,
    PoolNote,
    ProvisioningSettings,
    ProvisioningState,
    RayPoolSync,
    RequestNote,
    lifecycle_taints,
    node_pool_spec,
)
from flexq.clock import Clock
from flexq.durations import ends_at
from flexq.objects import NODE_BOOTING, set_condition
from flexq.scheduler import Event, EventKind, Taint
from flexq.store import BaseStore, Key, NotFound, record_event, rfc3339

if TYPE_CHECKING:
    from flexq.control import ControlPlane

__all__ = ["LiveCapacity"]

_COMPONENT: Final = "flexq-autoscaler"
_MANAGED: Final = "flexq.dev/managed-node"
_POOL_EVENTS: Final = frozenset({EventKind.NODE_DELETED, EventKind.SLICE_REPAIRED, EventKind.SLICE_RELEASED,
                                 EventKind.NODE_NOT_READY, EventKind.NODE_READY, EventKind.NODE_TAINTED})
_BOOTING: Final = NODE_BOOTING
_ACCEPTED: Final = "ProvisioningRequest is accepted by ClusterAutoscaler"
"""The cluster autoscaler's ``Accepted`` message, written with its other words (check-capacity's)."""
"""What happens to a pool's nodes: recorded on the NodePool (the workloads' evictions are on them)."""


def _taints_of(obj: Mapping[str, Any]) -> tuple[Taint, ...]:
    """A Node object's taints but those the node lifecycle controller keeps by its Ready condition (they are the
    emulated node's state, not taints it was given: :func:`flexq.capacity.lifecycle_taints`)."""
    return tuple(Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "")))
                 for t in (obj.get("spec") or {}).get("taints") or [] if t.get("key") not in LIFECYCLE_TAINT_KEYS)


def _node_taints(node: Node) -> list[dict[str, str]]:
    """What a Node object's ``spec.taints`` shows: the taints it was given, then the lifecycle controller's while it
    is down (a ``NoExecute`` one with the time it was added, from which tolerations count)."""
    given = [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints]
    added = rfc3339(datetime.fromtimestamp(node.down_since, UTC)) if node.down_since is not None else ""
    return given + [{"key": t.key, "effect": t.effect, **({"timeAdded": added} if t.effect == "NoExecute" else {})}
                    for t in lifecycle_taints(node)]


def _ready_condition(node: Node, stored: Mapping[str, Any] | None, now: float) -> dict[str, str]:
    """A node's Ready condition: booting, ready, or not since it went down: False, or Unknown where it was written
    Unknown (a kubelet no longer heard from); a down node's condition as written (its reason and message) is kept."""
    if node.down_since is not None:
        status = "Unknown" if node.unreachable else "False"
        if stored is not None and stored.get("status") == status and stored.get("reason") != _BOOTING:
            return dict(stored)
        if node.unreachable:
            reason, message = "NodeStatusUnknown", "Kubelet stopped posting node status."
        else:
            reason, message = "KubeletNotReady", "node is not ready"
        return {"type": "Ready", "status": status, "reason": reason, "message": message,
                "lastTransitionTime": rfc3339(datetime.fromtimestamp(node.down_since, UTC))}
    ready = node.ready_at <= now
    return {"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady" if ready else _BOOTING,
            "message": "node is ready" if ready else "the node is booting",
            "lastTransitionTime": rfc3339(datetime.fromtimestamp(node.ready_at if ready else node.created, UTC))}


def _stored_ready(obj: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Ready"), None)


def _quantity(resource: str, milli: int) -> str:
    from fractions import Fraction

    return Quantity(Fraction(milli, 1000), binary=resource == "memory").canonical()


class LiveCapacity:
    """The capacity side of the live server: which pools are modelled (the NodePool objects, then the server's
    capacity file), the timers of the control plane's driver, and the driver's notes written to the store."""

    def __init__(self, store: BaseStore, plane: ControlPlane, config: CapacityConfig, clock: Clock) -> None:
        self.store = store
        self.plane = plane
        # The capacity file's times (stock-outs, traces) count from the server's start.
        self.config = dataclasses.replace(config, cloud=dataclasses.replace(config.cloud, origin=clock.now()))
        self.timers = plane.timers
        self.notes: list[Event] = []
        """The driver's events since the last write (the control plane tells them here)."""
        self._back: set[str] = set()
        """Workloads whose unhealthy node is Ready again since the last write."""
        self._sent: list[Event] = []
        """Notes written but not committed yet: told again if the store refuses the step (:meth:`unwritten`)."""
        store.subscribe(lambda _changes: self._sent.clear())
        self.ray_pools = RayPoolSync(self.timers)
        """Pools of existing Ray clusters: their nodes read from the clusters."""
        self._given: dict[str, tuple[Taint, ...]] = {}
        """Each Node object's taints (but the lifecycle controller's) as this controller last wrote or read them: one
        that differs in the store was changed since (``kubectl taint``) and is read at the next step, not written
        over."""
        self._nodes_synced_empty = False
        """The Node objects were last written with no pool modelled (none left): nothing to write while none is."""

    @property
    def driver(self) -> CapacityDriver | None:
        """The control plane's capacity driver (None while no pool is modelled)."""
        return self.plane.driver

    def modelled(self, objects: Mapping[str, list[dict[str, Any]]]) -> CapacityConfig | None:
        """The capacity to model: the NodePool objects, and the capacity file's pools not named by one (None when
        there are no pools)."""
        pools = []
        for obj in objects.get("NodePool", []):
            try:
                pools.append(node_pool_spec(obj))
            except (LookupError, ValueError):
                continue  # refused at admission; an old object is simply not modelled
        pools += [p for p in self.config.pools if p.name not in {q.name for q in pools}]
        return dataclasses.replace(self.config, pools=tuple(pools)) if pools else None

    def configure(self, capacity: CapacityConfig | None) -> None:
        """The control plane was configured with ``capacity``: follow the pools of existing Ray clusters."""
        self.ray_pools.configure(capacity.pools if capacity is not None else (), self.driver)

    def release(self, key: str) -> None:
        if self.driver is not None:
            self.driver.release(key)

    def node_deleted(self, name: str) -> None:
        if self.driver is not None:
            self.driver.node_deleted(name)

    def node_modified(self, obj: Mapping[str, Any]) -> None:
        """A Node object changed (``kubectl taint node``, ``kubectl patch node --subresource=status``): its taints and
        its Ready condition are the emulated node's (:mod:`flexq.capacity.nodehealth`). A Ready condition that is not
        True counts as NotReady unless it is the one written for a node still booting."""
        driver = self.driver
        name = obj["metadata"]["name"]
        node = driver.cluster.nodes.get(name) if driver is not None else None
        if driver is None or node is None:
            return
        taints = _taints_of(obj)
        self._given[name] = taints
        if taints != node.taints:
            driver.node_tainted(name, taints)
        ready = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
        if ready is None:
            return
        if ready.get("status") != "True" and ready.get("reason") != _BOOTING and node.down_since is None:
            driver.node_not_ready(name, f"node {name} of pool {node.pool} is NotReady: "
                                  f"{ready.get('message') or ready.get('reason') or 'its Ready condition is False'}",
                                  unreachable=ready.get("status") == "Unknown")
        elif ready.get("status") == "True" and node.down_since is not None:
            self._back |= driver.waiting_for(name)  # they wait no more: their status loses the unhealthy node
            driver.node_ready(name)
        elif ready.get("status") in ("False", "Unknown") and node.down_since is not None:
            driver.node_still_down(name, unreachable=ready.get("status") == "Unknown")

    # --- writing what happened -----------------------------------------------------------------------

    def touched(self) -> set[str]:
        """Workloads whose story the notes since the last write changed, and those whose unhealthy node is back
        (told once)."""
        back, self._back = self._back, set()
        return {n.workload for n in self.notes if n.workload} | back

    def unwritten(self) -> None:
        """The store refused the step that wrote the last notes: they are written with the next."""
        self.notes, self._sent = self._sent + self.notes, []

    def write(self) -> None:
        notes, self.notes = self.notes, []
        self._sent = notes
        if self.driver is None and not notes and self._nodes_synced_empty:
            return
        with self.store.transaction():
            for note in notes:
                self._write_note(note)
            self._sync_nodes()
        self._nodes_synced_empty = self.driver is None

    def _workload(self, key: str) -> dict[str, Any] | None:
        if not key:
            return None
        namespace, _, name = key.partition("/")
        try:
            return self.store.get(Key("kueue.x-k8s.io", "workloads", namespace, name))
        except NotFound:
            return None

    def _write_note(self, note: Event) -> None:
        workload = self._workload(note.workload)
        payload = note.payload
        request = payload if isinstance(payload, RequestNote) else None
        warning = note.kind.warning or (request is not None and request.state is ProvisioningState.FAILED)
        if workload is not None:
            record_event(self.store, workload, note.kind.value, note.reason,
                         type="Warning" if warning else "Normal", component=_COMPONENT)
        elif note.kind in _POOL_EVENTS and isinstance(payload, PoolNote):
            with contextlib.suppress(NotFound):
                pool = self.store.get(Key("flexq.dev", "nodepools", "", payload.pool))
                record_event(self.store, pool, note.kind.value, note.reason,
                             type="Warning" if warning else "Normal", component=_COMPONENT)
        if request is not None and workload is not None:
            self._provisioning_request(workload, request, note.reason)

    def _provisioning_request(self, workload: dict[str, Any], request: RequestNote, message: str) -> None:
        name = request.request
        namespace = workload["metadata"].get("namespace", "default")
        key = Key("autoscaling.x-k8s.io", "provisioningrequests", namespace, name)
        now = rfc3339(datetime.now(UTC))
        if request.state is ProvisioningState.WITHDRAWN:
            # The workload started on another flavor: its request is deleted, as Kueue deletes the requests of
            # a workload that no longer needs them (the Event on the workload tells what it cost).
            with contextlib.suppress(NotFound):
                self.store.delete(key)
            return
        try:
            obj = self.store.get(key)
        except NotFound:
            obj = self.store.create(key, {
                "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
                "metadata": {"name": name, "namespace": namespace, "ownerReferences": [{
                    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                    "name": workload["metadata"]["name"], "uid": workload["metadata"].get("uid", ""),
                    "controller": True}]},
                "spec": self._request_spec(workload, name),
            })
        status = dict(obj.get("status") or {})
        if request.eta is not None:  # the cloud's answer is expected at a known moment: the message names it
            message = ends_at(message, datetime.fromtimestamp(request.eta, UTC))
        match request.state:
            case ProvisioningState.ACCEPTED:
                set_condition(status, "Accepted", True, "Accepted", _ACCEPTED if request.message else message,
                              now=now)
                set_condition(status, "Provisioned", False, request.reason or "Waiting", request.message or message,
                              now=now)
            case ProvisioningState.PROVISIONED:
                set_condition(status, "Provisioned", True, request.reason or "Provisioned", request.message or message,
                              now=now)
                if request.details:
                    status["provisioningClassDetails"] = dict(request.details)
            case ProvisioningState.FAILED:
                set_condition(status, "Failed", True, request.reason or "Failed", request.message or message, now=now)
            case _:
                pass  # BookingExpired and CapacityRevoked: told on the workload, followed by Failed or an eviction
        self.store.update(key, {**obj, "status": status}, subresource="status")

    def _request_spec(self, workload: Mapping[str, Any], name: str) -> dict[str, Any]:
        """A ProvisioningRequest's spec as Kueue makes it: the class its check's ProvisioningRequestConfig names, and
        one pod set per pod set of the workload that asks for a resource the config manages (all of them where it
        names none), with its count and its PodTemplate (``ppt-<request>-<pod set>``)."""
        settings = self._settings_of(workload)
        managed = settings.managed if settings is not None else frozenset()
        pod_sets = []
        for podset in (workload.get("spec") or {}).get("podSets") or []:
            containers = ((podset.get("template") or {}).get("spec") or {}).get("containers") or []
            asked = {r for c in containers for r in ((c.get("resources") or {}).get("requests") or {})}
            if managed and not asked & managed:
                continue
            pod_sets.append({"podTemplateRef": {"name": f"ppt-{name}-{podset['name']}"},
                             "count": int(podset.get("count", 1))})
        klass = settings.provisioning_class if settings is not None and settings.provisioning_class else \
            "queued-provisioning.gke.io"
        return {"provisioningClassName": klass, "podSets": pod_sets}

    def _settings_of(self, workload: Mapping[str, Any]) -> ProvisioningSettings | None:
        """The settings of the provisioning check among the workload's admission checks (None: none known)."""
        driver = self.driver
        if driver is None:
            return None
        names = [str(c.get("name")) for c in (workload.get("status") or {}).get("admissionChecks") or []]
        return next((driver.provisioning[n] for n in names if n in driver.provisioning), None)

    def _sync_nodes(self) -> None:
        nodes = self.driver.cluster.nodes if self.driver is not None else {}
        stored = {o["metadata"]["name"]: o for o in self.store.list_objects("", "nodes")[0]
                  if (o["metadata"].get("labels") or {}).get(_MANAGED)}
        now = self.timers.now()
        for name, node in nodes.items():
            old = stored.pop(name, None)
            status = {
                "capacity": {r: _quantity(r, v) for r, v in node.allocatable.items()},
                "allocatable": {r: _quantity(r, v) for r, v in node.allocatable.items()},
                "conditions": [_ready_condition(node, _stored_ready(old), now)],
                "nodeInfo": {"kubeletVersion": "v1.34.1-gke.1000", "architecture": "amd64",
                             "operatingSystem": "linux"},
            }
            taints = _node_taints(node)
            key = Key("", "nodes", "", name)
            if old is None:
                self.store.create(key, {"apiVersion": "v1", "kind": "Node",
                                        "metadata": {"name": name, "labels": {**node.labels, _MANAGED: "true"}},
                                        "spec": {"taints": taints}, "status": status})
                self._given[name] = node.taints
                continue
            seen = _taints_of(old)
            unread = seen != self._given.get(name, seen)
            if not unread and ((old.get("spec") or {}).get("taints") or []) != taints:
                # a cloud's hostTaints, NotReady, Ready
                old = self.store.update(key, {**old, "spec": {**(old.get("spec") or {}), "taints": taints}})
                self._given[name] = node.taints
            if old.get("status") != status:
                self.store.update(key, {**old, "status": status}, subresource="status")
        for name in stored:
            self.store.delete(Key("", "nodes", "", name))
            self._given.pop(name, None)
        counts: dict[str, int] = {}
        for node in nodes.values():
            counts[node.pool] = counts.get(node.pool, 0) + 1
        for pool in self.store.list_objects("flexq.dev", "nodepools")[0]:
            count = counts.get(pool["metadata"]["name"], 0)
            if (pool.get("status") or {}).get("nodeCount") != count:
                self.store.update(Key("flexq.dev", "nodepools", "", pool["metadata"]["name"]),
                                  {**pool, "status": {**(pool.get("status") or {}), "nodeCount": count}},
                                  subresource="status")
