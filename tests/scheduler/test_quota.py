from __future__ import annotations

import random

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


def _three_levels() -> QuotaTree:
    """root (own quota 2) > left > {a (6, lends 2, borrows 3), b (4)}, and root > c (5); a uses 5, b 3, c 1."""
    root = CohortSpec("root", None, (ResourceGroup(("cpu",), ("f",), {FR: Quota(2)}),))
    tree = QuotaTree([_cq("a", 6, "left", borrowing=3, lending=2), _cq("b", 4, "left"), _cq("c", 5, "root")],
                     [root, CohortSpec("left", "root")])
    for cq, used in (("a", 5), ("b", 3), ("c", 1)):
        tree.add(cq, {FR: used})
    return tree


QUERIES = [
    ("subtree", lambda t: {n: node.subtree for n, node in {**t.queues, **t.cohorts}.items()},
     {"a": {FR: 6}, "b": {FR: 4}, "c": {FR: 5}, "left": {FR: 6}, "root": {FR: 13}}),
    ("usage", lambda t: {n: node.usage for n, node in {**t.queues, **t.cohorts}.items()},
     {"a": {FR: 5}, "b": {FR: 3}, "c": {FR: 1}, "left": {FR: 4}, "root": {FR: 5}}),
    ("guaranteed", lambda t: {n: t.queues[n].guaranteed(FR) for n in "abc"}, {"a": 4, "b": 0, "c": 0}),
    ("available", lambda t: {n: t.available(n, FR) for n in "abc"}, {"a": 4, "b": 8, "c": 8}),
    ("potential", lambda t: {n: t.potential(n, FR) for n in "abc"}, {"a": 9, "b": 13, "c": 13}),
    ("nominal and usage", lambda t: [(t.nominal(n, FR), t.usage(n, FR)) for n in "abc"], [(6, 5), (4, 3), (5, 1)]),
    ("borrowing", lambda t: [t.borrowing("a", FR, 1), t.borrowing("a", FR, 2), t.borrowing("b", FR, 1),
                             t.borrowing("b", FR, 2), t.borrowing("c", FR)], [False, True, False, True, False]),
    ("local available", lambda t: [QuotaTree.local_available(t.queues[n], FR) for n in "abc"], [0, 0, 0]),
    ("height", lambda t: [t.height(t.cohorts["left"]), t.height(t.cohorts["root"])], [1, 2]),
    ("borrow level", lambda t: [t.borrow_level("b", FR, v) for v in (1, 2, 3, 9)] + [t.borrow_level("c", FR, 8)],
     [(0, True), (1, True), (2, False), (2, False), (2, False)]),
    ("within nominal", lambda t: [QuotaTree.within_nominal(t.cohorts["left"], [FR]),
                                  QuotaTree.within_nominal(t.queues["a"], [FR]),
                                  QuotaTree.within_nominal(t.queues["a"], [FR, ("f", "gpu")])], [True, True, True]),
    ("members", lambda t: [sorted(t.members(n)) for n in "ac"], [["a", "b", "c"]] * 2),
    ("same tree", lambda t: [t.same_tree("a", "c"), t.root("a").name], [True, "root"]),
]


@pytest.mark.parametrize(("query", "want"), [(q[1], q[2]) for q in QUERIES], ids=[q[0] for q in QUERIES])
def test_three_level_tree(query: object, want: object) -> None:
    assert callable(query)
    assert query(_three_levels()) == want


def test_usage_within_a_guarantee_stays_below() -> None:
    tree = _three_levels()
    tree.remove("a", {FR: 3})  # a holds 2 of its guaranteed 4: nothing of it reaches left
    assert [tree.usage("a", FR), tree.cohorts["left"].usage[FR], tree.cohorts["root"].usage[FR]] == [2, 3, 4]
    assert [QuotaTree.local_available(tree.queues["a"], FR), tree.available("a", FR)] == [2, 7]
    tree.add("b", {FR: 4})  # b borrows 3 beyond its 4
    assert [tree.cohorts["left"].usage[FR], tree.available("c", FR), tree.borrowing("b", FR)] == [7, 5, True]
    assert not QuotaTree.within_nominal(tree.queues["b"], [FR])
    assert not QuotaTree.within_nominal(tree.cohorts["left"], [FR])


def test_every_change_bumps_the_roots_version() -> None:
    tree = _three_levels()
    before = tree.root("a").version
    with tree.trial() as trial:
        trial.remove("c", {FR: 1})
        assert tree.usage("c", FR) == 0
        mark = trial.mark()
        trial.add("a", {FR: 1})
        trial.undo(mark)
        assert (tree.usage("a", FR), tree.usage("c", FR)) == (5, 0)
    assert (tree.usage("a", FR), tree.usage("c", FR)) == (5, 1)
    assert tree.root("a").version == before + 4


def test_a_lone_queue_never_borrows() -> None:
    tree = QuotaTree([_cq("a", 10)])
    tree.add("a", {FR: 12})
    assert (tree.borrow_level("a", FR, 1), tree.available("a", FR), tree.borrowing("a", FR)) == ((0, False), -2, True)


def test_the_borrow_level_counts_what_a_queue_still_has_of_its_guarantee() -> None:
    tree = _three_levels()
    tree.remove("a", {FR: 3})  # a holds 2 of its guaranteed 4: 2 more are its own before it borrows from left
    assert QuotaTree.local_available(tree.queues["a"], FR) == 2
    assert [tree.borrow_level("a", FR, v) for v in (4, 5, 6, 12)] == [(0, True), (1, True), (2, False), (2, False)]


@pytest.mark.parametrize("seed", range(30))
def test_changes_made_together_leave_the_tree_as_one_at_a_time(seed: int) -> None:
    """add_all: queues' usages added or removed together, walked up once per cohort; the same tree as one add per
    queue, in cohorts of cohorts with lending limits, and every root touched gets a new version."""
    rng = random.Random(seed)
    def lending(nominal: int, limit: int) -> tuple[ResourceGroup, ...]:
        return (ResourceGroup(("cpu",), ("f",), {FR: Quota(nominal, None, limit)}),)

    cohorts = [CohortSpec("top"), CohortSpec("mid", "top", lending(2, rng.randint(0, 4))),
               CohortSpec("low", "mid", lending(rng.randint(0, 3), 1)), CohortSpec("side")]
    queues = [_cq(f"q{i}", rng.randint(0, 6), rng.choice(["top", "mid", "low", "side", None]),
                  rng.choice([None, rng.randint(0, 4)]), rng.choice([None, None, rng.randint(0, 6)]))
              for i in range(8)]
    together, one_by_one = QuotaTree(queues, cohorts), QuotaTree(queues, cohorts)
    for _ in range(6):
        changes = {q.name: {FR: rng.randint(0, 5), ("f", "mem"): rng.randint(0, 3)}
                   for q in rng.sample(queues, rng.randint(0, 5))}
        sign = rng.choice([1, -1])
        roots = {q: together.root(q).version for q in changes}
        together.add_all(changes, sign)
        for cq, usage in changes.items():
            one_by_one.add(cq, usage, sign)
        assert {name: dict(node.usage) for name, node in {**together.queues, **together.cohorts}.items()} == {
            name: dict(node.usage) for name, node in {**one_by_one.queues, **one_by_one.cohorts}.items()}
        assert all(together.root(q).version > version for q, version in roots.items())
