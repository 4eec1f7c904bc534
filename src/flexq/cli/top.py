"""``flexq top``: where every queue, pool and waiting job stands, live in the terminal."""

from __future__ import annotations

import contextlib
import select
import sys
import termios
import time
import tty
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from flexq.api import parse_quantity, resolve
from flexq.cli.printers import rich_table
from flexq.client import Client
from flexq.durations import format_seconds
from flexq.objects import node_state, workload_eta

__all__ = ["overview", "run"]

_BAR = 12


def _items(client: Client, kind: str) -> list[dict[str, Any]]:
    return list(client.request("GET", client.path(resolve(kind), None)).get("items") or [])


def _named(table: Table, longest: int) -> Table:
    """The first column (names) keeps its names whole, however narrow the terminal: the others give way first."""
    column = table.columns[0]
    column.no_wrap, column.min_width = True, max(longest, len(str(column.header)))
    return table


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
    return _named(table, max((len(cq["metadata"]["name"]) for cq in queues), default=0))


def _pools(pools: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> Table:
    table = rich_table("node pool", "machine", "nodes", "ready", "booting", "not ready", "max", "capacity",
                       title="Node pools")
    counts: dict[str, list[int]] = {}
    for node in nodes:
        pool = (node["metadata"].get("labels") or {}).get("cloud.google.com/gke-nodepool", "")
        counts.setdefault(pool, [0, 0, 0])[("ready", "booting", "not_ready").index(node_state(node))] += 1
    for pool in sorted(pools, key=lambda o: o["metadata"]["name"]):
        name, spec = pool["metadata"]["name"], pool.get("spec") or {}
        ready, booting, not_ready = counts.get(name, [0, 0, 0])
        autoscaling = spec.get("autoscaling") or {}
        kind = "flex-start" if spec.get("flexStart") else ("queued" if spec.get("queuedProvisioning") else
                                                           "on-demand")
        table.add_row(name, str(spec.get("machineType", "")), str(ready + booting + not_ready), str(ready),
                      str(booting), str(not_ready), str(autoscaling.get("maxNodeCount", "")), kind)
    return _named(table, max((len(p["metadata"]["name"]) for p in pools), default=0))


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
    table.columns[-1].overflow = "fold"
    return _named(table, max((len(str(cell)) for cell in table.columns[0].cells), default=0))


def overview(client: Client, now: datetime | None = None) -> Group:
    """Queues with their quota in use, node pools with their nodes, and every waiting workload with why."""
    moment = now or datetime.now(UTC)
    return Group(_queues(_items(client, "ClusterQueue")),
                 _pools(_items(client, "NodePool"), _items(client, "Node")),
                 _waiting(_items(client, "Workload"), moment))


def _header(client: Client, interval: float, now: datetime, keys: bool) -> Text:
    moment = now.astimezone().strftime("%H:%M:%S")
    quit_key = "q or Ctrl-C to quit" if keys else "Ctrl-C to quit"
    return Text(f"flexq top · {client.server} · {moment} · every {interval:g}s · {quit_key}", style="dim")


@contextlib.contextmanager
def _keys(stream: TextIO) -> Iterator[bool]:
    """Single keys from ``stream`` as they are pressed (a terminal set to cbreak for the while); False where it is
    not a terminal."""
    if not stream.isatty():
        yield False
        return
    fd = stream.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _quit_pressed(stream: TextIO, wait: float) -> bool:
    """Wait up to ``wait`` seconds for a key; whether it was ``q``."""
    deadline = time.monotonic() + wait
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([stream], [], [], left)
        if ready and stream.read(1).lower() == "q":
            return True
    return False


def run(client: Client, interval: float, once: bool, console: Console, keys: TextIO | None = None) -> None:
    """Show the overview once, or refresh it every ``interval`` seconds, under a header with the time and the keys,
    until ``q`` is pressed (where ``keys``, standard input by default, is a terminal) or Ctrl-C."""
    if once:
        console.print(overview(client))
        return
    stream = keys or sys.stdin
    with _keys(stream) as live_keys:

        def screen() -> Group:
            now = datetime.now(UTC)
            return Group(_header(client, interval, now, live_keys), overview(client, now))

        with Live(screen(), console=console, refresh_per_second=4) as live:
            try:
                while True:
                    if live_keys:
                        if _quit_pressed(stream, interval):
                            return
                    else:
                        time.sleep(interval)
                    live.update(screen())
            except KeyboardInterrupt:
                return
