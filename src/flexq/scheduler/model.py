"""The scheduler's typed view of queues, flavors and workloads.

Amounts are integers in thousandths of a unit (``100m`` cpu is 100, ``1Gi`` is 1073741824000), so that
quota arithmetic is exact and fast. Specs are frozen; a :class:`Workload` carries mutable scheduling
state that only the scheduler and the controllers change.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Final, cast

from flexq.scheduler.phrases import Text

__all__ = [
    "Admission",
    "CheckState",
    "ClusterQueueSpec",
    "CohortSpec",
    "ConcurrentPolicy",
    "DelayedTopology",
    "FlavorResource",
    "FlavorSpec",
    "Fungibility",
    "Granular",
    "LabelSelector",
    "Mode",
    "NodeSelectorTerm",
    "PendingReason",
    "PodSet",
    "PodSetAssignment",
    "PodSetUpdate",
    "PreemptionPolicy",
    "Quota",
    "Requirement",
    "ResourceGroup",
    "Strategy",
    "Taint",
    "Toleration",
    "TopologyAssignment",
    "TopologyRequest",
    "Workload",
    "WorkloadState",
    "affinity_matches",
    "eviction_reason",
    "most_severe",
]

FlavorResource = tuple[str, str]
"""(flavor, resource)"""


class Mode(IntEnum):
    """How well a flavor fits, ordered as Kueue orders them: NoFit < Preempt < Fit."""

    NO_FIT = 0
    PREEMPT = 1
    FIT = 2


class Granular(IntEnum):
    """The flavor assigner's finer modes (Kueue's ``granularMode``), worst first.

    ``NO_CANDIDATES`` is Preempt with nobody to preempt: shown as Preempt, but in the flavor search it is
    no better than NoFit against a flavor that can admit.
    """

    NO_FIT = 0
    NO_CANDIDATES = 1
    PREEMPT = 2
    RECLAIM = 3
    FIT = 4

    @property
    def mode(self) -> Mode:
        return Mode.NO_FIT if self == 0 else Mode.FIT if self == 4 else Mode.PREEMPT

    @property
    def viable(self) -> bool:
        return self >= 2  # not NO_FIT, not NO_CANDIDATES


class PendingReason(Enum):
    """Why a workload holds no quota: Kueue's ``QuotaReserved=False`` reasons.

    Of the reasons a flavor search gives, the more severe wins where both apply (Kueue's order):
    TopologyPlacementFailed < WaitingForQuota < ExceedsMaxQuota < NoMatchingFlavor. See :func:`most_severe`.
    """

    WAITING_FOR_QUOTA = "WaitingForQuota"
    """It could fit the queue's quota, not now: quota is in use (or held for others)."""
    EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
    """It asks more than the queue could ever hold on any flavor it may use."""
    NO_MATCHING_FLAVOR = "NoMatchingFlavor"
    """No flavor matches its node selectors and tolerations (or a resource it asks is not in the queue)."""
    TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"
    """Its quota fits, but its topology request does not fit the flavor's nodes even were they empty of other
    topology-aware workloads (Kueue's topology-aware scheduling)."""
    WAITING_FOR_PREEMPTED_WORKLOADS = "WaitingForPreemptedWorkloads"
    """Preemptions were issued for it: it waits for them to stop."""
    PENDING_EVALUATION = "PendingEvaluation"
    """It was not evaluated (its admission checks failed)."""
    SUSPENDED = "Suspended"
    """Its ClusterQueue is inactive."""
    MISCONFIGURED = "Misconfigured"
    """Its ClusterQueue or LocalQueue does not exist."""

    @property
    def severity(self) -> int:
        return _SEVERITY.get(self, 0)


_SEVERITY = {PendingReason.TOPOLOGY_PLACEMENT_FAILED: 1, PendingReason.WAITING_FOR_QUOTA: 2,
             PendingReason.EXCEEDS_MAX_QUOTA: 3, PendingReason.NO_MATCHING_FLAVOR: 4}


def most_severe(a: PendingReason | None, b: PendingReason | None) -> PendingReason | None:
    """Kueue's ``mostSevereReason`` (either may be None)."""
    if a is None:
        return b
    if b is None:
        return a
    return a if a.severity >= b.severity else b


class Strategy(Enum):
    STRICT_FIFO = "StrictFIFO"
    BEST_EFFORT_FIFO = "BestEffortFIFO"


DEACTIVATED_DUE_TO: Final = "DeactivatedDueTo"


def eviction_reason(cause: str) -> tuple[str, str]:
    """Kueue's eviction ``reason`` and ``underlyingCause`` from its Evicted condition's reason: a deactivation Kueue
    made itself names its cause after ``DeactivatedDueTo`` (``DeactivatedDueToMaximumExecutionTimeExceeded`` is
    reason ``Deactivated``, cause ``MaximumExecutionTimeExceeded``); any other reason has no cause of its own."""
    if cause.startswith(DEACTIVATED_DUE_TO):
        return "Deactivated", cause.removeprefix(DEACTIVATED_DUE_TO)
    return cause, ""


class WorkloadState(Enum):
    PENDING = "Pending"
    QUOTA_RESERVED = "QuotaReserved"
    ADMITTED = "Admitted"
    FINISHED = "Finished"
    INACTIVE = "Inactive"


class CheckState(Enum):
    PENDING = "Pending"
    READY = "Ready"
    RETRY = "Retry"
    REJECTED = "Rejected"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    seconds: int | None = None
    """``tolerationSeconds``: how long a ``NoExecute`` taint is tolerated before the pod is evicted (None: for
    good; zero or less: not at all)."""

    def same(self, other: Toleration) -> bool:
        """Kubernetes' ``MatchToleration`` (an empty operator is ``Equal``): the same key, operator, value and
        effect."""
        return (self.key, self.operator or "Equal", self.value, self.effect) == (
            other.key, other.operator or "Equal", other.value, other.effect)

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' rule: empty effect matches all; Exists with no key matches every taint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True, slots=True)
class FlavorSpec:
    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology: str = ""
    """``spec.topologyName``: the Topology whose levels place its pods (empty: not topology-aware)."""
    levels: tuple[str, ...] = ()
    """The node labels of that Topology's levels, highest first (empty while the Topology does not exist)."""


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """A pod set's topology request (Kueue's ``spec.podSets[].topologyRequest``, from the pod template's
    ``kueue.x-k8s.io/podset-*-topology`` annotations).

    ``level``: the node label of the requested level (empty where only slices, or nothing, are asked);
    ``required``: all pods in one domain of that level, else they may spread (``preferred``);
    ``unconstrained``: anywhere with room (as a ClusterQueue of topology-aware flavors only implies it);
    ``slice_level``/``slice_size``: each group of ``slice_size`` pods in one domain of ``slice_level``;
    ``group``: Kueue's ``podSetGroupName``: the two pod sets of a workload that name the same group are placed
    together, the one of a single pod (the leader) in the domains of the other (its workers)."""

    level: str = ""
    required: bool = False
    unconstrained: bool = False
    slice_level: str = ""
    slice_size: int = 1
    group: str = ""
    layers: tuple[tuple[str, int], ...] = ()
    """Kueue's ``podsetSliceRequiredTopologyConstraints`` (``TASMultiLayerTopology``): every slice layer, outermost
    first, as (level, size); the first is ``slice_level``/``slice_size``, each inner one groups the pods of the
    layer above it again, lower down (empty: the request was not made so)."""


class DelayedTopology(Enum):
    """Kueue's ``delayedTopologyRequest`` of a pod set's assignment: a topology-aware flavor whose ClusterQueue has a
    ProvisioningRequest check for it reserves quota unplaced (``Pending``); once every check is Ready the pod set is
    placed on the nodes then there (``Ready``, with its ``topologyAssignment``), and only then is it admitted."""

    PENDING = "Pending"
    READY = "Ready"


@dataclass(frozen=True, slots=True)
class TopologyAssignment:
    """Where a pod set's pods go (Kueue's ``topologyAssignment``): the levels (node labels) the values name, and per
    domain its values at those levels and how many pods it takes."""

    levels: tuple[str, ...]
    domains: tuple[tuple[tuple[str, ...], int], ...]


@dataclass(frozen=True, slots=True)
class Quota:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[str, ...]
    quotas: Mapping[FlavorResource, Quota]


class PreemptionPolicy(Enum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
    ANY = "Any"


@dataclass(frozen=True, slots=True)
class Fungibility:
    """``flavorFungibility``: stop at a flavor that fits by borrowing / by preempting, or try the next."""

    stop_when_borrowing: bool = True
    stop_when_preempting: bool = False
    prefer_preemption_over_borrowing: bool = False


@dataclass(frozen=True, slots=True)
class ConcurrentPolicy:
    """``concurrentAdmissionPolicy`` (Kueue's Concurrent Admission): a workload races one variant per flavor.

    ``migrate``: ``TryPreferredFlavors`` (True) or ``RetainFirstAdmission``; ``last_acceptable``: the least
    preferred flavor a running workload may still move to. ``implicit``: not written in the ClusterQueue but
    flexq's own policy (only the flavors every pod set could use race, and nothing migrates once running).
    """

    migrate: bool = True
    last_acceptable: str | None = None
    implicit: bool = False


@dataclass(frozen=True, slots=True)
class Requirement:
    """One node-affinity match expression."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value in self.values
        if self.operator == "NotIn":
            return value not in self.values
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        if self.operator in ("Gt", "Lt") and value is not None and self.values:
            a, b = _int64(value), _int64(self.values[0])
            if a is None or b is None:
                return False
            return a > b if self.operator == "Gt" else a < b
        return False


_INTEGER: Final = re.compile(r"[+-]?[0-9]+")
_INT64: Final = range(-(2**63), 2**63)


def _int64(text: str) -> int | None:
    """``text`` as Go's ``strconv.ParseInt(text, 10, 64)`` reads it (None: not a 64-bit whole number)."""
    if not _INTEGER.fullmatch(text):
        return None
    value = int(text)
    return value if value in _INT64 else None


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One term of a pod's required node affinity (Kubernetes' ``NodeSelectorTerm``): its ``matchExpressions``
    on the node's labels and its ``matchFields`` on the node's fields (only ``metadata.name``), all ANDed; the terms
    of an affinity are ORed."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        """Kubernetes' ``nodeaffinity`` rule: a term with nothing in it matches no node, nor does one with an
        expression Kubernetes cannot read (In or NotIn with no values, Exists or DoesNotExist with some, Gt or
        Lt without one whole number; a field other than In or NotIn of one value)."""
        if not self.expressions and not self.fields:
            return False
        for r in self.expressions:
            if not _well_formed(r) or not r.matches(labels):
                return False
        for r in self.fields:
            if r.operator not in ("In", "NotIn") or len(r.values) != 1:
                return False
            value = name if r.key == "metadata.name" else ""
            if (value == r.values[0]) != (r.operator == "In"):
                return False
        return True


def _well_formed(r: Requirement) -> bool:
    if r.operator in ("In", "NotIn"):
        return bool(r.values)
    if r.operator in ("Exists", "DoesNotExist"):
        return not r.values
    if r.operator in ("Gt", "Lt"):
        return len(r.values) == 1 and _int64(r.values[0]) is not None
    return False


def affinity_matches(affinity: tuple[NodeSelectorTerm, ...], name: str, labels: Mapping[str, str]) -> bool:
    """Whether a node (its name and labels) meets a required node affinity: some term matches it (no terms: no
    affinity, every node)."""
    return not affinity or any(term.matches(name, labels) for term in affinity)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A Kubernetes label selector: every ``matchLabels`` pair and every ``matchExpressions`` requirement must hold
    (the empty selector matches everything)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            r.matches(labels) for r in self.match_expressions)

    @property
    def everything(self) -> bool:
        return not self.match_labels and not self.match_expressions


@dataclass(frozen=True, slots=True)
class ClusterQueueSpec:
    name: str
    cohort: str | None = None
    groups: tuple[ResourceGroup, ...] = ()
    strategy: Strategy = Strategy.BEST_EFFORT_FIFO
    fungibility: Fungibility = Fungibility()
    within_cluster_queue: PreemptionPolicy = PreemptionPolicy.NEVER
    reclaim_within_cohort: PreemptionPolicy = PreemptionPolicy.NEVER
    borrow_within_cohort: PreemptionPolicy = PreemptionPolicy.NEVER
    borrow_within_cohort_threshold: int | None = None
    checks: tuple[tuple[str, frozenset[str] | None], ...] = ()
    """Admission checks: (name, the flavors it applies to, or None for all)."""
    active: bool = True
    concurrent: ConcurrentPolicy | None = None
    namespace_selector: LabelSelector | None = LabelSelector()
    """The namespaces whose workloads it admits. None is the API's absent ``namespaceSelector``, which, as Kueue reads
    it, matches no namespace; a spec made in code matches every namespace unless told otherwise."""
    stop_policy: str = "None"
    """``spec.stopPolicy``: ``Hold`` admits nothing new (the queue is inactive), ``HoldAndDrain`` also evicts what
    it admitted."""
    fair_admission: bool = False
    """``spec.admissionScope.admissionMode: UsageBasedAdmissionFairSharing``: its pending workloads are tried in the
    order of their LocalQueues' usage, where Kueue's Configuration has ``admissionFairSharing``."""
    fair_weight: float = 1.0
    """``spec.fairSharing.weight`` (Kueue's default 1; 0: an infinite share while borrowing), read under fair
    sharing only."""
    default_max_exec_seconds: int | None = None
    """``spec.workloadDefaults.maximumExecutionTimeSeconds`` (KEP-7029, under the ``ClusterQueueMaxExecutionTime``
    gate): the maximum execution time its workloads are made with where their job gives none."""

    def admits_namespace(self, labels: Mapping[str, str]) -> bool:
        """Whether a workload from a namespace labelled ``labels`` may be admitted (Kueue's namespace check)."""
        selector = self.namespace_selector
        return selector is not None and (selector.everything or selector.matches(labels))

    def group_of(self, resource: str) -> ResourceGroup | None:
        for group in self.groups:
            if resource in group.covered:
                return group
        return None

    def checks_for(self, flavors: set[str]) -> list[str]:
        """The admission checks that apply to a workload assigned ``flavors`` (Kueue's onFlavors rule)."""
        return sorted(name for name, only in self.checks if only is None or only & flavors)


@dataclass(frozen=True, slots=True)
class CohortSpec:
    name: str
    parent: str | None = None
    groups: tuple[ResourceGroup, ...] = ()
    fair_weight: float = 1.0
    """``spec.fairSharing.weight``, as a ClusterQueue's."""


@dataclass(frozen=True, slots=True)
class PodSet:
    name: str
    count: int
    requests: Mapping[str, int]
    """Per pod, thousandths."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    affinity: tuple[NodeSelectorTerm, ...] = ()
    """The pod template's required node affinity (``affinity.nodeAffinity``'s
    ``requiredDuringSchedulingIgnoredDuringExecution``): its terms, ORed (empty: none)."""
    min_count: int | None = None
    """Kueue's ``minCount``: the fewest pods it may be admitted with (partial admission); None: all of them."""
    topology: TopologyRequest | None = None
    """Its topology request (None: it asks none)."""

    def total(self, resource: str) -> int:
        return self.requests.get(resource, 0) * self.count

    def __deepcopy__(self, memo: dict[int, object]) -> PodSet:
        """A value (frozen, its mappings read-only): a copy of the plane (a forecast's fork) shares it."""
        return self


@dataclass(frozen=True, slots=True)
class PodSetUpdate:
    """Kueue's ``PodSetUpdate``: what a Ready admission check asks of one pod set's pods (the ProvisioningRequest
    check: to consume its request). The second pass places the pod set as if its template carried them
    (:func:`~flexq.scheduler.second_pass.updated`); the job's pod templates are given all of it when it starts.
    Also what a pod set's pods carry, to merge into (Kueue's ``PodSetInfo``)."""

    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()

    def merged(self, more: PodSetUpdate) -> PodSetUpdate | str:
        """Kueue's ``PodSetInfo.Merge``: ``more``'s annotations, labels and node selector added to these, its
        tolerations appended (each once); or Kueue's message where both hold a key with different values."""
        for what, have, extra in (("annotations", self.annotations, more.annotations),
                                  ("labels", self.labels, more.labels),
                                  ("nodeSelector", self.node_selector, more.node_selector)):
            clash = next((k for k, v in have.items() if k in extra and extra[k] != v), None)
            if clash is not None:
                return (f"invalid admission check PodSetUpdate: conflict for {what}: conflict for key={clash}, "
                        f"value1={have[clash]}, value2={extra[clash]}")
        return PodSetUpdate({**self.annotations, **more.annotations}, {**self.labels, **more.labels},
                            {**self.node_selector, **more.node_selector},
                            self.tolerations + tuple(t for t in more.tolerations
                                                     if not any(t.same(e) for e in self.tolerations)))


@dataclass(frozen=True, slots=True)
class PodSetAssignment:
    name: str
    flavors: Mapping[str, str]
    """resource -> flavor"""
    usage: Mapping[FlavorResource, int]
    count: int
    topology: TopologyAssignment | None = None
    """Where its pods go on a topology-aware flavor (None: anywhere the flavor's nodes have room)."""
    delayed: DelayedTopology | None = None
    """Kueue's ``delayedTopologyRequest``: its placement waits for the nodes a ProvisioningRequest brings (None:
    placed at once, or not topology-aware)."""


@dataclass(frozen=True, slots=True)
class Admission:
    cluster_queue: str
    podsets: tuple[PodSetAssignment, ...]
    total: Mapping[FlavorResource, int] = field(default_factory=dict)
    """The usage of all pod sets together (filled by :meth:`of`)."""

    @classmethod
    def of(cls, cluster_queue: str, podsets: tuple[PodSetAssignment, ...]) -> Admission:
        total: dict[FlavorResource, int] = {}
        for ps in podsets:
            for fr, amount in ps.usage.items():
                total[fr] = total.get(fr, 0) + amount
        return cls(cluster_queue, podsets, total)

    def usage(self) -> Mapping[FlavorResource, int]:
        return self.total

    def flavors(self) -> set[str]:
        return {f for ps in self.podsets for f in ps.flavors.values()}

    def __deepcopy__(self, memo: dict[int, object]) -> Admission:
        """A value (frozen, its mappings read-only): a copy of the plane (a forecast's fork) shares it."""
        return self


@dataclass(slots=True)
class Workload:
    """A unit of admission: a job's pod sets, its queue, its priority, and where it stands."""

    namespace: str
    name: str
    queue: str
    cluster_queue: str
    podsets: tuple[PodSet, ...]
    priority: int = 0
    created: float = 0.0
    uid: str = ""
    owner: str = ""
    """``Kind namespace/name`` of the job that made this workload, if any."""
    state: WorkloadState = WorkloadState.PENDING
    admission: Admission | None = None
    ordering_time: float | None = None
    """When the workload (re)entered its queue: creation, or the last eviction or requeue."""
    reserved_at: float | None = None
    admitted_at: float | None = None
    finished_at: float | None = None
    checks: dict[str, CheckState] = field(default_factory=dict)
    requeue_at: float | None = None
    pending_reason: Text = ""
    """What it waits for, in words: the message of its QuotaReserved condition while pending (beside
    :attr:`pending`, Kueue's reason), of its Admitted condition while it holds quota and waits for checks, nodes or
    a placement. A :class:`~flexq.scheduler.phrases.Phrase` where it names a moment (nodes ready at), worded by
    whoever shows it."""
    pending: PendingReason | None = None
    """Why it holds no quota, as Kueue names it (None while it holds quota or has not been looked at)."""
    evictions: int = 0
    evicting: bool = False
    """Preempted: eviction is issued, the quota stays held until the job has stopped."""
    pod_set_updates: dict[str, dict[str, PodSetUpdate]] = field(default_factory=dict)
    """What Ready admission checks ask of the pods (Kueue's ``podSetUpdates``): check -> pod set -> update."""
    replaces: str = ""
    """The key of the workload slice this one replaces (Kueue's ``workload-slice-replacement-for``): an elastic
    job that grew. See :mod:`flexq.scheduler.slices`."""
    parent: str = ""
    """A variant (Concurrent Admission): the key of the workload it races for. See :mod:`flexq.scheduler.race`."""
    flavor: str = ""
    """A variant's flavor."""
    allowed: tuple[tuple[str, frozenset[str]], ...] | None = None
    """The flavors a variant's pod sets may take, by pod set (None: any)."""
    won: str = ""
    """A workload that raced: the name of the variant whose admission it took."""
    max_exec_seconds: int | None = None
    """Kueue's ``spec.maximumExecutionTimeSeconds`` (from the job's ``kueue.x-k8s.io/max-exec-time-seconds`` label):
    admitted longer than this in all, it is deactivated (:class:`~flexq.control.plane.ControlPlane`)."""
    past_exec_seconds: int = 0
    """Kueue's ``status.accumulatedPastExecutionTimeSeconds``: whole seconds admitted before its last eviction."""
    pods_ready_at: float | None = None
    """When all its pods became ready in its current admission (Kueue's ``PodsReady`` condition True); None: not
    (yet). Read by waitForPodsReady (:mod:`flexq.control.pods_ready`)."""
    requeue_count: int = 0
    """Kueue's ``status.requeueState.count``: how often it was requeued after its pods were not ready in time."""
    eviction_counts: dict[tuple[str, str], int] = field(default_factory=dict)
    """Kueue's ``status.schedulingStats.evictions``: how often it was evicted, by (reason, underlying cause), in the
    order each pair was first seen (see :meth:`count_eviction`)."""

    key: str = field(init=False, repr=False, compare=False)
    """``namespace/name`` (both fixed once the workload exists)."""

    def __post_init__(self) -> None:
        self.key = f"{self.namespace}/{self.name}"

    def allowed_for(self, podset: str) -> frozenset[str] | None:
        """The flavors pod set ``podset`` may take (None: any)."""
        if self.allowed is None:
            return None
        return next((flavors for name, flavors in self.allowed if name == podset), frozenset())

    def allowed_flavors(self) -> frozenset[str]:
        """Every flavor some pod set may take (empty: not limited)."""
        return frozenset().union(*(flavors for _name, flavors in self.allowed or ()))

    def shape(self) -> tuple[object, ...]:
        """What the flavor assigner sees of this workload, hashable: equal shapes get equal answers."""
        return tuple(
            (p.name, p.count, tuple(sorted(p.requests.items())), tuple(sorted(p.node_selector.items())),
             p.tolerations, p.affinity, p.topology)
            for p in self.podsets)

    def count_eviction(self, cause: str, underlying: str = "") -> None:
        """One more eviction whose Evicted condition's reason is ``cause``, counted as Kueue's eviction stats count
        it (:func:`eviction_reason`)."""
        self.evictions += 1
        reason, why = eviction_reason(cause)
        pair = (reason, why or underlying)
        self.eviction_counts[pair] = self.eviction_counts.get(pair, 0) + 1

    def scheduling_stats(self) -> dict[str, list[dict[str, str | int]]]:
        """Kueue's ``status.schedulingStats`` (empty where it was never evicted)."""
        if not self.eviction_counts:
            return {}
        return {"evictions": [{"reason": reason, "underlyingCause": cause, "count": count}
                              for (reason, cause), count in self.eviction_counts.items()]}

    def __deepcopy__(self, memo: dict[int, object]) -> Workload:
        """A copy whose own state is its own: its three mutable mappings are copied, every other field is a value
        (a string, a number, an enum, a frozen pod set or admission, a tuple of them) and is shared. A forecast forks
        the plane (:mod:`flexq.forecast.snapshot`) with every workload in it; this is most of that copy's cost.
        A field added to Workload must be one of the two kinds (tests/scheduler/test_workload_copy.py)."""
        other = _copy_fields(self)  # copy.deepcopy remembers it in memo: met twice, it is copied once
        other.checks = dict(self.checks)
        other.pod_set_updates = {check: dict(by_podset) for check, by_podset in self.pod_set_updates.items()}
        other.eviction_counts = dict(self.eviction_counts)
        return other

    @property
    def queue_time(self) -> float:
        return self.created if self.ordering_time is None else self.ordering_time

    @property
    def holds_quota(self) -> bool:
        return self.state in (WorkloadState.QUOTA_RESERVED, WorkloadState.ADMITTED)


def _field_copier() -> Callable[[Workload], Workload]:
    """A function that makes a new workload holding the same field values as the one given (none copied): written
    out field by field, as dataclasses write their methods, since a loop of ``setattr`` over the slots costs six
    times as much, and a forecast's fork copies every workload of the plane."""
    lines = "".join(f"    other.{name} = wl.{name}\n" for name in Workload.__slots__)
    scope: dict[str, object] = {"new": object.__new__, "Workload": Workload}
    exec(f"def copy_fields(wl):\n    other = new(Workload)\n{lines}    return other\n", scope)
    return cast(Callable[[Workload], Workload], scope["copy_fields"])


_copy_fields: Final = _field_copier()
