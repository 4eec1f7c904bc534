"""Where an emulated node sits in its data center: GKE's topology labels, deterministic so both clocks agree.

GKE labels each node of a pool with its place in Google's network hierarchy: ``cloud.google.com/gce-topology-block``,
``.../gce-topology-subblock`` and ``.../gce-topology-host``, besides ``kubernetes.io/hostname``; Kueue's
topology-aware scheduling reads them through a Topology's levels. The emulated cloud gives each node of a pool a
*slot*, the lowest one free when it is made (a multi-host TPU slice takes consecutive slots, aligned, so its hosts
share one sub-block): four slots a sub-block (or one slice, where a slice has more hosts), four sub-blocks a block.
Values name the pool, so that pools never share a domain.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from flexq.capacity.pools import NodePoolSpec

__all__ = ["BLOCK_LABEL", "HOSTNAME_LABEL", "HOST_LABEL", "SUBBLOCK_LABEL", "free_slot", "topology_labels"]

BLOCK_LABEL: Final = "cloud.google.com/gce-topology-block"
SUBBLOCK_LABEL: Final = "cloud.google.com/gce-topology-subblock"
HOST_LABEL: Final = "cloud.google.com/gce-topology-host"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"

_HOSTS_PER_SUBBLOCK: Final = 4
_SUBBLOCKS_PER_BLOCK: Final = 4


def subblock_hosts(pool: NodePoolSpec) -> int:
    """Hosts in one sub-block of the pool: four, or whole slices where a slice has more hosts."""
    hosts = pool.hosts_per_slice
    return -(-_HOSTS_PER_SUBBLOCK // hosts) * hosts


def free_slot(used: Iterable[int], hosts: int) -> int:
    """The lowest slot, a multiple of ``hosts``, from which ``hosts`` consecutive slots are free."""
    taken = set(used)
    slot = 0
    while any(slot + i in taken for i in range(hosts)):
        slot += hosts
    return slot


def topology_labels(pool: NodePoolSpec, name: str, slot: int) -> dict[str, str]:
    """The topology labels of node ``name`` in ``slot`` of ``pool``."""
    per_subblock = subblock_hosts(pool)
    subblock = slot // per_subblock
    block = subblock // _SUBBLOCKS_PER_BLOCK
    return {BLOCK_LABEL: f"{pool.name}-b{block}", SUBBLOCK_LABEL: f"{pool.name}-b{block}-s{subblock}",
            HOST_LABEL: f"{pool.name}-h{slot}", HOSTNAME_LABEL: name}
