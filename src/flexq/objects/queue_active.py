"""The Active condition of AdmissionChecks, ClusterQueues and LocalQueues, kept up to date as they are written
(from :mod:`flexq.objects.queue_status`'s states), with an Event when one turns active or inactive."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from flexq.api import KINDS, KindInfo
from flexq.objects.conditions import find_condition, set_condition
from flexq.objects.queue_status import admission_check_state, cluster_queue_state, local_queue_state
from flexq.store import BaseStore, Key, NotFound, record_event, rfc3339

__all__ = ["reconcile_all", "reconcile_one"]


def reconcile_all(store: BaseStore) -> None:
    """Bring the Active condition of every AdmissionCheck, ClusterQueue and LocalQueue up to date."""
    now = rfc3339(datetime.now(UTC))
    kinds = {info.kind: info for info in KINDS}

    def objects(kind: str) -> list[dict[str, Any]]:
        info = kinds[kind]
        return store.list_objects(info.group, info.plural)[0]

    configs = {o["metadata"]["name"] for o in objects("ProvisioningRequestConfig")}
    flavors = {o["metadata"]["name"] for o in objects("ResourceFlavor")}
    checks: dict[str, bool] = {}
    for check in objects("AdmissionCheck"):
        state = admission_check_state(check, configs)
        checks[check["metadata"]["name"]] = state.active
        _set_active(store, kinds["AdmissionCheck"], check, state.active, state.reason, state.message, now)
    cluster_queues: dict[str, bool] = {}
    for cq in objects("ClusterQueue"):
        state = cluster_queue_state(cq, flavors, checks)
        cluster_queues[cq["metadata"]["name"]] = state.active
        _set_active(store, kinds["ClusterQueue"], cq, state.active, state.reason, state.message, now,
                         counters=True)
    for lq in objects("LocalQueue"):
        state = local_queue_state(lq, cluster_queues)
        _set_active(store, kinds["LocalQueue"], lq, state.active, state.reason, state.message, now,
                         counters=True)

def reconcile_one(store: BaseStore, key: Key) -> None:
    """:func:`reconcile_all` for one ClusterQueue or LocalQueue written (or deleted): its own Active
    condition, and those of the LocalQueues that point at the ClusterQueue. The other queues' states do
    not depend on it, so a thousand queues created one by one cost a thousand reads, not a million."""
    now = rfc3339(datetime.now(UTC))
    kinds = {info.kind: info for info in KINDS}

    def objects(kind: str) -> list[dict[str, Any]]:
        return store.list_objects(kinds[kind].group, kinds[kind].plural)[0]

    def cluster_queue(name: str, write: bool) -> dict[str, bool]:
        try:
            cq = store.get(Key("kueue.x-k8s.io", "clusterqueues", "", name))
        except NotFound:
            return {}
        configs = {o["metadata"]["name"] for o in objects("ProvisioningRequestConfig")}
        checks = {c["metadata"]["name"]: admission_check_state(c, configs).active
                  for c in objects("AdmissionCheck")}
        state = cluster_queue_state(cq, {o["metadata"]["name"] for o in objects("ResourceFlavor")}, checks)
        if write:
            _set_active(store, kinds["ClusterQueue"], cq, state.active, state.reason, state.message, now,
                             counters=True)
        return {name: state.active}

    if key.resource == "clusterqueues":
        active = cluster_queue(key.name, True)
        local = store.find("kueue.x-k8s.io", "localqueues", "$.spec.clusterQueue", key.name)
    else:
        try:
            local = [store.get(key)]
        except NotFound:
            return
        active = cluster_queue(str(local[0].get("spec", {}).get("clusterQueue")), False)
    for lq in local:
        state = local_queue_state(lq, active)
        _set_active(store, kinds["LocalQueue"], lq, state.active, state.reason, state.message, now, counters=True)

def _set_active(store: BaseStore, info: KindInfo, obj: dict[str, Any], active: bool, reason: str, message: str,
                now: str, *, counters: bool = False) -> None:
    status = copy.deepcopy(obj.get("status") or {})
    if counters:
        for field in ("pendingWorkloads", "reservingWorkloads", "admittedWorkloads"):
            status.setdefault(field, 0)
    before = find_condition(obj.get("status") or {}, "Active")
    set_condition(status, "Active", active, reason, message, now=now,
                  observed_generation=obj["metadata"].get("generation"))
    if status == obj.get("status"):
        return
    new = dict(obj, status=status)
    namespace = obj["metadata"].get("namespace") or "" if info.namespaced else ""
    stored = store.update(Key(info.group, info.plural, namespace, obj["metadata"]["name"]), new, subresource="status")
    if before is None or (before.get("status"), before.get("reason")) != ("True" if active else "False", reason):
        record_event(store, stored, reason, message, type="Normal" if active else "Warning",
                     component="flexq-queue-controller")
