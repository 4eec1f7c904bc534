"""Fluent builders for the scheduler's own objects, for tests of the scheduling core: a Workload, a ClusterQueue and a
Scheduler over them said with only what the test is about.

``workload("a").cpu(2).priority(5).build()`` is a Workload of one pod set ``main`` (one pod asking 2 cpus) in
namespace ``ns``, LocalQueue ``lq``, ClusterQueue ``cq``; ``cluster_queue("cq").flavor("f", cpu=4).cohort("co")``
gives a ClusterQueue one resource group whose flavors come in the order said; ``scheduler(cluster_queue(...), ...)``
a Scheduler with those queues and their flavors. Amounts are said in whole units (cpus, GiB as the test chooses) and
stored in thousandths, as the scheduler counts them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from flexq.scheduler import (
    ClusterQueueSpec,
    Config,
    FlavorSpec,
    PodSet,
    PreemptionPolicy,
    Quota,
    ResourceGroup,
    Scheduler,
    Workload,
)

MILLI = 1000
"""Thousandths in a unit: the scheduler counts every amount in thousandths."""


def milli(amount: float) -> int:
    """``amount`` whole units in the scheduler's thousandths (``1.5`` -> 1500)."""
    return round(amount * MILLI)


class WorkloadBuilder:
    """A Workload whose first pod set is ``main`` (one pod, one cpu) unless the test says other pod sets."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._namespace = "ns"
        self._queue = "lq"
        self._cluster_queue = "cq"
        self._main: dict[str, Any] = {"count": 1, "requests": {"cpu": MILLI}}
        self._podsets: list[PodSet] = []
        self._fields: dict[str, Any] = {}

    def namespace(self, namespace: str) -> WorkloadBuilder:
        self._namespace = namespace
        return self

    def queue(self, local_queue: str) -> WorkloadBuilder:
        """Its LocalQueue (default ``lq``)."""
        self._queue = local_queue
        return self

    def on(self, cluster_queue: str) -> WorkloadBuilder:
        """Its ClusterQueue (default ``cq``)."""
        self._cluster_queue = cluster_queue
        return self

    def cpu(self, each: float) -> WorkloadBuilder:
        """Each ``main`` pod's cpus (its only request)."""
        return self.requests(cpu=each)

    def requests(self, **each: float) -> WorkloadBuilder:
        """Each ``main`` pod's requests, replacing the default one cpu (``requests(cpu=1, memory=4)``)."""
        self._main["requests"] = {resource: milli(amount) for resource, amount in each.items()}
        return self

    def pods(self, count: int, *, at_least: int | None = None) -> WorkloadBuilder:
        """How many ``main`` pods, and the fewest it may be admitted with (partial admission)."""
        self._main["count"] = count
        if at_least is not None:
            self._main["min_count"] = at_least
        return self

    def podset(self, name: str, count: int, **each: float) -> WorkloadBuilder:
        """A pod set of its own (the first one said replaces ``main``), ``count`` pods each asking ``each``."""
        self._podsets.append(PodSet(name, count, {resource: milli(amount) for resource, amount in each.items()}))
        return self

    def priority(self, priority: int) -> WorkloadBuilder:
        return self._set(priority=priority)

    def created(self, at: float) -> WorkloadBuilder:
        return self._set(created=at)

    def uid(self, uid: str) -> WorkloadBuilder:
        return self._set(uid=uid)

    def replaces(self, name: str) -> WorkloadBuilder:
        """The workload it replaces (an elastic job's new slice)."""
        return self._set(replaces=name)

    def _set(self, **fields: Any) -> WorkloadBuilder:
        self._fields.update(fields)
        return self

    def build(self) -> Workload:
        """A new Workload each call (a scheduler changes the ones it holds)."""
        podsets = tuple(self._podsets) or (PodSet("main", **{**self._main, "requests": dict(self._main["requests"])}),)
        return Workload(self._namespace, self._name, self._queue, self._cluster_queue, podsets, **self._fields)


def workload(name: str, *, cpu: float | None = None, pods: int | None = None, priority: int | None = None,
             on: str | None = None) -> WorkloadBuilder:
    """A Workload named ``name``, to be said more of fluently; what most tests say (each pod's cpus, the pods, the
    priority, the ClusterQueue) may be said here."""
    made = WorkloadBuilder(name)
    if cpu is not None:
        made.cpu(cpu)
    if pods is not None:
        made.pods(pods)
    if priority is not None:
        made.priority(priority)
    if on is not None:
        made.on(on)
    return made


class QueueBuilder:
    """A ClusterQueue with one resource group: the flavors in the order said, each with its quotas."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._flavors: dict[str, dict[str, Quota]] = {}
        self._fields: dict[str, Any] = {}

    @property
    def name(self) -> str:
        return self._name

    @property
    def flavor_names(self) -> tuple[str, ...]:
        return tuple(self._flavors)

    def flavor(self, name: str, *, borrowing: float | None = None, lending: float | None = None,
               **nominal: float) -> QueueBuilder:
        """A flavor (after those said before) with each resource's nominal quota (``flavor("f", cpu=4)``) and, where
        said, the borrowing and lending limits of each of them."""
        self._flavors[name] = {resource: Quota(milli(amount), None if borrowing is None else milli(borrowing),
                                               None if lending is None else milli(lending))
                               for resource, amount in nominal.items()}
        return self

    def cohort(self, cohort: str) -> QueueBuilder:
        return self._set(cohort=cohort)

    def checks(self, *names: str) -> QueueBuilder:
        """AdmissionChecks that apply to every flavor."""
        return self._set(checks=tuple((name, None) for name in names))

    def preempt(self, *, within: PreemptionPolicy | None = None, reclaim: PreemptionPolicy | None = None,
                borrow: PreemptionPolicy | None = None) -> QueueBuilder:
        """Its preemption: within the ClusterQueue, reclaiming within its cohort, borrowing within its cohort."""
        policies = {"within_cluster_queue": within, "reclaim_within_cohort": reclaim, "borrow_within_cohort": borrow}
        return self._set(**{key: policy for key, policy in policies.items() if policy is not None})

    def with_(self, **fields: Any) -> QueueBuilder:
        """Any other field of :class:`ClusterQueueSpec`, by its name."""
        return self._set(**fields)

    def _set(self, **fields: Any) -> QueueBuilder:
        self._fields.update(fields)
        return self

    def spec(self) -> ClusterQueueSpec:
        covered: dict[str, None] = {}
        for quotas in self._flavors.values():
            covered.update(dict.fromkeys(quotas))
        quotas = {(flavor, resource): per.get(resource, Quota(0))
                  for flavor, per in self._flavors.items() for resource in covered}
        groups = (ResourceGroup(tuple(covered), tuple(self._flavors), quotas),) if self._flavors else ()
        return replace(ClusterQueueSpec(self._name, groups=groups), **self._fields)


def cluster_queue(name: str = "cq") -> QueueBuilder:
    """A ClusterQueue named ``name``, its flavors and policies to be said fluently."""
    return QueueBuilder(name)


def scheduler(*queues: QueueBuilder, instant_eviction: bool = False, flavors: Iterable[FlavorSpec] = (),
              **config: Any) -> Scheduler:
    """A Scheduler over ``queues``, every flavor they name a plain :class:`FlavorSpec` unless given in ``flavors``;
    ``config`` sets other fields of :class:`Config` (``race=True``, ``check_retry_delay={...}``)."""
    given = {flavor.name: flavor for flavor in flavors}
    named = {name: given.get(name, FlavorSpec(name)) for queue in queues for name in queue.flavor_names}
    specs = {queue.name: queue.spec() for queue in queues}
    return Scheduler(Config({**given, **named}, specs, {}, **config), instant_eviction=instant_eviction)
