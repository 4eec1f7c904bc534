"""The queue controller's steps are counted and timed, whole and by phase, with what each read and wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from flexq.api.kinds import resolve
from flexq.controller.steps import PHASES, STEP_BUCKETS, StepStats, StepTimer
from tests.support import controller_on_store, queued_job


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_step_is_timed_by_phase_and_put_in_its_bucket() -> None:
    stats = StepStats()
    clock = _Clock()
    timer = StepTimer(stats, clock)
    spent = {"read": 0.002, "schedule": 0.001, "write": 0.030, "queues": 0.004, "commit": 0.003}
    timer.begin()
    timer.changes, timer.writes = 7, 3
    for phase in PHASES[:-1]:
        clock.now += spent[phase]
        timer.lap(phase)
    clock.now += spent["commit"]
    timer.end()
    assert stats.steps == 1 and stats.changes == 7 and stats.writes == 3
    assert stats.phases == pytest.approx(spent)
    assert stats.seconds == pytest.approx(0.040)
    assert stats.cumulative() == [(str(b), 0 if b < 0.040 else 1) for b in STEP_BUCKETS] + [("+Inf", 1)]
    timer.begin()  # a second, slower than every bucket: counted above them all
    clock.now += 9.0
    timer.end()
    assert stats.steps == 2 and stats.buckets[-1] == 1 and stats.cumulative()[-2] == ("5.0", 1)
    assert stats.phases["commit"] == pytest.approx(9.003)


def test_the_controller_counts_its_steps_reads_and_writes(tmp_path: Path) -> None:
    store, service, controller = controller_on_store(tmp_path)
    try:
        steps = controller.tally.steps
        before = (steps.steps, steps.changes, steps.writes)
        service.create(resolve("job.batch"), "default", queued_job("a"))
        service.create(resolve("job.batch"), "default", queued_job("b"))
        waiting = store.changes(controller.cursor)
        assert [(c.key.resource, c.key.name) for c in waiting][-2:] == [("jobs", "a"), ("jobs", "b")]
        controller.sync()  # every change read; each Workload stored once, with its admission
        assert (steps.steps - before[0], steps.changes - before[1], steps.writes - before[2]) == (1, len(waiting), 2)
        assert sum(steps.phases.values()) == pytest.approx(steps.seconds)
        assert all(steps.phases[p] >= 0 for p in PHASES)
        controller.sync()  # nothing new but its own writes, passed over
        assert steps.steps - before[0] == 2 and steps.writes - before[2] == 2
    finally:
        store.close()
