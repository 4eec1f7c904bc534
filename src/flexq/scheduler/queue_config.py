"""The queue configuration the scheduler works with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from flexq.scheduler.model import ClusterQueueSpec, CohortSpec, FlavorSpec

__all__ = ["Config"]


@dataclass(frozen=True, slots=True)
class Config:
    """The queue configuration the scheduler works with."""

    flavors: Mapping[str, FlavorSpec]
    cluster_queues: Mapping[str, ClusterQueueSpec]
    cohorts: Mapping[str, CohortSpec]
    check_retry_delay: Mapping[str, float] = field(default_factory=dict)
    """Seconds a workload waits after a check's Retry before it queues again (default: none)."""
    race: bool = False
    """flexq's policy: workloads race a variant per flavor even where no ClusterQueue asks for Concurrent
    Admission (:mod:`flexq.scheduler.race`). Off, the scheduler is Kueue's."""
