"""The queues' statuses take at most a tenth of the controller's time: after a write of them that took long (a
thousand queues whose figures all changed), the next waits ten times as long; a quick one keeps the 0.1 s pace.
Those whose figures changed are written in the order of the configuration's queues, as it was last read."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from flexq.controller.queue_counts import INTERVAL, SHARE, QueueCounts
from flexq.scheduler.scheduler import Scheduler
from flexq.store import Key, Store
from tests.support import CountedScheduler


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _SlowStore(Store):
    """A store where each write takes ``per_write`` seconds of the clock."""

    def __init__(self, path: Path, clock: _Clock, per_write: float) -> None:
        super().__init__(path)
        self.clock, self.per_write, self.writes = clock, per_write, 0
        self.written: list[str] = []

    def update(self, key: Key, obj: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        self.clock.now += self.per_write
        self.writes += 1
        self.written.append(key.name)
        return super().update(key, obj, **kwargs)


QUEUES = 30
# seconds each queue's status takes to write → seconds from a write's start to the next one's
CASES: dict[float, float] = {0.0001: INTERVAL, 0.001: 0.03 / SHARE, 0.01: 0.3 / SHARE}


@pytest.mark.parametrize("per_write", sorted(CASES))
def test_the_next_write_waits_in_proportion_to_the_last_ones_length(tmp_path: Path, per_write: float) -> None:
    clock = _Clock()
    store = _SlowStore(tmp_path / "flexq.db", clock, per_write)
    try:
        queues = [store.create(Key("kueue.x-k8s.io", "clusterqueues", "", f"cq-{i}"), {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": f"cq-{i}"},
            "spec": {"resourceGroups": []}}) for i in range(QUEUES)]
        counts = QueueCounts(store, clock)
        scheduler = cast(Scheduler, CountedScheduler())
        began = clock.now
        counts.write(scheduler, queues, [], [])  # every queue counted and written once
        assert store.writes == QUEUES
        counts.forget(Key("kueue.x-k8s.io", "clusterqueues", "", "cq-0"))  # its figures may have changed
        assert counts.due_in() == pytest.approx(began + CASES[per_write] - clock.now)
        clock.now = began + CASES[per_write] - 0.001
        assert counts.due_in() > 0
        counts.write(scheduler, queues, [], [])  # not yet due: nothing written
        assert store.writes == QUEUES
        clock.now = began + CASES[per_write]
        assert counts.due_in() == 0
    finally:
        store.close()


def _queue(store: Store, kind: str, name: str) -> dict[str, Any]:
    plural, spec = ("clusterqueues", {"resourceGroups": []}) if kind == "ClusterQueue" else ("localqueues", {
        "clusterQueue": "cq-0"})
    return store.create(Key("kueue.x-k8s.io", plural, "" if plural == "clusterqueues" else "default", name), {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind,
        "metadata": {"name": name, **({"namespace": "default"} if plural == "localqueues" else {})}, "spec": spec})


def test_changed_queues_are_written_in_the_configurations_order(tmp_path: Path) -> None:
    clock = _Clock()
    store = _SlowStore(tmp_path / "flexq.db", clock, 0.0)
    try:
        cqs = [_queue(store, "ClusterQueue", f"cq-{i}") for i in range(6)]
        lqs = [_queue(store, "LocalQueue", f"lq-{i}") for i in range(3)]
        counts = QueueCounts(store, clock)
        scheduler = cast(Scheduler, CountedScheduler())
        counts.write(scheduler, cqs, lqs, [])
        assert store.written == [f"cq-{i}" for i in range(6)] + [f"lq-{i}" for i in range(3)]

        def tampered(names: list[str], configured: list[dict[str, Any]]) -> list[str]:
            """Someone else writes these queues' statuses; what the counts write back, from ``configured``."""
            for name in names:
                key = Key("kueue.x-k8s.io", "clusterqueues" if name.startswith("cq") else "localqueues",
                          "" if name.startswith("cq") else "default", name)
                store.update(key, {**store.get(key), "status": {"pendingWorkloads": 7}}, subresource="status")
                counts.forget(key)
            store.written = []
            clock.now += 1
            counts.write(scheduler, configured, lqs, [])
            return store.written

        assert tampered(["lq-2", "cq-4", "cq-1", "lq-0"], cqs) == ["cq-1", "cq-4", "lq-0", "lq-2"]
        reordered = [cqs[5], _queue(store, "ClusterQueue", "cq-new"), *cqs[:5]]
        counts.recount()  # the configuration changed: a queue more, in another order
        assert tampered(["cq-0", "cq-5"], reordered) == ["cq-5", "cq-new", "cq-0"], "the new queue's first status"
    finally:
        store.close()
