"""A queue's status written in a controller step whose writes were then undone (the database rolled the step back,
a lease was lost under load) is written again once the controller has read everything back: the counts do not take
what they wrote for what the store holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from flexq.controller.queue_counts import QueueCounts
from flexq.scheduler.scheduler import Scheduler
from flexq.store import Key, Store
from tests.support import CountedScheduler

CQ = Key("kueue.x-k8s.io", "clusterqueues", "", "cq")


def _reserved(store: Store) -> str:
    return str(store.get(CQ)["status"]["flavorsReservation"][0]["resources"][0]["total"])


@pytest.mark.parametrize("undone", ["in the transaction", "by the write itself"])
def test_figures_of_an_undone_write_are_written_again_after_a_recount(tmp_path: Path, undone: str) -> None:
    store = Store(tmp_path / "flexq.db")
    now = [1000.0]
    try:
        queue = store.create(CQ, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                                  "metadata": {"name": "cq"}, "spec": {"resourceGroups": [{
                                      "coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
                                          {"name": "cpu", "nominalQuota": "100"}]}]}]}})
        counts = QueueCounts(store, lambda: now[0])
        counts.write(cast(Scheduler, CountedScheduler(23_000, nominal=100_000)), [queue], [], [])
        assert _reserved(store) == "23"
        now[0] += 1
        counts.recount()  # its figures changed: 34 cpu in use, written in a step that fails
        with pytest.raises(RuntimeError):
            if undone == "in the transaction":
                with store.transaction():
                    counts.write(cast(Scheduler, CountedScheduler(34_000, nominal=100_000)), [queue], [], [])
                    raise RuntimeError("a later write of the step failed")
            else:
                original = store.update

                def failing(*args: Any, **kwargs: Any) -> dict[str, Any]:
                    raise RuntimeError("the database refused the write")

                store.update = failing  # type: ignore[method-assign]
                try:
                    counts.write(cast(Scheduler, CountedScheduler(34_000, nominal=100_000)), [queue], [], [])
                finally:
                    store.update = original  # type: ignore[method-assign]
        assert _reserved(store) == "23", "the step's writes were undone"
        now[0] += 1
        counts.recount()  # the controller reads everything back and counts again
        counts.write(cast(Scheduler, CountedScheduler(34_000, nominal=100_000)), [queue], [], [])
        assert _reserved(store) == "34"
    finally:
        store.close()
