"""A real cluster's queues and recent Workloads, read through a kubeconfig context, as a scenario for what-if."""

from flexq.importer.cluster_read import ClusterReadError, read_cluster
from flexq.importer.kubeconfig import KubeconfigError, client, load_target
from flexq.importer.replay import build_scenario

__all__ = [
    "ClusterReadError",
    "KubeconfigError",
    "build_scenario",
    "client",
    "load_target",
    "read_cluster",
]
