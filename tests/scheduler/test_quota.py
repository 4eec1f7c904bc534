from __future__ import annotations

import pytest

from flexq.api.quantity import parse_quantity
from flexq.scheduler.flavorassigner import format_amount
from flexq.scheduler.model import ClusterQueueSpec, CohortSpec, Quota, ResourceGroup
from flexq.scheduler.quota import QuotaTree

FR = ("f", "cpu")


def _cq(name: str, nominal: int, cohort: str | None = None, borrowing: int | None = None,
        lending: int | None = None) -> ClusterQueueSpec:
    return ClusterQueueSpec(name, cohort, (ResourceGroup(("cpu",), ("f",), {FR: Quota(nominal, borrowing, lending)}),))


@pytest.mark.parametrize(("resource", "text"), [
    ("cpu", "250m"), ("cpu", "1"), ("cpu", "1500m"), ("cpu", "3k"), ("memory", "1Gi"), ("memory", "256Mi"),
    ("memory", "1536Mi"), ("google.com/tpu", "16"), ("google.com/tpu", "1G"), ("pods", "0")])
def test_format_amount_round_trips(resource: str, text: str) -> None:
    assert format_amount(resource, parse_quantity(text).milli()) == text


def test_lone_queue() -> None:
    tree = QuotaTree([_cq("a", 10, borrowing=5)])
    assert tree.potential("a", FR) == 10, "a ClusterQueue without a cohort cannot borrow"
    tree.add("a", {FR: 4})
    assert tree.available("a", FR) == 6


def test_cohort_borrowing_and_limits() -> None:
    tree = QuotaTree([_cq("a", 10, "co", borrowing=3), _cq("b", 10, "co", lending=4)])
    # b keeps 6 for itself; a may borrow at most 3 of what b lends (4).
    assert tree.potential("a", FR) == 13
    assert tree.potential("b", FR) == 20
    tree.add("a", {FR: 12})
    assert tree.borrowing("a", FR)
    assert tree.available("a", FR) == 1
    assert tree.available("b", FR) == 8
    assert tree.borrow_level("a", FR, 1) == (1, False)
    tree.remove("a", {FR: 12})
    assert tree.available("a", FR) == 13
    assert all(n.usage.get(FR, 0) == 0 for n in [*tree.queues.values(), *tree.cohorts.values()])


def test_hierarchy() -> None:
    cohorts = [CohortSpec("root"), CohortSpec("left", "root"), CohortSpec("right", "root")]
    tree = QuotaTree([_cq("a", 4, "left"), _cq("b", 4, "right")], cohorts)
    assert tree.root("a") is tree.root("b")
    assert tree.height(tree.cohorts["root"]) == 2
    tree.add("b", {FR: 6})
    assert tree.available("a", FR) == 2
    assert tree.borrow_level("a", FR, 3) == (0, True), "within its own quota: no borrowing"
    assert tree.borrow_level("a", FR, 5) == (2, False), "borrowing reaches the root"


def test_cycles_in_cohort_parents_are_broken() -> None:
    tree = QuotaTree([_cq("a", 4, "x")], [CohortSpec("x", "y"), CohortSpec("y", "x")])
    assert tree.root("a").name in ("x", "y")
