"""Kueue's Pod integration on the live server: Workloads for queued Pods and pod groups, gates lifted on
admission, pods run (:mod:`flexq.runtime.local_pods`), workloads finished when their pods end.

Called by the :class:`~flexq.controller.queue.QueueController` under its lock: each method returns the
scheduler's events for the controller to write. A group's workload is made once all its pods exist and agree
on their queue and total count (until then each new pod gets an ``ErrWorkloadCompose`` event, as in Kueue);
it finishes when all its pods have ended (Failed if any failed: failed pods are not replaced). An evicted pod
is killed, marked ``TerminationTarget`` and deleted, as Kueue stops a pod it cannot suspend. A workload goes
when the last of its pods is deleted. Under ``--runtime none`` admitted pods lose their gate and are
given their flavors' node labels, but nothing runs: they stay Pending.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import logging
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from flexq.api import ApiError, resolve
from flexq.control import JobDeleted, JobFinished, JobQueued, PodsReady
from flexq.controller.job_sync import place, update_pods
from flexq.controller.object_sync import workload_object
from flexq.controller.queue_state import COMPONENT
from flexq.jobs import (
    GATE,
    QUEUE_LABEL,
    JobError,
    group_of,
    group_podsets,
    group_total,
    is_queued,
    outcome,
    role,
    template,
)
from flexq.objects import BadRequest
from flexq.runtime import LocalPod, RemotePod, RemoteRayCluster, pod_run_dir, pod_workdir, ray_pool_of_pod
from flexq.scheduler import (
    FAILED_TO_START,
    Admission,
    Event,
    FlavorSpec,
    PodSetUpdate,
    Workload,
    WorkloadState,
    check_updates,
)
from flexq.store import Change, ChangeType, Key, NotFound, StoreError, record_event

if TYPE_CHECKING:
    from flexq.controller.queue_state import ControllerState

__all__ = ["PodIntegration"]

log = logging.getLogger("flexq.controller")

_COMPONENT: Final = COMPONENT


def _pod_key(namespace: str, name: str) -> Key:
    return Key("", "pods", namespace, name)


def _uid(pod: Mapping[str, Any]) -> str:
    return str(pod["metadata"].get("uid", ""))


def _ns(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"].get("namespace") or "default")


class PodIntegration:
    def __init__(self, state: ControllerState) -> None:
        self.state = state
        self.workload_of: dict[str, str] = {}
        """Pod uid -> the key of its workload."""
        self.running: dict[str, LocalPod] = {}
        """Pod uid -> its local run."""

    # --- pods changed -------------------------------------------------------------------------------

    def changed(self, change: Change) -> list[Event]:
        pod = change.obj
        if change.type is ChangeType.DELETED:
            return self._deleted(pod)
        if not is_queued(pod):
            return []
        if _uid(pod) not in self.workload_of:
            return self.added(pod)
        self._check_ready(self.workload_of[_uid(pod)])
        return self._check_finished(self.workload_of[_uid(pod)])

    def _check_ready(self, key: str) -> None:
        """A Pod's process started (running, or done) for every pod of the workload: its pods are ready."""
        wl = self.state.scheduler.workload(key)
        if wl is None or wl.state is not WorkloadState.ADMITTED or wl.pods_ready_at is not None:
            return
        pods = self._pods(key)
        if pods and all((p.get("status") or {}).get("phase") in ("Running", "Succeeded") for p in pods):
            self.state.plane.feed(PodsReady(key, self.state.clock.now()))
            self.state.touched.add(key)

    def resync(self) -> list[Event]:
        """At start-up: the pods' workloads, from their owners; queued pods that have none get one."""
        self.workload_of = {}
        for obj in self.state.store.list_objects("kueue.x-k8s.io", "workloads")[0]:
            for ref in obj["metadata"].get("ownerReferences") or []:
                if ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1":
                    self.workload_of[str(ref.get("uid", ""))] = f"{_ns(obj)}/{obj['metadata']['name']}"
        events: list[Event] = []
        for pod in self.state.store.list_objects("", "pods")[0]:
            if is_queued(pod) and _uid(pod) not in self.workload_of:
                events += self.added(pod)
            elif is_queued(pod):
                self._follow_again(pod)
        return events

    def _follow_again(self, pod: dict[str, Any]) -> None:
        """A pod the last server ran and that has not ended: its run is followed again from its record (its
        processes ran on), never started a second time; with no record to follow (the machine restarted, or the
        last server stopped and ended it), the pod has failed, as a pod on a lost node does."""
        runtime = self.state.runtime
        status = pod.get("status") or {}
        if runtime is None or _uid(pod) in self.running or status.get("phase") not in ("Running", "Pending") \
                or not any(c.get("type") == "PodScheduled" and c.get("status") == "True"
                           for c in status.get("conditions") or []) or ray_pool_of_pod(self.state.store, pod):
            return
        namespace, name = _ns(pod), str(pod["metadata"]["name"])
        report = functools.partial(self._status, namespace, name, _uid(pod))
        run = LocalPod.resume(pod, self._workdir(pod), report, self._run_dir(pod))
        if run is not None:
            self.running[_uid(pod)] = run
            run.start_following()
            record_event(self.state.store, pod, "Reattached", "The server restarted; the pod's processes ran on and "
                         "are followed again, not started a second time", component=_COMPONENT)
            return
        if status.get("phase") == "Running" or (status.get("containerStatuses") or []):
            record_event(self.state.store, pod, "NodeLost", "The server stopped while the pod ran and its processes "
                         "were ended: the pod failed", type="Warning", component=_COMPONENT)
            containers = (pod.get("spec") or {}).get("containers") or []
            report({**status, "phase": "Failed", "reason": "NodeLost",
                    "message": "the server stopped while the pod ran, and its processes were ended",
                    "containerStatuses": [{"name": c.get("name"), "image": c.get("image", ""), "restartCount": 0,
                                           "ready": False, "started": False, "state": {"terminated": {
                                               "exitCode": 137, "reason": "Error"}}} for c in containers]})

    def added(self, pod: dict[str, Any]) -> list[Event]:
        group = group_of(pod)
        if group is None:
            return self._create([pod], None)
        namespace = _ns(pod)
        existing = f"{namespace}/{group}"
        if self.state.scheduler.knows(existing):
            self.workload_of[_uid(pod)] = existing  # a pod of a group that is already queued
            return []
        members = sorted((p for p in self.state.store.list_objects("", "pods", namespace)[0]
                          if is_queued(p) and group_of(p) == group), key=lambda p: str(p["metadata"]["name"]))
        problem = _compose_problem(group, members, group_total(pod))
        if problem is not None:
            record_event(self.state.store, pod, "ErrWorkloadCompose", problem, type="Warning", component=_COMPONENT)
            return []  # the group waits, gated
        return self._create(members, group)

    def _create(self, pods: list[dict[str, Any]], group: str | None) -> list[Event]:
        state, first = self.state, pods[0]
        now = state.clock.now()
        try:
            if group is None:
                wl = state.plane.workload_for("Pod", "", first, now)
                templates = {"main": template(first)}
            else:
                sets, templates = group_podsets(pods)
                counted = state.plane.counted(sets)
                wl = dataclasses.replace(state.plane.workload_for("Pod", "", first, now, pod_sets=counted), name=group)
        except JobError as exc:
            for pod in pods:
                record_event(state.store, pod, "FailedToCreateWorkload", str(exc), type="Warning", component=_COMPONENT)
            return []
        obj = workload_object(wl, first, "Pod", "v1", templates, state.plane.priority_class_of("Pod", first))
        obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": p["metadata"]["name"], "uid": _uid(p),
             "controller": group is None, "blockOwnerDeletion": True} for p in pods]
        try:
            created = state.service.create(resolve("workload"), wl.namespace, obj)
        except (ApiError, BadRequest, StoreError) as exc:
            for pod in pods:
                record_event(state.store, pod, "FailedToCreateWorkload", str(exc), type="Warning", component=_COMPONENT)
            return []
        wl.uid = created["metadata"]["uid"]
        for pod in pods:
            self.workload_of[_uid(pod)] = wl.key
            record_event(state.store, pod, "CreatedWorkload", f"Created Workload: {wl.key}", component=_COMPONENT)
        return state.plane.feed(JobQueued(wl, now))

    def _deleted(self, pod: dict[str, Any]) -> list[Event]:
        uid = _uid(pod)
        run = self.running.pop(uid, None)
        if run is not None:
            try:
                run.remove()
            except OSError as exc:  # what it leaves is left; the pod's workload still goes
                log.warning("pod %s/%s: its run could not be cleared away: %s", _ns(pod), pod["metadata"]["name"], exc)
        elif self.state.runtime is not None:  # its run ended (or was stopped) earlier: what it left goes now
            shutil.rmtree(self._workdir(pod), ignore_errors=True)
            shutil.rmtree(self._run_dir(pod), ignore_errors=True)
        key = self.workload_of.pop(uid, None)
        if key is None:
            return []
        if key in self.workload_of.values():
            return self._check_finished(key)
        state = self.state
        events = state.plane.feed(JobDeleted(key, state.clock.now()))
        state.capacity.release(key)
        namespace, _, name = key.partition("/")
        with contextlib.suppress(NotFound):
            state.store.delete(Key("kueue.x-k8s.io", "workloads", namespace, name))
        return events

    def _pods(self, key: str) -> list[dict[str, Any]]:
        """The workload's pods that exist, by name."""
        uids = {uid for uid, owner in self.workload_of.items() if owner == key}
        if not uids:
            return []
        pods = self.state.store.list_objects("", "pods", key.partition("/")[0])[0]
        return sorted((p for p in pods if _uid(p) in uids), key=lambda p: str(p["metadata"]["name"]))

    def _check_finished(self, key: str) -> list[Event]:
        wl = self.state.scheduler.workload(key)
        if wl is None or wl.state is WorkloadState.FINISHED or not wl.holds_quota:
            return []
        verdict = outcome([str((p.get("status") or {}).get("phase", "Pending")) for p in self._pods(key)])
        if verdict is None:
            return []
        return self.state.plane.feed(JobFinished(key, self.state.clock.now(), f"Pods {verdict.lower()}", verdict))

    # --- admission and eviction ---------------------------------------------------------------------

    @staticmethod
    def owns(workload: Mapping[str, Any]) -> bool:
        ref = next(iter(workload["metadata"].get("ownerReferences") or []), None)
        return ref is not None and ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1"

    def start(self, workload: Mapping[str, Any], wl: Workload) -> None:
        """Admitted: lift the gate, add the flavors' node labels and tolerations. The controller then runs them
        (:meth:`run`: at once, or once the capacity driver has bound them to nodes)."""
        if wl.admission is None:
            return
        state = self.state
        admitted = []
        for pod in self._pods(wl.key):
            status = pod.get("status") or {}
            if status.get("phase") in ("Succeeded", "Failed"):
                continue
            podset = "main" if group_of(pod) is None else role(pod)
            conflict = _admit(pod, podset, wl.admission, state.scheduler.config.flavors, check_updates(wl, podset))
            if conflict is not None:  # no pod is changed; the workload finishes (Kueue: a permanent error)
                state.log(state.plane.feed(JobFinished(wl.key, state.clock.now(), conflict, FAILED_TO_START)))
                return
            pod["status"] = {**status, "conditions": [{"type": "PodScheduled", "status": "True"}]}
            admitted.append(pod)
        for pod in admitted:
            state.store.update(_pod_key(_ns(pod), pod["metadata"]["name"]), pod, keep_status=False)
            record_event(state.store, pod, "Started", f"Admitted by clusterQueue {wl.cluster_queue}",
                         component=_COMPONENT)

    def run(self, key: str, nodes: Mapping[str, list[str]]) -> None:
        """Bound to ``nodes`` (by pod set): start each pod's local run."""
        if self.state.runtime is None:
            return
        taken: dict[str, int] = {}
        for pod in self._pods(key):
            if _uid(pod) in self.running or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            podset = "main" if group_of(pod) is None else role(pod)
            placed = list(nodes.get(podset) or [])
            index = taken[podset] = taken.get(podset, -1) + 1
            if index < len(placed):
                pod["spec"]["nodeName"] = placed[index]
                self.state.store.update(_pod_key(_ns(pod), pod["metadata"]["name"]), pod)
            report = functools.partial(self._status, _ns(pod), str(pod["metadata"]["name"]), _uid(pod))
            remote = ray_pool_of_pod(self.state.store, pod)
            run = LocalPod(pod, self._workdir(pod), report, self._run_dir(pod)) if remote is None else \
                RemotePod(pod, self._workdir(pod), report, RemoteRayCluster(remote[1], remote[0]), self._run_dir(pod))
            self.running[_uid(pod)] = run
            run.start()

    def stop(self, workload: Mapping[str, Any]) -> None:
        """Evicted: as Kueue stops a pod (it cannot suspend one), each pod's run is killed, the pod is marked
        ``TerminationTarget`` and deleted; the workload then goes with the last of its pods."""
        key = f"{_ns(workload)}/{workload['metadata']['name']}"
        for pod in self._pods(key):
            run = self.running.pop(_uid(pod), None)
            if run is not None:
                run.stop(wait=0)  # its processes are killed; its thread, which may wait on the store, ends by itself
            status = copy.deepcopy(pod.get("status") or {})
            kept = [c for c in status.get("conditions") or [] if c.get("type") != "TerminationTarget"]
            status["conditions"] = [*kept,
                                    {"type": "TerminationTarget", "status": "True", "reason": "WorkloadEvicted",
                                     "message": "Evicted from its ClusterQueue"}]
            pod_key = _pod_key(_ns(pod), pod["metadata"]["name"])
            with contextlib.suppress(NotFound):
                self.state.store.update(pod_key, {**pod, "status": status}, subresource="status")
                record_event(self.state.store, pod, "Stopped", "Evicted from its ClusterQueue: the pod is deleted",
                             type="Warning", component=_COMPONENT)
                self.state.store.delete(pod_key)

    def stop_all(self) -> None:
        runs, self.running = list(self.running.values()), {}
        for run in runs:
            run.stop(wait=2.0, abandon=True)

    def _home(self) -> Path:
        return self.state.runtime.home if self.state.runtime is not None else Path(".")

    def _workdir(self, pod: Mapping[str, Any]) -> Path:
        return pod_workdir(self._home(), _ns(pod), str(pod["metadata"]["name"]), _uid(pod))

    def _run_dir(self, pod: Mapping[str, Any]) -> Path:
        return pod_run_dir(self._home(), _ns(pod), str(pod["metadata"]["name"]), _uid(pod))

    def _status(self, namespace: str, name: str, uid: str, status: dict[str, Any]) -> None:
        key = _pod_key(namespace, name)
        try:
            with self.state.store.transaction():
                pod = self.state.store.get(key)
                if _uid(pod) != uid:
                    return
                self.state.store.update(key, {**pod, "status": status}, subresource="status")
        except NotFound:
            return


def _compose_problem(group: str, members: list[dict[str, Any]], total: int) -> str | None:
    """Why the group's workload cannot be made yet (Kueue's messages), or None."""
    if len(members) < total:
        return f"'{group}' group has fewer runnable pods than expected"
    first = members[0]
    for other in members[1:]:
        queues = [(p["metadata"].get("labels") or {}).get(QUEUE_LABEL) for p in (first, other)]
        if queues[0] != queues[1]:
            return (f"pods '{first['metadata']['name']}' and '{other['metadata']['name']}' has different queue names: "
                    f"{queues[0]}!={queues[1]}")
        if group_total(other) != total:
            return (f"pods '{first['metadata']['name']}' and '{other['metadata']['name']}' has different "
                    f"'kueue.x-k8s.io/pod-group-total-count' values: {total}!={group_total(other)}")
    return None


def _admit(pod: dict[str, Any], podset: str, admission: Admission, flavors: Mapping[str, FlavorSpec],
           updates: list[tuple[str, PodSetUpdate]]) -> str | None:
    """Lift Kueue's gate and add the node labels and tolerations of the flavors ``podset`` was given, and what the
    admission checks' ``updates`` ask of its pods; or, the pod (a copy) half changed, say why it cannot start."""
    spec = pod.setdefault("spec", {})
    gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != GATE]
    if gates:
        spec["schedulingGates"] = gates
    else:
        spec.pop("schedulingGates", None)
    assignment = next((ps for ps in admission.podsets if ps.name == podset), None)
    if assignment is None:
        return None
    place(spec, assignment.flavors.values(), flavors)
    return update_pods(pod.setdefault("metadata", {}), spec, updates)
