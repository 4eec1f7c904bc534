"""``flexq``: the command line. kubectl-shaped where the guide uses kubectl; flexq's own beyond it.

Every command reaches the server through ``--server URL`` or ``FLEXQ_SERVER``, else the default local
address. With no server there, a command says how to start one and exits 1: the CLI never starts a
server behind the user's back, so state always lives in one place the user chose.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer

from flexq import __version__
from flexq.api.envsubst import read_env_file
from flexq.api.errors import ApiError, InputError
from flexq.api.kinds import KindInfo, UnknownKind, resolve
from flexq.cli.client import Client, CliError, close_clients
from flexq.cli.dashboard import dashboard
from flexq.cli.export import export_app
from flexq.cli.importer import import_cluster
from flexq.cli.inputs import read_manifests
from flexq.cli.kubeconfigs import kubeconfig_text
from flexq.cli.printers import describe as describe_text
from flexq.cli.printers import render_table, to_json, to_yaml
from flexq.cli.tokens import token_app
from flexq.config import DEFAULT_HOST, DEFAULT_PORT, caller_token, default_server_url, flexq_home

__all__ = ["app", "main"]

app = typer.Typer(
    name="flexq", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    help="A job queue for AI training: Kueue's semantics, DWS queued provisioning, real runs on Ray.",
    context_settings={"help_option_names": ["-h", "--help"]},
)
create_app = typer.Typer(help="Create an object from flags (kubectl create ...).", no_args_is_help=True)
app.add_typer(create_app, name="create")
app.add_typer(token_app, name="token")
app.add_typer(export_app, name="export")
app.command("import")(import_cluster)

_state: dict[str, str] = {}

TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def _client() -> Client:
    return Client(_state.get("server") or default_server_url())


@app.callback()
def _root(
    server: Annotated[str | None, typer.Option("--server", "-s", help="flexq server URL (env FLEXQ_SERVER).",
                                               envvar="FLEXQ_SERVER")] = None,
) -> None:
    if server:
        _state["server"] = server


def _env(env: list[str] | None, env_file: Path | None) -> dict[str, str]:
    values: dict[str, str] = {}
    if env_file is not None:
        loaded, warnings = read_env_file(env_file)
        for warning in warnings:
            typer.echo(f"warning: {warning}", err=True)
        values.update(loaded)
    for item in env or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"--env {item!r}: expected NAME=VALUE")
        values[key] = value
    return values


NamespaceOpt = Annotated[str | None, typer.Option("--namespace", "-n", help="Namespace (default: default).")]


@app.command()
def apply(
    filename: Annotated[list[str], typer.Option("--filename", "-f", help="File, directory or - for stdin.")],
    namespace: NamespaceOpt = None,
    env: Annotated[list[str] | None, typer.Option("--env", help="Substitute ${NAME} with VALUE (NAME=VALUE).")] = None,
    env_file: Annotated[Path | None, typer.Option("--env-file", help="KEY=VALUE lines to substitute.")] = None,
    validate: Annotated[str, typer.Option(
        "--validate", help="strict: refuse fields the schema does not declare (with the file and line); warn: drop "
                           "them with a warning; ignore: drop them silently.")] = "strict",
) -> None:
    """Create or update objects from manifests. All documents are applied, or none."""
    modes = {"strict": "Strict", "true": "Strict", "warn": "Warn", "ignore": "Ignore", "false": "Ignore"}
    if validate.lower() not in modes:
        raise typer.BadParameter(f"{validate!r}: expected strict, warn or ignore", param_hint="--validate")
    manifests = read_manifests(filename, _env(env, env_file))
    client = _client()
    body = {"sources": [{"text": m.text, "source": m.source} for m in manifests],
            "namespace": namespace or "default", "fieldValidation": modes[validate.lower()]}
    try:
        response = client.request("POST", "/flexq/v1/apply", json=body)
    except CliError as exc:
        raise CliError(exc.message.replace("Error from server (Invalid): ", "error: ")
                       .replace("Error from server (BadRequest): ", "error: ")) from None
    for warning in response.get("warnings", []):
        typer.echo(f"Warning: {warning}", err=True)
    for result in response["results"]:
        resource = f"{result['kind'].lower()}.{result['group']}" if result["group"] else result["kind"].lower()
        typer.echo(f"{resource}/{result['name']} {result['action']}")


def _targets(kinds: str, names: list[str]) -> list[tuple[KindInfo, str | None]]:
    """``cq`` / ``cq,lq`` / ``cq NAME`` / ``cq/NAME`` into (kind, name) pairs."""
    if not kinds.strip(",/ ") or any(not n for n in names):
        raise CliError("error: resource types and names must not be empty")
    if "/" in kinds:
        out = []
        for item in [kinds, *names]:
            kind, _, name = item.partition("/")
            out.append((resolve(kind), name or None))
        return out
    infos = [resolve(k) for k in kinds.split(",") if k]
    if names:
        if len(infos) > 1:
            raise CliError("error: there is no need to specify a resource type as a separate argument when "
                           "passing arguments in resource/name form")
        return [(infos[0], n) for n in names]
    return [(i, None) for i in infos]


@app.command()
def get(
    kind: Annotated[str, typer.Argument(help="Kind(s): cq, lq, wl, rf, rayjobs, cq,lq,... or KIND/NAME.")],
    names: Annotated[list[str] | None, typer.Argument(help="Names.")] = None,
    namespace: NamespaceOpt = None,
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="Every namespace.")] = False,
    output: Annotated[str | None, typer.Option("--output", "-o", help="wide, yaml, json or name.")] = None,
    selector: Annotated[str | None, typer.Option("--selector", "-l", help="Label selector.")] = None,
) -> None:
    """List or show objects."""
    if output not in (None, "wide", "yaml", "json", "name"):
        raise CliError(f"error: unable to match a printer suitable for the output format {output!r}, "
                       "allowed formats are: json, name, wide, yaml")
    targets = _targets(kind, names or [])
    ns = None if all_namespaces else (namespace or "default")
    client = _client()
    params = {"labelSelector": selector} if selector else None
    objects: list[tuple[KindInfo, dict[str, Any]]] = []
    tables: list[tuple[KindInfo, dict[str, Any]]] = []
    for info, name in targets:
        path = client.path(info, ns, name)
        if output in (None, "wide"):
            tbl = client.request("GET", path, params=params, headers={"Accept": TABLE_ACCEPT})
            tables.append((info, tbl))
        else:
            found = client.request("GET", path, params=params)
            items = found.get("items", []) if name is None else [found]
            objects.extend((info, item) for item in items)
    if output in (None, "wide"):
        text = render_table(tables, wide=output == "wide", all_namespaces=all_namespaces,
                            qualify=len(targets) > 1 and len({i.kind for i, _ in targets}) > 1)
        if text:
            typer.echo(text)
        elif ns and any(i.namespaced for i, _ in targets):
            typer.echo(f"No resources found in {ns} namespace.", err=True)
        else:
            typer.echo("No resources found", err=True)
        return
    if output == "name":
        for info, obj in objects:
            resource = f"{info.singular}.{info.group}" if info.group else info.singular
            typer.echo(f"{resource}/{obj['metadata']['name']}")
        return
    single = len(targets) == 1 and targets[0][1] is not None
    payload: Any = objects[0][1] if single else {
        "apiVersion": "v1", "kind": "List", "items": [o for _, o in objects], "metadata": {"resourceVersion": ""}}
    typer.echo(to_yaml(payload) if output == "yaml" else to_json(payload), nl=output != "yaml")


@app.command()
def describe(
    kind: Annotated[str, typer.Argument(help="Kind, or KIND/NAME.")],
    names: Annotated[list[str] | None, typer.Argument(help="Names (default: all of the kind).")] = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Show an object in detail, with its conditions and events."""
    client = _client()
    ns = namespace or "default"
    texts = []
    for info, name in _targets(kind, names or []):
        if name is None:
            items = client.request("GET", client.path(info, ns)).get("items", [])
        else:
            items = [client.request("GET", client.path(info, ns, name))]
        for obj in items:
            meta = obj["metadata"]
            selector = f"involvedObject.name={meta['name']},involvedObject.uid={meta.get('uid', '')}"
            events_ns = meta.get("namespace") or "default"
            events = client.request("GET", f"/api/v1/namespaces/{events_ns}/events",
                                    params={"fieldSelector": selector}).get("items", [])
            texts.append(describe_text(info, obj, events))
    typer.echo("\n\n".join(texts))


@app.command()
def delete(
    kind: Annotated[str | None, typer.Argument(help="Kind, or KIND/NAME.")] = None,
    names: Annotated[list[str] | None, typer.Argument(help="Names.")] = None,
    filename: Annotated[list[str] | None, typer.Option("--filename", "-f", help="Delete what a file names.")] = None,
    namespace: NamespaceOpt = None,
    ignore_not_found: Annotated[bool, typer.Option("--ignore-not-found")] = False,
    env: Annotated[list[str] | None, typer.Option("--env", help="Substitute ${NAME} with VALUE.")] = None,
    env_file: Annotated[Path | None, typer.Option("--env-file")] = None,
) -> None:
    """Delete objects by kind and name, or those a manifest names."""
    client = _client()
    ns = namespace or "default"
    targets: list[tuple[KindInfo, str, str]] = []
    if filename:
        from flexq.api.documents import load_documents
        from flexq.api.kinds import by_gvk

        for manifest in read_manifests(filename, _env(env, env_file)):
            for doc in load_documents(manifest.text, manifest.source):
                try:
                    info = by_gvk(str(doc.obj.get("apiVersion", "")), str(doc.obj.get("kind", "")))
                except UnknownKind as exc:
                    raise InputError(manifest.source, str(exc), doc.line) from None
                meta = doc.obj.get("metadata") or {}
                targets.append((info, meta.get("namespace") or ns, str(meta.get("name", ""))))
    elif kind:
        for info, name in _targets(kind, names or []):
            if name is None:
                raise CliError("error: resource(s) were provided, but no name was specified")
            targets.append((info, ns, name))
    else:
        raise CliError("error: you must provide one or more resources by argument or filename")
    failed = False
    for info, obj_ns, name in targets:
        resource = f"{info.singular}.{info.group}" if info.group else info.singular
        try:
            client.request("DELETE", client.path(info, obj_ns, name))
            typer.echo(f'{resource} "{name}" deleted')
        except CliError as exc:
            if ignore_not_found and "(NotFound)" in exc.message:
                continue
            typer.echo(exc.message, err=True)
            failed = True
    if failed:
        raise typer.Exit(1)


@create_app.command("configmap")
def create_configmap(
    name: Annotated[str, typer.Argument(help="ConfigMap name.")],
    from_file: Annotated[list[str] | None, typer.Option("--from-file", help="[KEY=]PATH; key defaults to the file name.")] = None,  # noqa: E501
    from_literal: Annotated[list[str] | None, typer.Option("--from-literal", help="KEY=VALUE.")] = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Create a ConfigMap from files and literals (kubectl create configmap)."""
    data: dict[str, str] = {}
    for item in from_file or []:
        key, sep, path_text = item.partition("=")
        path = Path(path_text if sep else key)
        key = key if sep else path.name
        try:
            data[key] = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(str(path), "no such file or directory") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(str(path), f"cannot read as text: {exc}") from None
    for item in from_literal or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"error: --from-literal {item!r}: expected KEY=VALUE")
        data[key] = value
    client = _client()
    info = resolve("configmap")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    client.request("POST", client.path(info, namespace or "default"), json=body)
    typer.echo(f"configmap/{name} created")


container_app = typer.Typer(help="Clusters and node pools, as `gcloud container` manages them.",
                            no_args_is_help=True)
clusters_app = typer.Typer(help="gcloud container clusters ...", no_args_is_help=True)
pools_app = typer.Typer(help="gcloud container node-pools ...", no_args_is_help=True)
container_app.add_typer(clusters_app, name="clusters")
container_app.add_typer(pools_app, name="node-pools")
app.add_typer(container_app, name="container")

LocationOpt = Annotated[str | None, typer.Option("--location", "--zone", "--region", help="Zone or region.")]
ProjectOpt = Annotated[str | None, typer.Option("--project", help="Project (accepted; one cluster space).")]
FormatOpt = Annotated[str | None, typer.Option("--format", help="yaml, json, get(FIELD), value(FIELD,...).")]


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
    client = _client()
    machine = machine_type if machine_type != "e2-medium" else "n2-standard-16"
    cluster = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Cluster", "metadata": {"name": name},
               "spec": {"location": location, "project": project, "machineType": machine, "numNodes": num_nodes,
                        "version": cluster_version}}
    pool = _pool_object("default-pool", name, location, machine, None, None, False, num_nodes, None, None, False,
                        False)
    _apply_objects(client, [cluster, pool], "container.clusters.create")
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
    client = _client()
    pools = client.request("GET", client.path(resolve("nodepool"), None)).get("items", [])
    for pool in pools:
        if pool["spec"]["cluster"] == name:
            client.request("DELETE", client.path(resolve("nodepool"), None, pool["metadata"]["name"]))
    client.request("DELETE", client.path(resolve("clusters.flexq.dev"), None, name))
    typer.echo(f"Deleted [{name}].", err=True)


@clusters_app.command("list")
def clusters_list(location: LocationOpt = None, project: ProjectOpt = None) -> None:
    client = _client()
    items = client.request("GET", client.path(resolve("clusters.flexq.dev"), None)).get("items", [])
    rows = [["NAME", "LOCATION", "MACHINE_TYPE", "STATUS"]] + [
        [c["metadata"]["name"], c["spec"].get("location") or "", c["spec"].get("machineType") or "", "RUNNING"]
        for c in items]
    typer.echo(_columns(rows))


@clusters_app.command("get-credentials")
def clusters_get_credentials(
    name: Annotated[str, typer.Argument()],
    location: LocationOpt = None,
    project: ProjectOpt = None,
) -> None:
    """Point kubectl at the flexq server (writes FLEXQ_HOME/kubeconfig; export KUBECONFIG to use it)."""
    client = _client()
    client.request("GET", client.path(resolve("clusters.flexq.dev"), None, name))
    home = flexq_home()
    home.mkdir(parents=True, exist_ok=True)
    path = home / "kubeconfig"
    path.write_text(kubeconfig_text(client.server), encoding="utf-8")
    typer.echo(f"Fetching cluster endpoint and auth data.\nkubeconfig entry generated for {name} in {path}.",
               err=True)


def _pool_object(name: str, cluster: str, location: str | None, machine: str, topology: str | None,
                 reservation: str | None, autoscaling: bool, num_nodes: int, min_nodes: int | None,
                 max_nodes: int | None, flex_start: bool, queued: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"cluster": cluster, "machineType": machine, "initialNodeCount": num_nodes,
                            "autoscaling": {"enabled": autoscaling}}
    if autoscaling:
        spec["autoscaling"].update({"minNodeCount": min_nodes or 0, "maxNodeCount": max_nodes or 0})
    for key, value in (("location", location), ("tpuTopology", topology), ("reservationAffinity", reservation)):
        if value:
            spec[key] = value
    if flex_start:
        spec["flexStart"] = True
    if queued:
        spec["queuedProvisioning"] = True
    return {"apiVersion": "flexq.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def _apply_objects(client: Client, objects: list[dict[str, Any]], command: str) -> None:
    import json
    import re

    text = "\n---\n".join(json.dumps(o) for o in objects)
    try:
        client.request("POST", "/flexq/v1/apply", json={"sources": [{"text": text, "source": "flags"}]})
    except CliError as exc:
        problems = re.findall(r"^\s+line \d+: (?:[\w.\[\]]+: )?(.*)$", exc.message, re.MULTILINE)
        detail = "; ".join(problems) if problems else exc.message.split("): ", 1)[-1]
        raise CliError(f"ERROR: (gcloud.{command}) {detail}") from None


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
    location: LocationOpt = None,
    project: ProjectOpt = None,
) -> None:
    """Create a node pool (the flags of `gcloud container node-pools create`)."""
    client = _client()
    client.request("GET", client.path(resolve("clusters.flexq.dev"), None, cluster))
    if enable_autoscaling and max_nodes is None:
        raise CliError("ERROR: (gcloud.container.node-pools.create) --max-nodes must be set with "
                       "--enable-autoscaling")
    pool = _pool_object(name, cluster, location, machine_type, tpu_topology, reservation_affinity,
                        enable_autoscaling, num_nodes, min_nodes, max_nodes, flex_start, enable_queued_provisioning)
    if client.request("GET", client.path(resolve("nodepool"), None, name), ok_missing=True) is not None:
        raise CliError(f"ERROR: (gcloud.container.node-pools.create) ResponseError: code=409, message=Already "
                       f"exists: node pool {name!r} in cluster {cluster!r}.")
    _apply_objects(client, [pool], "container.node-pools.create")
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
    from flexq.capacity.gke import gke_node_pool
    from flexq.cli.gformat import FormatError, render

    client = _client()
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
    client = _client()
    items = [p for p in client.request("GET", client.path(resolve("nodepool"), None)).get("items", [])
             if p["spec"]["cluster"] == cluster]
    rows = [["NAME", "MACHINE_TYPE", "DISK_SIZE_GB", "NODE_VERSION"]] + [
        [p["metadata"]["name"], p["spec"]["machineType"], "100", "1.34"] for p in items]
    typer.echo(_columns(rows))


@pools_app.command("delete")
def pools_delete(
    name: Annotated[str, typer.Argument()],
    cluster: Annotated[str, typer.Option("--cluster")],
    location: LocationOpt = None,
    project: ProjectOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    client = _client()
    _pool(client, name, cluster)
    client.request("DELETE", client.path(resolve("nodepool"), None, name))
    typer.echo(f"Deleted [{name}].", err=True)


def _columns(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows)


check_app = typer.Typer(help="Drive admission checks by hand.", no_args_is_help=True)
app.add_typer(check_app, name="check")


@check_app.command("set")
def check_set(
    workload: Annotated[str, typer.Argument(help="Workload name, or rayjob/NAME or job/NAME for a job's workload.")],
    check: Annotated[str, typer.Option("--check", "-c", help="Admission check name (e.g. dws-prov).")],
    state: Annotated[str, typer.Option("--state", help="Ready, Retry, Rejected or Pending.")],
    message: Annotated[str, typer.Option("--message", "-m", help="Why.")] = "",
    namespace: NamespaceOpt = None,
) -> None:
    """Set an admission check's state on a workload (what a check controller does)."""
    if state not in ("Ready", "Retry", "Rejected", "Pending"):
        raise CliError(f"error: --state {state!r}: expected Ready, Retry, Rejected or Pending")
    client = _client()
    ns = namespace or "default"
    info = resolve("workload")
    name = _workload_name(client, workload, ns)
    obj = client.request("GET", client.path(info, ns, name))
    checks = (obj.get("status") or {}).get("admissionChecks") or []
    if not any(c.get("name") == check for c in checks):
        known = ", ".join(c.get("name", "") for c in checks) or "none (it holds no quota yet)"
        raise CliError(f"error: workload {ns}/{name} has no admission check {check!r}; its checks: {known}")
    from datetime import UTC, datetime

    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    updated = [dict(c, state=state, message=message, lastTransitionTime=stamp) if c.get("name") == check else c
               for c in checks]
    client.request("PATCH", client.path(info, ns, name) + "/status", json={"status": {"admissionChecks": updated}},
                   headers={"Content-Type": "application/merge-patch+json"})
    typer.echo(f"workload.kueue.x-k8s.io/{name} check {check} set to {state}")


def _workload_name(client: Client, ref: str, namespace: str) -> str:
    kind, sep, name = ref.partition("/")
    if not sep:
        return ref
    job_info = resolve(kind)
    job = client.request("GET", client.path(job_info, namespace, name))
    uid = job["metadata"].get("uid", "")
    items = client.request("GET", client.path(resolve("workload"), namespace),
                           params={"labelSelector": f"kueue.x-k8s.io/job-uid={uid}"}).get("items", [])
    if not items:
        raise CliError(f"error: {kind}/{name} has no workload (is it labelled kueue.x-k8s.io/queue-name?)")
    return str(items[0]["metadata"]["name"])


@app.command()
def server(
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default; any other needs tokens and "
                                           "TLS).")] = DEFAULT_HOST,
    port: Annotated[int, typer.Option(help="Port for plain HTTP (flexq's CLI; on loopback only).")] = DEFAULT_PORT,
    home: Annotated[Path | None, typer.Option(help="State directory (env FLEXQ_HOME).")] = None,
    log_level: Annotated[str, typer.Option(help="critical, error, warning, info or debug.")] = "warning",
    capacity: Annotated[Path | None, typer.Option(
        help="The emulated cloud's behaviour (the format of a scenario's spec.capacity: cloud, timings).")] = None,
    runtime: Annotated[str, typer.Option(help="ray: run admitted RayJobs on local Ray clusters; none: do not.")]
    = "ray",
    tls_port: Annotated[int | None, typer.Option(
        help="Port for HTTPS, the endpoint gcloud's get-credentials points kubectl at (default: --port + 1; "
             "0: any free port).")] = None,
    no_tls: Annotated[bool, typer.Option("--no-tls", help="Serve plain HTTP only (loopback only).")] = False,
    auth: Annotated[str | None, typer.Option(
        help="anonymous: a caller without a token is the administrator (the default on loopback); token: every "
             "request needs a token (the default, and the only choice, on other addresses).")] = None,
    store: Annotated[str | None, typer.Option(
        envvar="FLEXQ_STORE",
        help="Where objects live: postgresql://USER@HOST:PORT/DB (shared by several servers; one leads the "
             "controllers) or sqlite:///PATH (default: FLEXQ_HOME/flexq.db).")] = None,
    lease_duration: Annotated[str, typer.Option(
        help="With PostgreSQL: how long the leader's lease lasts without renewal; another server takes over "
             "within it when the leader dies.")] = "15s",
) -> None:
    """Serve the Kubernetes API, the GKE API and flexq's API until interrupted."""
    from flexq.durations import DurationError, parse_duration
    from flexq.server.listen import ListenError, plan_listeners
    from flexq.server.run import StoreOptionError, serve
    from flexq.sim.scenario import load_capacity
    from flexq.store import StoreUnavailable

    if runtime not in ("ray", "none"):
        raise CliError(f"error: --runtime {runtime!r}: expected ray or none")
    state = home or flexq_home()
    try:
        lease = parse_duration(lease_duration)
    except DurationError as exc:
        raise CliError(f"error: --lease-duration: {exc}") from None
    if lease < 1:
        raise CliError(f"error: --lease-duration {lease_duration}: must be at least 1s")
    try:
        plan = plan_listeners(host, port, tls_port, not no_tls, auth)
        config = load_capacity(capacity) if capacity is not None else None
        serve(state, plan, log_level=log_level, capacity=config, runtime=runtime, store_spec=store,
              lease_duration=lease)
    except (ListenError, StoreOptionError, StoreUnavailable) as exc:  # the store refusing its first writes
        raise CliError(f"error: {exc}") from None


@app.command()
def kubeconfig(
    write: Annotated[Path | None, typer.Option("--write", "-w", help="Write to this file instead of stdout.")] = None,
) -> None:
    """Print (or write) a kubeconfig that points kubectl at the flexq server."""
    text = kubeconfig_text(_state.get("server") or default_server_url())
    if write is None:
        typer.echo(text, nl=False)
        return
    write.parent.mkdir(parents=True, exist_ok=True)
    write.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {write}", err=True)


@app.command()
def env(
    project: Annotated[str, typer.Option(help="The gcloud project to use.")] = "demo",
) -> None:
    """Print shell exports that point kubectl, gcloud and flexq at the server: eval "$(flexq env)".

    Your own gcloud and kubectl configuration is left alone: gcloud gets a configuration directory of
    flexq's own (CLOUDSDK_CONFIG) and kubectl a kubeconfig of flexq's own (KUBECONFIG), both under FLEXQ_HOME.
    """
    home = flexq_home()
    home.mkdir(parents=True, exist_ok=True)
    server_url = (_state.get("server") or default_server_url()).rstrip("/")
    kubeconfig_path = home / "kubeconfig"
    kubeconfig_path.write_text(kubeconfig_text(server_url), encoding="utf-8")
    gcloud = home / "gcloud"
    (gcloud / "configurations").mkdir(parents=True, exist_ok=True)
    (gcloud / "active_config").write_text("default", encoding="utf-8")
    token = gcloud / "access-token"
    token.write_text((caller_token() or "anonymous") + "\n", encoding="utf-8")
    token.chmod(0o600)
    # The caller's flexq token as gcloud's access token: gcloud sends it to the GKE API, and
    # gke-gcloud-auth-plugin hands it to kubectl after get-credentials. Without one ("anonymous"), a server in
    # anonymous mode takes the caller for the administrator and one that requires tokens refuses it.
    (gcloud / "configurations" / "config_default").write_text(
        "[core]\n"
        f"project = {project}\n"
        "account = flexq@local\n"
        "disable_prompts = true\n"
        "disable_usage_reporting = true\n"
        "[auth]\n"
        f"access_token_file = {token}\n"
        "[component_manager]\n"
        "disable_update_check = true\n"
        "[api_endpoint_overrides]\n"
        f"container = {server_url}/\n"
        f"cloudresourcemanager = {server_url}/\n"
        f"serviceusage = {server_url}/\n", encoding="utf-8")
    typer.echo(f"export FLEXQ_SERVER={server_url}\nexport KUBECONFIG={kubeconfig_path}\n"
               f"export CLOUDSDK_CONFIG={gcloud}")


@app.command()
def simulate(
    scenario: Annotated[Path, typer.Argument(help="Scenario file (kind: Scenario).")],
    events: Annotated[Path | None, typer.Option("--events", help="Write the event log here (JSON lines; - for stdout).")] = None,  # noqa: E501
    output: Annotated[str | None, typer.Option("--output", "-o", help="json: print a summary as JSON.")] = None,
    report: Annotated[Path | None, typer.Option("--report", help="Write report.html, jobs.csv, summary.json here.")]
    = None,
    compare: Annotated[bool, typer.Option("--compare", help="Run every policy (Kueue-compatible, flexq, the "
                                                         "clairvoyant lower bound) and compare them.")] = False,
    progress: Annotated[bool | None, typer.Option("--progress/--no-progress", help="A progress bar on stderr "
                                                   "(default: when stderr is a terminal).")] = None,
) -> None:
    """Replay a scenario in virtual time (no server needed): every admission decision, in order."""
    from flexq.sim.policies import compare_policies, policy_name, policy_run
    from flexq.sim.progress import SimProgress
    from flexq.sim.report import write_report
    from flexq.sim.runner import run_scenario
    from flexq.sim.scenario import load_scenario

    if output not in (None, "json"):
        raise CliError(f"error: --output {output!r}: the only format is json")
    loaded = load_scenario(scenario)
    show = sys.stderr.isatty() if progress is None else progress
    with SimProgress(loaded, enabled=show) as bar:
        result = run_scenario(loaded, bar.callback(loaded.name))
        runs = None
        if compare:
            runs = compare_policies(loaded, result, bar.labelled)
    if report is not None or runs is not None:
        if runs is None:
            runs = {policy_name(loaded): policy_run(result)}
        if report is not None:
            written = write_report(report, runs, result.flex_flavors)
            typer.echo(f"report written to {report / 'report.html'}", err=True)
        else:
            from flexq.sim.report import summarize

            written = {p: summarize(r.rows, r.events, result.flex_flavors) for p, r in runs.items()}
        _policy_table(written)
    if events is not None:
        text = "".join(line + "\n" for line in result.log_lines())
        if str(events) == "-":
            typer.echo(text, nl=False)
        else:
            events.parent.mkdir(parents=True, exist_ok=True)
            events.write_text(text, encoding="utf-8")
    summary = result.summary()
    if output == "json":
        typer.echo(to_json(summary))
        return
    if str(events) != "-":
        typer.echo(_summary_table(summary))


def _policy_table(summary: dict[str, Any]) -> None:
    """Each policy's waits (and p95 over the oracle's), fallbacks and cost, as a table on stderr."""
    from rich.console import Console
    from rich.table import Table

    from flexq.durations import format_seconds
    from flexq.sim.policies import LOWER_BOUND, ORACLE
    from flexq.sim.report import ratio as _ratio

    def t(value: float | None) -> str:
        return "-" if value is None else format_seconds(value)

    reference = (summary.get(ORACLE) or {}).get("wait", {}).get("p95")
    table = Table("policy", "jobs", "started", "p50 wait", "p95 wait", "max wait", "p95/oracle", "fallbacks",
                  "DWS retries", "cost", "wasted", box=None, header_style="bold")
    for policy, numbers in summary.items():
        wait = numbers["wait"]
        clairvoyant = policy in (LOWER_BOUND, ORACLE)
        ratio = _ratio(wait["p95"], reference)
        table.add_row(policy, str(numbers["jobs"]), str(numbers["jobs"] - numbers["neverStarted"]), t(wait["p50"]),
                      t(wait["p95"]), t(wait["max"]), ratio, str(numbers["fallbacks"]),
                      str(numbers["provisioningRetries"]),
                      "-" if clairvoyant else f"${numbers['cost']['total']:,.2f}",
                      "-" if clairvoyant else f"${numbers['cost']['wasted']:,.2f}")
    Console(stderr=True, width=160).print(table)


def _summary_table(summary: dict[str, Any]) -> str:
    from flexq.durations import format_seconds

    header = ["WORKLOAD", "QUEUE", "STATE", "SUBMITTED", "ADMITTED", "STARTED", "FINISHED", "WAIT", "FLAVORS"]
    costed = any("cost" in row for row in summary["workloads"])
    if costed:
        header.insert(-1, "COST")
    rows = [header]
    for row in summary["workloads"]:
        flavors = ",".join(f"{ps}={'/'.join(sorted(set(res.values())))}" for ps, res in (row["flavors"] or {}).items())
        def t(value: float | None) -> str:
            return "" if value is None else format_seconds(value)
        cells = [row["workload"], row["clusterQueue"], row["state"], t(row["submitted"]), t(row["admitted"]),
                 t(row["started"]), t(row["finished"]), t(row["wait"]), flavors or (row["pendingReason"] or "")]
        if costed:
            cells.insert(-1, f"${row.get('cost', 0):.2f}")
        rows.append(cells)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("   ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows)


@app.command()
def logs(
    target: Annotated[str, typer.Argument(help="rayjob/NAME, or job/NAME (a RayJob's submitter, as in the guide).")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing until the job ends.")] = False,
    namespace: NamespaceOpt = None,
) -> None:
    """Print a job's driver log (it ends with `Job '...' succeeded` once the job has)."""
    kind, sep, name = target.partition("/")
    if not sep or kind not in ("rayjob", "rayjobs", "job", "jobs") or not name:
        raise CliError(f"error: {target!r}: expected rayjob/NAME or job/NAME")
    client = _client()
    ns = namespace or "default"
    path = f"/flexq/v1/namespaces/{quote(ns, safe='')}/rayjobs/{quote(name, safe='')}/logs"
    if not follow:
        typer.echo(client.request_text("GET", path), nl=False)
        return
    for chunk in client.stream_text(path, {"follow": "true"}):
        typer.echo(chunk, nl=False)


@app.command("port-forward")
def port_forward(
    target: Annotated[str, typer.Argument(help="rayjob/NAME (its head), service/NAME or pod/NAME.")],
    ports: Annotated[list[str], typer.Argument(help="[LOCAL_PORT:]REMOTE_PORT, e.g. 8265 or :8265 (any free "
                                                     "local port); a RayJob's head serves 8265 (dashboard), 6379 "
                                                     "(GCS) and 10001 (client).")],
    address: Annotated[str, typer.Option("--address", help="The local address to listen on.")] = "127.0.0.1",
    namespace: NamespaceOpt = None,
) -> None:
    """Forward local ports to a pod's ports through the server (a job's Ray dashboard), as kubectl port-forward."""
    from flexq.cli import forward

    pairs = forward.parse_ports(ports)
    client = _client()
    ns = namespace or "default"
    pod = forward.resolve_pod(client, target, ns)
    forward.run(client.server, ns, pod, pairs, address, out=typer.echo,
                err=lambda line: typer.echo(line, err=True))


@app.command()
def top(
    interval: Annotated[float, typer.Option("--interval", "-n", help="Seconds between refreshes.", min=0.5)] = 2.0,
    once: Annotated[bool, typer.Option("--once", help="Print the overview once and exit.")] = False,
) -> None:
    """Where every queue, node pool and waiting job stands, live: quota in use, nodes, why each job waits."""
    from rich.console import Console

    from flexq.cli import top as overview

    overview.run(_client(), interval, once, Console(width=None if not once else 200))


app.command()(dashboard)


@app.command()
def version() -> None:
    """Print flexq's version."""
    typer.echo(f"flexq {__version__}")


def main() -> None:
    """Entry point: run the app; user errors become a message on stderr and exit 1, never a traceback."""
    try:
        code = app(standalone_mode=False)  # a command's typer.Exit(N) comes back as N here
    except CliError as exc:
        typer.echo(exc.message, err=True)
        sys.exit(exc.code)
    except (ApiError, UnknownKind) as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("Aborted.", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        if _usage_error(exc):  # a bad option or argument: click's own message, as in standalone mode
            exc.show()  # type: ignore[attr-defined]
            sys.exit(int(exc.exit_code))  # type: ignore[attr-defined]
        raise
    finally:
        close_clients()
    if isinstance(code, int) and code:
        sys.exit(code)


def _usage_error(exc: Exception) -> bool:
    """Is ``exc`` a click error (from click, or from the copy of click that newer typer releases vendor)?"""
    import click

    vendored: tuple[type[Exception], ...] = ()
    try:
        from typer._click import exceptions as typer_click  # type: ignore[import-not-found, unused-ignore]

        vendored = (typer_click.ClickException,)
    except ImportError:
        pass
    return isinstance(exc, (click.ClickException, *vendored))


if __name__ == "__main__":
    main()
