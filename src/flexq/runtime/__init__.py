"""Real execution: a local Ray cluster per RayJob, the job's entrypoint through Ray's Jobs API, logs; batch/v1 Jobs'
and plain Pods' commands as local processes; what KubeRay would show for a running RayJob."""

from flexq.runtime.batch_job import BatchJobRun
from flexq.runtime.cluster_objects import cluster_status, raycluster_objects
from flexq.runtime.elastic import ELASTIC_ANNOTATION, is_elastic
from flexq.runtime.job_user import JobUser, JobUserError, choose_uids, configure, parse_uid_range
from flexq.runtime.kuberay_view import (
    LOG_ANNOTATION,
    head_port_map,
    job_of_pod,
    kuberay_objects,
    log_reference,
    pod_log_file,
    ray_log_path,
)
from flexq.runtime.local_pods import LocalPod, pod_log_path, pod_run_dir, pod_workdir
from flexq.runtime.raycluster import RayClusterRun
from flexq.runtime.rayjob import END_MARKER, Borrowed, RayJobRun, parse_reports
from flexq.runtime.reattach import LOST_REASON, Resume, attach, read_records, reap, reap_all, record_path, same_object
from flexq.runtime.remote import RemoteRayCluster, ray_pool_of, ray_pool_of_pod
from flexq.runtime.remote_pods import RemotePod

__all__ = [
    "ELASTIC_ANNOTATION",
    "END_MARKER",
    "LOG_ANNOTATION",
    "LOST_REASON",
    "BatchJobRun",
    "Borrowed",
    "JobUser",
    "JobUserError",
    "LocalPod",
    "RayClusterRun",
    "RayJobRun",
    "RemotePod",
    "RemoteRayCluster",
    "Resume",
    "attach",
    "choose_uids",
    "cluster_status",
    "configure",
    "head_port_map",
    "is_elastic",
    "job_of_pod",
    "kuberay_objects",
    "log_reference",
    "parse_reports",
    "parse_uid_range",
    "pod_log_file",
    "pod_log_path",
    "pod_run_dir",
    "pod_workdir",
    "ray_log_path",
    "ray_pool_of",
    "ray_pool_of_pod",
    "raycluster_objects",
    "read_records",
    "reap",
    "reap_all",
    "record_path",
    "same_object",
]
