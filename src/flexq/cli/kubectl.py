"""The kubectl-shaped verbs: apply, get, describe, delete, create configmap, logs and port-forward."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer

from flexq.api import InputError, KindInfo, UnknownKind, config_key_errors, go_quote, resolve
from flexq.cli import options
from flexq.cli.checks import workload_name
from flexq.cli.inputs import read_manifests
from flexq.cli.options import NamespaceOpt
from flexq.cli.printers import describe as describe_text
from flexq.cli.printers import render_table, to_json, to_yaml
from flexq.cli.watching import watch
from flexq.client import Client, CliError, ServerError

__all__ = ["apply", "create_app", "delete", "describe", "get", "logs", "port_forward"]

create_app = typer.Typer(help="Create an object from flags (kubectl create ...).", no_args_is_help=True)

TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
_VALIDATION = {"strict": "Strict", "true": "Strict", "warn": "Warn", "ignore": "Ignore", "false": "Ignore"}


def _resource(info: KindInfo) -> str:
    """How kubectl names a kind in its messages: ``workload.kueue.x-k8s.io``, ``configmap``."""
    return f"{info.singular}.{info.group}" if info.group else info.singular


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
    if validate.lower() not in _VALIDATION:
        raise typer.BadParameter(f"{validate!r}: expected strict, warn or ignore", param_hint="--validate")
    manifests = read_manifests(filename, options.env_values(env, env_file))
    body = {"sources": [{"text": m.text, "source": m.source} for m in manifests],
            "namespace": namespace or "default", "fieldValidation": _VALIDATION[validate.lower()]}
    response = options.client().submit("/flexq/v1/apply", body)
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


def get(
    kind: Annotated[str, typer.Argument(help="Kind(s): cq, lq, wl, rf, rayjobs, cq,lq,... or KIND/NAME.")],
    names: Annotated[list[str] | None, typer.Argument(help="Names.")] = None,
    namespace: NamespaceOpt = None,
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="Every namespace.")] = False,
    output: Annotated[str | None, typer.Option("--output", "-o", help="wide, yaml, json or name.")] = None,
    selector: Annotated[str | None, typer.Option("--selector", "-l", help="Label selector.")] = None,
    watch_changes: Annotated[bool, typer.Option(
        "--watch", "-w", help="After listing, print each change as it comes (Ctrl-C ends it).")] = False,
) -> None:
    """List or show objects (a job's workload: ``workload rayjob/NAME`` or ``job/NAME``)."""
    if output not in (None, "wide", "yaml", "json", "name"):
        raise CliError(f"error: unable to match a printer suitable for the output format {output!r}, "
                       "allowed formats are: json, name, wide, yaml")
    ns = None if all_namespaces else (namespace or "default")
    client = options.client()
    targets = _job_workloads(client, _targets(kind, names or []), ns or "default")
    params = {"labelSelector": selector} if selector else None
    if watch_changes:
        if len(targets) != 1:
            raise CliError("error: you may only specify a single resource type, and at most one name, with --watch")
        info, name = targets[0]
        watch(client, info, ns if info.namespaced else None, name, selector, output, all_namespaces)
        return
    if output in (None, "wide"):
        tables = [(info, client.request("GET", client.path(info, ns, name), params=params,
                                        headers={"Accept": TABLE_ACCEPT})) for info, name in targets]
        _print_tables(tables, targets, ns, wide=output == "wide", all_namespaces=all_namespaces)
        return
    objects: list[tuple[KindInfo, dict[str, Any]]] = []
    for info, name in targets:
        found = client.request("GET", client.path(info, ns, name), params=params)
        objects.extend((info, item) for item in (found.get("items", []) if name is None else [found]))
    if output == "name":
        for info, obj in objects:
            typer.echo(f"{_resource(info)}/{obj['metadata']['name']}")
        return
    single = len(targets) == 1 and targets[0][1] is not None
    payload: Any = objects[0][1] if single else {
        "apiVersion": "v1", "kind": "List", "items": [o for _, o in objects], "metadata": {"resourceVersion": ""}}
    typer.echo(to_yaml(payload) if output == "yaml" else to_json(payload), nl=output != "yaml")


def _print_tables(tables: list[tuple[KindInfo, dict[str, Any]]], targets: list[tuple[KindInfo, str | None]],
                  ns: str | None, *, wide: bool, all_namespaces: bool) -> None:
    text = render_table(tables, wide=wide, all_namespaces=all_namespaces,
                        qualify=len(targets) > 1 and len({i.kind for i, _ in targets}) > 1)
    if text:
        typer.echo(text)
    elif ns and any(i.namespaced for i, _ in targets):
        typer.echo(f"No resources found in {ns} namespace.", err=True)
    else:
        typer.echo("No resources found", err=True)


def _job_workloads(client: Client, targets: list[tuple[KindInfo, str | None]],
                   namespace: str) -> list[tuple[KindInfo, str | None]]:
    """Targets with a Workload named by its job (``workload rayjob/NAME``, ``wl/job/NAME``) given the workload's
    own name, as ``flexq check set`` takes them."""
    return [(info, workload_name(client, name, namespace) if info.kind == "Workload" and name and "/" in name
             else name) for info, name in targets]


def describe(
    kind: Annotated[str, typer.Argument(help="Kind, or KIND/NAME; workload rayjob/NAME (or job/NAME): a job's.")],
    names: Annotated[list[str] | None, typer.Argument(help="Names (default: all of the kind).")] = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Show an object in detail, with its conditions and events."""
    client = options.client()
    ns = namespace or "default"
    texts: list[str] = []
    for info, name in _job_workloads(client, _targets(kind, names or []), ns):
        if name is None:
            items = client.request("GET", client.path(info, ns)).get("items", [])
        else:
            items = [client.request("GET", client.path(info, ns, name))]
        texts.extend(describe_text(info, obj, _events(client, obj)) for obj in items)
    typer.echo("\n\n".join(texts))


def _events(client: Client, obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The events about ``obj``."""
    meta = obj["metadata"]
    selector = f"involvedObject.name={meta['name']},involvedObject.uid={meta.get('uid', '')}"
    events_ns = meta.get("namespace") or "default"
    found = client.request("GET", f"/api/v1/namespaces/{events_ns}/events", params={"fieldSelector": selector})
    return list(found.get("items", []))


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
    client = options.client()
    ns = namespace or "default"
    if filename:
        targets = _manifest_targets(filename, options.env_values(env, env_file), ns)
    elif kind:
        targets = []
        for info, name in _targets(kind, names or []):
            if name is None:
                raise CliError("error: resource(s) were provided, but no name was specified")
            targets.append((info, ns, name))
    else:
        raise CliError("error: you must provide one or more resources by argument or filename")
    failed = False
    for info, obj_ns, name in targets:
        try:
            client.request("DELETE", client.path(info, obj_ns, name))
            typer.echo(f'{_resource(info)} "{name}" deleted')
        except CliError as exc:
            if ignore_not_found and isinstance(exc, ServerError) and exc.reason == "NotFound":
                continue
            typer.echo(exc.message, err=True)
            failed = True
    if failed:
        raise typer.Exit(1)


def _manifest_targets(filename: list[str], values: dict[str, str], ns: str) -> list[tuple[KindInfo, str, str]]:
    """The (kind, namespace, name) of every document of the manifests ``filename`` names."""
    from flexq.api import by_gvk, load_documents

    targets: list[tuple[KindInfo, str, str]] = []
    for manifest in read_manifests(filename, values):
        for doc in load_documents(manifest.text, manifest.source):
            try:
                info = by_gvk(str(doc.obj.get("apiVersion", "")), str(doc.obj.get("kind", "")))
            except UnknownKind as exc:
                raise InputError(manifest.source, str(exc), doc.line) from None
            meta = doc.obj.get("metadata") or {}
            targets.append((info, meta.get("namespace") or ns, str(meta.get("name", ""))))
    return targets


@create_app.command("configmap")
def create_configmap(
    name: Annotated[str, typer.Argument(help="ConfigMap name.")],
    from_file: Annotated[list[str] | None, typer.Option("--from-file", help="[KEY=]PATH; key defaults to the file name.")] = None,  # noqa: E501
    from_literal: Annotated[list[str] | None, typer.Option("--from-literal", help="KEY=VALUE.")] = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Create a ConfigMap from files and literals (kubectl create configmap).

    Each key is checked before anything is sent, as kubectl checks it: a key the API server would refuse (``a/b``,
    ``../x``) or one given twice is an error naming it."""
    data: dict[str, str] = {}
    for key, value in _file_data(from_file or []):
        _add_key(data, name, key, value)
    for item in from_literal or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"error: --from-literal {item!r}: expected KEY=VALUE")
        _add_key(data, name, key, value)
    client = options.client()
    info = resolve("configmap")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    client.request("POST", client.path(info, namespace or "default"), json=body)
    typer.echo(f"configmap/{name} created")


def _add_key(data: dict[str, str], name: str, key: str, value: str) -> None:
    """Add ``key`` to a new ConfigMap's ``data``, refusing it with kubectl's words where kubectl would."""
    errors = config_key_errors(key)
    if errors:
        raise CliError(f"error: {go_quote(key)} is not a valid key name for a ConfigMap: {','.join(errors)}")
    if key in data:
        raise CliError(f"error: cannot add key {go_quote(key)}, another key by that name already exists in Data for "
                       f"ConfigMap {go_quote(name)}")
    data[key] = value


def _file_data(items: list[str]) -> list[tuple[str, str]]:
    """``--from-file [KEY=]PATH`` values: each file's key (the file's name by default) and text, in order."""
    data: list[tuple[str, str]] = []
    for item in items:
        key, sep, path_text = item.partition("=")
        path = Path(path_text if sep else key)
        key = key if sep else path.name
        try:
            data.append((key, path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise InputError(str(path), "no such file or directory") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(str(path), f"cannot read as text: {exc}") from None
    return data


def logs(
    target: Annotated[str, typer.Argument(help="rayjob/NAME, or job/NAME (a RayJob's submitter, as in the guide).")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing until the job ends.")] = False,
    namespace: NamespaceOpt = None,
) -> None:
    """Print a job's driver log (it ends with `Job '...' succeeded` once the job has)."""
    kind, sep, name = target.partition("/")
    if not sep or kind not in ("rayjob", "rayjobs", "job", "jobs") or not name:
        raise CliError(f"error: {target!r}: expected rayjob/NAME or job/NAME")
    client = options.client()
    ns = namespace or "default"
    path = f"/flexq/v1/namespaces/{quote(ns, safe='')}/rayjobs/{quote(name, safe='')}/logs"
    if not follow:
        typer.echo(client.request_text("GET", path), nl=False)
        return
    for chunk in client.stream_text(path, {"follow": "true"}):
        typer.echo(chunk, nl=False)


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
    client = options.client()
    ns = namespace or "default"
    pod = forward.resolve_pod(client, target, ns)
    forward.run(client.server, ns, pod, pairs, address, out=typer.echo,
                err=lambda line: typer.echo(line, err=True))
