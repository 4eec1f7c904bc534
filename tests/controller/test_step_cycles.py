"""A step of the live queue controller schedules a few cycles at the most, and says it left scheduling to do: the
next step goes on at once, and the steps together admit what one unbounded step would."""

from __future__ import annotations

from pathlib import Path

from flexq.api.kinds import resolve
from flexq.controller.pacing import STEP_CYCLES
from flexq.scheduler.model import WorkloadState
from tests.support import controller_on_store, queued_job


def test_a_busy_moment_is_admitted_over_several_steps_each_of_a_few_cycles(tmp_path: Path) -> None:
    store, service, controller = controller_on_store(tmp_path, cpu=10)
    try:
        for i in range(12):
            service.create(resolve("job.batch"), "default", queued_job(f"job-{i:02d}"))
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
