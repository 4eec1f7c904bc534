"""``flexq forecast``: when each waiting job will start (Slurm's ``squeue --start``), and with ``-f``, where and when
jobs would start if submitted now, without submitting them."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from flexq.api import resolve
from flexq.cli import options
from flexq.cli.inputs import read_manifests
from flexq.cli.printers import columns, to_json
from flexq.client import CliError
from flexq.durations import format_seconds
from flexq.objects import parse_time

__all__ = ["forecast"]


def _when(start: float | None, now: float) -> tuple[str, str]:
    if start is None:
        return "unknown", "-"
    local = datetime.fromtimestamp(start).strftime("%Y-%m-%d %H:%M:%S")
    return local, "now" if start - now < 1 else format_seconds(start - now)


def _cost(usd: Any) -> str:
    return f"${usd:,.2f}" if isinstance(usd, (int, float)) else "-"


def _what_if(filename: list[str], namespace: str | None, env: dict[str, str], output: str | None) -> None:
    manifests = read_manifests(filename, env)
    body = {"sources": [{"text": m.text, "source": m.source} for m in manifests], "namespace": namespace or "default"}
    items = options.client().submit("/flexq/v1/forecast", body)["items"]
    if output == "json":
        typer.echo(to_json(items))
        return
    now = time.time()
    rows = [["JOB", "CLUSTERQUEUE", "START", "IN", "FLAVORS", "BASIS", "COST"]]
    for item in items:
        start, wait = _when(item["start"], now)
        rows.append([f"{item['kind'].lower()}/{item['name']}", item["clusterQueue"], start, wait,
                     ",".join(item["flavors"]) or "-", item["basis"], _cost(item["costUsd"])])
    typer.echo(columns(rows))
    for item in items:
        typer.echo(f"{item['kind'].lower()}/{item['name']}: {item['message']}")
    held = [[f"{item['kind'].lower()}/{item['name']}", row["flavor"], *_when(row["start"], now), row["basis"],
             _cost(row["costUsd"])] for item in items for row in item.get("byFlavor") or []]
    if held:
        typer.echo("\nUnder each flavor (the job held to it):")
        typer.echo(columns([["JOB", "FLAVOR", "START", "IN", "BASIS", "COST"], *held]))
    typer.echo("(nothing was submitted)")


def _waiting(namespace: str | None, all_namespaces: bool, output: str | None) -> None:
    client = options.client()
    info = resolve("workload")
    ns = None if all_namespaces else (namespace or "default")
    items = client.request("GET", client.path(info, ns)).get("items") or []
    waiting = [w for w in items if isinstance((w.get("status") or {}).get("forecast"), dict)]
    if output == "json":
        typer.echo(to_json([{"namespace": w["metadata"].get("namespace"), "workload": w["metadata"]["name"],
                             **w["status"]["forecast"]} for w in waiting]))
        return
    if not waiting:
        typer.echo("No job is waiting." if ns is None else f"No job is waiting in namespace {ns}.")
        return
    now = time.time()

    def start_of(w: dict[str, Any]) -> float:
        at = parse_time(w["status"]["forecast"].get("start"))
        return at.timestamp() if at is not None else float("inf")

    rows = [[*(["NAMESPACE"] if ns is None else []), "JOB", "QUEUE", "START", "IN", "FLAVORS", "BASIS", "WAITS FOR"]]
    for w in sorted(waiting, key=start_of):
        forecast = w["status"]["forecast"]
        at = start_of(w)
        start, wait = _when(None if at == float("inf") else at, now)
        owner: dict[str, Any] = next(iter(w["metadata"].get("ownerReferences") or []), {})
        job = f"{str(owner.get('kind', 'workload')).lower()}/{owner.get('name', w['metadata']['name'])}"
        rows.append([*([w["metadata"].get("namespace", "")] if ns is None else []), job,
                     (w.get("spec") or {}).get("queueName", ""), start, wait,
                     ",".join(forecast.get("flavors") or []) or "-", forecast.get("basis", ""),
                     forecast.get("message", "")])
    typer.echo(columns(rows))


def forecast(
    filename: Annotated[list[str] | None, typer.Option("--filename", "-f", help="Jobs to forecast as if submitted "
                                                       "now (file, directory or - for stdin); nothing is submitted.")]
    = None,
    namespace: Annotated[str | None, typer.Option("--namespace", "-n", help="The namespace (default: default).")]
    = None,
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="Waiting jobs of every namespace.")]
    = False,
    env: Annotated[list[str] | None, typer.Option("--env", help="Substitute ${NAME} with VALUE (NAME=VALUE).")] = None,
    env_file: Annotated[Path | None, typer.Option("--env-file", help="KEY=VALUE lines to substitute.")] = None,
    output: Annotated[str | None, typer.Option("--output", "-o", help="json: the forecasts as JSON.")] = None,
) -> None:
    """When each waiting job is expected to start, where, and what that rests on; with -f, where and when jobs
    would start (and cost) if submitted now."""
    if output not in (None, "json"):
        raise CliError(f"error: --output {output!r}: the only format is json")
    if filename:
        _what_if(filename, namespace, options.env_values(env, env_file), output)
    else:
        _waiting(namespace, all_namespaces, output)
