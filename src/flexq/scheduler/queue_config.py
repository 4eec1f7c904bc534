"""The queue configuration the scheduler works with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from flexq.scheduler.model import ClusterQueueSpec, CohortSpec, FlavorSpec

__all__ = ["NAME_LABEL", "Config"]

NAME_LABEL: Final = "kubernetes.io/metadata.name"
"""The label the API server sets on every Namespace: its name."""


@dataclass(frozen=True, slots=True)
class Config:
    """The queue configuration the scheduler works with."""

    flavors: Mapping[str, FlavorSpec]
    cluster_queues: Mapping[str, ClusterQueueSpec]
    cohorts: Mapping[str, CohortSpec]
    check_retry_delay: Mapping[str, float] = field(default_factory=dict)
    """Seconds a workload waits after a check's Retry before it queues again (default: none)."""
    provisioning_checks: frozenset[str] = frozenset()
    """The AdmissionChecks of Kueue's ProvisioningRequest controller: a topology-aware flavor they apply to places
    its pod sets only once they are Ready (Kueue's delayed topology request)."""
    race: bool = False
    """flexq's policy: workloads race a variant per flavor even where no ClusterQueue asks for Concurrent
    Admission (:mod:`flexq.scheduler.race`). Off, the scheduler is Kueue's."""
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """The labels of each Namespace known (a namespace not listed has only ``kubernetes.io/metadata.name``)."""
    stopped_queues: Mapping[tuple[str, str], str] = field(default_factory=dict)
    """LocalQueues with a ``stopPolicy`` (``Hold`` or ``HoldAndDrain``): (namespace, name) -> the policy."""
    queue_weights: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """LocalQueues' ``spec.fairSharing.weight`` where given: (namespace, name) -> the weight (default 1)."""
    fair_sharing: tuple[str, ...] | None = None
    """Kueue's fair sharing (its Configuration's ``fairSharing``): the preemption strategies, in order
    (``LessThanOrEqualToFinalShare``, ``LessThanInitialShare``); None: off (Kueue's default)."""
    replace_failed_nodes: bool = True
    """Kueue's ``TASFailedNodeReplacement`` feature gate (on by default): a topology-aware workload's pods on a lost
    node get a replacement node in their domain (:mod:`flexq.scheduler.tas_replace`); off, the workload is evicted."""
    replace_fail_fast: bool = True
    """Kueue's ``TASFailedNodeReplacementFailFast`` (on by default): a workload with no replacement at once is evicted;
    off, it keeps its quota and is tried again after a backoff (:mod:`flexq.capacity.nodeloss`)."""
    replace_on_pod_termination: bool = True
    """Kueue's ``TASReplaceNodeOnPodTermination`` (on by default): a NotReady or tainted node counts as failed for a
    workload once its pods there have terminated, not at once (:mod:`flexq.capacity.nodehealth`)."""
    replace_on_taints: bool = True
    """Kueue's ``TASReplaceNodeOnNodeTaints`` (on by default): a NoSchedule or NoExecute taint a workload does not
    tolerate makes its node a failed one for it."""
    balanced_placement: bool = False
    """Kueue's ``TASBalancedPlacement`` (alpha, off by default): a preferred topology request spread evenly over the
    fewest domains (:mod:`flexq.scheduler.tas_balanced`)."""
    recompute_tas: bool = True
    """Kueue's ``TASRecomputeAssignmentWithinSchedulingCycle`` (beta, on by default in v0.19): a workload whose quota
    still fits when its turn in the cycle comes, but whose topology placement was taken by one admitted or preempting
    before it, is assigned again (its flavors kept) against what the cycle took; off, it is skipped."""
    not_ready_fixed_time: bool = False
    """Kueue's ``TASReplaceNodeDueToNotReadyOverFixedTime`` (deprecated, off by default in v0.19): a node NotReady for
    30 s counts as failed whatever its pods do."""

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        """A namespace's labels, with the one the API server sets on every namespace."""
        labels = self.namespaces.get(namespace)
        if labels is None or labels.get(NAME_LABEL) != namespace:
            return {**(labels or {}), NAME_LABEL: namespace}
        return labels
