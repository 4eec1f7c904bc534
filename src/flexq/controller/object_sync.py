"""Workload objects in the store, and the scheduler's model of them, both ways.

A Workload object looks as Kueue writes it (``kueue.x-k8s.io/v1beta2``): ``spec.podSets`` with the
job's pod templates, ``status.conditions`` (QuotaReserved, Admitted, Evicted, Preempted, Finished),
``status.admission`` (ClusterQueue and per pod set flavors, usage, count) and
``status.admissionChecks``. flexq adds ``status.flavorsConsidered``: for each pod set, every flavor
the last nomination tried and why it was not taken.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from flexq.api import assignment_domains, to_v1beta2
from flexq.durations import dated
from flexq.jobs import pod_requests, request_from_object, request_object
from flexq.objects import find_condition, set_condition
from flexq.scheduler import (
    COUNTDOWNS,
    Admission,
    Assignment,
    CheckState,
    DelayedTopology,
    Granular,
    PodSet,
    PodSetAssignment,
    Text,
    TopologyAssignment,
    Workload,
    WorkloadState,
    format_amount,
    node_affinity,
    pod_set_update_objects,
    pod_set_updates,
    toleration,
    worded,
)

__all__ = ["JOB_UID_LABEL", "REPLACEMENT_FOR", "in_status", "render_status", "workload_from_object",
           "workload_object"]

JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
REPLACEMENT_FOR: Final = "kueue.x-k8s.io/workload-slice-replacement-for"
"""On a workload slice: the key (namespace/name) of the slice it replaces."""
_DELAYED: Final = frozenset(d.value for d in DelayedTopology)
_PENDING_DELAYED: Final = "There are pending delayed topology requests"


def _parse_time(text: Any) -> float:
    if not isinstance(text, str) or not text:
        return 0.0
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def workload_object(wl: Workload, job: Mapping[str, Any], kind: str, api_version: str,
                    templates: Mapping[str, dict[str, Any]],
                    priority_class: Mapping[str, str] | None) -> dict[str, Any]:
    """The Workload object for a job's workload (``wl`` from :func:`flexq.jobs.workload.make_workload`), with the
    class its priority comes from (``priority_class``, from :func:`flexq.jobs.workload.priority_class_ref`). The
    ``templates`` become the object's own: pass copies (:func:`flexq.controller.job_sync.templates` makes them)."""
    meta = job["metadata"]
    spec: dict[str, Any] = {
        "queueName": wl.queue,
        "podSets": [{"name": ps.name, "count": ps.count,
                     **({"minCount": ps.min_count} if ps.min_count is not None else {}),
                     "template": templates[ps.name],
                     **({"topologyRequest": request_object(ps.topology)} if ps.topology is not None else {})}
                    for ps in wl.podsets],
        "priority": wl.priority,
        "active": True,
    }
    if priority_class:
        spec["priorityClassRef"] = dict(priority_class)
    if wl.max_exec_seconds is not None:
        spec["maximumExecutionTimeSeconds"] = wl.max_exec_seconds
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": wl.name,
            "namespace": wl.namespace,
            "labels": {JOB_UID_LABEL: str(meta.get("uid", ""))},
            "ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": meta["name"],
                                 "uid": str(meta.get("uid", "")), "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": spec,
    }


def _podset(raw: Mapping[str, Any]) -> PodSet:
    spec = (raw.get("template") or {}).get("spec") or {}
    least = raw.get("minCount")
    return PodSet(str(raw.get("name", "main")), int(raw.get("count", 1)), pod_requests(spec),
                  dict(spec.get("nodeSelector") or {}),
                  tuple(toleration(t) for t in spec.get("tolerations") or []), node_affinity(spec),
                  min_count=least if isinstance(least, int) and not isinstance(least, bool) else None,
                  topology=request_from_object(raw.get("topologyRequest")))


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def workload_from_object(obj: Mapping[str, Any], local_queues: Mapping[tuple[str, str], str]) -> Workload:
    """The scheduler's model of a stored Workload, with its admission if it holds quota."""
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    namespace = meta.get("namespace") or "default"
    queue = str(spec.get("queueName") or "")
    owner = next(iter(meta.get("ownerReferences") or []), None)
    wl = Workload(
        namespace=namespace, name=meta["name"], queue=queue,
        cluster_queue=local_queues.get((namespace, queue), ""),
        podsets=tuple(_podset(p) for p in spec.get("podSets") or []),
        priority=int(spec.get("priority") or 0),
        created=_parse_time(meta.get("creationTimestamp")),
        uid=str(meta.get("uid", "")),
        owner=f"{owner['kind']} {namespace}/{owner['name']}" if owner else "",
        replaces=str((meta.get("annotations") or {}).get(REPLACEMENT_FOR, "")),
        max_exec_seconds=_positive(spec.get("maximumExecutionTimeSeconds")),
        past_exec_seconds=_positive(status.get("accumulatedPastExecutionTimeSeconds")) or 0,
        requeue_count=_positive((status.get("requeueState") or {}).get("count")) or 0,
        eviction_counts=_eviction_counts(status),
    )
    ready = find_condition(status, "PodsReady")
    if ready is not None and ready.get("status") == "True":
        wl.pods_ready_at = _parse_time(ready.get("lastTransitionTime"))
    admission = status.get("admission")
    reserved = find_condition(status, "QuotaReserved")
    if admission and reserved and reserved.get("status") == "True":
        podsets = []
        for ps in admission.get("podSetAssignments") or []:
            flavors = dict(ps.get("flavors") or {})
            usage = {}
            for resource, amount in (ps.get("resourceUsage") or {}).items():
                from flexq.api import parse_quantity

                usage[(flavors.get(resource, ""), resource)] = parse_quantity(amount).milli()
            placed = assignment_domains(ps.get("topologyAssignment"))
            delayed = ps.get("delayedTopologyRequest")
            podsets.append(PodSetAssignment(ps["name"], flavors, usage, int(ps.get("count", 1)),
                                            TopologyAssignment(*placed) if placed is not None else None,
                                            DelayedTopology(delayed) if delayed in _DELAYED else None))
        wl.admission = Admission.of(str(admission.get("clusterQueue", wl.cluster_queue)), tuple(podsets))
        wl.cluster_queue = wl.admission.cluster_queue
        admitted = find_condition(status, "Admitted")
        wl.state = WorkloadState.ADMITTED if admitted and admitted.get("status") == "True" \
            else WorkloadState.QUOTA_RESERVED
        wl.reserved_at = _parse_time(reserved.get("lastTransitionTime"))
        if wl.state is WorkloadState.ADMITTED and admitted is not None:
            # When it was admitted, as its condition says: its maximum execution time and its run count from there.
            wl.admitted_at = _parse_time(admitted.get("lastTransitionTime"))
        wl.checks = {c["name"]: CheckState(c.get("state", "Pending")) for c in status.get("admissionChecks") or []}
        wl.pod_set_updates = {c["name"]: pod_set_updates(c["podSetUpdates"])
                              for c in status.get("admissionChecks") or [] if c.get("podSetUpdates")}
    finished = find_condition(status, "Finished")
    if finished and finished.get("status") == "True":
        wl.state = WorkloadState.FINISHED
        wl.admission = None  # what it ran with stays in its status; it holds no quota
    if spec.get("active") is False:
        wl.state = WorkloadState.INACTIVE
    return wl


_PODS_READY_MESSAGES: Final = {"WaitForStart": "Not all pods are ready or succeeded",
                               "WaitForRecovery": "At least one pod has failed, waiting for recovery",
                               "Started": "All pods reached readiness and the workload is running",
                               "Recovered": "All pods reached readiness and the workload is running"}
"""Kueue's PodsReady condition messages, by reason (``generatePodsReadyCondition``)."""


def _pods_ready_status(wl: Workload, status: dict[str, Any], pods_ready: str | None, now: str,
                       generation: int | None) -> None:
    """Kueue's ``PodsReady`` condition where waitForPodsReady is on, as Kueue's job reconciler writes it on a job's
    workload from the start (a Workload made by hand gets it once admitted): ``pods_ready`` says what its pods are
    doing (``WaitForStart``, also while not admitted; ``WaitForRecovery``; ``Started`` or ``Recovered``; None: off).
    And its ``requeueState``."""
    admitted = wl.state is WorkloadState.ADMITTED
    finished = wl.state is WorkloadState.FINISHED  # as Kueue: a finished workload's conditions stay as they were
    if pods_ready is not None and not finished and (admitted or wl.owner or find_condition(status, "PodsReady")):
        reason = pods_ready if admitted else "WaitForStart"
        set_condition(status, "PodsReady", reason in ("Started", "Recovered"), reason, _PODS_READY_MESSAGES[reason],
                      now=now, observed_generation=generation)
    if wl.requeue_count:
        status["requeueState"] = {"count": wl.requeue_count, **(
            {"requeueAt": _stamp(wl.requeue_at)} if wl.requeue_at is not None else {})}
    else:
        status.pop("requeueState", None)


def _counted(wl: Workload, status: dict[str, Any]) -> None:
    """What a workload's status counts across its admissions: Kueue's ``accumulatedPastExecutionTimeSeconds`` and
    ``schedulingStats.evictions`` (each reason and underlying cause with its count, in the order first seen)."""
    if wl.past_exec_seconds:
        status["accumulatedPastExecutionTimeSeconds"] = wl.past_exec_seconds
    else:
        status.pop("accumulatedPastExecutionTimeSeconds", None)
    if wl.eviction_counts:
        status["schedulingStats"] = wl.scheduling_stats()


def _eviction_counts(status: Mapping[str, Any]) -> dict[tuple[str, str], int]:
    """The eviction counts a stored status keeps (``schedulingStats.evictions``), rows without a count left out."""
    counts: dict[tuple[str, str], int] = {}
    for row in (status.get("schedulingStats") or {}).get("evictions") or []:
        count = _positive(row.get("count")) if isinstance(row, Mapping) else None
        if count is not None:
            counts[(str(row.get("reason", "")), str(row.get("underlyingCause", "")))] = count
    return counts


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _admission(admission: Admission) -> dict[str, Any]:
    return {
        "clusterQueue": admission.cluster_queue,
        "podSetAssignments": [{
            "name": ps.name,
            "flavors": dict(sorted(ps.flavors.items())),
            "resourceUsage": {res: format_amount(res, amount) for (_, res), amount in sorted(ps.usage.items(),
                                                                                          key=lambda i: i[0][1])},
            "count": ps.count,
            **({"topologyAssignment": to_v1beta2(ps.topology.levels, ps.topology.domains)}
               if ps.topology is not None else {}),
            **({"delayedTopologyRequest": ps.delayed.value} if ps.delayed is not None else {}),
        } for ps in admission.podsets],
    }


_MODES: Final = {
    Granular.FIT: "Fit",
    Granular.RECLAIM: "Reclaim",
    Granular.PREEMPT: "Preempt",
    Granular.NO_CANDIDATES: "NoPreemptionCandidates",
    Granular.NO_FIT: "NoFit",
}


def _considered(assignment: Assignment | None) -> list[dict[str, Any]]:
    if assignment is None:
        return []
    out = []
    for ps in assignment.podsets:
        for attempt in ps.tried:
            entry: dict[str, Any] = {"podSet": ps.name, "flavor": attempt.flavor, "mode": _MODES[attempt.granular],
                                     "borrowing": attempt.borrow > 0}
            if attempt.reasons:
                entry["reasons"] = sorted(attempt.reasons)
            out.append(entry)
    return out


def _check_states(wl: Workload, before: list[dict[str, Any]], now: str) -> list[dict[str, Any]]:
    """The workload's admission checks as its status lists them, keeping the message and transition time of each
    whose state did not change."""
    previous = {c["name"]: c for c in before}
    return [{
        "name": name, "state": state.value,
        **({"podSetUpdates": pod_set_update_objects(wl.pod_set_updates[name])} if name in wl.pod_set_updates else {}),
        "message": previous.get(name, {}).get("message", "") if previous.get(name, {}).get("state") ==
        state.value else "",
        "lastTransitionTime": previous[name]["lastTransitionTime"]
        if name in previous and previous[name].get("state") == state.value else now,
    } for name, state in sorted(wl.checks.items())]


def _dated(status: dict[str, Any], type_: str, message: str, now: str) -> str:
    """``message`` for condition ``type_`` with the moments its waits end (:func:`~flexq.durations.dated`), said at
    ``now``; the stored one stands where it says the same."""
    before = str((find_condition(status, type_) or {}).get("message", ""))
    return dated(message, datetime.fromisoformat(now), before)


def in_status(text: Text, now: str) -> str:
    """A workload's reason as its status says it at ``now`` (RFC 3339): a moment it names counted down to, as its
    events say it (:func:`_dated` then adds the moment a wait ends, which a status read later needs)."""
    return worded(text, COUNTDOWNS, datetime.fromisoformat(now).timestamp()) if text else ""


def _admitted(wl: Workload, admission: Admission, status: dict[str, Any], now: str) -> tuple[bool, str, str]:
    """The Admitted condition of a workload that holds quota (Kueue's ``SyncAdmittedCondition``)."""
    if wl.state is WorkloadState.ADMITTED:
        return True, "Admitted", f"The variant {wl.won} is admitted" if wl.won else "The workload is admitted"
    if wl.checks and all(s is CheckState.READY for s in wl.checks.values()) and any(
            ps.delayed is DelayedTopology.PENDING and ps.topology is None for ps in admission.podsets):
        # Checks Ready, a delayed topology request not placed yet (the message: why its last second pass found no
        # placement, where one failed).
        return False, "PendingDelayedTopologyRequests", in_status(wl.pending_reason, now) or _PENDING_DELAYED
    return False, "UnsatisfiedAdmissionChecks", _dated(
        status, "Admitted", in_status(wl.pending_reason, now) or "The workload has not all checks ready", now)


def render_status(wl: Workload, old: Mapping[str, Any], assignment: Assignment | None, now: str,
                  generation: int | None, evicted: tuple[str, str] | None = None,
                  preempted: tuple[str, str] | None = None, finished: tuple[str, str] | None = None, *,
                  pods_ready: str | None = None) -> dict[str, Any]:
    """The Workload status that says where ``wl`` stands, keeping transition times that did not change. A copy of
    ``old`` at its top level: what it changes below that it puts in anew (conditions, admission, checks), the rest
    it shares with ``old``, for the caller to compare and write, not to change in place."""
    status: dict[str, Any] = dict(old)
    _counted(wl, status)

    def cond(type_: str, value: bool, reason: str, message: str) -> None:
        set_condition(status, type_, value, reason, message, now=now, observed_generation=generation)

    if wl.state is WorkloadState.FINISHED and wl.admission is None and evicted is None and "admission" in status:
        pass  # as Kueue: a finished workload keeps the admission it ran with (its quota is no longer counted)
    elif wl.admission is not None:
        cond("QuotaReserved", True, "QuotaReserved", f"Quota reserved in ClusterQueue {wl.admission.cluster_queue}")
        status["admission"] = _admission(wl.admission)
        status["admissionChecks"] = _check_states(wl, status.get("admissionChecks") or [], now)
        if not status["admissionChecks"]:
            status.pop("admissionChecks")
        cond("Admitted", *_admitted(wl, wl.admission, status, now))
        if find_condition(status, "Evicted") is not None:
            cond("Evicted", False, "QuotaReserved", "Previously: " + (find_condition(status, "Evicted") or {})
                 .get("reason", ""))
    else:
        status.pop("admission", None)
        status.pop("admissionChecks", None)
        if wl.state is WorkloadState.PENDING:
            waiting = in_status(wl.pending_reason, now) or "Waiting in the ClusterQueue's queue"
            cond("QuotaReserved", False, wl.pending.value if wl.pending is not None else "Pending",
                 _dated(status, "QuotaReserved", waiting, now))
        elif find_condition(status, "QuotaReserved") is not None:
            cond("QuotaReserved", False, "NoReservation", "The workload has no reservation")
        if find_condition(status, "Admitted") is not None:
            cond("Admitted", False, "NoReservation", "The workload has no reservation")
    if evicted is not None:
        cond("Evicted", True, evicted[0], evicted[1])
    if preempted is not None:
        cond("Preempted", True, preempted[0], preempted[1])
    if wl.state is WorkloadState.FINISHED:
        kept = find_condition(status, "Finished")
        if finished is None and kept is not None and kept.get("status") == "True":  # a later rewrite keeps how it ended
            finished = (str(kept.get("reason", "")), str(kept.get("message", "")))
        cond("Finished", True, *(finished or ("Succeeded", "Job finished")))
    if wl.state is WorkloadState.PENDING and assignment is not None:
        status["flavorsConsidered"] = _considered(assignment)
    else:
        status.pop("flavorsConsidered", None)
    _pods_ready_status(wl, status, pods_ready, now, generation)
    if wl.state is WorkloadState.ADMITTED and wl.pending_reason:
        status["waitingFor"] = in_status(wl.pending_reason, now)
    else:
        status.pop("waitingFor", None)
    return status

