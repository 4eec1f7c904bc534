"""What the scheduler holds: one record, shared by the parts that act on it.

:class:`SchedulerState` is the bottom of the scheduler. Each field is described here, once; the parts
(:mod:`~flexq.scheduler.holdings`, :mod:`~flexq.scheduler.racing`, :mod:`~flexq.scheduler.transitions`,
:mod:`~flexq.scheduler.cycle`) read and change it, and :class:`~flexq.scheduler.scheduler.Scheduler` owns it and
them. Nothing here acts: the record has no methods beyond a fresh quota tree for a new configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from flexq.scheduler.domains import TopologyNode
from flexq.scheduler.events import Event
from flexq.scheduler.flavorassigner import Assignment
from flexq.scheduler.model import Admission, FlavorResource, Workload
from flexq.scheduler.phrases import Text
from flexq.scheduler.preemption import Target
from flexq.scheduler.queue_config import Config
from flexq.scheduler.queues import QueueManager
from flexq.scheduler.quota import QuotaTree

__all__ = ["MigrationCheck", "SchedulerState", "Stuck"]

MigrationCheck = Callable[[Workload, Workload, float], Text | None]
"""Asked before a running workload migrates to a variant's flavor (parent, variant, now); a reason refuses it."""

Stuck = tuple[tuple[dict[FlavorResource, int], ...], tuple[tuple[FlavorResource, int], ...]]
"""What an assignment that found no way in read, where it read of its cohort tree only the nodes from its queue up to
the root: their usage then, from the queue up, and the preemption questions it asked ((flavor, resource), amount),
each answered from the queue alone (:func:`~flexq.scheduler.preemption.nobody_locally`)."""


@dataclass(slots=True, eq=False)
class SchedulerState:
    """The scheduler's state: the configuration and quota tree, the workloads and their queues, and the
    bookkeeping of retries, fallbacks, slices and races."""

    config: Config
    """The queue configuration (replaced whole by :meth:`~flexq.scheduler.scheduler.Scheduler.configure`)."""
    tree: QuotaTree
    """Quota and usage by ClusterQueue and cohort, built from :attr:`config` (rebuilt with it)."""
    instant_eviction: bool = False
    """Preempted workloads stop at once, in the cycle that preempts them, instead of when a driver says so."""
    workloads: dict[str, Workload] = field(default_factory=dict)
    """Every workload held, racing variants included, by key, in the order they were added."""
    queues: QueueManager = field(default_factory=QueueManager)
    """The pending workloads in line, per ClusterQueue."""
    holding: dict[str, dict[str, Workload]] = field(default_factory=dict)
    """The workloads holding quota, by ClusterQueue (what preemption chooses victims from)."""
    last_assignment: dict[str, Assignment] = field(default_factory=dict)
    """The flavor assignment last found for each workload nominated."""
    failed: dict[tuple[object, ...], tuple[int, Assignment, Stuck | None]] = field(default_factory=dict)
    """Assignments that found no way in, by (queue, workload shape), valid while their tree is unchanged, or, where
    they read only their queue's path to the root (:data:`Stuck`), while that path's usage is unchanged and each
    question asked is still answered from the queue alone."""
    fitted: dict[tuple[object, ...], Assignment] = field(default_factory=dict)
    """The last assignment that fitted, by (queue, allowed flavors, workload shape), where it is
    :func:`~flexq.scheduler.flavorassigner.reusable`: given again while it :func:`fits again
    <flexq.scheduler.flavorassigner.fits_again>`. Cleared with :attr:`failed`."""
    requeues: dict[str, float] = field(default_factory=dict)
    """Workloads waiting out a retry delay: key -> when they queue again."""
    second_pass: dict[str, tuple[float, int]] = field(default_factory=dict)
    """Workloads whose delayed topology request waits for its second pass: key -> (when, which attempt)
    (:mod:`flexq.scheduler.second_pass`)."""
    requeue_order: dict[str, float] = field(default_factory=dict)
    """Where a workload waiting out a delay takes its place in the queue when it comes back (default: then)."""
    unavailable: dict[str, tuple[float, str]] = field(default_factory=dict)
    """Flavors that could not deliver nodes: flavor -> (until, why). Skipped by the flavor search."""
    last_targets: dict[str, list[Target]] = field(default_factory=dict)
    """The preemption targets last chosen for each workload (issued, or already being evicted)."""
    replaced_by: dict[str, str] = field(default_factory=dict)
    """Workload slices waiting to replace another: the replaced slice's key -> the replacement's."""
    variants: dict[str, list[str]] = field(default_factory=dict)
    """Racing workloads: the parent's key -> its variants' keys, most preferred first."""
    start_decides: bool = False
    """Set by a capacity driver: a variant wins when its pods start (``settle``), not when admitted."""
    migration_check: MigrationCheck | None = None
    """Beyond Kueue: asked before a running workload migrates to a variant's flavor (parent, variant, now); a
    reason refuses it (the variant is withdrawn)."""
    carrier: dict[str, str] = field(default_factory=dict)
    """Racing workloads: the one (a variant, or the parent once it runs) whose quota holds the pod sets the
    variants share (the guide's Ray head on ``default-cpu``): the others reserve only what they race for."""
    full: dict[str, Admission] = field(default_factory=dict)
    """Variants holding quota without the shared part: their admission as it would be with it."""
    deferred: list[Event] = field(default_factory=list)
    """Events of races started outside a scheduling pass (a configuration change), returned by the next."""
    gated: set[str] = field(default_factory=set)
    """Variants whose preemption targets were held back this cycle (``Racing.may_preempt``)."""
    set_aside: int = 0
    """Variants set aside so far: a cycle that set one aside has a new head to try in that queue."""
    stops_due: bool = False
    """Queues were stopped since the last pass: their workloads that hold quota are looked at."""
    cut_short: bool = False
    """The last ``schedule`` ran its ``max_cycles`` and the last of them still decided something."""
    nodes: Callable[[], Iterable[TopologyNode]] | None = None
    """Set by a capacity driver: the cluster's nodes, which topology-aware flavors place pods on."""

    @staticmethod
    def tree_for(config: Config) -> QuotaTree:
        """An empty quota tree for ``config``."""
        return QuotaTree(config.cluster_queues.values(), config.cohorts.values())
