"""The queue controller passes over its own writes to workloads, jobs and queues' statuses when it reads the change
log back (they say what it decided), and still acts on anyone else's write to the same objects."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from flexq.api.kinds import KindInfo, resolve
from flexq.scheduler.model import WorkloadState
from flexq.store import Change, Gone, Key
from tests.support import controller_on_store, queued_job


def test_own_writes_are_passed_over_and_others_are_read(tmp_path: Path) -> None:
    store, service, controller = controller_on_store(tmp_path)
    read: list[tuple[str, str, str]] = []
    dispatch = controller._dispatch

    def recording(info: KindInfo, change: Change) -> None:
        read.append((info.kind, change.type.value, change.key.name))
        dispatch(info, change)

    controller._dispatch = recording  # type: ignore[method-assign]
    try:
        service.create(resolve("job.batch"), "default", queued_job("a"))
        controller.sync()  # the Job is read: its Workload made and admitted, the Job started
        controller.sync()  # what that step wrote comes back
        [wl] = controller.scheduler.workloads()
        assert wl.state is WorkloadState.ADMITTED
        jobs_and_workloads = [r for r in read if r[0] in ("Job", "Workload")]
        assert jobs_and_workloads == [("Job", "ADDED", "a")], "the controller read back its own writes"
        assert not controller._own, "its own writes were not all passed over"
        # Someone else deactivates the workload: read, and acted on.
        key = Key("kueue.x-k8s.io", "workloads", "default", wl.name)
        stored = store.get(key)
        stored["spec"]["active"] = False
        store.update(key, stored)
        controller.sync()
        assert ("Workload", "MODIFIED", wl.name) in read
        assert controller.scheduler.held(wl.key).state is WorkloadState.INACTIVE
        # The Job finishes, as its runner says: read, and the workload finished.
        job_key = Key("batch", "jobs", "default", "a")
        job = store.get(job_key)
        job["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
        store.update(job_key, job, subresource="status")
        controller.sync()
        assert ("Job", "MODIFIED", "a") in read
    finally:
        store.close()


def test_own_queue_statuses_are_passed_over_and_anyone_elses_corrected(tmp_path: Path) -> None:
    store, service, controller = controller_on_store(tmp_path)
    controller.sync()  # what the start-up read wrote (outside a step) is read back
    forgotten: list[str] = []
    forget = controller._counts.forget

    def recording(key: Key) -> None:
        forgotten.append(key.name)
        forget(key)

    controller._counts.forget = recording  # type: ignore[method-assign]
    cq = Key("kueue.x-k8s.io", "clusterqueues", "", "cq")
    try:
        for name in ("a", "b"):
            service.create(resolve("job.batch"), "default", queued_job(name))
            time.sleep(0.15)  # the queues' statuses are written at most every 0.1 s
            controller.sync()
        time.sleep(0.15)
        controller.sync()  # what the last step wrote comes back
        assert store.get(cq)["status"]["admittedWorkloads"] == 2
        assert forgotten == [], "the controller read back its own queue statuses"
        # Someone else writes the ClusterQueue's status: read, and put right at the next write.
        stored = store.get(cq)
        stored["status"]["admittedWorkloads"] = 99
        store.update(cq, stored, subresource="status")
        time.sleep(0.15)
        controller.sync()
        assert forgotten == ["cq"]
        assert store.get(cq)["status"]["admittedWorkloads"] == 2
    finally:
        store.close()


def test_a_job_is_read_once_to_start_it_and_once_to_stop_it(tmp_path: Path) -> None:
    """Starting an admitted job (and stopping an evicted one) reads the job once: the object to change and the
    object as stored come from the same read, and the write goes over exactly that version."""
    store, service, controller = controller_on_store(tmp_path, cpu=1)
    try:
        reads: list[str] = []
        body = store._body

        def counting(key: Key) -> Any:
            if key.resource == "jobs":
                reads.append(key.name)
            return body(key)

        store._body = counting  # type: ignore[method-assign]
        service.create(resolve("job.batch"), "default", queued_job("a"))
        controller.sync()  # admitted, and its Job started
        assert reads == ["a"]
        job = store.get(Key("batch", "jobs", "default", "a"))
        assert job["spec"]["suspend"] is False and job["metadata"]["generation"] == 2
        reads.clear()
        [wl] = controller.scheduler.workloads()
        controller._log(controller.scheduler.deactivate(wl.key, controller.clock.now()))
        controller.state.touched.add(wl.key)
        with controller._step():
            controller._schedule_and_write()  # evicted: its Job stopped
        assert reads == ["a"]
        assert store.get(Key("batch", "jobs", "default", "a"))["spec"]["suspend"] is True
    finally:
        store.close()


def test_a_step_reads_its_changes_without_holding_the_store(tmp_path: Path) -> None:
    """While a step reads the change log, another thread's write goes through at once (the store is held only for
    the step's writes); what the step then writes is still its own."""
    import threading

    store, service, controller = controller_on_store(tmp_path)
    dispatch = controller._dispatch
    wrote: list[float] = []
    during: list[bool] = []

    def writer() -> None:
        service.create(resolve("configmap"), "default",
                       {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "meanwhile"}})
        wrote.append(time.monotonic())

    def reading(info: KindInfo, change: Change) -> None:
        if info.kind == "Job" and not wrote:
            other = threading.Thread(target=writer)
            other.start()
            other.join(timeout=2.0)  # held by the step, the write would wait for its end
            during.append(bool(wrote))
        dispatch(info, change)

    controller._dispatch = reading  # type: ignore[method-assign]
    try:
        service.create(resolve("job.batch"), "default", queued_job("a"))
        controller.sync()
        assert during == [True], "a write from another thread waited for the step's reads"
        [wl] = controller.scheduler.workloads()
        assert wl.state is WorkloadState.ADMITTED
        controller.sync()  # its own writes come back, passed over
        assert not controller._own, "the step's writes were not taken as its own"
    finally:
        store.close()


def test_a_controller_behind_the_log_window_reads_on_instead_of_starting_over(tmp_path: Path) -> None:
    """The controller holds the change log: a burst of writes longer than the log's history, compacted meanwhile,
    is read from the log at its next step, not answered by reading everything afresh."""
    store, service, controller = controller_on_store(tmp_path, cpu=100)
    started_over: list[bool] = []
    resync = controller.resync

    def counting() -> None:
        started_over.append(True)
        resync()

    controller.resync = counting  # type: ignore[method-assign]
    controller.sync()
    for i in range(40):
        service.create(resolve("job.batch"), "default", queued_job(f"j{i}"))
    store.compact(20)  # the log's history is 20 changes: the burst is longer
    controller.sync()
    assert started_over == []
    assert len(controller.scheduler.workloads()) == 40
    controller.stop()  # lets go: the log is compacted past where it stopped reading
    stopped_at = controller.cursor
    for i in range(30):
        service.create(resolve("configmap"), "default", {"apiVersion": "v1", "kind": "ConfigMap",
                                                         "metadata": {"name": f"c{i}"}})
    store.compact(20)
    with pytest.raises(Gone):
        store.changes(stopped_at)
    store.close()
