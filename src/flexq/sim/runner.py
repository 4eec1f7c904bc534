"""Running a scenario: the scheduler in virtual time, every decision written to the event log.

At each instant the kernel first applies what happens then (jobs finishing, admission-check
verdicts, submissions, requeue timers), then runs one scheduling pass. Admitted jobs finish
``runFor`` later. Everything that could vary (uids, order of ties) is fixed by the scenario, so the same
scenario gives the same log, byte for byte.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import json
import math
import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from flexq.api import DEFAULT_KUEUE_CONFIG, Document, InvalidObject, KindInfo, normalize
from flexq.api.models import check_dns_subdomain
from flexq.capacity import CapacityDriver
from flexq.control import (
    CheckSet,
    ControlPlane,
    JobFinished,
    JobHooks,
    JobQueued,
    KueueCounts,
    KueueState,
    PodsReady,
    QueuesReconfigured,
    kueue_state,
)
from flexq.durations import format_seconds
from flexq.jobs import JOB_KINDS, PRIORITY_LABEL, JobError
from flexq.scheduler import (
    NAMED_MOMENTS,
    CheckState,
    Config,
    Event,
    EventKind,
    Scheduler,
    Workload,
    WorkloadState,
    worded,
)
from flexq.sim.generator import CLASS_LABEL
from flexq.sim.scenario import Check, Scenario, ScenarioError, Submission
from flexq.timers import Kernel

__all__ = ["SimResult", "Simulation", "run_scenario"]

_FINISH, _CHECK, _SUBMIT, _WAKE = 0, 1, 2, 3
_PLAIN_JOB = frozenset({"apiVersion", "kind", "metadata", "spec"})
_PLAIN_META = frozenset({"name", "namespace", "labels"})


@dataclass
class SimResult:
    events: list[dict[str, Any]] = field(default_factory=list)
    workloads: list[Workload] = field(default_factory=list)
    submitted: dict[str, float] = field(default_factory=dict)
    end: float = 0.0
    costs: dict[str, float] | None = None
    """USD per workload, when the scenario models capacity."""
    waste: dict[str, float] = field(default_factory=dict)
    """USD of each workload's cost spent on capacity provisioned for a variant that lost its race."""
    flex_flavors: set[str] = field(default_factory=set)
    """Flavors whose nodes come from flex-start pools (for cost by capacity type)."""
    run_for: dict[str, float | None] = field(default_factory=dict)
    """How long each workload runs once started (None: until the end)."""
    nodes: list[tuple[float, dict[str, tuple[int, int]]]] = field(default_factory=list)
    """Pool sizes over time, when capacity is modelled: (t, pool -> (nodes, nodes in use)), at each change."""
    config: Config | None = None
    classes: dict[str, str] = field(default_factory=dict)
    """Each workload's class: Kueue's performance class label, ``flexq.dev/class``, or its priority class."""
    kueue: tuple[KueueCounts, KueueState] | None = None
    """Kueue's metrics at the end, when asked for: what was counted, and where things stood."""

    def log_lines(self) -> list[str]:
        return [json.dumps(e, separators=(",", ":")) for e in self.events]

    def summary(self) -> dict[str, Any]:
        first: dict[tuple[str, str], float] = {}
        podsets: dict[str, Any] = {}
        for e in self.events:
            first.setdefault((e["workload"], e["event"]), float(e["t"]))
            if e["event"] == "Admitted":
                podsets[e["workload"]] = e.get("podSets")
        rows = []
        for wl in self.workloads:
            submitted = self.submitted.get(wl.key, wl.created)
            admitted = first.get((wl.key, "Admitted"))
            reserved = first.get((wl.key, "QuotaReserved"))
            finished = first.get((wl.key, "Finished"))
            started = first.get((wl.key, "Started"))
            running = started if started is not None else admitted
            flavors = podsets.get(wl.key)
            rows.append({
                "workload": wl.key, "job": wl.owner, "clusterQueue": wl.cluster_queue,
                "submitted": _num(submitted), "quotaReserved": _num(reserved), "admitted": _num(admitted),
                "started": _num(running), "finished": _num(finished),
                "wait": _num(running - submitted) if running is not None else None,
                "flavors": flavors, "class": self.classes.get(wl.key), "state": wl.state.value,
                "pendingReason": worded(wl.pending_reason, NAMED_MOMENTS, 0.0) or None,  # names moments: no "now"
                **({"schedulingStats": wl.scheduling_stats()} if wl.eviction_counts else {}),
                **({"cost": round(self.costs.get(wl.key, 0.0), 2), "waste": round(self.waste.get(wl.key, 0.0), 2)}
                   if self.costs is not None else {}),
            })
        return {"end": _num(self.end), "workloads": rows}


def _num(value: float | None) -> float | int | None:
    if value is None:
        return None
    return int(value) if float(value).is_integer() else round(value, 3)


class Simulation:
    """A scenario replayed through the control plane in virtual time (:meth:`run`, or :meth:`run_to` in parts)."""

    def __init__(self, scenario: Scenario, progress: Callable[[float], None] | None = None, *,
                 declare_run_times: bool = True, metrics: bool = False) -> None:
        self.scenario = scenario
        self.declare_run_times = declare_run_times
        """Whether the control plane is told each job's ``runFor`` as a declared run time (as a job says it with
        ``flexq.dev/expected-run-time``); without, it knows them only as jobs finish (its forecasts estimate)."""
        self.progress = progress
        self.instants = 0
        self.kernel = Kernel()
        self.rng = random.Random(scenario.seed)
        self.result = SimResult()
        self._instant: tuple[float, float | int | None] = (math.nan, None)
        """The last event's time and its number as the log writes it (the events of an instant come together)."""
        objects = self._objects()
        self.jobs: dict[str, str] = {}  # "ns/jobname" -> workload key
        self.finish_at: dict[str, float] = {}
        """When each running workload will finish (the scenario says how long it runs)."""
        self.run_for: dict[str, float | None] = {}
        # The simulator knows what the live server can only be told: how long each job runs, when it ends.
        self.ready_after: dict[str, float | None] = {}
        """How long after its start each workload's pods are all ready (None: never), where not at once."""
        self.plane = ControlPlane(self.kernel, self._record, JobHooks(self._start, self.run_for.get,
                                                                       self.finish_at.get), virtual=True,
                                  kueue=scenario.kueue or DEFAULT_KUEUE_CONFIG)
        self.kueue = KueueCounts().attach(self.plane) if metrics else None
        """Kueue's counters, heard as the live server hears them (``metrics``: asked for)."""
        self.plane.feed(QueuesReconfigured(objects, scenario.capacity, self.kernel.clock.now()))
        self.finishing: dict[str, list[tuple[float, str]]] = {}
        """Per cohort tree (by its root): finish times of the workloads running in it, soonest first."""
        self.finish_token: dict[str, int] = {}
        self.wake_at: set[float] = set()
        self._scheduled = False
        self._normalized: dict[Any, list[Any]] = {}
        """Jobs checked so far, by shape: [kind, normalized template, shared parts, pod sets or None]."""

    @property
    def scheduler(self) -> Scheduler:
        return self.plane.scheduler

    @property
    def driver(self) -> CapacityDriver | None:
        return self.plane.driver

    def _uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _objects(self) -> dict[str, list[dict[str, Any]]]:
        by_kind: dict[str, list[dict[str, Any]]] = {}
        for doc in self.scenario.objects:
            info, obj = normalize(doc, strict=True)  # a field its kind lacks is refused, as flexq apply refuses it
            by_kind.setdefault(info.kind, []).append(obj)
        return by_kind

    def log(self, events: list[Event]) -> None:
        self.plane.emit(events)

    def _record(self, event: Event) -> None:
        """An event into the log (a pending one with when quota frees next in its cohort tree)."""
        line = event.to_json()
        t = event.t
        if t != self._instant[0]:
            self._instant = (t, _num(t))
        line["t"] = self._instant[1]
        if event.kind is EventKind.PENDING:
            eta = self._quota_eta(event.workload, event.t)
            if eta is not None:
                line["eta"] = _num(eta)
                line["reason"] += f" (quota frees next at t={format_seconds(eta)})"
        self.result.events.append(line)

    def _quota_eta(self, key: str, now: float) -> float | None:
        """When quota in the workload's cohort tree frees next: the earliest finish of a workload holding it.

        A lower bound on the wait, not a promise: what frees may not be enough, or may go to another head.
        """
        wl = self.scheduler.workload(key)
        root = self.scheduler.cohort_root(wl.cluster_queue) if wl is not None else None
        if root is None:
            return None
        heap = self.finishing.get(root)
        while heap:
            at, other = heap[0]
            holder = self.scheduler.workload(other)
            if at > now and self.finish_at.get(other) == at and holder is not None and holder.admission is not None:
                return at
            heapq.heappop(heap)  # finished, evicted or past: it frees nothing later
        return None

    def _start(self, key: str, t: float) -> None:
        self._pods_ready(key, t)
        run_for = self.run_for.get(key)
        if run_for is None:
            return
        token = self.finish_token.get(key, 0) + 1
        self.finish_token[key] = token

        def finish() -> None:
            wl = self.scheduler.workload(key)
            self.finish_at.pop(key, None)
            if wl is None or self.finish_token.get(key) != token or wl.state is not WorkloadState.ADMITTED:
                return  # evicted (or deleted) since it started: this run never completes
            self.log(self.plane.feed(JobFinished(key, self.kernel.clock.now(), "JobFinished")))

        self.finish_at[key] = t + run_for
        wl = self.scheduler.workload(key)
        root = self.scheduler.cohort_root(wl.cluster_queue) if wl is not None else None
        if root is not None:
            heapq.heappush(self.finishing.setdefault(root, []), (t + run_for, key))
        self.kernel.schedule(t + run_for, finish, _FINISH)

    def _pods_ready(self, key: str, t: float) -> None:
        """The job's pods become ready as its scenario says: when it starts (default), some time after, or never."""
        if key not in self.ready_after:
            self.plane.feed(PodsReady(key, t))
            return
        after = self.ready_after[key]
        if after is None:
            return
        wl = self.scheduler.workload(key)
        admitted = wl.admitted_at if wl is not None else None

        def ready() -> None:
            now = self.scheduler.workload(key)
            if now is not None and now.admitted_at == admitted:  # still in the admission it started in
                self.plane.feed(PodsReady(key, self.kernel.clock.now()))

        self.kernel.schedule(t + after, ready, _FINISH)

    def submit(self, sub: Submission) -> None:
        now = self.kernel.clock.now()
        info, obj, cached = self._normalize(sub.document)
        if info.kind not in JOB_KINDS:
            raise ScenarioError(sub.document.source,
                                f"a submission must be a RayJob, a RayCluster or a Job, not {info.kind}")
        meta = obj["metadata"]
        meta.setdefault("namespace", "default")
        meta["uid"] = self._uid()
        job_key = f"{meta['namespace']}/{meta['name']}"
        if job_key in self.jobs:
            self.result.events.append({"t": _num(now), "event": "Refused", "workload": job_key, "clusterQueue": "",
                                       "reason": f"{info.kind} {job_key} already exists"})
            return
        try:
            wl = self.plane.workload_for(info.kind, info.group, obj, now,
                                         pod_sets=cached[3] if cached is not None else None)
            if cached is not None:
                cached[3] = wl.podsets  # the same spec, the same pod sets (immutable): shared from now on
        except JobError as exc:
            self.result.events.append({"t": _num(now), "event": "Refused", "workload": job_key, "clusterQueue": "",
                                       "reason": str(exc)})
            return
        self.jobs[job_key] = wl.key
        self.run_for[wl.key] = sub.run_for
        if sub.ready_after != 0:
            self.ready_after[wl.key] = sub.ready_after
        if sub.run_for is not None and self.declare_run_times:
            self.plane.run_times.declared[wl.key] = sub.run_for
        self.result.submitted[wl.key] = now
        self.result.workloads.append(wl)
        labels = meta.get("labels") or {}
        job_class = labels.get(CLASS_LABEL) or labels.get("flexq.dev/class") or labels.get(PRIORITY_LABEL)
        if job_class:
            self.result.classes[wl.key] = str(job_class)
        self.log(self.plane.feed(JobQueued(wl, now)))

    def _normalize(self, doc: Document) -> tuple[KindInfo, dict[str, Any], list[Any] | None]:
        """Validate and default a submitted job; jobs that differ only in their name are checked once.

        Returns the kind, the object (its metadata its own, the rest shared with jobs of the same shape: read
        only) and the cache entry, whose last item holds the jobs' pod sets once known.
        """
        obj = doc.obj
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if not (isinstance(meta, dict) and isinstance(name, str) and _valid_name(name)):
            return (*self._checked(doc), None)  # validation names the problem; nothing to share
        shared: tuple[Any, ...] = ()
        if set(obj) <= _PLAIN_JOB and set(meta) <= _PLAIN_META:
            # Generated jobs share their spec and labels: known by identity, no need to serialise them.
            shared = (obj.get("spec"), meta.get("labels"))
            key: Any = (obj.get("apiVersion"), obj.get("kind"), meta.get("namespace"), *map(id, shared))
        else:
            key = json.dumps({**obj, "metadata": {**meta, "name": ""}}, sort_keys=True, default=repr)
        hit = self._normalized.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[2], shared, strict=True)):
            info, template = hit[0], hit[1]
            return info, {**template, "metadata": {**template["metadata"], "name": name}}, hit
        info, normalized = self._checked(doc)
        template = json.loads(json.dumps(normalized))
        template["metadata"]["name"] = ""
        entry = [info, template, shared, None]
        self._normalized[key] = entry
        return info, normalized, entry

    def _checked(self, doc: Document) -> tuple[KindInfo, dict[str, Any]]:
        try:
            return normalize(doc, strict=True)
        except InvalidObject as exc:
            raise ScenarioError(doc.source, str(exc).removeprefix(f"{doc.source}: ")) from None

    def check(self, check: Check) -> None:
        key = self.jobs.get(check.workload, check.workload)
        if not self.scheduler.knows(key):
            raise ScenarioError(self.scenario.source, f"checks: no workload or job {check.workload!r} at "
                                f"t={_num(check.at)}s")
        now = self.kernel.clock.now()
        self.log(self.plane.feed(CheckSet(key, check.check, CheckState(check.state), now, check.message,
                                          check.pod_set_updates)))

    def after(self, t: float) -> None:
        self.plane.settle(t)
        nxt = self.scheduler.next_requeue()
        if nxt is not None and nxt not in self.wake_at:
            self.wake_at.add(nxt)
            self.kernel.schedule(nxt, lambda: None, _WAKE)
        if self.driver is not None:
            self._sample_nodes(self.driver, t)
        self.instants += 1
        if self.progress is not None and self.instants % 256 == 0:
            self.progress(t)

    def _sample_nodes(self, driver: CapacityDriver, t: float) -> None:
        sample = {pool: (counted.total, counted.busy) for pool, counted in driver.cluster.census(t).items()}
        series = self.result.nodes
        if not series or series[-1][1] != sample:
            series.append((t, sample))

    def run(self) -> SimResult:
        self.run_to(self.scenario.until)
        return self.finish()

    def run_to(self, moment: float | None) -> None:
        """Replay the scenario up to ``moment`` (None: to its end); a later call goes on from there."""
        if not self._scheduled:
            self._scheduled = True
            for sub in self.scenario.submissions:
                self.kernel.schedule(sub.at, lambda s=sub: self.submit(s), _SUBMIT)  # type: ignore[misc]
            for check in self.scenario.checks:
                self.kernel.schedule(check.at, lambda c=check: self.check(c), _CHECK)  # type: ignore[misc]
        until = self.scenario.until
        self.kernel.run_until(moment if until is None or (moment is not None and moment < until) else until,
                              self.after)

    def finish(self) -> SimResult:
        """The result, once the scenario has been replayed to its end."""
        self.result.run_for = dict(self.run_for)
        self.scheduler.note_race_reasons()  # still racing at the end: why, as its variants stand now
        self.result.config = self.scheduler.config
        self.result.end = self.scenario.until if self.scenario.until is not None else self.kernel.clock.now()
        if self.kueue is not None:
            if self.plane.fair_usage is not None:  # the LocalQueues' usage as sampled up to the end
                self.scheduler.fair_tick(self.result.end)
            self.result.kueue = (self.kueue, kueue_state(self.plane))
        if self.driver is not None:
            self.result.costs = {wl.key: self.driver.cost(wl.key) for wl in self.result.workloads}
            self.result.waste = dict(self.driver.waste)
            flex = {p.name for p in self.driver.cluster.pools.values() if p.flex_start}
            self.result.flex_flavors = {name for name, spec in self.scheduler.config.flavors.items()
                                        if spec.node_labels.get("cloud.google.com/gke-nodepool") in flex}
        return self.result


def _valid_name(name: str) -> bool:
    """The metadata.name rule validation applies (a DNS subdomain): a job reusing a checked template skips
    validation, so its own name must pass this first."""
    try:
        check_dns_subdomain(name)
    except ValueError:
        return False
    return True


def run_scenario(scenario: Scenario, progress: Callable[[float], None] | None = None, *,
                 metrics: bool = False) -> SimResult:
    """Replay ``scenario`` through the scheduler; raise :class:`ScenarioError` on a bad scenario.

    ``progress``, if given, is called now and then with the virtual time reached; ``metrics``: count Kueue's
    metrics too (:attr:`SimResult.kueue`).
    """
    with _few_collections():
        return Simulation(scenario, progress, metrics=metrics).run()


@contextlib.contextmanager
def _few_collections() -> Iterator[None]:
    """A run allocates millions of short-lived objects and frees few cycles: collecting garbage every 700
    allocations (Python's default) would cost a fifth of the run. Collect less often, for the run only."""
    before = gc.get_threshold()
    gc.set_threshold(50_000, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*before)
