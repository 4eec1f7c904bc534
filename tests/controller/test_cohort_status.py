"""A Cohort object's ``status.fairSharing`` as Kueue's cohort reconciler writes it: the weighted share rounded up
while fair sharing is on (2^63-1 for an infinite one), and no ``fairSharing`` at all while it is off, a stale one
taken out."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from flexq.controller.queue_counts import QueueCounts
from flexq.scheduler.scheduler import Scheduler
from flexq.store import Key, Store


class _Shares:
    """The scheduler as the counts see it: no workloads, and the cohorts' weighted shares given (None: fair sharing
    off)."""

    def __init__(self, cohorts: dict[str, float] | None) -> None:
        self.cohorts = cohorts

    def workload(self, key: str) -> None:
        return None

    def workload_keys(self) -> list[str]:
        return []

    def weighted_shares(self) -> tuple[dict[str, float], dict[str, float]] | None:
        return None if self.cohorts is None else ({}, self.cohorts)


CASES: dict[str, tuple[dict[str, float] | None, dict[str, Any], dict[str, Any]]] = {
    "rounded up": ({"org": 83.4}, {}, {"fairSharing": {"weightedShare": 84}}),
    "a cohort not borrowing": ({}, {}, {"fairSharing": {"weightedShare": 0}}),
    "weight 0 and borrowing": ({"org": float("inf")}, {}, {"fairSharing": {"weightedShare": 2**63 - 1}}),
    "fair sharing off": (None, {"fairSharing": {"weightedShare": 7}, "other": 1}, {"other": 1}),
}


@pytest.mark.parametrize("case", CASES)
def test_a_cohorts_status_says_its_weighted_share_under_fair_sharing_only(tmp_path: Path, case: str) -> None:
    shares, before, after = CASES[case]
    store = Store(tmp_path / "flexq.db")
    try:
        key = Key("kueue.x-k8s.io", "cohorts", "", "org")
        cohort = store.create(key, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort",
                                    "metadata": {"name": "org"}, "spec": {}})
        if before:
            cohort = store.update(key, {**cohort, "status": before}, subresource="status")
        QueueCounts(store, lambda: 1000.0).write(cast(Scheduler, _Shares(shares)), [], [], [], [cohort])
        assert store.get(key).get("status", {}) == after
    finally:
        store.close()
