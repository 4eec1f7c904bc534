"""Both clocks tell the same story: the live server's real QueueController, stepped on a virtual clock against a
real store, and the simulator replaying the same scenario decide the same things at the same moments."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from flexq.api import KueueConfig, resolve
from flexq.clock import VirtualClock
from flexq.control import kueue_state
from flexq.controller import QueueController, RayRuntime
from flexq.jobs.webhook import job_webhook
from flexq.objects import ObjectService
from flexq.scheduler import Event, EventKind, format_usage
from flexq.server.kueue_families import render_kueue
from flexq.sim import Simulation, load_scenario
from flexq.store import Key, Store
from tests.kueue_metrics import check_scrape, families
from tests.support import job

START = 1_800_000_000.0
TOLD = (EventKind.QUOTA_RESERVED, EventKind.ADMITTED, EventKind.EVICTED, EventKind.PREEMPTED, EventKind.FINISHED)

QUEUES = """
- {apiVersion: kueue.x-k8s.io/v1beta1, kind: ResourceFlavor, metadata: {name: default}}
- {apiVersion: kueue.x-k8s.io/v1beta1, kind: WorkloadPriorityClass, metadata: {name: urgent}, value: 100}
- apiVersion: kueue.x-k8s.io/v1beta1
  kind: ClusterQueue
  metadata: {name: team-a}
  spec:
    namespaceSelector: {}
    cohort: shared
    preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
    resourceGroups:
      - coveredResources: [cpu]
        flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
- apiVersion: kueue.x-k8s.io/v1beta1
  kind: ClusterQueue
  metadata: {name: team-b}
  spec:
    namespaceSelector: {}
    cohort: shared
    resourceGroups:
      - coveredResources: [cpu]
        flavors: [{name: default, resources: [{name: cpu, nominalQuota: 2}]}]
- {apiVersion: kueue.x-k8s.io/v1beta1, kind: LocalQueue, metadata: {name: a, namespace: default},
   spec: {clusterQueue: team-a}}
- {apiVersion: kueue.x-k8s.io/v1beta1, kind: LocalQueue, metadata: {name: b, namespace: default},
   spec: {clusterQueue: team-b}}
"""

Job = tuple[int, str, str, int, int, bool]
# (at s, name, LocalQueue, cpus, run s, urgent)
JOBS: list[Job] = [(0, "a1", "a", 3, 600, False), (0, "b1", "b", 3, 900, False), (10, "a2", "a", 2, 300, False),
        (20, "b2", "b", 1, 1200, False), (30, "a3", "a", 4, 300, True), (700, "a4", "a", 1, 60, False),
        (950, "b3", "b", 2, 100, False)]


def _job(name: str, queue: str, cpus: int, urgent: bool) -> dict[str, Any]:
    """A Job of ``cpus`` one-cpu pods on LocalQueue ``queue``, urgent or not."""
    return job(name, queue=queue, cpu=1, pods=cpus).image("x").priority_class("urgent" if urgent else None).object()


def _scenario(tmp_path: Path, queues: str = QUEUES, jobs: list[Job] = JOBS,
              kueue: dict[str, Any] | None = None) -> Path:
    submit = [{"at": f"{at}s", "runFor": f"{run}s", "object": _job(name, queue, cpus, urgent)}
              for at, name, queue, cpus, run, urgent in jobs]
    doc = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "same-story"},
           "spec": {"objects": yaml.safe_load(queues), "submit": submit, "until": "2h",
                    **({"kueueConfig": kueue} if kueue is not None else {})}}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _owner(key: str) -> str:
    """A workload's job by name (``default/job-a1-1f2e3`` -> ``a1``): each run names workloads by uids of its own."""
    return key.split("/", 1)[1].removeprefix("job-").rsplit("-", 1)[0]


def _simulated(path: Path) -> list[tuple[float, str, str]]:
    sim = Simulation(load_scenario(path))
    told: list[tuple[float, str, str]] = []
    sim.plane.listen(lambda e: told.append((e.t, e.kind.value, _owner(e.workload))) if e.kind in TOLD else None)
    sim.run()
    return told


class _Live:
    """The real controller on a virtual clock: jobs created at their moments, finished when their run is up."""

    def __init__(self, tmp_path: Path, kueue: KueueConfig | None = None, *, ray: bool = True, queues: str = QUEUES,
                 jobs: list[Job] = JOBS) -> None:
        self.clock = VirtualClock(START)
        self.store = Store(tmp_path / "flexq.db", now=lambda: datetime.fromtimestamp(self.clock.now(), UTC))
        self.service = ObjectService(self.store, hooks=[job_webhook])
        if kueue is None:
            self.controller = QueueController(self.service, self.clock)
        elif ray:
            self.controller = QueueController(self.service, self.clock, runtime=cast(RayRuntime, _Runtime(self)),
                                              kueue=kueue)
        else:
            self.controller = QueueController(self.service, self.clock, kueue=kueue)
        self.queues, self.jobs = queues, jobs
        self.told: list[tuple[float, str, str]] = []
        self.due: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.runs = {name: run for _at, name, _q, _c, run, _u in jobs}
        self.controller.plane.listen(self._heard)

    def at(self, t: float, action: Callable[[], None]) -> None:
        heapq.heappush(self.due, (t, next(self._seq), action))

    def _heard(self, event: Event) -> None:
        if event.kind not in TOLD:
            return
        name = _owner(event.workload)
        self.told.append((event.t - START, event.kind.value, name))
        if event.kind is EventKind.ADMITTED and name in self.runs:  # (RayJobs end as their runtime says)
            self.at(event.t + self.runs[name], lambda: self._finish(name, event.t))

    def _finish(self, name: str, admitted: float) -> None:
        wl = next((w for w in self.controller.scheduler.workloads() if _owner(w.key) == name), None)
        if wl is None or wl.admitted_at != admitted:
            return  # evicted since: this run does not end here
        key = Key("batch", "jobs", "default", name)
        job = self.store.get(key)
        job["status"] = {"conditions": [{"type": "Complete", "status": "True", "message": "done"}]}
        self.store.update(key, job, subresource="status")

    def run(self, until: float, queues: str | None = None, jobs: list[Job] | None = None) -> None:
        """The queues, then the jobs at their moments (those given, else the story's); each finishes its run after its
        admission."""
        queues, jobs = queues or self.queues, jobs or self.jobs
        self.runs = {name: run for _at, name, _q, _c, run, _u in jobs}
        for doc in yaml.safe_load(queues):
            self._create(doc)
        self.controller.resync()
        for at, name, queue, cpus, _run, urgent in jobs:
            self.at(START + at,
                    lambda n=name, q=queue, c=cpus, u=urgent: self._create(_job(n, q, c, u)))  # type: ignore[misc]
        self._loop(until)

    def run_on(self, until: float) -> None:
        """Go on after :meth:`run` stopped, up to ``until``."""
        self._loop(until)

    def run_ray_jobs(self, until: float) -> None:
        """The RayJobs of :data:`RAY_JOBS` at their moments (their runs and readiness as :class:`_Runtime` says)."""
        for doc in yaml.safe_load(QUEUES):
            self._create(doc)
        self.controller.resync()
        for at, name, _run, _ready in RAY_JOBS:
            self.at(START + at, lambda n=name: self._create(_ray_job(n)))  # type: ignore[misc]
        self._loop(until)

    def workload_name(self, job: str) -> str:
        return next(str(w["metadata"]["name"]) for w in self.store.list_objects("kueue.x-k8s.io", "workloads")[0]
                    if str(w["metadata"]["name"]).startswith(f"rayjob-{job}-"))

    def admitted_at(self, job: str) -> float | None:
        wl = self.controller.scheduler.workload(f"default/{self.workload_name(job)}")
        return wl.admitted_at if wl is not None else None

    def ray_status(self, job: str, admitted: float | None, deployment: str, state: str) -> None:
        """KubeRay's status of RayJob ``job``, written where it still runs in the admission it started in."""
        if self.admitted_at(job) != admitted:
            return
        key = Key("ray.io", "rayjobs", "default", job)
        obj = self.store.get(key)
        obj["status"] = {"jobDeploymentStatus": deployment, "jobStatus": state}
        self.store.update(key, obj, subresource="status")

    def _loop(self, until: float) -> None:
        while True:
            wake = self.controller.plane.next_wake()
            times = [t for t in (self.due[0][0] if self.due else None, wake) if t is not None]
            if not times or min(times) > START + until:
                return
            now = max(min(times), self.clock.now())
            self.clock.advance_to(now)
            while self.due and self.due[0][0] <= now:
                heapq.heappop(self.due)[2]()
            self.controller.sync()
            while self.controller.more:
                self.controller.sync()

    def _create(self, doc: dict[str, Any]) -> None:
        info = resolve(doc["kind"])
        self.service.create(info, doc["metadata"].get("namespace") if info.namespaced else None, doc)


@pytest.mark.timeout(120)
def test_the_live_controller_and_the_simulator_decide_the_same_at_the_same_moments(tmp_path: Path) -> None:
    simulated = _simulated(_scenario(tmp_path))
    live = _Live(tmp_path)
    try:
        live.run(7200)
    finally:
        live.controller.stop()
        live.store.close()
    assert any(kind == "Preempted" for _t, kind, _n in simulated), "the story has a preemption in it"
    assert live.told == simulated


# --- waitForPodsReady on both clocks ------------------------------------------------------------------------------

KUEUE_CONFIG = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                "integrations": {"frameworks": ["ray.io/rayjob"]},
                "waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {"backoffBaseSeconds": 60,
                                                                            "backoffLimitCount": 1}}}
READY_TOLD = (EventKind.ADMITTED, EventKind.EVICTED, EventKind.REQUEUED, EventKind.DEACTIVATED, EventKind.FINISHED)
# (at s, name, run s, pods ready s after its start, None: never)
RAY_JOBS: list[tuple[int, str, int, int | None]] = [(0, "r1", 3600, None), (0, "r2", 600, 120), (60, "r3", 300, 0)]


def _ray_job(name: str) -> dict[str, Any]:
    def group(cpu: str) -> dict[str, Any]:
        return {"rayStartParams": {}, "template": {"spec": {"containers": [
            {"name": "ray", "image": "rayproject/ray", "resources": {"requests": {"cpu": cpu}}}]}}}

    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "a"}},
            "spec": {"entrypoint": "python train.py", "rayClusterSpec": {
                "headGroupSpec": group("1"), "workerGroupSpecs": [{"groupName": "w", "replicas": 1, **group("1")}]}}}


def _ready_story(event: Event, at: float = 0.0) -> tuple[float, str, str, str] | None:
    if event.kind not in READY_TOLD:
        return None
    name = event.workload.split("/", 1)[1].removeprefix("rayjob-").rsplit("-", 1)[0]
    return event.t - at, event.kind.value, name, str(event.extra.get("cause", ""))


class _Runtime:
    """The Ray runtime's part the controller calls, with KubeRay's status as the test writes it: a job's Ray cluster
    comes up (``jobDeploymentStatus: Running``) when its scenario says, or never; it completes when its run is up."""

    def __init__(self, live: _Live) -> None:
        self.live = live

    def start(self, namespace: str, name: str, _nodes: object = None, _counts: object = None) -> None:
        _at, _name, run, ready = next(j for j in RAY_JOBS if j[1] == name)
        started = self.live.clock.now()
        admitted = self.live.admitted_at(name)
        if ready is not None:
            self.live.at(started + ready, lambda: self.live.ray_status(name, admitted, "Running", "RUNNING"))
        self.live.at(started + run, lambda: self.live.ray_status(name, admitted, "Complete", "SUCCEEDED"))

    def suspend(self, _namespace: str, _name: str) -> None:
        return None

    def stop(self, _namespace: str, _name: str) -> None:
        return None

    def stop_all(self) -> None:
        return None


def _ready_scenario(tmp_path: Path) -> Path:
    submit = [{"at": f"{at}s", "runFor": f"{run}s", "podsReadyAfter": "never" if ready is None else f"{ready}s",
               "object": _ray_job(name)} for at, name, run, ready in RAY_JOBS]
    doc = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "pods-ready"},
           "spec": {"objects": yaml.safe_load(QUEUES), "kueueConfig": KUEUE_CONFIG, "submit": submit, "until": "2h"}}
    path = tmp_path / "pods-ready.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.timeout(120)
def test_wait_for_pods_ready_evicts_requeues_and_deactivates_alike_on_both_clocks(tmp_path: Path) -> None:
    from flexq.api import parse_kueue_config

    sim = Simulation(load_scenario(_ready_scenario(tmp_path)))
    simulated: list[tuple[float, str, str, str]] = []
    sim.plane.listen(lambda e: simulated.append(s) if (s := _ready_story(e)) is not None else None)
    sim.run()
    live = _Live(tmp_path, kueue=parse_kueue_config(yaml.safe_dump(KUEUE_CONFIG), "kueue.yaml"))
    told: list[tuple[float, str, str, str]] = []
    live.controller.plane.listen(lambda e: told.append(s) if (s := _ready_story(e, START)) is not None else None)
    try:
        live.run_ray_jobs(7200)
        stored = live.store.get(Key("kueue.x-k8s.io", "workloads", "default", live.workload_name("r2")))
        ready = next(c for c in stored["status"]["conditions"] if c["type"] == "PodsReady")
        r1 = live.store.get(Key("kueue.x-k8s.io", "workloads", "default", live.workload_name("r1")))
    finally:
        live.controller.stop()
        live.store.close()
    assert simulated == [
        (0, "Admitted", "r1", ""), (0, "Admitted", "r2", ""),
        (60, "Admitted", "r3", ""),  # borrowing team-b's unused quota
        (300, "Evicted", "r1", "PodsReadyTimeout"),  # 5 minutes and its Ray cluster never came up
        (360, "Finished", "r3", ""),
        (360, "Requeued", "r1", ""), (360, "Admitted", "r1", ""),  # after 60 s of backoff
        (600, "Finished", "r2", ""),  # ready after 2 minutes: it ran its course
        (660, "Evicted", "r1", "DeactivatedDueToRequeuingLimitExceeded"),  # requeued once already: the limit
        (660, "Deactivated", "r1", "")]
    assert told == simulated
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "True", "Started", "All pods reached readiness and the workload is running")
    assert r1["spec"]["active"] is False
    evicted = next(c for c in r1["status"]["conditions"] if c["type"] == "Evicted")
    assert (evicted["reason"], evicted["message"]) == (
        "DeactivatedDueToRequeuingLimitExceeded",
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries")


# --- admission fair sharing on both clocks -------------------------------------------------------------------------

AFS_QUEUES = """
- {apiVersion: kueue.x-k8s.io/v1beta1, kind: ResourceFlavor, metadata: {name: default}}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ClusterQueue
  metadata: {name: shared}
  spec:
    namespaceSelector: {}
    admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}
    resourceGroups:
      - coveredResources: [cpu]
        flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
- {apiVersion: kueue.x-k8s.io/v1beta1, kind: LocalQueue, metadata: {name: a, namespace: default},
   spec: {clusterQueue: shared}}
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: b, namespace: default},
   spec: {clusterQueue: shared, fairSharing: {weight: "2"}}}
"""
AFS_CONFIG = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
               "integrations": {"frameworks": ["batch/job"]},
               "admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "1m"}}
# LocalQueue a queues four jobs before b queues three; each job takes the whole 4 cpu but a4 and b3 (2 each).
AFS_JOBS: list[Job] = [(0, "a1", "a", 4, 600, False), (10, "a2", "a", 4, 600, False), (20, "a3", "a", 4, 600, False),
                        (30, "a4", "a", 2, 600, False), (40, "b1", "b", 4, 600, False), (50, "b2", "b", 4, 600, False),
                        (60, "b3", "b", 2, 600, False)]


@pytest.mark.timeout(120)
def test_admission_fair_sharing_takes_turns_between_local_queues_alike_on_both_clocks(tmp_path: Path) -> None:
    from flexq.api import parse_kueue_config

    def admitted(story: list[tuple[float, str, str]]) -> list[tuple[float, str]]:
        return [(t, name) for t, kind, name in story if kind == "Admitted"]

    plain = admitted(_simulated(_scenario(tmp_path, AFS_QUEUES, AFS_JOBS)))
    simulated = _simulated(_scenario(tmp_path, AFS_QUEUES, AFS_JOBS, AFS_CONFIG))
    live = _Live(tmp_path, kueue=parse_kueue_config(yaml.safe_dump(AFS_CONFIG), "kueue.yaml"), ray=False)
    try:
        live.run(7200, AFS_QUEUES, AFS_JOBS)
        status = live.store.get(Key("kueue.x-k8s.io", "localqueues", "default", "a"))["status"]["fairSharing"]
        ledger = live.controller.plane.fair_usage
        assert ledger is not None
        consumed, last = ledger.consumed(("default", "a")) or ({}, 0.0)
        scrape = render_kueue(live.controller.tally.kueue, kueue_state(live.controller.plane)).decode()
        usage = {lq: ledger.usage(("default", lq), weight) for lq, weight in (("a", 1.0), ("b", 2.0))}
    finally:
        live.controller.stop()
        live.store.close()
    # Without it, a's jobs go first in the order they came (b3, small, fits beside a4).
    assert plain == [(0, "a1"), (600, "a2"), (1200, "a3"), (1800, "a4"), (1800, "b3"), (2400, "b1"), (3000, "b2")]
    # With it, the LocalQueue that used least goes next: b (weight 2) after a1, then a, then b...
    assert admitted(simulated) == [(0, "a1"), (600, "b1"), (1200, "a2"), (1800, "b2"), (2400, "a3"), (3000, "b3"),
                                   (3000, "a4")]
    assert live.told == simulated
    assert status["weightedShare"] == 0
    assert status["admissionFairSharingStatus"] == {
        "consumedResources": {"cpu": format_usage(consumed["cpu"])},
        "lastUpdate": datetime.fromtimestamp(last, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    assert last > START + 3600 and 0 < consumed["cpu"] < 4  # sampled on, decaying since its last job ended
    assert check_scrape(scrape, need_samples=False) == []
    family = families(scrape)["kueue_local_queue_admission_fair_sharing_usage"]
    assert {(s.labels["name"], s.labels["cluster_queue"]): s.value for s in family.samples} == {
        ("a", "shared"): usage["a"], ("b", "shared"): usage["b"]}
    assert usage["a"] > 0 and usage["b"] > 0


# --- fair sharing on both clocks ----------------------------------------------------------------------------------

def _team_queues(teams: str) -> list[str]:
    """A ClusterQueue ``team-T`` of 4 cpus in cohort ``shared`` (reclaiming from it, preempting lower priorities)
    and its LocalQueue ``T``, for each team."""
    return [f"""- apiVersion: kueue.x-k8s.io/v1beta1
  kind: ClusterQueue
  metadata: {{name: team-{t}}}
  spec:
    namespaceSelector: {{}}
    cohort: shared
    preemption: {{withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}}
    resourceGroups:
      - coveredResources: [cpu]
        flavors: [{{name: default, resources: [{{name: cpu, nominalQuota: 4}}]}}]
- {{apiVersion: kueue.x-k8s.io/v1beta1, kind: LocalQueue, metadata: {{name: {t}, namespace: default}},
   spec: {{clusterQueue: team-{t}}}}}""" for t in teams]


FLAVOR = "- {apiVersion: kueue.x-k8s.io/v1beta1, kind: ResourceFlavor, metadata: {name: default}}"
FAIR_QUEUES = "\n".join([FLAVOR, *_team_queues("abc")])
FAIR_CONFIG = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
               "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}}
# team-b borrows 6 of the cohort's 12 cpus; team-a, borrowing 1 with a2, has the lower share and takes from it.
FAIR_JOBS: list[Job] = [(0, "b1", "b", 4, 3000, False), (1, "b2", "b", 2, 3000, False), (2, "b3", "b", 2, 3000, False),
             (3, "b4", "b", 2, 3000, False), (4, "a1", "a", 2, 3000, False), (60, "a2", "a", 3, 600, False)]


@pytest.mark.timeout(120)
def test_fair_sharing_preempts_alike_on_both_clocks(tmp_path: Path) -> None:
    from flexq.api import parse_kueue_config
    from flexq.control import kueue_state

    sim = Simulation(load_scenario(_scenario(tmp_path, FAIR_QUEUES, FAIR_JOBS, FAIR_CONFIG)))
    simulated: list[tuple[float, str, str]] = []
    reasons: dict[str, str] = {}

    def heard(e: Event) -> None:
        if e.kind in TOLD:
            simulated.append((e.t, e.kind.value, _owner(e.workload)))
        if e.kind is EventKind.PREEMPTED:
            reasons[_owner(e.workload)] = str(e.extra.get("preemptionReason"))

    sim.plane.listen(heard)
    sim.run_to(100)
    sim_shares = kueue_state(sim.plane).weighted_share
    sim.run()
    live = _Live(tmp_path, parse_kueue_config(yaml.safe_dump(FAIR_CONFIG), "kueue.yaml"), ray=False,
                 queues=FAIR_QUEUES, jobs=FAIR_JOBS)
    try:
        live.run(100)
        live_shares = kueue_state(live.controller.plane).weighted_share
        statuses = {t: live.store.get(Key("kueue.x-k8s.io", "clusterqueues", "", f"team-{t}"))["status"]
                    for t in "abc"}
        live.run_on(7200)
    finally:
        live.controller.stop()
        live.store.close()
    # Without fair sharing team-a, which must borrow for a2, may not reclaim at all (borrowWithinCohort: Never);
    # with it, a2 takes the two most recently admitted of team-b's workloads, as much as it needs.
    assert reasons == {"b4": "InCohortFairSharing", "b3": "InCohortFairSharing"}
    assert live.told == simulated
    # At 100 s: team-a holds 5 (1 borrowed), team-b 6 (2 borrowed), of a cohort that lends 12.
    assert live_shares == sim_shares == pytest.approx({"team-a": 1000 / 12, "team-b": 2000 / 12, "team-c": 0.0})
    assert {t: s.get("fairSharing") for t, s in statuses.items()} == {
        "a": {"weightedShare": 84}, "b": {"weightedShare": 167}, "c": {"weightedShare": 0}}


# --- what fair sharing writes on cohorts, and what evictions leave on workloads, on both clocks --------------------

COHORT_QUEUES = "\n".join([
    FLAVOR,
    "- {apiVersion: kueue.x-k8s.io/v1beta2, kind: Cohort, metadata: {name: org}}",
    "- {apiVersion: kueue.x-k8s.io/v1beta2, kind: Cohort, metadata: {name: shared},"
    " spec: {parentName: org, fairSharing: {weight: '2'}}}",
    """- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Cohort
  metadata: {name: other}
  spec:
    parentName: org
    resourceGroups:
      - coveredResources: [cpu]
        flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]""",
    *_team_queues("ab")])
# team-b takes 10 of org's 12 cpus (cohort shared borrows 2 of other's 4); a1 then reclaims team-a's 4: b3, the
# latest admitted, is preempted, and queues again until a1 is done.
COHORT_JOBS: list[Job] = [(0, "b1", "b", 4, 3000, False), (1, "b2", "b", 4, 3000, False),
                          (2, "b3", "b", 2, 3000, False), (60, "a1", "a", 4, 600, False)]


def _cohort_shares(store: Store) -> dict[str, Any]:
    return {name: (store.get(Key("kueue.x-k8s.io", "cohorts", "", name)).get("status") or {}).get("fairSharing")
            for name in ("org", "shared", "other")}


@pytest.mark.timeout(120)
def test_cohort_shares_and_eviction_counts_alike_on_both_clocks(tmp_path: Path) -> None:
    from flexq.api import parse_kueue_config

    sim = Simulation(load_scenario(_scenario(tmp_path, COHORT_QUEUES, COHORT_JOBS, FAIR_CONFIG)))
    simulated: list[tuple[float, str, str]] = []
    sim.plane.listen(lambda e: simulated.append((e.t, e.kind.value, _owner(e.workload))) if e.kind in TOLD else None)
    sim.run_to(30)
    sim_before = kueue_state(sim.plane).cohort_weighted_share
    sim.run_to(100)
    sim_after = kueue_state(sim.plane).cohort_weighted_share
    sim_stats = {_owner(wl.key): wl.scheduling_stats() for wl in sim.scheduler.workloads()}
    live = _Live(tmp_path, parse_kueue_config(yaml.safe_dump(FAIR_CONFIG), "kueue.yaml"), ray=False,
                 queues=COHORT_QUEUES, jobs=COHORT_JOBS)
    try:
        live.run(30)
        before = _cohort_shares(live.store)
        live.run_on(100)
        after = _cohort_shares(live.store)
        workloads = live.store.list_objects("kueue.x-k8s.io", "workloads")[0]
        live_stats = {_owner(f"default/{w['metadata']['name']}"): (w.get("status") or {}).get("schedulingStats", {})
                      for w in workloads}
    finally:
        live.controller.stop()
        live.store.close()
    assert live.told == [t for t in simulated if t[0] <= 100]
    # At 30 s team-b holds 10: shared borrows 2 of the 12 org could lend, weight 2: 2000/12/2 = 83.3, written 84.
    assert sim_before == pytest.approx({"org": 0.0, "shared": 2000 / 12 / 2, "other": 0.0})
    assert before == {"org": {"weightedShare": 0}, "shared": {"weightedShare": 84}, "other": {"weightedShare": 0}}
    # At 100 s team-a holds 4, team-b 8: shared borrows 4 of 12, weight 2: 166.7, written 167.
    assert sim_after == pytest.approx({"org": 0.0, "shared": 4000 / 12 / 2, "other": 0.0})
    assert after == {"org": {"weightedShare": 0}, "shared": {"weightedShare": 167}, "other": {"weightedShare": 0}}
    preempted = {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]}
    assert live_stats == sim_stats == {"a1": {}, "b1": {}, "b2": {}, "b3": preempted}
