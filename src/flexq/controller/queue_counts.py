"""ClusterQueue and LocalQueue statuses: the pending, reserving and admitted counts and the quota in use.

Kept after every step of the queue controller, and written where a figure changed: what was last written
is remembered per queue, and a queue is read (and written, if its stored status differs) only when its
figures differ from those, or when its object changed since (someone else may have written its status).
Under load the figures change at every step: they are then written at most every ``INTERVAL`` seconds, as
Kueue batches its queues' status updates (:meth:`QueueCounts.due_in` says when the next write is due), and less
often where writing them takes long (a thousand queues whose figures all change): they take at most ``SHARE`` of
the controller's time.

With Kueue's admission fair sharing on, each LocalQueue's ``status.fairSharing`` is written as Kueue writes it:
``weightedShare`` (0: flexq's LocalQueues hold no quota of their own) and ``admissionFairSharingStatus`` with the
decayed ``consumedResources`` and their ``lastUpdate``, whenever a sample or an admission changed them.

With fair sharing on, each Cohort object's ``status.fairSharing.weightedShare`` is written as Kueue's cohort
reconciler writes it (and taken out when fair sharing is off), whenever a ClusterQueue's figures changed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from flexq.api import KindInfo, resolve
from flexq.scheduler import FlavorResource, Scheduler, UsageLedger, WorkloadState, format_amount, format_usage
from flexq.store import BaseStore, Key, NotFound, rfc3339

__all__ = ["INTERVAL", "QueueCounts", "object_key"]

INTERVAL: Final = 0.1
"""Seconds between two writes of the queues' statuses, at the most (where writing them is quick)."""
SHARE: Final = 0.1
"""The share of the controller's time the queues' statuses may take: after a write that took ``d`` seconds, the
next comes ``d / SHARE`` seconds after it began, at the earliest."""


Usage = dict[FlavorResource, int]
Slot = tuple[str, tuple[str, str], int, Mapping[FlavorResource, int]]
"""Where a workload is counted: its ClusterQueue, its LocalQueue (namespace, name), its slot (0 pending, 1 quota
reserved, 2 admitted) and the quota it holds."""


def weighted_share(share: float) -> int:
    """``status.fairSharing.weightedShare`` as Kueue writes it: the share rounded up (2^63-1 for an infinite one)."""
    return 2**63 - 1 if math.isinf(share) else math.ceil(share)


def _by_flavor(spec: Mapping[str, Any], totals: Mapping[FlavorResource, int]) -> list[dict[str, Any]]:
    """A LocalQueue's quota in ``totals``, as Kueue's LocalQueue status lists it: for each flavor of its
    ClusterQueue (``spec``), each resource the flavor's group covers, with its total (0 where none is held)."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            resources = rows.setdefault(flavor["name"], [])
            resources.extend({"name": r, "total": format_amount(r, totals.get((flavor["name"], r), 0))}
                             for r in group.get("coveredResources") or [])
    return [{"name": name, "resources": resources} for name, resources in rows.items()]


def object_key(info: KindInfo, obj: Mapping[str, Any]) -> Key:
    return Key(info.group, info.plural, obj["metadata"].get("namespace", "") if info.namespaced else "",
               obj["metadata"]["name"])


class QueueCounts:
    """The counts per queue, kept up to date from the workloads each step names (all of them after
    :meth:`forget`), and the queues whose figures changed since they were last written."""

    def __init__(self, store: BaseStore, monotonic: Callable[[], float]) -> None:
        self.store = store
        self._monotonic = monotonic
        self._last = -INTERVAL
        self._gap = INTERVAL
        """Seconds from one write's start to the next one's, at the least (see :data:`SHARE`)."""
        self._written: dict[Key, dict[str, Any]] = {}
        self._slots: dict[str, Slot] = {}
        self._counts: dict[str, list[int]] = {}
        self._local: dict[tuple[str, str], list[int]] = {}
        self._local_usage: dict[tuple[str, str], tuple[Usage, Usage]] = {}
        """Per LocalQueue: the quota its workloads reserve, and the quota its admitted workloads use."""
        self._dirty: set[str] = set()
        self._dirty_local: set[tuple[str, str]] = set()
        self._recount = True
        self.fair: UsageLedger | None = None
        """Kueue's admission fair sharing, whose LocalQueue usage is written in their statuses (None: off)."""
        self._fair_version = -1
        self._dirty_cohorts = True
        """Whether the Cohort objects' statuses may differ from what was last written (any ClusterQueue's usage
        changed, or a Cohort object did)."""
        self._indexed: tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]] | None = None
        """The queues :attr:`_cq_at`, :attr:`_lq_at` and :attr:`_specs` were made from (None: none yet, or the
        configuration changed since)."""
        self._cq_at: dict[str, int] = {}
        """Each ClusterQueue's place in the list of them: the dirty ones are written in its order."""
        self._lq_at: dict[tuple[str, str], int] = {}
        self._specs: dict[str, Mapping[str, Any]] = {}

    def recount(self) -> None:
        """Workloads may have moved between queues (the configuration changed, or everything was read again after a
        step whose writes failed): count them all again, and compare each queue's figures with its stored status
        rather than with what was last written (a failed step's writes, these among them, may have been undone)."""
        self._recount = True
        self._written.clear()

    def forget(self, key: Key) -> None:
        """The queue or cohort ``key`` may have changed: read it before the next write."""
        self._written.pop(key, None)
        if key.resource == "cohorts":
            self._dirty_cohorts = True
        elif key.resource == "clusterqueues":
            self._dirty.add(key.name)
        else:
            self._dirty_local.add((key.namespace, key.name))

    def _place(self, scheduler: Scheduler, key: str) -> None:
        old = self._slots.pop(key, None)
        if old is not None:
            self._count(old, -1)
        wl = scheduler.workload(key)
        if wl is None or wl.state in (WorkloadState.FINISHED, WorkloadState.INACTIVE) or wl.parent:
            return
        slot = 0 if wl.state is WorkloadState.PENDING else (2 if wl.state is WorkloadState.ADMITTED else 1)
        usage = wl.admission.usage() if slot and wl.admission is not None else {}
        place = (wl.cluster_queue, (wl.namespace, wl.queue), slot, usage)
        self._slots[key] = place
        self._count(place, 1)

    def _count(self, place: Slot, sign: int) -> None:
        cq, lq, slot, usage = place
        for bucket in (self._counts.setdefault(cq, [0, 0, 0]), self._local.setdefault(lq, [0, 0, 0])):
            bucket[slot] += sign
            if slot == 2:
                bucket[1] += sign  # admitted workloads also reserve quota
        if usage:
            reserved, used = self._local_usage.setdefault(lq, ({}, {}))
            for totals in (reserved, used) if slot == 2 else (reserved,):
                for fr, amount in usage.items():
                    totals[fr] = totals.get(fr, 0) + sign * amount
        self._dirty.add(cq)
        self._dirty_local.add(lq)

    def write(self, scheduler: Scheduler, cluster_queues: Sequence[Mapping[str, Any]],
              local_queues: Sequence[Mapping[str, Any]], changed: Iterable[str],
              cohorts: Iterable[Mapping[str, Any]] = ()) -> None:
        """Bring the queues' and the Cohort objects' statuses up to date (their specs as last read:
        ``cluster_queues``, ``local_queues``, ``cohorts``), ``changed`` naming the workloads that may have changed
        state, queue or existence since the last call."""
        if self._recount:
            self._dirty_cohorts = True
            self._recount, self._indexed = False, None
            self._slots, self._counts, self._local, self._local_usage = {}, {}, {}, {}
            changed = scheduler.workload_keys()
            self._dirty = {cq["metadata"]["name"] for cq in cluster_queues}
            self._dirty_local = {(lq["metadata"].get("namespace", "default"), lq["metadata"]["name"])
                                 for lq in local_queues}
        for key in changed:
            self._place(scheduler, key)
        if self.fair is not None and self.fair.version != self._fair_version:
            self._fair_version = self.fair.version
            self._dirty_local |= set(self.fair.entries())
        self._dirty_cohorts = self._dirty_cohorts or bool(self._dirty)
        if not (self._dirty or self._dirty_local or self._dirty_cohorts) or self.due_in() > 0:
            return
        self._last = self._monotonic()
        self._write_all(scheduler, cluster_queues, local_queues)
        if self._dirty_cohorts:
            self._dirty_cohorts = False
            self._write_cohorts(scheduler, cohorts)
        self._gap = max(INTERVAL, (self._monotonic() - self._last) / SHARE)

    def _index(self, cluster_queues: Sequence[Mapping[str, Any]], local_queues: Sequence[Mapping[str, Any]]) -> None:
        """Where each queue is in ``cluster_queues`` and ``local_queues``, and the ClusterQueues' specs: made again
        when the configuration changed (a thousand queues are not walked at every write for the few that changed)."""
        if self._indexed is not None and self._indexed[0] is cluster_queues and self._indexed[1] is local_queues:
            return
        self._indexed = (cluster_queues, local_queues)
        self._cq_at = {cq["metadata"]["name"]: n for n, cq in reversed(list(enumerate(cluster_queues)))}
        self._lq_at = {(lq["metadata"].get("namespace", "default"), lq["metadata"]["name"]): n
                       for n, lq in reversed(list(enumerate(local_queues)))}
        self._specs = {cq["metadata"]["name"]: cq.get("spec") or {} for cq in cluster_queues}

    def _write_all(self, scheduler: Scheduler, cluster_queues: Sequence[Mapping[str, Any]],
                   local_queues: Sequence[Mapping[str, Any]]) -> None:
        self._index(cluster_queues, local_queues)
        both = scheduler.weighted_shares()
        shares = both[0] if both is not None else None
        with self.store.transaction():
            for at in sorted(self._cq_at[name] for name in self._dirty if name in self._cq_at):
                cq = cluster_queues[at]
                name = cq["metadata"]["name"]
                pending, reserving, admitted = self._counts.get(name, [0, 0, 0])
                usage = scheduler.queue_usage(name)
                flavors: dict[str, list[dict[str, Any]]] = {}
                for group in (cq.get("spec") or {}).get("resourceGroups") or []:
                    for flavor in group.get("flavors", []):
                        rows = flavors.setdefault(flavor["name"], [])
                        for res in flavor.get("resources", []):
                            amount = usage.get((flavor["name"], res["name"]), 0)
                            nominal = scheduler.nominal(name, (flavor["name"], res["name"]))
                            rows.append({"name": res["name"], "total": format_amount(res["name"], amount),
                                         "borrowed": format_amount(res["name"], max(0, amount - nominal))})
                usage_rows = [{"name": f, "resources": r} for f, r in flavors.items()]
                fields: dict[str, Any] = {"pendingWorkloads": pending, "reservingWorkloads": reserving,
                                          "admittedWorkloads": admitted, "flavorsReservation": usage_rows,
                                          "flavorsUsage": usage_rows}
                if shares is not None and name in shares:
                    fields["fairSharing"] = {"weightedShare": weighted_share(shares[name])}
                self._set(cq, fields)
            for at in sorted(self._lq_at[place] for place in self._dirty_local if place in self._lq_at):
                lq = local_queues[at]
                place = (lq["metadata"].get("namespace", "default"), lq["metadata"]["name"])
                pending, reserving, admitted = self._local.get(place, [0, 0, 0])
                reserved, used = self._local_usage.get(place, ({}, {}))
                spec = self._specs.get((lq.get("spec") or {}).get("clusterQueue", ""), {})
                fields = {"pendingWorkloads": pending, "reservingWorkloads": reserving,
                          "admittedWorkloads": admitted, "flavorsReservation": _by_flavor(spec, reserved),
                          "flavorsUsage": _by_flavor(spec, used)}
                self._set(lq, {**fields, **self._fair_status(place)})
        self._dirty, self._dirty_local = set(), set()

    def _write_cohorts(self, scheduler: Scheduler, cohorts: Iterable[Mapping[str, Any]]) -> None:
        """Each Cohort object's ``status.fairSharing`` as Kueue's cohort reconciler writes it: its weighted share
        rounded up while fair sharing is on, none while it is off (a cohort only named by ClusterQueues has no
        object, and so no status)."""
        both = scheduler.weighted_shares()
        with self.store.transaction():
            for cohort in cohorts:
                name = cohort["metadata"]["name"]
                share = both[1].get(name, 0.0) if both is not None else None
                self._set(cohort, {"fairSharing": {"weightedShare": weighted_share(share)}} if share is not None
                          else {}, drop=() if share is not None else ("fairSharing",))

    def _fair_status(self, place: tuple[str, str]) -> dict[str, Any]:
        """A LocalQueue's ``fairSharing`` status field, where admission fair sharing is on and it was sampled."""
        consumed = self.fair.consumed(place) if self.fair is not None else None
        if consumed is None:
            return {}
        amounts, last = consumed
        return {"fairSharing": {"weightedShare": 0, "admissionFairSharingStatus": {
            "consumedResources": {name: format_usage(amount) for name, amount in sorted(amounts.items())},
            "lastUpdate": rfc3339(datetime.fromtimestamp(last, UTC))}}}

    def due_in(self) -> float:
        """Seconds until figures that changed may be written (0: now; ``inf``: nothing changed)."""
        if not (self._dirty or self._dirty_local or self._dirty_cohorts):
            return float("inf")
        return max(0.0, self._last + self._gap - self._monotonic())

    def _set(self, obj: Mapping[str, Any], fields: dict[str, Any], drop: tuple[str, ...] = ()) -> None:
        """Write ``fields`` into ``obj``'s stored status, and take the fields ``drop`` names out of it."""
        key = object_key(resolve(str(obj["kind"])), obj)
        if self._written.get(key) == fields:
            return
        try:
            fresh = self.store.get(key)
        except NotFound:
            return
        status = dict(fresh.get("status") or {})
        if not all(status.get(k) == v for k, v in fields.items()) or any(k in status for k in drop):
            status.update(fields)
            for k in drop:
                status.pop(k, None)
            self.store.update(key, {**fresh, "status": status}, subresource="status", echo=False, current=fresh)
        self._written[key] = fields
