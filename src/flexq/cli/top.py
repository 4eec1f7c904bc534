"""``flexq top``: where every queue, pool and waiting job stands, live in the terminal."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from flexq.api.kinds import resolve
from flexq.api.quantity import parse_quantity
from flexq.cli.printers import rich_table
from flexq.client import Client
from flexq.durations import format_seconds
from flexq.objects import workload_eta

__all__ = ["overview", "run"]

_BAR = 12


def _items(client: Client, kind: str) -> list[dict[str, Any]]:
    return list(client.request("GET", client.path(resolve(kind), None)).get("items") or [])


def _bar(used: float, total: float) -> str:
    if total <= 0:
        return ""
    filled = min(_BAR, round(_BAR * used / total))
    return "█" * filled + "·" * (_BAR - filled)


def _number(value: Any) -> float:
    try:
        return float(parse_quantity(value).value)
    except (ValueError, TypeError):
        return 0.0


def _queues(queues: list[dict[str, Any]]) -> Table:
    table = rich_table("ClusterQueue", "pending", "reserving", "admitted", "flavor", "resource", "in use", "",
                       title="Queues")
    for cq in sorted(queues, key=lambda o: o["metadata"]["name"]):
        status = cq.get("status") or {}
        used = {(f["name"], r["name"]): r.get("total", "0") for f in status.get("flavorsUsage") or []
                for r in f.get("resources") or []}
        rows = [(f["name"], r["name"], r.get("nominalQuota", "0"))
                for g in (cq.get("spec") or {}).get("resourceGroups") or [] for f in g.get("flavors") or []
                for r in f.get("resources") or [] if _number(used.get((f["name"], r["name"]), "0")) > 0
                or r["name"] in ("google.com/tpu", "nvidia.com/gpu")]
        first = True
        for flavor, resource, nominal in rows or [("", "", "0")]:
            amount = used.get((flavor, resource), "0")
            head = [cq["metadata"]["name"], str(status.get("pendingWorkloads", 0)),
                    str(status.get("reservingWorkloads", 0)), str(status.get("admittedWorkloads", 0))] if first \
                else ["", "", "", ""]
            table.add_row(*head, flavor, resource, f"{amount}/{nominal}" if flavor else "",
                          _bar(_number(amount), _number(nominal)) if flavor else "")
            first = False
    return table


def _pools(pools: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> Table:
    table = rich_table("node pool", "machine", "nodes", "ready", "booting", "max", "capacity", title="Node pools")
    counts: dict[str, list[int]] = {}
    for node in nodes:
        pool = (node["metadata"].get("labels") or {}).get("cloud.google.com/gke-nodepool", "")
        up = any(c.get("type") == "Ready" and c.get("status") == "True"
                 for c in (node.get("status") or {}).get("conditions") or [])
        counts.setdefault(pool, [0, 0])[0 if up else 1] += 1
    for pool in sorted(pools, key=lambda o: o["metadata"]["name"]):
        name, spec = pool["metadata"]["name"], pool.get("spec") or {}
        ready, booting = counts.get(name, [0, 0])
        autoscaling = spec.get("autoscaling") or {}
        kind = "flex-start" if spec.get("flexStart") else ("queued" if spec.get("queuedProvisioning") else
                                                           "on-demand")
        table.add_row(name, str(spec.get("machineType", "")), str(ready + booting), str(ready), str(booting),
                      str(autoscaling.get("maxNodeCount", "")), kind)
    return table


def _waiting(workloads: list[dict[str, Any]], now: datetime) -> Table:
    table = rich_table("workload", "queue", "waiting", "starts in", "why (and until when)", title="Waiting")
    for wl in sorted(workloads, key=lambda o: o["metadata"].get("creationTimestamp", "")):
        if any(r.get("kind") == "Workload" for r in wl["metadata"].get("ownerReferences") or []):
            continue  # a racing workload's variant: its workload's row says how the race stands
        conditions = {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}
        if conditions.get("Admitted", {}).get("status") == "True" or "Finished" in conditions:
            continue
        if (wl.get("spec") or {}).get("active") is False:
            continue
        why = conditions.get("QuotaReserved", {})
        reason = why.get("message", "") if why.get("status") != "True" else conditions.get("Admitted", {}).get(
            "message", "")
        created = wl["metadata"].get("creationTimestamp")
        age = ""
        if created:
            age = format_seconds((now - datetime.fromisoformat(created.replace("Z", "+00:00"))).total_seconds())
        forecast = (wl.get("status") or {}).get("forecast") or {}
        if forecast.get("message"):
            reason = f"{reason}; forecast: {forecast['message']}" if reason else forecast["message"]
        table.add_row(wl["metadata"]["name"], (wl.get("spec") or {}).get("queueName", ""), age,
                      workload_eta(wl, now) or "-", reason)
    return table


def overview(client: Client, now: datetime | None = None) -> Group:
    """Queues with their quota in use, node pools with their nodes, and every waiting workload with why."""
    moment = now or datetime.now(UTC)
    return Group(_queues(_items(client, "ClusterQueue")),
                 _pools(_items(client, "NodePool"), _items(client, "Node")),
                 _waiting(_items(client, "Workload"), moment))


def run(client: Client, interval: float, once: bool, console: Console) -> None:
    """Show the overview once, or refresh it every ``interval`` seconds until interrupted (Ctrl-C)."""
    if once:
        console.print(overview(client))
        return
    with Live(overview(client), console=console, refresh_per_second=4) as live:
        try:
            while True:
                time.sleep(interval)
                live.update(overview(client))
        except KeyboardInterrupt:
            return
