"""Job integrations: RayJob, batch/v1 Job and plain Pods into Kueue Workloads, and admission back into the jobs."""

from flexq.jobs.pods import GATE, group_of, group_podsets, group_total, is_queued, outcome, role, template
from flexq.jobs.webhook import job_webhook, job_webhook_for
from flexq.jobs.workload import (
    COMPLETIONS_EQUAL_PARALLELISM,
    JOB_KINDS,
    MIN_PARALLELISM,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    RAY_KINDS,
    JobError,
    Priorities,
    local_queues_of,
    make_workload,
    pod_requests,
    podsets,
    selected_cluster,
    workload_name,
)

__all__ = [
    "COMPLETIONS_EQUAL_PARALLELISM",
    "GATE",
    "JOB_KINDS",
    "MIN_PARALLELISM",
    "PRIORITY_LABEL",
    "QUEUE_LABEL",
    "RAY_KINDS",
    "JobError",
    "Priorities",
    "group_of",
    "group_podsets",
    "group_total",
    "is_queued",
    "job_webhook",
    "job_webhook_for",
    "local_queues_of",
    "make_workload",
    "outcome",
    "pod_requests",
    "podsets",
    "role",
    "selected_cluster",
    "template",
    "workload_name",
]
