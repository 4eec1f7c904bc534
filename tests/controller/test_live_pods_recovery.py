"""waitForPodsReady on the live server when a running job's pods stop being ready: a RayJob whose Ray cluster is made
anew (KubeRay's ``Retrying``) waits for recovery (Kueue's ``WaitForRecovery``) and, ready again in time, is
``Recovered``; one that never comes back is evicted when ``recoveryTimeout`` runs out, counted under the cause
``WaitForRecovery``. A job's workload carries ``PodsReady`` from the start (``WaitForStart`` while it waits), as Kueue's
job reconciler writes it. The real controller, stepped on a virtual clock against a real store."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import yaml

from flexq.api import KueueConfig, PodsReadyConfig, resolve
from flexq.clock import VirtualClock
from flexq.control import KueueCounts
from flexq.controller import QueueController, RayRuntime
from flexq.jobs.webhook import job_webhook
from flexq.objects import ObjectService
from flexq.scheduler import Event, EventKind
from flexq.store import Key, Store

START = 1_800_000_000.0
QUEUES = """
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: default}}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ClusterQueue
  metadata: {name: cq}
  spec:
    namespaceSelector: {}
    resourceGroups:
      - coveredResources: [cpu]
        flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: q, namespace: default},
   spec: {clusterQueue: cq}}
"""
# name -> (cpus a pod, KubeRay's jobDeploymentStatus by seconds after the job started)
JOBS: dict[str, tuple[str, dict[int, str]]] = {
    "back": ("1", {10: "Running", 60: "Retrying", 100: "Running"}),
    "gone": ("1", {10: "Running", 60: "Retrying"}),
    "waits": ("1", {}),  # no room while the others hold their 2 cpu each; its pods never get ready
}


def _ray_job(name: str) -> dict[str, Any]:
    def group() -> dict[str, Any]:
        return {"rayStartParams": {}, "template": {"spec": {"containers": [
            {"name": "ray", "image": "rayproject/ray", "resources": {"requests": {"cpu": JOBS[name][0]}}}]}}}

    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"entrypoint": "python train.py", "rayClusterSpec": {
                "headGroupSpec": group(), "workerGroupSpecs": [{"groupName": "w", "replicas": 1, **group()}]}}}


class _Live:
    def __init__(self, tmp_path: Path) -> None:
        self.clock = VirtualClock(START)
        self.store = Store(tmp_path / "flexq.db", now=lambda: datetime.fromtimestamp(self.clock.now(), UTC))
        self.service = ObjectService(self.store, hooks=[job_webhook])
        kueue = KueueConfig(pods_ready=PodsReadyConfig(timeout=300.0, recovery_timeout=120.0))
        self.controller = QueueController(self.service, self.clock, runtime=cast(RayRuntime, self), kueue=kueue)
        self.counts = self.controller.tally.kueue
        self.due: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.told: list[tuple[float, str, str, str]] = []
        self.controller.plane.listen(self._heard)

    def _heard(self, event: Event) -> None:
        if event.kind in (EventKind.ADMITTED, EventKind.EVICTED):
            name = event.workload.split("/")[1].removeprefix("rayjob-").rsplit("-", 1)[0]
            self.told.append((event.t - START, event.kind.value, name, str(event.extra.get("cause", ""))))

    # The runtime's part the controller calls: KubeRay's status as JOBS say, in the admission the job started in.
    def start(self, namespace: str, name: str, _nodes: object = None, _counts: object = None) -> None:
        started, admitted = self.clock.now(), self.admitted_at(name)
        for after, deployment in JOBS[name][1].items():
            heapq.heappush(self.due, (started + after, next(self._seq),
                                      lambda d=deployment: self.status(name, admitted, d)))  # type: ignore[misc]

    def suspend(self, _namespace: str, _name: str) -> None:
        return None

    def stop(self, _namespace: str, _name: str) -> None:
        return None

    def stop_all(self) -> None:
        return None

    def admitted_at(self, name: str) -> float | None:
        wl = next((w for w in self.controller.scheduler.workloads() if f"/rayjob-{name}-" in w.key), None)
        return wl.admitted_at if wl is not None else None

    def status(self, name: str, admitted: float | None, deployment: str) -> None:
        if self.admitted_at(name) != admitted:
            return
        key = Key("ray.io", "rayjobs", "default", name)
        obj = self.store.get(key)
        obj["status"] = {"jobDeploymentStatus": deployment, "jobStatus": "RUNNING"}
        self.store.update(key, obj, subresource="status")

    def pods_ready(self, name: str) -> tuple[str, str, str] | None:
        for wl in self.store.list_objects("kueue.x-k8s.io", "workloads")[0]:
            if str(wl["metadata"]["name"]).startswith(f"rayjob-{name}-"):
                found = [c for c in wl["status"].get("conditions") or [] if c["type"] == "PodsReady"]
                return (found[0]["status"], found[0]["reason"], found[0]["message"]) if found else None
        return None

    def run_until(self, until: float) -> None:
        self.step()
        while True:
            wake = self.controller.plane.next_wake()
            times = [t for t in (self.due[0][0] if self.due else None, wake) if t is not None]
            if not times or min(times) > START + until:
                self.clock.advance_to(START + until)
                return
            now = max(min(times), self.clock.now())
            self.clock.advance_to(now)
            while self.due and self.due[0][0] <= now:
                heapq.heappop(self.due)[2]()
            self.step()

    def step(self) -> None:
        self.controller.sync()
        while self.controller.more:
            self.controller.sync()


def test_pods_that_stop_being_ready_wait_for_recovery_on_the_live_server(tmp_path: Path) -> None:
    live = _Live(tmp_path)
    seen: dict[float, dict[str, tuple[str, str, str] | None]] = {}
    try:
        for doc in yaml.safe_load(QUEUES):
            live.service.create(resolve(doc["kind"]), doc["metadata"].get("namespace"), doc)
        live.controller.resync()
        for name in JOBS:
            live.service.create(resolve("RayJob"), "default", _ray_job(name))
        for at in (5, 30, 80, 110, 185):
            live.run_until(at)
            seen[at] = {name: live.pods_ready(name) for name in JOBS}
        counts: KueueCounts = live.counts
    finally:
        live.controller.stop()
        live.store.close()
    start = ("False", "WaitForStart", "Not all pods are ready or succeeded")
    ready = ("True", "Started", "All pods reached readiness and the workload is running")
    lost = ("False", "WaitForRecovery", "At least one pod has failed, waiting for recovery")
    recovered = ("True", "Recovered", "All pods reached readiness and the workload is running")
    assert seen == {
        5: {"back": start, "gone": start, "waits": start},  # "waits" is pending: Kueue writes it there too
        30: {"back": ready, "gone": ready, "waits": start},
        80: {"back": lost, "gone": lost, "waits": start},
        110: {"back": recovered, "gone": lost, "waits": start},
        # gone's 120 s of recovery ran out at 180 s: evicted, and waits takes its quota at once (admitted, its pods
        # not ready yet).
        185: {"back": recovered, "gone": start, "waits": start},
    }
    assert live.told == [(0, "Admitted", "back", ""), (0, "Admitted", "gone", ""),
                         (180, "Evicted", "gone", "PodsReadyTimeout"), (180, "Admitted", "waits", "")]
    assert {key: n for key, n in counts.evicted.items()} == {("cq", "PodsReadyTimeout", "WaitForRecovery", ""): 1}
    assert {key: h.count for key, h in counts.ready_wait.items()} == {("cq", ""): 2}, "not again when recovered"
