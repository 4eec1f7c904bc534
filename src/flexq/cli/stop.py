"""``flexq stop`` and ``flexq resume``: kueuectl's verbs (``kubectl kueue stop|resume``) for a ClusterQueue, a
LocalQueue or a Workload.

A queue is stopped by its ``spec.stopPolicy``: ``HoldAndDrain`` (nothing new admitted, what runs evicted), or
``Hold`` with ``--keep-already-running`` (what runs runs on); resuming sets it back to ``None``. A Workload is stopped
by ``spec.active: false`` (evicted if admitted, not admitted again until resumed). Each is a merge patch of the
object, as kueuectl sends it.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Any

import typer

from flexq.api import resolve
from flexq.cli import options
from flexq.cli.checks import workload_name
from flexq.cli.options import NamespaceOpt

__all__ = ["resume_app", "stop_app"]

stop_app = typer.Typer(help="Stop a ClusterQueue, a LocalQueue or a Workload (kubectl kueue stop).",
                       no_args_is_help=True)
resume_app = typer.Typer(help="Resume a stopped ClusterQueue, LocalQueue or Workload (kubectl kueue resume).",
                         no_args_is_help=True)


class DryRun(StrEnum):
    none = "none"
    client = "client"
    server = "server"


DryRunOpt = Annotated[DryRun, typer.Option("--dry-run", help="client: send nothing (the object must exist); server: "
                                           "have the server check it without storing it.")]
KeepOpt = Annotated[bool, typer.Option("--keep-already-running",
                                       help="Keep already running workloads (stopPolicy Hold, not HoldAndDrain).")]
NameArg = Annotated[str, typer.Argument(help="Its name.")]
WorkloadArg = Annotated[str, typer.Argument(help="Workload name, or rayjob/NAME or job/NAME for a job's workload.")]


def _patch(kind: str, namespace: str | None, name: str, spec: dict[str, Any], dry_run: DryRun,
           operation: str = "") -> None:
    """Merge-patch ``spec`` into the object (unknown names: the server's NotFound, exit 1) and print its name."""
    info = resolve(kind)
    client = options.client()
    path = client.path(info, namespace if info.namespaced else None, name)
    if dry_run is DryRun.client:
        client.request("GET", path)  # as kueuectl: the object must exist
    else:
        client.request("PATCH", path, json={"spec": spec}, params={"dryRun": "All"} if dry_run is DryRun.server
                       else None, headers={"Content-Type": "application/merge-patch+json"})
    suffix = f" ({dry_run.value} dry run)" if dry_run is not DryRun.none else ""
    typer.echo(f"{info.kind.lower()}.{info.group}/{name}{' ' + operation if operation else ''}{suffix}")


def _queue_policy(keep_already_running: bool) -> str:
    return "Hold" if keep_already_running else "HoldAndDrain"


def stop_cluster_queue(name: NameArg, keep_already_running: KeepOpt = False,
                       dry_run: DryRunOpt = DryRun.none) -> None:
    """Put the ClusterQueue on hold: nothing new is admitted, and what it admitted is evicted unless
    --keep-already-running."""
    _patch("clusterqueue", None, name, {"stopPolicy": _queue_policy(keep_already_running)}, dry_run)


def stop_local_queue(name: NameArg, namespace: NamespaceOpt = None, keep_already_running: KeepOpt = False,
                     dry_run: DryRunOpt = DryRun.none) -> None:
    """Put the LocalQueue on hold: nothing new is admitted from it, and what it admitted is evicted unless
    --keep-already-running."""
    _patch("localqueue", namespace or "default", name, {"stopPolicy": _queue_policy(keep_already_running)}, dry_run)


def stop_workload(name: WorkloadArg, namespace: NamespaceOpt = None, dry_run: DryRunOpt = DryRun.none) -> None:
    """Put the Workload on hold (spec.active: false): it is not admitted, and an admitted one is evicted back to its
    queue."""
    ns = namespace or "default"
    _patch("workload", ns, workload_name(options.client(), name, ns), {"active": False}, dry_run, "stopped")


def resume_cluster_queue(name: NameArg, dry_run: DryRunOpt = DryRun.none) -> None:
    """Resume the ClusterQueue (stopPolicy None): it admits again."""
    _patch("clusterqueue", None, name, {"stopPolicy": "None"}, dry_run)


def resume_local_queue(name: NameArg, namespace: NamespaceOpt = None, dry_run: DryRunOpt = DryRun.none) -> None:
    """Resume the LocalQueue (stopPolicy None): its workloads are admitted again."""
    _patch("localqueue", namespace or "default", name, {"stopPolicy": "None"}, dry_run)


def resume_workload(name: WorkloadArg, namespace: NamespaceOpt = None, dry_run: DryRunOpt = DryRun.none) -> None:
    """Resume the Workload (spec.active: true): it may be admitted again under its ClusterQueue's rules."""
    ns = namespace or "default"
    _patch("workload", ns, workload_name(options.client(), name, ns), {"active": True}, dry_run, "resumed")


def _register(app: typer.Typer, command: Callable[..., None], name: str, *aliases: str) -> None:
    app.command(name)(command)
    for alias in aliases:  # kueuectl's aliases
        app.command(alias, hidden=True)(command)


_WORKLOAD_ALIASES = ("wl", "kwl", "kueueworkload")
_register(stop_app, stop_cluster_queue, "clusterqueue", "cq")
_register(stop_app, stop_local_queue, "localqueue", "lq")
_register(stop_app, stop_workload, "workload", *_WORKLOAD_ALIASES)
_register(resume_app, resume_cluster_queue, "clusterqueue", "cq")
_register(resume_app, resume_local_queue, "localqueue", "lq")
_register(resume_app, resume_workload, "workload", *_WORKLOAD_ALIASES)
