"""The scheduler's decisions written back by the queue controller: a workload's status and Events, its racing
variants' Workload objects, and its job started (un-suspended on its flavors) or stopped."""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from flexq.api import ApiError, KindInfo, copy_json, resolve
from flexq.control import JobFinished, PodsReady
from flexq.controller.job_sync import inject, restore
from flexq.controller.object_sync import JOB_UID_LABEL, in_status, render_status
from flexq.controller.queue_state import COMPONENT, ControllerState
from flexq.forecast import CONDITION, Forecast, forecast_status
from flexq.jobs import JOB_KINDS, RAY_KINDS
from flexq.objects import BadRequest, find_condition, set_condition
from flexq.scheduler import (
    ALLOWED_FLAVORS,
    FAILED_TO_START,
    PARENT_LABEL,
    REPLACED,
    Event,
    EventKind,
    Workload,
    WorkloadState,
    check_updates,
)
from flexq.store import Key, NotFound, StoreError, record_event

if TYPE_CHECKING:
    from flexq.controller.pod_sync import PodIntegration
    from flexq.scheduler import Scheduler

__all__ = ["WorkloadWrites", "parent_of", "shows_forecast"]

_COMPONENT: Final = COMPONENT

log = logging.getLogger("flexq.controller")


def shows_forecast(wl: Workload) -> bool:
    """Whether a workload's status may carry its forecast: until its job starts, whether it waits for quota, for its
    admission checks (a ProvisioningRequest's answer) or for its nodes (a racing workload's variants are told on
    it). The forecast is made only while its job has not started, and taken out once it has."""
    return wl.state in (WorkloadState.PENDING, WorkloadState.QUOTA_RESERVED, WorkloadState.ADMITTED) and not wl.parent


NO_POOLS: Final = ("no ProvisioningRequest yet: no cluster has node pools to provision from (create the cluster and "
                   "its node pools: gcloud container clusters create, gcloud container node-pools create)")

class WorkloadWrites:
    """Write what the scheduler decided about a workload: its status and Events, its variants' objects, its job
    started or stopped (a queued Pod's through ``pods``)."""

    def __init__(self, state: ControllerState, pods: PodIntegration) -> None:
        self.state = state
        self.service, self.store, self.clock = state.service, state.store, state.clock
        self.capacity, self.runtime = state.capacity, state.runtime
        self.pods = pods
        self._shown: tuple[dict[str, Forecast], dict[str, tuple[Forecast, dict[str, Any]]]] = ({}, {})
        """The round of forecasts last shown (:attr:`ControllerState.forecast`), and each workload's forecast of it
        as its status shows it: a waiting workload is written again and again with the same one."""

    @property
    def scheduler(self) -> Scheduler:
        return self.state.scheduler

    def run_workload(self, key: str, _now: float) -> None:
        """Its pods are bound to nodes: run its job (RayJobs and RayClusters run on Ray; Pods, and batch/v1 Jobs'
        pods, as local processes)."""
        wl = self.scheduler.workload(key)
        if wl is None:
            return
        kind, _, owner = wl.owner.partition(" ")
        runtime = self.runtime
        if not self.tells_ready(wl):
            self._placed_ready(wl)
        if runtime is None or not self._runs(wl):
            return
        namespace, _, name = owner.partition("/")
        driver = self.capacity.driver
        nodes = dict(driver.placements.get(key, {})) if driver is not None else {}
        counts = {p.name: p.count for p in wl.podsets}
        start: Callable[[], None]
        if kind == "RayJob":
            start = lambda: runtime.start(namespace, name, nodes, counts)  # noqa: E731
        elif kind == "RayCluster":
            start = lambda: runtime.clusters.start(namespace, name, nodes, counts)  # noqa: E731
        elif kind == "Pod":
            start = lambda: self.pods.run(key, nodes)  # noqa: E731
        elif kind == "Job":
            placed = [node for podset in sorted(nodes) for node in nodes[podset]]
            start = lambda: runtime.batch.start(namespace, name, placed)  # noqa: E731
        else:
            return
        stored = self.state.wl_key(wl)
        self.state.after_write.append(lambda: self._if_admitted(stored, start))

    def write_workload(self, wl: Workload, events: list[Event], stamp: str) -> None:
        unborn = wl.key in self.state.unborn
        stored = self.state.unborn[wl.key][0] if unborn else self.state.stored_workload(wl)
        if stored is None:
            return
        if wl.key in self.scheduler.variants:
            self.scheduler.explain(wl.key, self.scheduler.race_reason(wl.key))
        status = self._why_unprovisioned(render_status(
            wl, stored.get("status") or {}, self.scheduler.last_assignment.get(wl.key), stamp,
            stored["metadata"].get("generation", 1), *_endings(events), pods_ready=self._ready(wl)))
        unhealthy = self.capacity.driver.unhealthy_node(wl.key) if self.capacity.driver is not None else ""
        if unhealthy:  # Kueue's: the node whose pods wait to be placed again (TASFailedNodeReplacementFailFast off)
            status["unhealthyNodes"] = [{"name": unhealthy}]
        else:
            status.pop("unhealthyNodes", None)
        variants = self._variant_rows(wl, stamp)
        if variants:
            status["variants"] = variants
        else:
            status.pop("variants", None)
        if variants and wl.admission is None:
            # A racing workload shows its variants' checks, so that a check controller or a person can set them
            # on the workload the job owns (they reach the variant that has the check).
            previous = {c["name"]: c for c in (stored.get("status") or {}).get("admissionChecks") or []}
            checks = {c["name"]: c["state"] for row in variants for c in row.get("admissionChecks", [])}
            if checks:
                status["admissionChecks"] = [
                    {"name": name, "state": state, "message": "",
                     "lastTransitionTime": previous[name]["lastTransitionTime"]
                     if previous.get(name, {}).get("state") == state else stamp}
                    for name, state in sorted(checks.items())]
        if wl.key in self.state.metrics:
            status["trainingMetrics"] = self.state.metrics[wl.key]
        self._show_forecast(wl, status, stamp)
        self._show_cost(wl, status)
        held = len(self.state.event_notes)
        try:
            self._write(wl, stored, status, events, variants, unborn)
        except BaseException:
            del self.state.event_notes[held:]  # its write undone: its Events with it
            raise

    def _write(self, wl: Workload, stored: dict[str, Any], status: dict[str, Any], events: list[Event],
               variants: list[dict[str, Any]], unborn: bool) -> None:
        """The workload's status, its job and its Events noted, whole or not at all (in a step's batch the Events
        noted are written together, before it commits: :meth:`ControllerState.write_events`)."""
        with self.store.transaction():
            if unborn:
                born = self.state.born(wl, status)
                if born is None:
                    return
                stored = born
            elif status != stored.get("status"):
                self.store.update(self.state.wl_key(wl), {**stored, "status": status}, subresource="status", echo=False,
                                  current=stored)  # read above, in this step's hold of the store
            if wl.state is WorkloadState.INACTIVE and stored.get("spec", {}).get("active") is not False:
                fresh = self.store.get(self.state.wl_key(wl))
                fresh["spec"]["active"] = False
                written = self.store.update(self.state.wl_key(wl), fresh)
                self.state.inactive_generation[wl.key] = int(written["metadata"].get("generation") or 0)
            if (variants or wl.won) and (stored["metadata"].get("labels") or {}).get(PARENT_LABEL) != "true":
                fresh = self.store.get(self.state.wl_key(wl))  # as Kueue marks a workload that races its variants
                fresh["metadata"].setdefault("labels", {})[PARENT_LABEL] = "true"
                self.store.update(self.state.wl_key(wl), fresh)
            for event in events:
                self._record(stored, event)
            kinds = {e.kind for e in events}
            # Evicted and admitted again within one sync (its quota reserved anew at once): the job still stops
            # first, so that its run ends and a new one starts.
            if kinds & {EventKind.EVICTED, EventKind.DEACTIVATED}:
                self._stop_job(stored)
            if EventKind.ADMITTED in kinds and wl.state is WorkloadState.ADMITTED and wl.admission is not None:
                self._start_job(stored, wl)
            if not self.state.holding_events:
                self.state.write_events()  # no batch to hold them back: with this write

    def _show_cost(self, wl: Workload, status: dict[str, Any]) -> None:
        """What the workload's run has cost so far, where capacity is modelled and it used nodes."""
        driver = self.capacity.driver
        if driver is not None and driver.cost(wl.key) > 0:
            status["cost"] = {"usd": round(driver.cost(wl.key), 4),
                              "basis": "node-hours of the nodes its pods used, at the catalog's hourly prices"}

    def _why_unprovisioned(self, status: dict[str, Any]) -> dict[str, Any]:
        """``status``, where a provisioning check waits with no node pool to provision from, saying so (no
        ProvisioningRequest is made until a cluster has one; then it is, and the check goes on)."""
        pools = self.capacity.driver is not None
        checks = status.get("admissionChecks") or []
        for n, check in enumerate(checks):
            if check.get("name") not in self.state.plane.provisioning_checks or check.get("state") != "Pending":
                continue
            if not pools and not check.get("message"):
                message = NO_POOLS
            elif pools and check.get("message") == NO_POOLS:
                message = ""  # its request is made now
            else:
                continue
            checks = status["admissionChecks"] = [*checks[:n], {**check, "message": message}, *checks[n + 1:]]
        return status

    def _runs(self, wl: Workload) -> bool:
        """Whether flexq runs the workload's pods (RayJobs and RayClusters on Ray, Pods and batch/v1 Jobs' pods as
        local processes)."""
        return self.runtime is not None and wl.owner.partition(" ")[0] in ("RayJob", "RayCluster", "Pod", "Job")

    def tells_ready(self, wl: Workload) -> bool:
        """Whether the job says itself when its pods are ready (a RayJob's Ray cluster up, a RayCluster ready, a Pod's
        process started); else they count as ready once placed (a batch/v1 Job's too: nothing reports its pods')."""
        return self.runtime is not None and wl.owner.partition(" ")[0] in ("RayJob", "RayCluster", "Pod")

    def _placed_ready(self, wl: Workload, *, writing: bool = False) -> None:
        """Nothing here runs its pods (no runtime, or a kind flexq does not execute): placed, they count as ready
        (waitForPodsReady); a job that runs says so itself (JobEvents, PodIntegration). Its status is written again
        unless it is being ``writing`` now."""
        parent = self.scheduler.workload(wl.parent) if wl.parent else wl
        if parent is not None and parent.pods_ready_at is None:
            self.state.plane.feed(PodsReady(wl.key, self.clock.now()))
            if not writing:
                self.state.touched.add(parent.key)

    def _ready(self, wl: Workload) -> str | None:
        """Kueue's PodsReady reason for ``wl`` where waitForPodsReady is on (None where it is off)."""
        plane = self.state.plane
        if plane.kueue.pods_ready is None or wl.parent:
            return None
        if self.capacity.driver is None and wl.state is WorkloadState.ADMITTED and not self.tells_ready(wl) \
                and not any(check_updates(wl, ps.name) for ps in wl.podsets):
            # It starts with this write: ready with it. One whose checks ask something of its pods may not start (an
            # update its template disagrees with): it is ready once its job has started (run_workload).
            self._placed_ready(wl, writing=True)
        return plane.pods_ready.reason(wl)

    def _show_forecast(self, wl: Workload, status: dict[str, Any], stamp: str) -> None:
        """A waiting workload's last forecast in its status (``status.forecast`` and the Forecast condition); gone
        once its job has started."""
        with self.state.forecast_lock:
            made, made_with = self.state.forecast.get(wl.key), self.state.forecast
        if made is None or not shows_forecast(wl):
            status.pop("forecast", None)
            if find_condition(status, CONDITION) is not None:
                status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != CONDITION]
            return
        if self._shown[0] is not made_with:  # a new round of forecasts: those shown of the last one go
            self._shown = (made_with, {})
        shown = self._shown[1].get(wl.key)
        if shown is None or shown[0] is not made:
            shown = (made, forecast_status(made))  # its message: describe(made, relative=False)
            self._shown[1][wl.key] = shown
        status["forecast"] = copy_json(shown[1])
        set_condition(status, CONDITION, made.start is not None, made.basis.word, shown[1]["message"], now=stamp)

    def _if_admitted(self, key: Key, start: Callable[[], None]) -> None:
        """Start a job only on an admission the store holds (one whose write failed is forgotten, not run)."""
        try:
            obj = self.store.get(key)
        except NotFound:
            return
        if (find_condition(obj.get("status") or {}, "Admitted") or {}).get("status") == "True":
            start()
        else:
            log.warning("not starting %s/%s: its admission is not in the store", key.namespace, key.name)

    def write_variants(self, parent_key: str, stamp: str) -> None:
        """Keep the variants' Workload objects as Kueue keeps them: one per racing variant, owned by the parent,
        named ``<parent>-variant-<flavor>-<hash>``, with its flavor in the allowed-flavors annotation and its own
        status; gone once it is withdrawn or has won."""
        namespace = parent_key.partition("/")[0]
        live = {v.name: v for k in self.scheduler.variants.get(parent_key, ())
                if (v := self.scheduler.workload(k)) is not None}
        names = self.state.stored_variants.setdefault(parent_key, set())
        for name in sorted(names - set(live)):
            with contextlib.suppress(NotFound):
                self.store.delete(Key("kueue.x-k8s.io", "workloads", namespace, name))
            names.discard(name)
        parent = self.scheduler.workload(parent_key)
        stored_parent = self.state.stored_workload(parent) if parent is not None else None
        for name, variant in sorted(live.items()):
            key = Key("kueue.x-k8s.io", "workloads", namespace, name)
            try:
                stored = self.store.get(key)
            except NotFound:
                if stored_parent is None:
                    continue
                try:
                    stored = self.service.create(resolve("workload"), namespace,
                                                 _variant_object(stored_parent, variant))
                except (ApiError, BadRequest, StoreError) as exc:
                    log.warning("variant %s could not be stored: %s", name, exc)
                    continue
            names.add(name)
            status = render_status(variant, stored.get("status") or {},
                                   self.scheduler.last_assignment.get(variant.key), stamp,
                                   stored["metadata"].get("generation"))
            if status != stored.get("status"):
                self.store.update(key, {**stored, "status": status}, subresource="status", echo=False)
        if not names:
            del self.state.stored_variants[parent_key]

    def _variant_rows(self, wl: Workload, stamp: str) -> list[dict[str, Any]]:
        """What the parent's status shows of its racing variants (Kueue keeps them as Workloads of their own), said
        at ``stamp``."""
        rows = []
        for key in self.scheduler.variants.get(wl.key, ()):
            variant = self.scheduler.workload(key)
            if variant is None:
                continue
            row: dict[str, Any] = {"name": variant.name, "flavor": variant.flavor, "state": variant.state.value}
            if variant.pending_reason:
                row["message"] = in_status(variant.pending_reason, stamp)
            if variant.checks:
                row["admissionChecks"] = [{"name": c, "state": s.value} for c, s in sorted(variant.checks.items())]
            rows.append(row)
        return rows

    def _record(self, workload: dict[str, Any], event: Event) -> None:
        if event.kind is EventKind.CREATED and not event.extra.get("parent"):
            return
        reason = event.kind.value if event.kind is not EventKind.CHECK else "AdmissionCheckUpdated"
        message = event.reason
        variant = event.workload.partition("/")[2]
        if event.kind is EventKind.FINISHED and variant == workload["metadata"]["name"]:
            if event.extra.get("finishedReason") == REPLACED:  # Kueue's scheduler tells it on the old slice
                self.state.note_event(workload, REPLACED, message)
            else:
                self._finished_on_job(workload)
            return
        if variant == workload["metadata"]["name"] and event.kind in (EventKind.QUOTA_RESERVED, EventKind.ADMITTED):
            message = self._admission_message(event)
        if variant != workload["metadata"]["name"]:
            reason = "Variant" + reason
            message = f"variant {variant}: {message}"
        if event.kind is EventKind.CHECK:
            message = f"Admission check {event.extra.get('check')} is {event.extra.get('state')}" + (
                f": {event.reason}" if event.reason not in ("", event.extra.get("state")) else "")
        warning = event.kind in (EventKind.PENDING, EventKind.EVICTED, EventKind.PREEMPTED, EventKind.DEACTIVATED,
                                 EventKind.SECOND_PASS_FAILED)
        self.state.note_event(workload, reason, message or reason, type="Warning" if warning else "Normal")

    def _admission_message(self, event: Event) -> str:
        """The QuotaReserved and Admitted Events' messages, as Kueue's scheduler and workload controller word them:
        with the wait since the workload was queued (created, or requeued), or since its quota was reserved (0 s
        where it is admitted as its quota is reserved)."""
        wl = self.scheduler.workload(event.workload)
        if event.kind is EventKind.QUOTA_RESERVED:
            since = wl.queue_time if wl is not None else event.t
            return (f"Quota reserved in ClusterQueue {event.cluster_queue}, wait time since queued was "
                    f"{max(0.0, event.t - since):.0f}s")
        since = wl.reserved_at if wl is not None and wl.reserved_at is not None else event.t
        return (f"Admitted by ClusterQueue {event.cluster_queue}, wait time since reservation was "
                f"{max(0.0, event.t - since):.0f}s")

    def _finished_on_job(self, workload: dict[str, Any]) -> None:
        """Kueue's job reconciler tells a workload's end on its job (``FinishedWorkload``), not on the workload: the
        job its owner reference names (none for a workload no job owns)."""
        meta = workload["metadata"]
        ref = next(iter(meta.get("ownerReferences") or []), None)
        if ref is None:
            return
        namespace = meta.get("namespace", "default")
        job = {"apiVersion": ref.get("apiVersion", ""), "kind": ref.get("kind", ""),
               "metadata": {"name": ref.get("name", ""), "namespace": namespace, "uid": ref.get("uid", "")}}
        self.state.note_event(job, "FinishedWorkload", f"Workload '{namespace}/{meta['name']}' is declared finished")

    def _owned_job(self, workload: dict[str, Any]) -> tuple[KindInfo, Key, dict[str, Any], dict[str, Any]] | None:
        """The job that owns ``workload``: its kind, key and current object twice, a copy to change and the object
        as stored (None if gone)."""
        ref = next(iter(workload["metadata"].get("ownerReferences") or []), None)
        if ref is None:
            return None
        group, kind = ref["apiVersion"].rpartition("/")[0], ref["kind"]
        info = resolve(kind) if kind in JOB_KINDS else None
        if info is None or info.group != group:
            return None
        key = Key(info.group, info.plural, workload["metadata"].get("namespace", "default"), ref["name"])
        try:
            return info, key, *self.store.get_to_change(key)
        except NotFound:
            return None

    def _start_job(self, workload: dict[str, Any], wl: Workload) -> None:
        if self.pods.owns(workload):
            self.pods.start(workload, wl)
            if self.capacity.driver is None:
                self.run_workload(wl.key, self.clock.now())
            return
        owned = self._owned_job(workload)
        if owned is None or wl.admission is None:
            return
        info, key, job, stored = owned
        updates = {ps.name: check_updates(wl, ps.name) for ps in wl.admission.podsets}
        conflict = inject(info.kind, job, wl.admission, self.scheduler.config.flavors, updates)
        if conflict is not None:  # the job stays as it is; its workload finishes (Kueue: a permanent error)
            self.state.log(self.state.plane.feed(JobFinished(wl.key, self.clock.now(), conflict, FAILED_TO_START)))
            return
        self.store.update(key, job, echo=False, current=stored)
        self.state.note_event(job, "Started", f"Admitted by clusterQueue {wl.cluster_queue}")
        if self.capacity.driver is None:
            self.run_workload(wl.key, self.clock.now())

    def _stop_job(self, workload: dict[str, Any]) -> None:
        if self.pods.owns(workload):
            self.pods.stop(workload)
            return
        owned = self._owned_job(workload)
        if owned is None:
            return
        info, key, job, stored = owned
        originals = {ps["name"]: ps.get("template") or {} for ps in workload.get("spec", {}).get("podSets") or []}
        if self.runtime is not None and info.kind in RAY_KINDS:
            runtime, namespace, name = self.runtime, key.namespace, key.name
            # Before any start queued in this sync: that start is for the admission that follows the eviction.
            if info.kind == "RayCluster":
                self.state.after_write.insert(0, lambda: runtime.clusters.stop(namespace, name, suspended=True))
            else:
                self.state.after_write.insert(0, lambda: runtime.suspend(namespace, name))
        elif self.runtime is not None and info.kind == "Job":  # its active pods deleted, as the Job controller does
            runtime, namespace, name = self.runtime, key.namespace, key.name
            self.state.after_write.insert(0, lambda: runtime.batch.suspend(namespace, name))
        counts = {ps["name"]: int(ps.get("count", 1)) for ps in workload.get("spec", {}).get("podSets") or []}
        restore(info.kind, job, originals, counts)
        self.store.update(key, job, echo=False, current=stored)
        record_event(self.store, job, "Stopped", "Evicted from its ClusterQueue: suspended until admitted again",
                     type="Warning", component=_COMPONENT)


def parent_of(obj: Mapping[str, Any]) -> str | None:
    """The key of the Workload that owns ``obj`` (a variant), if any."""
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "Workload" and str(ref.get("apiVersion", "")).startswith("kueue.x-k8s.io/"):
            return f"{obj['metadata'].get('namespace', 'default')}/{ref.get('name')}"
    return None


def _variant_object(parent: Mapping[str, Any], variant: Workload) -> dict[str, Any]:
    """A variant's Workload, as Kueue makes it from its parent: the parent's spec and labels (not the parent
    label), its flavor annotated, owned by the parent."""
    meta = parent["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in (PARENT_LABEL, JOB_UID_LABEL)}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": variant.name, "namespace": variant.namespace, "labels": labels,
                     "annotations": {ALLOWED_FLAVORS: variant.flavor},
                     "ownerReferences": [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                                          "name": meta["name"], "uid": meta.get("uid", ""), "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": copy.deepcopy(parent.get("spec") or {}),
    }


Ending = tuple[str, str] | None
"""Why a workload was evicted, preempted or finished (the reason and its message), where it was."""


def _endings(events: list[Event]) -> tuple[Ending, Ending, Ending]:
    """How ``events`` ended the workload's admission or run: evicted, preempted, finished."""
    evicted = preempted = finished = None
    for event in events:
        if event.kind is EventKind.FINISHED and event.extra.get("finishedReason"):
            finished = (str(event.extra["finishedReason"]), event.reason)
        if event.kind is EventKind.EVICTED:
            evicted = (str(event.extra.get("cause", "Evicted")), event.reason)
        if event.kind is EventKind.PREEMPTED:
            preempted = (str(event.extra.get("preemptionReason", "Preempted")), event.reason)
    return evicted, preempted, finished
