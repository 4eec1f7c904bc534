"""Which waiting workloads are looked at again when a workload gives back the nodes a topology-aware flavor placed
it on, in a ClusterQueue of another cohort tree (or of none).

Kueue v0.19 requeues inadmissible workloads when a workload finishes, is evicted or is deleted through
``QueueAssociatedInadmissibleWorkloadsAfter`` (``pkg/controller/core/workload_controller.go``), which asks
``notifyRetryInadmissible`` (``pkg/cache/queue/inadmissible_workloads.go``) for the workload's own ClusterQueue: that
ClusterQueue alone where it has no cohort, else its whole cohort tree. Nothing requeues the other ClusterQueues that
use the same topology: the TAS node handler (``pkg/controller/tas/resource_flavor.go``) requeues every active
ClusterQueue on a node change only, and the pod-usage controller (``non_tas_usage_controller.go``) only when a pod
outside TAS frees a node. So a BestEffortFIFO workload set aside for its placement
(``TopologyPlacementFailed``'s message) waits until something touches its own cohort tree or the nodes.

A StrictFIFO ClusterQueue keeps no inadmissible workloads: ``RequeueIfNotPresent`` puts its head straight back into
the heap (``immediate``, ``pkg/cache/queue/cluster_queue.go``) and every scheduling cycle tries it again, so once the
other queue's workload has given its nodes back the head is admitted at the next cycle.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from flexq.scheduler.domains import HOSTNAME
from flexq.scheduler.model import FlavorSpec, Strategy, WorkloadState
from flexq.scheduler.scheduler import Scheduler
from tests.support.tas import node, tas_job, tas_queue, tas_scheduler

FLAVOR = FlavorSpec("tas-default", {}, topology="tas-single-level", levels=(HOSTNAME,))
OTHER = FlavorSpec("tas-other", {"pool": "other"}, topology="tas-other", levels=(HOSTNAME,))
PLACEMENT_FAILED = ('couldn\'t assign flavors to pod set main: topology "tas-single-level" doesn\'t allow to fit any '
                    'of 2 pod(s). Total nodes: 1; excluded: resource "cpu": 1')

GIVE_BACK: dict[str, Callable[[Scheduler, str, float], object]] = {
    "finished": lambda s, key, now: s.finish(key, now),
    "deleted": lambda s, key, now: s.delete(key, now),
    "deactivated": lambda s, key, now: s.deactivate(key, now),
}


def _two_queues(strategy: Strategy, cohort: str = "") -> Scheduler:
    """One host of two cpus under a topology-aware flavor; queues a and b (each four cpus of it, ``cohort`` or none)
    share it; b1 (queue b) holds both cpus, a1 (queue a) waits for them."""
    s = tas_scheduler([node("x1", {HOSTNAME: "x1"}, 2)], [FLAVOR],
                      [tas_queue(name, [FLAVOR.name], 4, strategy=strategy, cohort=cohort) for name in ("a", "b")])
    s.add(tas_job("b1", 2, 1, HOSTNAME, cq="b"), 0.0)
    s.schedule(0.0)
    s.add(tas_job("a1", 2, 1, HOSTNAME, cq="a"), 1.0)
    s.schedule(1.0)
    assert [s.held("default/b1").state, s.held("default/a1").state] == [WorkloadState.ADMITTED, WorkloadState.PENDING]
    assert s.held("default/a1").pending_reason == PLACEMENT_FAILED
    return s


@pytest.mark.parametrize("how", GIVE_BACK)
def test_a_best_effort_workload_set_aside_for_its_placement_waits_for_its_own_cohort_tree(how: str) -> None:
    s = _two_queues(Strategy.BEST_EFFORT_FIFO)
    a1 = s.held("default/a1")
    assert s.aside(a1)
    GIVE_BACK[how](s, "default/b1", 2.0)
    s.schedule(2.0)
    assert a1.state is WorkloadState.PENDING and s.aside(a1), "only queue b's cohort tree (b alone) looks again"
    s.nodes_changed()  # Kueue's TAS node handler: a node event requeues every ClusterQueue
    s.schedule(3.0)
    assert a1.state is WorkloadState.ADMITTED


@pytest.mark.parametrize("how", GIVE_BACK)
def test_a_best_effort_workload_in_the_same_cohort_is_looked_at_again(how: str) -> None:
    s = _two_queues(Strategy.BEST_EFFORT_FIFO, cohort="shared")
    GIVE_BACK[how](s, "default/b1", 2.0)
    s.schedule(2.0)
    assert s.held("default/a1").state is WorkloadState.ADMITTED


@pytest.mark.parametrize("how", GIVE_BACK)
def test_a_strict_fifo_head_is_tried_again_once_another_queue_gives_its_nodes_back(how: str) -> None:
    s = _two_queues(Strategy.STRICT_FIFO)
    GIVE_BACK[how](s, "default/b1", 2.0)
    s.schedule(2.0)
    a1 = s.held("default/a1")
    assert a1.state is WorkloadState.ADMITTED
    assert a1.admission is not None and a1.admission.cluster_queue == "a"


def test_a_strict_fifo_head_waits_for_the_nodes_of_its_own_topology() -> None:
    """Nodes of another topology freed: nothing changed for the head, which still waits; its own topology's nodes
    freed, it is admitted."""
    main = FlavorSpec("tas-main", {"pool": "main"}, topology="tas-single-level", levels=(HOSTNAME,))
    s = tas_scheduler([node("x1", {HOSTNAME: "x1", "pool": "main"}, 2),
                       node("y1", {HOSTNAME: "y1", "pool": "other"}, 2)], [main, OTHER],
                      [tas_queue("a", [main.name], 4, strategy=Strategy.STRICT_FIFO),
                       tas_queue("b", [main.name], 4), tas_queue("c", [OTHER.name], 4)])
    for name, cq in (("b1", "b"), ("c1", "c")):
        s.add(tas_job(name, 2, 1, HOSTNAME, cq=cq), 0.0)
    s.schedule(0.0)
    s.add(tas_job("a1", 2, 1, HOSTNAME, cq="a"), 1.0)
    s.schedule(1.0)
    a1 = s.held("default/a1")
    assert a1.state is WorkloadState.PENDING
    s.finish("default/c1", 2.0)
    s.schedule(2.0)
    assert a1.state is WorkloadState.PENDING
    s.finish("default/b1", 3.0)
    s.schedule(3.0)
    assert a1.state is WorkloadState.ADMITTED
