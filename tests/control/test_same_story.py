"""Both clocks tell the same story: the live server's real QueueController, stepped on a virtual clock against a
real store, and the simulator replaying the same scenario decide the same things at the same moments."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from flexq.api import resolve
from flexq.clock import VirtualClock
from flexq.controller import QueueController
from flexq.jobs.webhook import job_webhook
from flexq.objects import ObjectService
from flexq.scheduler import Event, EventKind
from flexq.sim import Simulation, load_scenario
from flexq.store import Key, Store

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

# (at s, name, LocalQueue, cpus, run s, urgent)
JOBS = [(0, "a1", "a", 3, 600, False), (0, "b1", "b", 3, 900, False), (10, "a2", "a", 2, 300, False),
        (20, "b2", "b", 1, 1200, False), (30, "a3", "a", 4, 300, True), (700, "a4", "a", 1, 60, False),
        (950, "b3", "b", 2, 100, False)]


def _job(name: str, queue: str, cpus: int, urgent: bool) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": queue}
    if urgent:
        labels["kueue.x-k8s.io/priority-class"] = "urgent"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default",
                                                                   "labels": labels},
            "spec": {"parallelism": cpus, "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}}


def _scenario(tmp_path: Path) -> Path:
    submit = [{"at": f"{at}s", "runFor": f"{run}s", "object": _job(name, queue, cpus, urgent)}
              for at, name, queue, cpus, run, urgent in JOBS]
    doc = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "same-story"},
           "spec": {"objects": yaml.safe_load(QUEUES), "submit": submit, "until": "2h"}}
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

    def __init__(self, tmp_path: Path) -> None:
        self.clock = VirtualClock(START)
        self.store = Store(tmp_path / "flexq.db", now=lambda: datetime.fromtimestamp(self.clock.now(), UTC))
        self.service = ObjectService(self.store, hooks=[job_webhook])
        self.controller = QueueController(self.service, self.clock)
        self.told: list[tuple[float, str, str]] = []
        self.due: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.runs = {name: run for _at, name, _q, _c, run, _u in JOBS}
        self.controller.plane.listen(self._heard)

    def at(self, t: float, action: Callable[[], None]) -> None:
        heapq.heappush(self.due, (t, next(self._seq), action))

    def _heard(self, event: Event) -> None:
        if event.kind not in TOLD:
            return
        name = _owner(event.workload)
        self.told.append((event.t - START, event.kind.value, name))
        if event.kind is EventKind.ADMITTED:
            self.at(event.t + self.runs[name], lambda: self._finish(name, event.t))

    def _finish(self, name: str, admitted: float) -> None:
        wl = next((w for w in self.controller.scheduler.workloads() if _owner(w.key) == name), None)
        if wl is None or wl.admitted_at != admitted:
            return  # evicted since: this run does not end here
        key = Key("batch", "jobs", "default", name)
        job = self.store.get(key)
        job["status"] = {"conditions": [{"type": "Complete", "status": "True", "message": "done"}]}
        self.store.update(key, job, subresource="status")

    def run(self, until: float) -> None:
        for doc in yaml.safe_load(QUEUES):
            self._create(doc)
        self.controller.resync()
        for at, name, queue, cpus, _run, urgent in JOBS:
            self.at(START + at,
                    lambda n=name, q=queue, c=cpus, u=urgent: self._create(_job(n, q, c, u)))  # type: ignore[misc]
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
