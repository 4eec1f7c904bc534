"""The scheduling core: Kueue's queues, quota, flavor assignment and preemption, in real and virtual time."""

from flexq.scheduler.build import (
    build_config,
    milli,
    node_affinity,
    pod_set_update_objects,
    pod_set_updates,
    toleration,
    toleration_object,
)
from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.fair_usage import UsageLedger, format_usage
from flexq.scheduler.flavorassigner import Assignment, format_amount, node_matches
from flexq.scheduler.model import (
    Admission,
    CheckState,
    ClusterQueueSpec,
    DelayedTopology,
    FlavorResource,
    FlavorSpec,
    Granular,
    PodSet,
    PodSetAssignment,
    PodSetUpdate,
    PreemptionPolicy,
    Quota,
    ResourceGroup,
    Taint,
    Toleration,
    TopologyAssignment,
    TopologyRequest,
    Workload,
    WorkloadState,
    eviction_reason,
)
from flexq.scheduler.quota import QuotaTree
from flexq.scheduler.race import ALLOWED_FLAVORS, PARENT_LABEL
from flexq.scheduler.scheduler import Config, Scheduler
from flexq.scheduler.second_pass import FAILED_TO_START, check_updates, start_conflict, with_updates
from flexq.scheduler.second_pass import backoff as second_pass_backoff
from flexq.scheduler.slices import REPLACED
from flexq.scheduler.tas_replace import names_node

__all__ = [
    "ALLOWED_FLAVORS",
    "FAILED_TO_START",
    "PARENT_LABEL",
    "REPLACED",
    "Admission",
    "Assignment",
    "CheckState",
    "ClusterQueueSpec",
    "Config",
    "DelayedTopology",
    "Event",
    "EventKind",
    "FlavorResource",
    "FlavorSpec",
    "Granular",
    "PodSet",
    "PodSetAssignment",
    "PodSetUpdate",
    "PreemptionPolicy",
    "Quota",
    "QuotaTree",
    "ResourceGroup",
    "Scheduler",
    "Taint",
    "Toleration",
    "TopologyAssignment",
    "TopologyRequest",
    "UsageLedger",
    "Workload",
    "WorkloadState",
    "build_config",
    "check_updates",
    "eviction_reason",
    "format_amount",
    "format_usage",
    "milli",
    "names_node",
    "node_affinity",
    "node_matches",
    "pod_set_update_objects",
    "pod_set_updates",
    "second_pass_backoff",
    "start_conflict",
    "toleration",
    "toleration_object",
    "with_updates",
]
