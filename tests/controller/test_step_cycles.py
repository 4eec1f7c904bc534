"""A step of the live queue controller schedules a few cycles at the most, and says it left scheduling to do: the
next step goes on at once, and the steps together admit what one unbounded step would."""

from __future__ import annotations

from pathlib import Path

import yaml

from flexq.api.kinds import resolve
from flexq.clock import RealClock
from flexq.controller.pacing import STEP_CYCLES
from flexq.controller.queue import QueueController
from flexq.jobs.webhook import job_webhook
from flexq.objects.service import ObjectService
from flexq.scheduler.model import WorkloadState
from flexq.store import Store
from tests.controller.test_own_writes import _job
from tests.queues import queue_yaml


def test_a_busy_moment_is_admitted_over_several_steps_each_of_a_few_cycles(tmp_path: Path) -> None:
    store = Store(tmp_path / "flexq.db")
    service = ObjectService(store, hooks=[job_webhook])
    for doc in yaml.safe_load_all(queue_yaml(("default", None), cpu=10)):
        info = resolve(doc["kind"])
        service.create(info, "default" if info.namespaced else "", doc)
    controller = QueueController(service, RealClock())
    controller.resync()
    try:
        for i in range(12):
            service.create(resolve("job.batch"), "default", _job(f"job-{i:02d}"))
        admitted: list[int] = []
        controller.sync()
        while True:
            admitted.append(sum(1 for wl in controller.scheduler.workloads() if wl.state is WorkloadState.ADMITTED))
            if not controller.more:
                break
            controller.sync()
        assert admitted[0] == STEP_CYCLES, "one ClusterQueue: a head a cycle"
        assert admitted == sorted(admitted) and admitted[-1] == 10, "10 cpu of quota: ten of the twelve"
        assert len(admitted) >= 10 // STEP_CYCLES
        jobs = store.list_objects("batch", "jobs", "default")[0]
        assert sum(1 for job in jobs if not job["spec"].get("suspend")) == 10, "each admitted job started"
    finally:
        store.close()
