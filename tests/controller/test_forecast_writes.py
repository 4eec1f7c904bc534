"""A new forecast that moves the start of many waiting workloads is written over several steps, a little at a time,
and the steps meanwhile take back and give out quota as they would without it: a job's end is not held up behind
thousands of forecasts to write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flexq.api.kinds import resolve
from flexq.controller import QueueController
from flexq.controller import queue as queue_module
from flexq.scheduler.model import WorkloadState
from flexq.store import Store
from tests.support import controller_on_store, queued_job

WAITING = 12


def _shown(store: Store) -> set[str]:
    """The jobs whose workload's stored status carries a forecast."""
    return {wl["metadata"]["ownerReferences"][0]["name"] for wl in
            store.list_objects("kueue.x-k8s.io", "workloads", "default")[0] if "forecast" in wl.get("status", {})}


def _jobs(controller: QueueController, state: WorkloadState) -> set[str]:
    """The jobs whose workload is in ``state``."""
    return {wl.owner.rpartition("/")[2] for wl in controller.scheduler.workloads() if wl.state is state}


def _finish(service: Any, name: str) -> None:
    info = resolve("job.batch")
    current = service.get(info, "default", name)
    service.replace(info, "default", name, {**current, "status": {"conditions": [
        {"type": "Complete", "status": "True"}]}}, subresource="status")


def test_a_wave_of_forecasts_is_written_a_little_a_step_and_quota_moves_meanwhile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queue_module, "FORECAST_WRITES", 0.0)  # one forecast alone a step
    store, service, controller = controller_on_store(tmp_path, cpu=1)
    try:
        for i in range(WAITING + 1):
            service.create(resolve("job.batch"), "default", {**queued_job(f"job-{i:02d}"), "metadata": {
                **queued_job(f"job-{i:02d}")["metadata"],
                "annotations": {"flexq.dev/expected-run-time": "10m"}}})
        while True:
            controller.sync()
            if not controller.more:
                break
        running = _jobs(controller, WorkloadState.ADMITTED)
        assert len(running) == 1, "one cpu: one job runs, the others wait"
        assert _shown(store) == set()

        controller.forecasts.once()  # every waiting workload's first forecast: all of them due
        controller.sync()
        assert len(_shown(store)) == 1, "one forecast a step, the rest left due"
        assert controller.more, "the next step is due at once"

        # The running job ends: the next step admits the next one, before any forecast left to write.
        (first,) = running
        _finish(service, first)
        controller.sync()
        now = _jobs(controller, WorkloadState.ADMITTED)
        assert len(now) == 1 and now != running, "quota taken back and given out again"
        assert len(_shown(store)) <= 3, "forecasts still left to write"

        for _ in range(3 * WAITING):
            if not controller.more:
                break
            controller.sync()
        waiting = _jobs(controller, WorkloadState.PENDING)
        assert len(waiting) == WAITING - 1
        assert _shown(store) >= waiting, "every waiting workload shows its forecast in the end"
        assert not controller.more
    finally:
        store.close()
