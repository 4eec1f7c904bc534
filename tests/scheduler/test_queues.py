"""The pending queues, as tables: Kueue's order, workloads set aside and woken, StrictFIFO's blocked head, and
what an event looks like once written."""

from __future__ import annotations

import copy
import random

import pytest

from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.model import Workload, WorkloadState
from flexq.scheduler.queues import QueueManager
from tests.support import cluster_queue, scheduler, workload


def _wl(name: str, cq: str = "cq", priority: int = 0, created: float = 0.0) -> Workload:
    return workload(name, priority=priority, on=cq).requests().created(created).build()


@pytest.mark.parametrize(("arrivals", "order"), [
    ([("a", 0, 1.0), ("b", 0, 2.0), ("c", 0, 0.5)], ["c", "a", "b"]),
    ([("a", 0, 1.0), ("b", 5, 2.0), ("c", -1, 0.0)], ["b", "a", "c"]),
    ([("a", 1, 1.0), ("b", 1, 1.0), ("c", 1, 1.0)], ["a", "b", "c"]),  # ties: in the order they came
])
def test_heads_come_in_kueues_order(arrivals: list[tuple[str, int, float]], order: list[str]) -> None:
    queues = QueueManager()
    workloads = {}
    for name, priority, created in arrivals:
        wl = _wl(name, priority=priority, created=created)
        workloads[wl.key] = wl
        queues.push(wl)
    assert queues.pending_count("cq") == len(arrivals)
    heads = []
    while (head := queues.head("cq", workloads)) is not None:
        heads.append(head.name)
        queues.discard(head)
    assert (heads, queues.pending_count("cq")) == (order, 0)


def test_set_aside_and_woken() -> None:
    queues = QueueManager()
    a, b, other = _wl("a", created=1.0), _wl("b", created=2.0), _wl("x", cq="other")
    workloads = {w.key: w for w in (a, b, other)}
    for wl in (a, b, other):
        queues.push(wl)
    queues.set_aside(a)
    assert [queues.queued(a), queues.aside(a), queues.aside(b), queues.aside(other)] == [True, True, False, False]
    assert (queues.head("cq", workloads), queues.pending_count("cq"), queues.pending_count("other")) == (b, 2, 1)
    queues.wake(["other"], workloads)
    assert queues.aside(a), "woken only by a change in its own queues"
    queues.wake(["cq"], workloads)
    assert [queues.aside(a), queues.head("cq", workloads)] == [False, a]
    queues.set_aside(a)
    queues.discard(a)
    assert [queues.queued(a), queues.pending_count("cq"), queues.queues()] == [False, 1, ["cq", "other"]]


def test_a_workload_set_aside_returns_only_if_still_pending() -> None:
    queues = QueueManager()
    done, waiting, gone = _wl("done"), _wl("waiting"), _wl("gone")
    for wl in (done, waiting, gone):
        queues.push(wl)
        queues.set_aside(wl)
    done.state = WorkloadState.FINISHED
    waiting.requeue_at = 5.0
    queues.wake(["cq"], {done.key: done, waiting.key: waiting})
    assert [queues.queued(w) for w in (done, waiting, gone)] == [False, False, False]


def test_blocked_until_woken() -> None:
    queues = QueueManager()
    a = _wl("a")
    queues.push(a)
    queues.block("cq")
    assert [queues.blocked("cq"), queues.blocked("other")] == [True, False]
    queues.wake(["other"], {a.key: a})
    assert queues.blocked("cq")
    queues.wake(["cq"], {a.key: a})
    assert [queues.blocked("cq"), queues.queued(a)] == [False, True]


@pytest.mark.parametrize(("arrival", "unblocks"), [
    (("higher", 5, 9.0), True),     # a higher priority: the new head
    (("earlier", 0, 0.5), True),    # queued before the head (a workload requeued with its first queue time)
    (("later", 0, 2.0), False),     # behind the head: the queue stays blocked on it
    (("lower", -1, 0.0), False),
])
def test_a_workload_that_comes_before_a_blocked_head_unblocks_its_queue(arrival: tuple[str, int, float],
                                                                       unblocks: bool) -> None:
    queues = QueueManager()
    head = _wl("head", created=1.0)
    queues.push(head)
    queues.block("cq")
    name, priority, created = arrival
    new = _wl(name, priority=priority, created=created)
    queues.push(new)
    assert queues.blocked("cq") is not unblocks
    assert queues.head("cq", {w.key: w for w in (head, new)}) is (new if unblocks else head)


@pytest.mark.parametrize("seed", range(20))
def test_waking_many_queues_at_once_is_waking_each(seed: int) -> None:
    """A cohort tree's queues woken together (most of them holding nothing back: those that do are looked up) end as
    woken one by one: the same workloads back in line, in the same order, the same heads unblocked."""
    rng = random.Random(seed)
    names = [f"q{i}" for i in range(12)]
    made = [_wl(f"w{i}", cq=rng.choice(names), priority=rng.randrange(3), created=float(rng.randrange(4)))
            for i in range(rng.randrange(1, 16))]
    workloads = {w.key: w for w in made}
    aside = {w.key for w in made if rng.random() < 0.6}
    blocked = {q for q in names if rng.random() < 0.2}
    named = rng.sample(names, rng.randrange(1, len(names) + 1))
    together, each = QueueManager(), QueueManager()
    for queues in (together, each):
        for wl in made:
            queues.push(wl)
        for wl in made:
            if wl.key in aside:
                queues.set_aside(wl)
        for q in blocked:
            queues.block(q)
    together.wake(named, workloads)
    for q in named:
        each.wake([q], workloads)
    assert [(q, together.blocked(q), [w.key for w in together.in_line(q, workloads)],
             sorted(w.key for w in made if w.cluster_queue == q and together.aside(w))) for q in names] == [
        (q, each.blocked(q), [w.key for w in each.in_line(q, workloads)],
         sorted(w.key for w in made if w.cluster_queue == q and each.aside(w))) for q in names]


def test_the_same_workload_queued_again_counts_once() -> None:
    queues = QueueManager()
    a = _wl("a")
    queues.push(a)
    queues.push(a)
    assert (queues.pending_count("cq"), queues.pending_count("missing")) == (1, 0)


@pytest.mark.parametrize(("event", "json"), [
    (Event(1.5, EventKind.PENDING, "ns/w", "cq", "why"),
     [("t", 1.5), ("event", "Pending"), ("workload", "ns/w"), ("clusterQueue", "cq"), ("reason", "why")]),
    (Event(2.0, EventKind.ADMITTED, "ns/w", "cq", "ok", {"main": {"cpu": "a"}}, {"variant": "v"}),
     [("t", 2.0), ("event", "Admitted"), ("workload", "ns/w"), ("clusterQueue", "cq"),
      ("podSets", {"main": {"cpu": "a"}}), ("reason", "ok"), ("variant", "v")]),
    (Event(3.0, EventKind.SCALED_DOWN, "", "", "idle", extra={"pool": "p", "nodes": 0}),
     [("t", 3.0), ("event", "ScaledDown"), ("workload", ""), ("clusterQueue", ""), ("reason", "idle"),
      ("pool", "p"), ("nodes", 0)]),
])
def test_event_json_keeps_its_key_order(event: Event, json: list[tuple[str, object]]) -> None:
    assert list(event.to_json().items()) == json


def test_event_kinds() -> None:
    capacity = {k.value for k in EventKind if k.capacity}
    warning = {k.value for k in EventKind if k.warning}
    assert capacity == {"Started", "Unschedulable", "ScaledUp", "ScaledDown", "NodesUnavailable", "NodesExpired",
                        "NodeDeleted", "NodeReplaced", "SliceReleased", "SliceRepaired", "Fallback",
                        "ProvisioningRequest", "RaceWon", "NodeNotReady", "NodeReady", "NodeTainted"}
    assert warning == {"NodesUnavailable", "Fallback", "Unschedulable", "NodesExpired", "NodeDeleted", "NodeNotReady",
                       "NodeTainted"}


def test_the_line_is_the_order_heads_would_be_tried() -> None:
    """``in_line``: the pending workloads in the order the queue's heads come once its set-aside ones are woken (ties
    of set-aside workloads after the active ones), without those that hold quota, and changing nothing."""
    queues = QueueManager()
    arrivals = [("a", 0, 1.0), ("b", 5, 2.0), ("c", 0, 0.5), ("d", 5, 2.0), ("e", 0, 1.0), ("f", 9, 0.0),
                ("g", 0, 1.0)]
    workloads = {}
    for name, priority, created in arrivals:
        wl = _wl(name, priority=priority, created=created)
        workloads[wl.key] = wl
        queues.push(wl)
    elsewhere = _wl("x", cq="other")
    workloads[elsewhere.key] = elsewhere
    queues.push(elsewhere)
    for name in ("b", "e"):
        queues.set_aside(workloads[f"ns/{name}"])
    workloads["ns/f"].state = WorkloadState.ADMITTED  # its stale entry is passed over
    line = [wl.name for wl in queues.in_line("cq", workloads)]
    assert line == ["d", "b", "c", "a", "g", "e"]
    assert [wl.name for wl in queues.in_line("cq", workloads)] == line, "reading the line changes nothing"
    assert queues.in_line("none", workloads) == []
    queues.wake(["cq"], workloads)
    heads = []
    while (head := queues.head("cq", workloads)) is not None:
        heads.append(head.name)
        queues.discard(head)
    assert heads == line


def test_a_copy_goes_on_as_the_queues_would_and_apart_from_them() -> None:
    queues = QueueManager()
    workloads = {wl.key: wl for wl in (_wl(n, created=float(i)) for i, n in enumerate("abcde"))}
    for wl in workloads.values():
        queues.push(wl)
    queues.set_aside(workloads["ns/a"])
    queues.push(workloads["ns/b"])  # queued again: its first entry is stale, in the copy too
    queues.block("cq")
    copied = copy.deepcopy(queues)
    workloads["ns/f"] = _wl("f", created=9.0)

    def drained(q: QueueManager) -> list[str]:
        q.wake(["cq"], workloads)
        q.push(workloads["ns/f"])
        heads = []
        while (head := q.head("cq", workloads)) is not None:
            heads.append(head.name)
            q.discard(head)
        return heads

    assert drained(copied) == ["a", "b", "c", "d", "e", "f"]
    assert (queues.blocked("cq"), queues.aside(workloads["ns/a"]), queues.pending_count("cq")) == (True, True, 5)
    assert drained(queues) == ["a", "b", "c", "d", "e", "f"]


@pytest.mark.parametrize(("uids", "first"), [(("uid-2", "uid-1"), "b"), (("uid-1", "uid-2"), "a"), (("", ""), "a")])
def test_a_cycle_s_heads_alike_in_all_else_go_in_the_order_of_their_uids(uids: tuple[str, str], first: str) -> None:
    # Kueue's order of a cycle's entries: borrowing, priority, queue time, then the UID (flexq: the key where a
    # workload has none). Both heads borrow the lender's 2 cpus, at the same priority and time: one gets them.
    sched = scheduler(*(cluster_queue(name).flavor("f", cpu=cpu).cohort("co") for name, cpu in
                        (("qa", 0), ("qb", 0), ("lender", 2))))
    heads = {name: workload(name, cpu=2, on=f"q{name}").uid(uid).build() for name, uid in zip("ab", uids, strict=True)}
    for wl in heads.values():
        sched.add(wl, 0.0)
    sched.cycle(1.0)
    assert {name for name, wl in heads.items() if wl.admission is not None} == {first}
