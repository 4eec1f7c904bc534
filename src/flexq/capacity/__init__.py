"""Where machines come from: the machine catalog, node pools, the emulated cloud, placement, autoscaling."""

from flexq.capacity.catalog import CATALOG, MachineType, UnknownMachineType, machine_type
from flexq.capacity.cloud import CapacitySpec, EmulatedCloud, random_outages
from flexq.capacity.cluster import Cluster, PodGroup
from flexq.capacity.driver import PROVISIONING_EXPIRY, CapacityDriver, provisioning_settings
from flexq.capacity.gke_pools import (
    GKE_VERSION,
    NODE_POOL_LABEL,
    gke_node_pool,
    initial_nodes_written,
    node_pool_of,
    node_pool_spec,
    node_pool_webhook,
)
from flexq.capacity.nodehealth import LIFECYCLE_TAINT_KEYS, lifecycle_taints
from flexq.capacity.notes import FallbackNote, PoolNote, ProvisioningState, RequestNote, StartedNote, WorkloadNote
from flexq.capacity.pools import Node, NodePoolSpec
from flexq.capacity.provisioning import ProvisioningSettings, answer_timer
from flexq.capacity.raypool import RayAddressError, RayPoolSync, dashboard_address
from flexq.capacity.record import CapacityState
from flexq.capacity.settings import CapacityConfig
from flexq.capacity.variants import finishes_sooner_here

__all__ = [
    "CATALOG",
    "GKE_VERSION",
    "LIFECYCLE_TAINT_KEYS",
    "NODE_POOL_LABEL",
    "PROVISIONING_EXPIRY",
    "CapacityConfig",
    "CapacityDriver",
    "CapacitySpec",
    "CapacityState",
    "Cluster",
    "EmulatedCloud",
    "FallbackNote",
    "MachineType",
    "Node",
    "NodePoolSpec",
    "PodGroup",
    "PoolNote",
    "ProvisioningSettings",
    "ProvisioningState",
    "RayAddressError",
    "RayPoolSync",
    "RequestNote",
    "StartedNote",
    "UnknownMachineType",
    "WorkloadNote",
    "answer_timer",
    "dashboard_address",
    "finishes_sooner_here",
    "gke_node_pool",
    "initial_nodes_written",
    "lifecycle_taints",
    "machine_type",
    "node_pool_of",
    "node_pool_spec",
    "node_pool_webhook",
    "provisioning_settings",
    "random_outages",
]
