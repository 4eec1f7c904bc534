"""``flexq container``: clusters and node pools with the commands and flags of ``gcloud container``."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from flexq.api import resolve
from flexq.cli import options
from flexq.cli.kubeconfigs import kubeconfig_text
from flexq.cli.printers import columns
from flexq.client import Client, CliError, ServerError
from flexq.config import flexq_home, write_private

__all__ = ["PoolFlags", "container_app"]

container_app = typer.Typer(help="Clusters and node pools, as `gcloud container` manages them.",
                            no_args_is_help=True)
clusters_app = typer.Typer(help="gcloud container clusters ...", no_args_is_help=True)
pools_app = typer.Typer(help="gcloud container node-pools ...", no_args_is_help=True)
container_app.add_typer(clusters_app, name="clusters")
container_app.add_typer(pools_app, name="node-pools")

LocationOpt = Annotated[str | None, typer.Option("--location", "--zone", "--region", help="Zone or region.")]
ProjectOpt = Annotated[str | None, typer.Option("--project", help="Project (accepted; one cluster space).")]
FormatOpt = Annotated[str | None, typer.Option("--format", help="yaml, json, get(FIELD), value(FIELD,...).")]


@dataclass(frozen=True, slots=True)
class PoolFlags:
    """A node pool as ``gcloud container node-pools create`` describes it with flags."""

    name: str
    cluster: str
    machine_type: str
    location: str | None = None
    num_nodes: int = 3
    tpu_topology: str | None = None
    reservation_affinity: str | None = None
    autoscaling: bool = False
    min_nodes: int | None = None
    max_nodes: int | None = None
    flex_start: bool = False
    queued_provisioning: bool = False
    ray_address: str | None = None

    def node_pool(self) -> dict[str, Any]:
        """The NodePool object these flags make."""
        spec: dict[str, Any] = {"cluster": self.cluster, "machineType": self.machine_type,
                                "initialNodeCount": self.num_nodes, "autoscaling": {"enabled": self.autoscaling}}
        if self.ray_address:  # the nodes are the Ray cluster's: no machine type, no node count
            spec = {"cluster": self.cluster, "rayAddress": self.ray_address, "initialNodeCount": 0,
                    "autoscaling": {"enabled": self.autoscaling}}
        if self.autoscaling:
            spec["autoscaling"].update({"minNodeCount": self.min_nodes or 0, "maxNodeCount": self.max_nodes or 0})
        for key, value in (("location", self.location), ("tpuTopology", self.tpu_topology),
                           ("reservationAffinity", self.reservation_affinity)):
            if value:
                spec[key] = value
        if self.flex_start:
            spec["flexStart"] = True
        if self.queued_provisioning:
            spec["queuedProvisioning"] = True
        return {"apiVersion": "flexq.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": self.name},
                "spec": spec}


def _apply_objects(client: Client, objects: list[dict[str, Any]], command: str) -> None:
    """Apply ``objects``; a refusal becomes gcloud's ``ERROR: (gcloud.COMMAND) ...`` line."""
    text = "\n---\n".join(json.dumps(o) for o in objects)
    try:
        client.request("POST", "/flexq/v1/apply", json={"sources": [{"text": text, "source": "flags"}]})
    except ServerError as exc:
        problems = [str(c.get("message", "")) for c in exc.causes if "line" in c] if exc.reason == "Invalid" else []
        detail = "; ".join(problems) if problems else exc.detail
        raise CliError(f"ERROR: (gcloud.{command}) {detail}") from None
    except CliError as exc:  # no server there, or no answer
        raise CliError(f"ERROR: (gcloud.{command}) {exc.message}") from None


_NODES_WAIT = 30.0
"""How long a create or delete waits for the controller to write (or remove) its pools' Node objects, as gcloud
waits for GKE's operation: a script's ``kubectl get nodes`` right after it sees them."""


def _await_nodes(client: Client, created: Sequence[str] = (), deleted: Sequence[str] = ()) -> None:
    """Return once the ``created`` pools count their initial nodes and no Node of the ``deleted`` pools is left
    (after :data:`_NODES_WAIT` at most: the objects are written either way)."""
    from flexq.capacity import initial_nodes_written, node_pool_of

    deadline = time.monotonic() + _NODES_WAIT
    while time.monotonic() < deadline:
        waiting = False
        for name in created:
            pool = client.request("GET", client.path(resolve("nodepool"), None, name), ok_missing=True)
            waiting |= pool is not None and not initial_nodes_written(pool)
        if deleted:
            nodes = client.request("GET", client.path(resolve("node"), None)).get("items", [])
            waiting |= any(node_pool_of(node) in deleted for node in nodes)
        if not waiting:
            return
        time.sleep(0.1)


@clusters_app.command("create")
def clusters_create(
    name: Annotated[str, typer.Argument(help="Cluster name.")],
    machine_type: Annotated[str, typer.Option("--machine-type", help="Machine type of default-pool.")] =
    "e2-medium",
    num_nodes: Annotated[int, typer.Option("--num-nodes", help="Nodes in default-pool.")] = 3,
    location: LocationOpt = None,
    project: ProjectOpt = None,
    cluster_version: Annotated[str | None, typer.Option("--cluster-version")] = None,
    enable_image_streaming: Annotated[bool, typer.Option("--enable-image-streaming")] = False,
    addons: Annotated[str | None, typer.Option("--addons", help="Accepted (RayOperator is built in).")] = None,
) -> None:
    """Create a cluster and its default-pool."""
    client = options.client()
    machine = machine_type if machine_type != "e2-medium" else "n2-standard-16"
    cluster = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Cluster", "metadata": {"name": name},
               "spec": {"location": location, "project": project, "machineType": machine, "numNodes": num_nodes,
                        "version": cluster_version}}
    pool = PoolFlags("default-pool", name, machine, location=location, num_nodes=num_nodes).node_pool()
    _apply_objects(client, [cluster, pool], "container.clusters.create")
    _await_nodes(client, created=["default-pool"])
    where = f" in {location}" if location else ""
    typer.echo(f"Created [{name}]{where}: default-pool with {num_nodes} {machine} node(s).", err=True)
    typer.echo(f"NAME  LOCATION  MASTER_VERSION  MACHINE_TYPE  NUM_NODES  STATUS\n{name}  {location or ''}  "
               f"{cluster_version or '1.34'}  {machine}  {num_nodes}  RUNNING")


@clusters_app.command("delete")
def clusters_delete(
    name: Annotated[str, typer.Argument()],
    location: LocationOpt = None,
    project: ProjectOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Delete a cluster and its node pools."""
    client = options.client()
    pools = [pool["metadata"]["name"] for pool in client.request("GET", client.path(resolve("nodepool"), None))
             .get("items", []) if pool["spec"]["cluster"] == name]
    for pool in pools:
        client.request("DELETE", client.path(resolve("nodepool"), None, pool))
    client.request("DELETE", client.path(resolve("clusters.flexq.dev"), None, name))
    _await_nodes(client, deleted=pools)
    typer.echo(f"Deleted [{name}].", err=True)


@clusters_app.command("list")
def clusters_list(location: LocationOpt = None, project: ProjectOpt = None) -> None:
    client = options.client()
    items = client.request("GET", client.path(resolve("clusters.flexq.dev"), None)).get("items", [])
    rows = [["NAME", "LOCATION", "MACHINE_TYPE", "STATUS"]] + [
        [c["metadata"]["name"], c["spec"].get("location") or "", c["spec"].get("machineType") or "", "RUNNING"]
        for c in items]
    typer.echo(columns(rows, gap="  "))


@clusters_app.command("get-credentials")
def clusters_get_credentials(
    name: Annotated[str, typer.Argument()],
    location: LocationOpt = None,
    project: ProjectOpt = None,
) -> None:
    """Point kubectl at the flexq server (writes FLEXQ_HOME/kubeconfig; export KUBECONFIG to use it)."""
    client = options.client()
    client.request("GET", client.path(resolve("clusters.flexq.dev"), None, name))
    path = flexq_home() / "kubeconfig"
    write_private(path, kubeconfig_text(client.server))  # it holds the caller's token: 0600
    typer.echo(f"Fetching cluster endpoint and auth data.\nkubeconfig entry generated for {name} in {path}.",
               err=True)


@pools_app.command("create")
def pools_create(
    name: Annotated[str, typer.Argument(help="Node pool name.")],
    cluster: Annotated[str, typer.Option("--cluster", help="Cluster name.")],
    machine_type: Annotated[str, typer.Option("--machine-type")] = "n2-standard-16",
    tpu_topology: Annotated[str | None, typer.Option("--tpu-topology")] = None,
    reservation_affinity: Annotated[str | None, typer.Option("--reservation-affinity")] = None,
    enable_autoscaling: Annotated[bool, typer.Option("--enable-autoscaling")] = False,
    num_nodes: Annotated[int, typer.Option("--num-nodes")] = 3,
    min_nodes: Annotated[int | None, typer.Option("--min-nodes")] = None,
    max_nodes: Annotated[int | None, typer.Option("--max-nodes")] = None,
    flex_start: Annotated[bool, typer.Option("--flex-start")] = False,
    enable_queued_provisioning: Annotated[bool, typer.Option("--enable-queued-provisioning")] = False,
    ray_address: Annotated[str | None, typer.Option(
        "--ray-address", help="flexq's own: the pool is an existing Ray cluster, given by its dashboard's address "
        "(http://HOST:8265); its nodes are the cluster's, and jobs admitted onto it run there.")] = None,
    location: LocationOpt = None,
    project: ProjectOpt = None,
) -> None:
    """Create a node pool (the flags of `gcloud container node-pools create`)."""
    if ray_address is not None:
        from flexq.capacity import RayAddressError, dashboard_address

        try:
            ray_address = dashboard_address(ray_address)
        except RayAddressError as exc:
            raise CliError(f"ERROR: (gcloud.container.node-pools.create) {exc}") from None
        if machine_type != "n2-standard-16" or num_nodes != 3 or tpu_topology:
            raise CliError("ERROR: (gcloud.container.node-pools.create) --ray-address: the pool's nodes are the Ray "
                           "cluster's, so --machine-type, --num-nodes and --tpu-topology do not apply")
        num_nodes, machine_type = 0, "ray-cluster"
    client = options.client()
    client.request("GET", client.path(resolve("clusters.flexq.dev"), None, cluster))
    if enable_autoscaling and max_nodes is None:
        raise CliError("ERROR: (gcloud.container.node-pools.create) --max-nodes must be set with "
                       "--enable-autoscaling")
    flags = PoolFlags(name, cluster, machine_type, location=location, num_nodes=num_nodes, tpu_topology=tpu_topology,
                      reservation_affinity=reservation_affinity, autoscaling=enable_autoscaling,
                      min_nodes=min_nodes, max_nodes=max_nodes, flex_start=flex_start,
                      queued_provisioning=enable_queued_provisioning, ray_address=ray_address)
    if client.request("GET", client.path(resolve("nodepool"), None, name), ok_missing=True) is not None:
        raise CliError(f"ERROR: (gcloud.container.node-pools.create) ResponseError: code=409, message=Already "
                       f"exists: node pool {name!r} in cluster {cluster!r}.")
    _apply_objects(client, [flags.node_pool()], "container.node-pools.create")
    _await_nodes(client, created=[name])
    typer.echo(f"Created [{name}] in cluster [{cluster}].", err=True)
    typer.echo(f"NAME  MACHINE_TYPE  DISK_SIZE_GB  NODE_VERSION\n{name}  {machine_type}  100  1.34")


def _pool(client: Client, name: str, cluster: str) -> dict[str, Any]:
    pool = client.request("GET", client.path(resolve("nodepool"), None, name), ok_missing=True)
    if pool is None or pool["spec"]["cluster"] != cluster:
        raise CliError(f"ERROR: (gcloud.container.node-pools.describe) ResponseError: code=404, message=Not found: "
                       f"node pool {name!r} in cluster {cluster!r}.")
    return dict(pool)


@pools_app.command("describe")
def pools_describe(
    name: Annotated[str, typer.Argument()],
    cluster: Annotated[str, typer.Option("--cluster")],
    location: LocationOpt = None,
    project: ProjectOpt = None,
    format: FormatOpt = None,
) -> None:
    """Describe a node pool as GKE does (`--format="get(config.flexStart)"` prints True)."""
    from flexq.capacity import gke_node_pool
    from flexq.cli.gformat import FormatError, render

    client = options.client()
    resource = gke_node_pool(_pool(client, name, cluster), project or "", location or "")
    try:
        typer.echo(render(resource, format), nl=False)
    except FormatError as exc:
        raise CliError(f"ERROR: (gcloud.container.node-pools.describe) {exc}") from None


@pools_app.command("list")
def pools_list(
    cluster: Annotated[str, typer.Option("--cluster")],
    location: LocationOpt = None,
    project: ProjectOpt = None,
) -> None:
    client = options.client()
    items = [p for p in client.request("GET", client.path(resolve("nodepool"), None)).get("items", [])
             if p["spec"]["cluster"] == cluster]
    rows = [["NAME", "MACHINE_TYPE", "DISK_SIZE_GB", "NODE_VERSION"]] + [
        [p["metadata"]["name"], p["spec"].get("machineType") or "ray-cluster", "100", "1.34"] for p in items]
    typer.echo(columns(rows, gap="  "))


@pools_app.command("delete")
def pools_delete(
    name: Annotated[str, typer.Argument()],
    cluster: Annotated[str, typer.Option("--cluster")],
    location: LocationOpt = None,
    project: ProjectOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    client = options.client()
    _pool(client, name, cluster)
    client.request("DELETE", client.path(resolve("nodepool"), None, name))
    _await_nodes(client, deleted=[name])
    typer.echo(f"Deleted [{name}].", err=True)
