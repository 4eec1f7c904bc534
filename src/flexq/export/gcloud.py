"""The gcloud commands that make, on real GKE, the cluster and node pools flexq holds.

Flags as the guide's ``cluster.sh`` writes them: the cluster with its version, machine type, location,
image streaming and the Ray operator add-on; each node pool with its machine type, TPU topology,
reservation affinity, autoscaling bounds, queued provisioning and flex-start. ``default-pool`` comes
with the cluster (``--machine-type``, ``--num-nodes`` of ``clusters create``), as on GKE.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["DEFAULT_POOL", "cluster_command", "credentials_command", "pool_command"]

DEFAULT_POOL: Final = "default-pool"
GCLOUD_NUM_NODES: Final = 3  # what `clusters create` gives default-pool when --num-nodes is left out


def _command(words: Sequence[str], flags: Sequence[str]) -> str:
    """One command, a flag a line, as cluster.sh writes them (``"${PROJECT_ID}"`` left for the shell)."""
    lines = [" ".join(words)] + [_quote(flag) for flag in flags]
    return " \\\n  ".join(lines)


def _quote(flag: str) -> str:
    name, sep, value = flag.partition("=")
    if not sep or value.startswith('"${'):
        return flag
    return f"{name}={shlex.quote(value)}"


def cluster_command(cluster: Mapping[str, Any], location: str) -> str:
    spec = cluster.get("spec") or {}
    flags = []
    if spec.get("version"):
        flags.append(f"--cluster-version={spec['version']}")
    flags.append(f"--machine-type={spec.get('machineType') or 'e2-medium'}")
    if spec.get("numNodes") not in (None, GCLOUD_NUM_NODES):
        flags.append(f"--num-nodes={spec['numNodes']}")
    flags += [f"--location={location}", "--enable-image-streaming", "--addons=RayOperator",
              '--project="${PROJECT_ID}"']
    return _command(["gcloud", "container", "clusters", "create", cluster["metadata"]["name"]], flags)


def credentials_command(name: str, location: str) -> str:
    return _command(["gcloud", "container", "clusters", "get-credentials", name],
                    [f"--location={location}", '--project="${PROJECT_ID}"'])


def pool_command(pool: Mapping[str, Any], location: str) -> str:
    spec = pool["spec"]
    if spec.get("rayAddress"):  # flexq's own: its nodes are an existing Ray cluster's, not GKE's
        return (f"# node pool {pool['metadata']['name']} is the existing Ray cluster at {spec['rayAddress']} "
                "(flexq's --ray-address): no GKE node pool is made for it")
    flags = [f"--cluster={spec['cluster']}", f"--location={location}", f"--machine-type={spec['machineType']}"]
    if spec.get("tpuTopology"):
        flags.append(f"--tpu-topology={spec['tpuTopology']}")
    if spec.get("reservationAffinity"):
        flags.append(f"--reservation-affinity={spec['reservationAffinity']}")
    autoscaling = spec.get("autoscaling") or {}
    if autoscaling.get("enabled"):
        flags.append("--enable-autoscaling")
    if spec.get("queuedProvisioning"):
        flags.append("--enable-queued-provisioning")
    if spec.get("flexStart"):
        flags.append("--flex-start")
    if spec.get("maxRunDurationSeconds"):
        flags.append(f"--max-run-duration={spec['maxRunDurationSeconds']}s")
    flags.append(f"--num-nodes={spec.get('initialNodeCount', 0)}")
    if autoscaling.get("enabled"):
        flags += [f"--min-nodes={autoscaling.get('minNodeCount', 0)}",
                  f"--max-nodes={autoscaling.get('maxNodeCount', 0)}"]
    flags.append('--project="${PROJECT_ID}"')
    return _command(["gcloud", "container", "node-pools", "create", pool["metadata"]["name"]], flags)
