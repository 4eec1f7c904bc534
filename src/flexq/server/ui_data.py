"""What the dashboard shows, read from the store: queues, pools, ProvisioningRequests, jobs and one job's story.

Pure functions of stored objects (and the controller's :class:`~flexq.controller.metrics.Sample` where the server
runs one), so that the pages, their JSON and ``flexq get`` agree: a job's flavors and its one-line reason are the
ones ``get workloads`` prints (:mod:`flexq.objects.tables`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from flexq.api import parse_quantity
from flexq.capacity import UnknownMachineType, machine_type
from flexq.controller import Sample
from flexq.durations import WAIT, DurationError, parse_duration
from flexq.objects import node_state, parse_time, workload_flavors, workload_reason
from flexq.runtime import parse_reports
from flexq.server.ui_models import (
    Cohort,
    FlavorQuota,
    FlavorTry,
    JobRow,
    MetricPoint,
    Phase,
    Pool,
    Provisioning,
    Queue,
    ResourceUse,
    TimelineEntry,
    Variant,
)

__all__ = ["STATES", "JobEntry", "cohorts", "considered", "eta", "is_variant", "job_entry", "job_running",
           "metric_points", "owner", "phases", "pools", "provisioning", "queues", "timeline", "unlimited",
           "variant_prefix", "variants", "why"]

STATES: Final = ("pending", "reserved", "admitted", "running", "succeeded", "failed", "inactive")
_POOL_LABEL: Final = "cloud.google.com/gke-nodepool"
_UNLIMITED: Final = 1e9
"""A quota of this many units or more (``1000000000``, ``1000000000Gi``) stands for no limit, as Kueue's examples
write it."""
_RACED_FLAVOR: Final = re.compile(r"for flavor (\S+)$")
_SUFFIX: Final = re.compile(r"(?:[KMGTPE]i|[numkMGTPE])$")


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def eta(message: str, since: Any) -> str | None:
    """When what a message says is awaited is expected: the moment a :func:`~flexq.durations.dated` message names,
    else ``expected in 30s`` counted from ``since`` (RFC 3339: when the message was written, as far as is known)."""
    match = WAIT.search(message)
    if match is not None and match.group(2):
        return match.group(2)
    start = parse_time(since)
    if match is None or start is None:
        return None
    try:
        return _iso(start + timedelta(seconds=parse_duration(match.group(1))))
    except DurationError:
        return None


def _amount(value: Any) -> float:
    try:
        return float(parse_quantity(value).value)
    except (ValueError, TypeError):
        return 0.0


def unlimited(quantity: Any) -> bool:
    """Is a quota written as no limit: a billion or more of its unit (``1000000000Gi``, ``1e9``)?"""
    try:
        return float(_SUFFIX.sub("", str(quantity).strip())) >= _UNLIMITED
    except ValueError:
        return False


def _use(resource: str, used: Any, nominal: Any) -> ResourceUse:
    free = unlimited(nominal)
    return ResourceUse(resource=resource, used=_amount(used), nominal=_amount(nominal), usedText=str(used),
                       nominalText="unlimited" if free else str(nominal), unlimited=free)


def _conditions(obj: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(c.get("type")): c for c in (obj.get("status") or {}).get("conditions") or []}


def _true(conditions: Mapping[str, Mapping[str, Any]], kind: str) -> bool:
    return conditions.get(kind, {}).get("status") == "True"


# --- overview ---------------------------------------------------------------------------------------------------

def queues(cluster_queues: Iterable[Mapping[str, Any]]) -> list[Queue]:
    """Each ClusterQueue with its flavors' quota and what of it is reserved, per resource."""
    out = []
    for cq in sorted(cluster_queues, key=lambda o: str(o["metadata"]["name"])):
        spec, status = cq.get("spec") or {}, cq.get("status") or {}
        used = {(f["name"], r["name"]): r.get("total", "0")
                for f in status.get("flavorsReservation") or status.get("flavorsUsage") or []
                for r in f.get("resources") or []}
        flavors = []
        for group in spec.get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                resources = [_use(r["name"], used.get((flavor["name"], r["name"]), "0"), r.get("nominalQuota", "0"))
                             for r in flavor.get("resources") or []]
                flavors.append(FlavorQuota(flavor=flavor["name"], resources=resources))
        active = _conditions(cq).get("Active", {})
        out.append(Queue(name=cq["metadata"]["name"], cohort=str(spec.get("cohortName") or spec.get("cohort") or ""),
                         active=active.get("status", "True") == "True",
                         reason="" if active.get("status", "True") == "True" else str(active.get("message", "")),
                         pending=int(status.get("pendingWorkloads") or 0),
                         reserving=int(status.get("reservingWorkloads") or 0),
                         admitted=int(status.get("admittedWorkloads") or 0), flavors=flavors))
    return out


def cohorts(rows: Sequence[Queue], objects: Iterable[Mapping[str, Any]] = ()) -> list[Cohort]:
    """Each cohort with its ClusterQueues, its parent (Cohort objects' ``spec.parentName``: cohorts form a tree),
    and its ClusterQueues' quota and usage summed per flavor and resource. A cohort named only as a parent, or by a
    Cohort object no ClusterQueue joins, is listed too (with no queues)."""
    members: dict[str, list[Queue]] = {}
    parents: dict[str, str] = {}
    for obj in objects:
        name = str(obj["metadata"]["name"])
        parent = str((obj.get("spec") or {}).get("parentName") or "")
        parents[name] = parent
        members.setdefault(name, [])
        if parent:
            members.setdefault(parent, [])
    for q in rows:
        if q.cohort:
            members.setdefault(q.cohort, []).append(q)
    out = []
    for name, queues_ in sorted(members.items()):
        sums: dict[str, dict[str, list[float]]] = {}
        free: set[tuple[str, str]] = set()
        for q in queues_:
            for f in q.flavors:
                for r in f.resources:
                    total = sums.setdefault(f.flavor, {}).setdefault(r.resource, [0.0, 0.0])
                    total[0] += r.used
                    total[1] += r.nominal
                    if r.unlimited:
                        free.add((f.flavor, r.resource))
        flavors = [FlavorQuota(flavor=flavor, resources=[
            ResourceUse(resource=resource, used=used, nominal=nominal, usedText=_text(used),
                        nominalText="unlimited" if (flavor, resource) in free else _text(nominal),
                        unlimited=(flavor, resource) in free)
            for resource, (used, nominal) in by_resource.items()]) for flavor, by_resource in sums.items()]
        out.append(Cohort(name=name, parent=parents.get(name, ""), queues=[q.name for q in queues_],
                          flavors=flavors))
    return out


def _text(amount: float) -> str:
    """A summed amount, short: ``12``, ``1.5``, ``64Gi`` for whole gibibytes."""
    if amount >= 2**30 and amount % 2**30 == 0:
        return f"{int(amount) // 2**30}Gi"
    return f"{amount:g}"


def pools(node_pools: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]],
          sample: Sample | None) -> list[Pool]:
    """Each node pool with its nodes by state and what it costs an hour. The controller's sample (where the server
    runs one) tells idle nodes from busy ones; the Node objects alone tell ready from booting and from NotReady."""
    counted: dict[str, list[int]] = {}
    for node in nodes:
        pool = str((node["metadata"].get("labels") or {}).get(_POOL_LABEL, ""))
        counted.setdefault(pool, [0, 0, 0])[("ready", "booting", "not_ready").index(node_state(node))] += 1
    out = []
    for obj in sorted(node_pools, key=lambda o: str(o["metadata"]["name"])):
        name, spec = str(obj["metadata"]["name"]), obj.get("spec") or {}
        machine = str(spec.get("machineType", ""))
        ready, booting, not_ready = counted.get(name, [0, 0, 0])
        idle = 0
        price: float | None = None
        if sample is not None:
            booting = sample.nodes.get((name, "booting"), booting)
            not_ready = sample.nodes.get((name, "not_ready"), not_ready)
            idle = sample.nodes.get((name, "idle"), 0)
            ready = idle + sample.nodes.get((name, "busy"), max(0, ready - idle))
            price = sample.pool_hourly.get(name)
        flex = bool(spec.get("flexStart"))
        if price is None:
            try:
                kind = machine_type(machine)
                price = kind.flex_start_hourly if flex else kind.on_demand_hourly
            except UnknownMachineType:
                price = None
        autoscaling = spec.get("autoscaling") or {}
        most = autoscaling.get("maxNodeCount")
        out.append(Pool(name=name, machineType=machine,
                        capacityType="flex-start" if flex else ("queued" if spec.get("queuedProvisioning")
                                                                else "on-demand"),
                        ready=ready, booting=booting, notReady=not_ready, idle=idle,
                        maxNodes=int(most) if most is not None else None, pricePerNodeHour=price,
                        costPerHour=round((price or 0.0) * (ready + booting + not_ready), 4)))
    return out


def provisioning(requests: Iterable[Mapping[str, Any]]) -> list[Provisioning]:
    """ProvisioningRequests in flight (neither provisioned nor failed), with when their capacity is expected."""
    out = []
    for pr in requests:
        conditions = _conditions(pr)
        if any(_true(conditions, kind) for kind in ("Provisioned", "Failed", "BookingExpired", "CapacityRevoked")):
            continue
        latest = max((c for c in conditions.values() if c.get("status") == "True"),
                     key=lambda c: str(c.get("lastTransitionTime", "")), default={})
        message = str(latest.get("message") or conditions.get("Provisioned", {}).get("message") or "")
        meta = pr["metadata"]
        owner = next((r["name"] for r in meta.get("ownerReferences") or [] if r.get("kind") == "Workload"), "")
        out.append(Provisioning(namespace=str(meta.get("namespace", "")), name=str(meta["name"]), workload=owner,
                                state=str(latest.get("type", "Pending")), message=message,
                                created=str(meta.get("creationTimestamp", "")),
                                eta=eta(message, latest.get("lastTransitionTime"))))
    return sorted(out, key=lambda p: (p.created, p.name))


# --- jobs -------------------------------------------------------------------------------------------------------

def owner(wl: Mapping[str, Any]) -> tuple[str, str]:
    """The kind and name of the job a workload was made for (``("", "")`` for none)."""
    for ref in wl["metadata"].get("ownerReferences") or []:
        if ref.get("kind") in ("RayJob", "Job"):
            return str(ref["kind"]), str(ref["name"])
    return "", ""


def variant_prefix(workload: str) -> str:
    """How the names of a workload's racing variants begin: Kueue's ``<parent>-variant-<flavor>-<hash>``, the parent's
    name without its own 5-character hash suffix (:func:`flexq.scheduler.race.variant_name`)."""
    base, _, suffix = workload.rpartition("-")
    if not (base and len(suffix) == 5 and suffix.isalnum()):
        base = workload
    return f"{base}-variant-"


def is_variant(wl: Mapping[str, Any]) -> bool:
    """A racing workload's variant: its workload's row tells how the race stands."""
    return any(r.get("kind") == "Workload" for r in wl["metadata"].get("ownerReferences") or [])


def job_running(kind: str, job: Mapping[str, Any] | None) -> bool:
    """Does the job run now (a RayJob's jobStatus RUNNING, a Job's active pods)?"""
    status = (job or {}).get("status") or {}
    if kind == "RayJob":
        return status.get("jobStatus") == "RUNNING"
    return int(status.get("active") or 0) > 0


def _state(wl: Mapping[str, Any], conditions: Mapping[str, Mapping[str, Any]], running: bool) -> str:
    if _true(conditions, "Finished"):
        return "succeeded" if conditions["Finished"].get("reason") == "Succeeded" else "failed"
    if (wl.get("spec") or {}).get("active") is False:
        return "inactive"
    if _true(conditions, "Admitted"):
        return "running" if running else "admitted"
    return "reserved" if _true(conditions, "QuotaReserved") else "pending"


@dataclass(frozen=True, slots=True)
class JobEntry:
    """A job's row, and what its wait is counted from: it grows with the clock until the job is admitted."""

    row: JobRow
    created: float
    """Epoch seconds."""
    ended: float | None
    """When the wait ended (admitted, or finished without), epoch seconds."""
    flavors: frozenset[str]
    admitted: float | None = None
    """When it was admitted, epoch seconds (while its Admitted condition says so)."""

    def wait(self, now: float) -> float:
        return max(0.0, round((self.ended if self.ended is not None else now) - self.created, 1))

    def at(self, now: float) -> JobRow:
        """The row, its wait counted to ``now``."""
        return self.row.model_copy(update={"waitSeconds": self.wait(now)})


def job_entry(wl: Mapping[str, Any], running: bool, cluster_queue: str, now: datetime) -> JobEntry:
    """A job's row from its workload (not a racing variant's). ``running``: whether its job runs;
    ``cluster_queue``: its LocalQueue's ClusterQueue, for a workload not admitted."""
    meta, spec, status = wl["metadata"], wl.get("spec") or {}, wl.get("status") or {}
    conditions = _conditions(wl)
    kind, name = owner(wl)
    state = _state(wl, conditions, running)
    created = parse_time(meta.get("creationTimestamp")) or now
    admitted = parse_time(conditions["Admitted"].get("lastTransitionTime")) if _true(conditions, "Admitted") else None
    finished = parse_time(conditions["Finished"].get("lastTransitionTime")) if _true(conditions, "Finished") else None
    ended = admitted or finished
    reason = "" if state in ("running", "succeeded", "failed") else workload_reason(dict(wl), now)
    # The ETA is read from the whole condition message: the one-line reason may be cut short.
    waits = [eta(str(c.get("message", "")), c.get("lastTransitionTime")) for k, c in conditions.items()
             if k in ("QuotaReserved", "Admitted") and c.get("status") != "True"] if reason else []
    flavors = workload_flavors(dict(wl), now)
    raw = status.get("forecast")
    forecast: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if isinstance(forecast.get("start"), str):
        waits.insert(0, forecast["start"])
    row = JobRow(
        namespace=str(meta.get("namespace", "")), name=str(meta["name"]), jobKind=kind, jobName=name,
        queue=str(spec.get("queueName", "")),
        clusterQueue=str((status.get("admission") or {}).get("clusterQueue") or cluster_queue),
        state=state, priority=int(spec.get("priority") or 0), flavors=flavors, created=_iso(created),
        waitSeconds=0.0, reason=reason, eta=next((w for w in waits if w is not None), None),
        forecast=str(forecast.get("message", "")), forecastBasis=str(forecast.get("basis", "")),
        costUsd=round(float((status.get("cost") or {}).get("usd") or 0.0), 4))
    return JobEntry(row, created.timestamp(), ended.timestamp() if ended is not None else None,
                    frozenset(f for part in flavors.split(",") if "=" in part
                              for f in part.split("=", 1)[1].split("+")),
                    admitted.timestamp() if admitted is not None else None)


# --- one job ----------------------------------------------------------------------------------------------------

def timeline(wl: Mapping[str, Any], events: Iterable[Mapping[str, Any]],
             requests: Iterable[Mapping[str, Any]]) -> list[TimelineEntry]:
    """Created, each condition's latest transition, every Event about the workload or its job, and each of its
    ProvisioningRequests' conditions; oldest first."""
    entries = [TimelineEntry(time=str(wl["metadata"].get("creationTimestamp", "")), source="condition",
                             what="Created", detail=f"workload {wl['metadata']['name']}")]
    for c in (wl.get("status") or {}).get("conditions") or []:
        entries.append(TimelineEntry(time=str(c.get("lastTransitionTime", "")), source="condition",
                                     what=f"{c.get('type')}={c.get('status')}",
                                     detail=f"{c.get('reason', '')}: {c.get('message', '')}".strip(": ")))
    for ev in events:
        count = int(ev.get("count") or 1)
        entries.append(TimelineEntry(time=str(ev.get("lastTimestamp") or ev.get("firstTimestamp") or ""),
                                     source="event", what=str(ev.get("reason", "")),
                                     detail=str(ev.get("message", "")) + (f" (x{count})" if count > 1 else "")))
    for pr in requests:
        for c in (pr.get("status") or {}).get("conditions") or []:
            entries.append(TimelineEntry(time=str(c.get("lastTransitionTime", "")), source="provisioning",
                                         what=f"{pr['metadata']['name']} {c.get('type')}={c.get('status')}",
                                         detail=str(c.get("message", ""))))
    return sorted(entries, key=lambda e: (e.time, e.source != "condition"))


def phases(wl: Mapping[str, Any], events: Iterable[Mapping[str, Any]], requests: Iterable[Mapping[str, Any]],
           running: bool, executes: bool) -> list[Phase]:
    """A job's story as spans of time, for a picture: queued (created until its quota is reserved), racing (its
    first variant until it won or stopped), each ProvisioningRequest (created until provisioned or failed), waiting
    for its admission checks (quota reserved until admitted), then running (admitted until finished), or admitted
    where the server does not execute jobs (``executes``) or the job has not started (``running``). A span still
    going has no end."""
    meta = wl["metadata"]
    conditions = _conditions(wl)
    events = list(events)
    created = str(meta.get("creationTimestamp", ""))
    finished = conditions["Finished"].get("lastTransitionTime") if _true(conditions, "Finished") else None

    def since(kind: str) -> Any:
        """When the condition turned true; for a finished workload (its quota released), its Event's time."""
        if _true(conditions, kind):
            return conditions[kind].get("lastTransitionTime")
        if not finished:
            return None
        return min((str(e.get("firstTimestamp") or e.get("lastTimestamp") or "") for e in events
                    if e.get("reason") == kind),
                   default=None)

    reserved, admitted = since("QuotaReserved"), since("Admitted")
    # A job that finished with its quota released: its last spans end when it finished.
    settled = reserved or admitted or finished
    out = [Phase(name="queued", start=created, end=str(settled) if settled else None,
                 detail="waiting for quota" if not settled else "until its quota was reserved")]
    created_variants = [e for e in events if e.get("reason") == "VariantCreated"]
    if created_variants:
        flavors = sorted({m.group(1) for e in created_variants
                          if (m := _RACED_FLAVOR.search(str(e.get("message", "")))) is not None}
                         | {v.flavor for v in variants(wl)})
        out.append(Phase(name="racing", start=min(str(e.get("firstTimestamp") or e.get("lastTimestamp") or "")
                                                  for e in created_variants),
                         end=str(settled) if settled else None,
                         detail="on " + ", ".join(flavors) if flavors else "variants on several flavors"))
    requests = list(requests)
    out += _gone_requests(events, {str(p["metadata"]["name"]) for p in requests})
    for pr in sorted(requests, key=lambda p: str(p["metadata"].get("creationTimestamp", ""))):
        pr_conditions = _conditions(pr)
        done = next((c for k in ("Provisioned", "Failed", "BookingExpired", "CapacityRevoked")
                     if _true(pr_conditions, k) for c in [pr_conditions[k]]), None)
        out.append(Phase(name="provisioning", start=str(pr["metadata"].get("creationTimestamp", "")),
                         end=str(done.get("lastTransitionTime", "")) if done is not None else None,
                         detail=f"{pr['metadata']['name']}: "
                                + (str(done.get("type")) if done is not None else "in flight")))
    if reserved and admitted != reserved and (admitted or not finished):
        out.append(Phase(name="waiting for checks", start=str(reserved), end=str(admitted) if admitted else None,
                         detail="quota reserved, admission checks pending"))
    if admitted or (finished and reserved):
        start = str(admitted or reserved)
        name = "running" if executes and (running or finished) else "admitted"
        detail = ("not executed: the server runs with --runtime none" if not executes else
                  "its pods run" if running else "finished" if finished else "admitted, not started yet")
        out.append(Phase(name=name, start=start, end=str(finished) if finished else None, detail=detail))
    return out


def _gone_requests(events: Sequence[Mapping[str, Any]], present: set[str]) -> list[Phase]:
    """ProvisioningRequests deleted since (a race's losers are withdrawn), told by their Events
    (``ProvisioningRequest NAME is Accepted: ...``, then ``... withdrawn ...``): from the first to the last."""
    told: dict[str, list[tuple[str, str]]] = {}
    for e in events:
        words = str(e.get("message", "")).split(maxsplit=2)
        if e.get("reason") == "ProvisioningRequest" and len(words) > 1 and words[0] == "ProvisioningRequest" \
                and words[1] not in present:
            told.setdefault(words[1], []).append((str(e.get("firstTimestamp") or e.get("lastTimestamp") or ""),
                                                  str(e.get("message", ""))))
    out = []
    for said in sorted(told.values(), key=min):
        said.sort()
        out.append(Phase(name="provisioning", start=said[0][0], end=said[-1][0],
                         detail=said[-1][1].removeprefix("ProvisioningRequest ")))
    return out


def why(wl: Mapping[str, Any]) -> str:
    """The whole message of the condition that holds a workload back (QuotaReserved, else Admitted)."""
    conditions = _conditions(wl)
    if _true(conditions, "Admitted") or _true(conditions, "Finished"):
        return ""
    held = conditions.get("Admitted", {}) if _true(conditions, "QuotaReserved") else conditions.get(
        "QuotaReserved", {})
    return str(held.get("message", ""))


def considered(wl: Mapping[str, Any]) -> list[FlavorTry]:
    return [FlavorTry(podSet=str(t.get("podSet", "")), flavor=str(t.get("flavor", "")), mode=str(t.get("mode", "")),
                      borrowing=bool(t.get("borrowing")), reasons=[str(r) for r in t.get("reasons") or []])
            for t in (wl.get("status") or {}).get("flavorsConsidered") or []]


def variants(wl: Mapping[str, Any]) -> list[Variant]:
    return [Variant(name=str(v.get("name", "")), flavor=str(v.get("flavor", "")), state=str(v.get("state", "")),
                    message=str(v.get("message", "")))
            for v in (wl.get("status") or {}).get("variants") or []]


def metric_points(log: str) -> list[MetricPoint]:
    """The numeric metrics of every ``train.report`` in a driver log."""
    points = []
    for report in parse_reports(log):
        values = {str(k): float(v) for k, v in report.items()
                  if k != "report" and isinstance(v, int | float) and not isinstance(v, bool)}
        points.append(MetricPoint(report=int(report["report"]), values=values))
    return points
