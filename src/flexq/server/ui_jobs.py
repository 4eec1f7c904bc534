"""The jobs table behind ``/flexq/v1/dashboard/jobs``: one row per job, kept up to date from the store's change
log, filtered, sorted and paged on request.

The table is built from every workload once (the first request), then follows the change log: a changed workload
has its row made again; a job that starts or stops running has its workload's row made again; a LocalQueue that
points at another ClusterQueue has its pending rows made again. Waits are counted when a page is served, so rows
do not go stale with the clock. A change log compacted past the table's resourceVersion makes it build anew.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

import flexq.server.ui_data as ui_data
from flexq.server.ui_data import JobEntry
from flexq.server.ui_models import JobPage, JobRow
from flexq.store import BaseStore, Change, ChangeType, Gone, Key, NotFound

__all__ = ["JobTable"]

_JOB_KINDS: Final = {("ray.io", "rayjobs"): "RayJob", ("batch", "jobs"): "Job"}
_REBUILD_AFTER: Final = 20_000
"""More changes than this behind: building anew reads less than following them."""

Ref = tuple[str, str]
"""(namespace, name)"""
JobRef = tuple[str, str, str]
"""(namespace, kind, name)"""


def _ref(obj: dict[str, Any]) -> Ref:
    return str(obj["metadata"].get("namespace", "")), str(obj["metadata"]["name"])


class JobTable:
    """Thread-safe; :meth:`page` and :meth:`row` bring the table up to the store's latest change first."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._rv = -1
        self._entries: dict[Ref, JobEntry] = {}
        self._running: set[JobRef] = set()
        self._queues: dict[Ref, str] = {}
        """(namespace, LocalQueue) -> its ClusterQueue"""
        self._owned: dict[JobRef, Ref] = {}
        """job -> its workload"""

    def _entry(self, wl: dict[str, Any], now: datetime) -> None:
        ref = _ref(wl)
        if ui_data.is_variant(wl):
            return
        kind, name = ui_data.owner(wl)
        job = (ref[0], kind, name)
        if kind:
            self._owned[job] = ref
        queue = str((wl.get("spec") or {}).get("queueName", ""))
        self._entries[ref] = ui_data.job_entry(wl, job in self._running, self._queues.get((ref[0], queue), ""), now)

    def _build(self, now: datetime) -> None:
        workloads, rv = self.store.list_objects("kueue.x-k8s.io", "workloads")
        self._running = {(ns, kind, name) for (group, resource), kind in _JOB_KINDS.items()
                         for obj in self.store.list_objects(group, resource)[0]
                         for ns, name in [_ref(obj)] if ui_data.job_running(kind, obj)}
        self._queues = {_ref(o): str((o.get("spec") or {}).get("clusterQueue", ""))
                        for o in self.store.list_objects("kueue.x-k8s.io", "localqueues")[0]}
        self._entries, self._owned = {}, {}
        for wl in workloads:
            self._entry(wl, now)
        self._rv = rv  # what changed while the jobs and queues were read is applied again: it is idempotent

    def _again(self, ref: Ref, now: datetime) -> None:
        try:
            self._entry(self.store.get(Key("kueue.x-k8s.io", "workloads", *ref)), now)
        except NotFound:
            self._entries.pop(ref, None)

    def _apply(self, change: Change, now: datetime) -> None:
        key = change.key
        if key.group == "kueue.x-k8s.io" and key.resource == "workloads":
            if change.type is ChangeType.DELETED:
                self._entries.pop((key.namespace, key.name), None)
            else:
                self._entry(change.obj, now)
        elif (key.group, key.resource) in _JOB_KINDS:
            job = (key.namespace, _JOB_KINDS[(key.group, key.resource)], key.name)
            running = change.type is not ChangeType.DELETED and ui_data.job_running(job[1], change.obj)
            if running != (job in self._running):
                (self._running.add if running else self._running.discard)(job)
                if job in self._owned:
                    self._again(self._owned[job], now)
        elif key.group == "kueue.x-k8s.io" and key.resource == "localqueues":
            target = "" if change.type is ChangeType.DELETED else \
                str((change.obj.get("spec") or {}).get("clusterQueue", ""))
            if self._queues.get((key.namespace, key.name), "") != target:
                self._queues[(key.namespace, key.name)] = target
                for ref, entry in list(self._entries.items()):
                    if entry.row.namespace == key.namespace and entry.row.queue == key.name:
                        self._again(ref, now)

    def _catch_up(self) -> list[JobEntry]:
        with self._lock:
            now = datetime.now(UTC)
            if self._rv < 0 or self.store.current_rv() - self._rv > _REBUILD_AFTER:
                self._build(now)
            while True:
                try:
                    changes = self.store.changes(self._rv)
                except Gone:
                    self._build(now)
                    continue
                if not changes:
                    return list(self._entries.values())
                for change in changes:
                    self._apply(change, now)
                self._rv = changes[-1].rv

    def warm(self) -> None:
        """Build the table now (a server starting with many workloads: the first visit need not wait for it)."""
        with contextlib.suppress(sqlite3.Error):  # the store was closed first: a server that stopped at once
            self._catch_up()

    def entries(self, namespace: str | None = None) -> list[JobEntry]:
        """Every job's entry (one namespace's with ``namespace``), up to date."""
        return [e for e in self._catch_up() if namespace is None or e.row.namespace == namespace]

    def workload_of(self, namespace: str, job: str) -> str | None:
        """The workload made for the job named ``job`` (a RayJob's before a Job's), None for none."""
        self._catch_up()
        with self._lock:
            for kind in _JOB_KINDS.values():
                ref = self._owned.get((namespace, kind, job))
                if ref is not None and ref in self._entries:
                    return ref[1]
        return None

    def row(self, namespace: str, name: str, costs: Mapping[str, float] | None = None) -> JobRow | None:
        """One workload's row; ``costs`` (workload key -> USD so far) are what its runs cost as of now, where known
        (the status says what it had cost when it was last written)."""
        entry = next((e for e in self._catch_up() if (e.row.namespace, e.row.name) == (namespace, name)), None)
        return _costed(entry.at(time.time()), costs) if entry is not None else None

    def page(self, queue: str | None, state: str | None, flavor: str | None, sort: str, descending: bool,
             offset: int, limit: int, namespace: str | None = None,
             costs: Mapping[str, float] | None = None) -> JobPage:
        """Rows that pass the filters (a queue is a LocalQueue or a ClusterQueue), sorted, one page of them; with
        ``namespace``, that namespace's rows only (all a developer may read); ``costs`` as for :meth:`row`."""
        entries = [e for e in self._catch_up() if namespace is None or e.row.namespace == namespace]
        now = time.time()
        picked = [e for e in entries if (not queue or queue in (e.row.queue, e.row.clusterQueue))
                  and (not state or e.row.state == state) and (not flavor or flavor in e.flavors)]
        picked.sort(key=_order(sort, now, costs or {}), reverse=descending)
        return JobPage(total=len(picked), offset=offset, limit=limit,
                       items=[_costed(e.at(now), costs) for e in picked[offset:offset + limit]],
                       queues=sorted({e.row.queue for e in entries if e.row.queue}
                                     | {e.row.clusterQueue for e in entries if e.row.clusterQueue}),
                       states=list(ui_data.STATES), flavors=sorted({f for e in entries for f in e.flavors}))


def _cost(row: JobRow, costs: Mapping[str, float]) -> float:
    return round(costs.get(f"{row.namespace}/{row.name}", row.costUsd), 4)


def _costed(row: JobRow, costs: Mapping[str, float] | None) -> JobRow:
    """``row`` with its cost as of now where ``costs`` know it."""
    if not costs or f"{row.namespace}/{row.name}" not in costs:
        return row
    return row.model_copy(update={"costUsd": _cost(row, costs)})


def _order(sort: str, now: float, costs: Mapping[str, float]) -> Callable[[JobEntry], Any]:
    orders: dict[str, Callable[[JobEntry], Any]] = {
        "created": lambda e: (e.row.created, e.row.namespace, e.row.name),
        "name": lambda e: (e.row.jobName or e.row.name, e.row.namespace),
        "queue": lambda e: (e.row.queue, e.row.created, e.row.name),
        "state": lambda e: (ui_data.STATES.index(e.row.state), e.row.created, e.row.name),
        "priority": lambda e: (e.row.priority, e.row.created, e.row.name),
        "wait": lambda e: (e.wait(now), e.row.name),
        "cost": lambda e: (_cost(e.row, costs), e.row.name)}
    return orders[sort]
