"""``flexq check set``: drive a workload's admission checks by hand, as a check controller does."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from flexq.api import resolve
from flexq.cli import options
from flexq.cli.options import NamespaceOpt
from flexq.client import Client, CliError

__all__ = ["check_app", "workload_name"]

check_app = typer.Typer(help="Drive admission checks by hand.", no_args_is_help=True)


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
    client = options.client()
    ns = namespace or "default"
    info = resolve("workload")
    name = workload_name(client, workload, ns)
    obj = client.request("GET", client.path(info, ns, name))
    checks = (obj.get("status") or {}).get("admissionChecks") or []
    if not any(c.get("name") == check for c in checks):
        known = ", ".join(c.get("name", "") for c in checks) or "none (it holds no quota yet)"
        raise CliError(f"error: workload {ns}/{name} has no admission check {check!r}; its checks: {known}")
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    updated = [dict(c, state=state, message=message, lastTransitionTime=stamp) if c.get("name") == check else c
               for c in checks]
    client.request("PATCH", client.path(info, ns, name) + "/status", json={"status": {"admissionChecks": updated}},
                   headers={"Content-Type": "application/merge-patch+json"})
    typer.echo(f"workload.kueue.x-k8s.io/{name} check {check} set to {state}")


def workload_name(client: Client, ref: str, namespace: str) -> str:
    """The workload ``ref`` names: itself, or the workload of the job ``KIND/NAME``."""
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
