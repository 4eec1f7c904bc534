"""``meta.k8s.io/v1`` Tables: the rows ``kubectl get`` prints, built from a kind's printer columns."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

from flexq.api import Column, KindInfo
from flexq.objects.jsonpath import evaluate

__all__ = ["human_duration", "parse_time", "table", "workload_eta", "workload_flavors", "workload_reason"]


def human_duration(seconds: float) -> str:
    """Kubernetes' ``duration.HumanDuration``: ``45s``, ``5m3s``, ``3h``, ``2d5h``, ``400d``."""
    s = int(seconds)
    if s < 0:
        return "<invalid>"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    years = hours // (24 * 365)
    if years < 8:
        return f"{years}y{(hours // 24) % 365}d"
    return f"{years}y"


def parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _age(value: Any, now: datetime) -> str:
    moment = parse_time(value)
    return "<unknown>" if moment is None else human_duration((now - moment).total_seconds())


def _job_status(obj: dict[str, Any], now: datetime) -> str:
    conditions = {c.get("type"): c.get("status") for c in obj.get("status", {}).get("conditions") or []}
    if conditions.get("Complete") == "True":
        return "Complete"
    if conditions.get("Failed") == "True":
        return "Failed"
    if obj["metadata"].get("deletionTimestamp"):
        return "Terminating"
    if conditions.get("Suspended") == "True" or obj.get("spec", {}).get("suspend"):
        return "Suspended"
    return "Running"


def _completions(obj: dict[str, Any], now: datetime) -> str:
    succeeded = int(obj.get("status", {}).get("succeeded") or 0)
    spec = obj.get("spec", {})
    if spec.get("completions") is not None:
        return f"{succeeded}/{spec['completions']}"
    parallelism = int(spec.get("parallelism") or 1)
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _duration(obj: dict[str, Any], now: datetime) -> str:
    status = obj.get("status", {})
    start = parse_time(status.get("startTime"))
    if start is None:
        return ""
    end = parse_time(status.get("completionTime")) or now
    return human_duration((end - start).total_seconds())


def _data(obj: dict[str, Any], now: datetime) -> int:
    return len(obj.get("data") or {}) + len(obj.get("binaryData") or {})


def _involved(obj: dict[str, Any], now: datetime) -> str:
    inv = obj.get("involvedObject", {})
    return f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}"


def _wl_flavors(obj: dict[str, Any], now: datetime) -> str:
    admission = obj.get("status", {}).get("admission") or {}
    parts = []
    for ps in admission.get("podSetAssignments") or []:
        flavors = sorted(set((ps.get("flavors") or {}).values()))
        parts.append(f"{ps.get('name')}={'+'.join(flavors)}")
    return ",".join(parts)


def _wl_eta(obj: dict[str, Any], now: datetime) -> str:
    """When a waiting workload is expected to start, from now (its forecast): ``12m``, ``~12m`` (run times
    estimated), ``<12m`` (at the latest), ``now``, ``unknown``; empty for a workload whose job runs or ended."""
    forecast = (obj.get("status") or {}).get("forecast")
    if not isinstance(forecast, dict):
        return ""
    at = parse_time(forecast.get("start"))
    if at is None:
        return "unknown"
    left = (at - now).total_seconds()
    text = "now" if left < 1 else human_duration(left)
    basis = forecast.get("basis")
    if basis in ("Limit", "Unknown"):
        return f"<{text}"  # at the latest: jobs ahead may end sooner than their limits, or than never
    return f"~{text}" if basis == "Estimated" else text


def _wl_reason(obj: dict[str, Any], now: datetime) -> str:
    status = obj.get("status", {})
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    if conditions.get("Finished", {}).get("status") == "True":
        return ""
    if conditions.get("Admitted", {}).get("status") == "True":
        return str(status.get("waitingFor", ""))
    if obj.get("spec", {}).get("active") is False:
        return "deactivated"
    if conditions.get("QuotaReserved", {}).get("status") == "True":
        message = str(conditions.get("Admitted", {}).get("message", ""))
        if message and message != "The workload has not all checks ready":
            return message
        waiting = [c["name"] for c in status.get("admissionChecks") or [] if c.get("state") != "Ready"]
        return "waiting for admission checks: " + ", ".join(waiting) if waiting else ""
    message = str(conditions.get("QuotaReserved", {}).get("message", ""))
    return message if len(message) <= 100 else message[:97] + "..."


workload_flavors = _wl_flavors
"""A workload's flavors per pod set, as ``get workloads`` prints them (``head=default-cpu,tpu-group=dws``)."""
workload_eta = _wl_eta
"""When a waiting workload is expected to start, from now, as ``get workloads`` prints it (``12m``, ``~3h``)."""
workload_reason = _wl_reason
"""The one-line reason ``get workloads`` prints for a workload not admitted (or what an admitted one waits for)."""


def _node_status(obj: dict[str, Any], now: datetime) -> str:
    ready = next((c for c in obj.get("status", {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    status = "Ready" if ready and ready.get("status") == "True" else "NotReady"
    return status + (",SchedulingDisabled" if obj.get("spec", {}).get("unschedulable") else "")


def _node_roles(obj: dict[str, Any], now: datetime) -> str:
    return "<none>"


def _node_pool(obj: dict[str, Any], now: datetime) -> str:
    return str((obj["metadata"].get("labels") or {}).get("cloud.google.com/gke-nodepool", ""))


def _pod_ready(obj: dict[str, Any], now: datetime) -> str:
    statuses = obj.get("status", {}).get("containerStatuses") or []
    total = len(obj.get("spec", {}).get("containers") or []) or len(statuses)
    return f"{sum(1 for c in statuses if c.get('ready'))}/{total}"


def _pod_status(obj: dict[str, Any], now: datetime) -> str:
    status = obj.get("status", {})
    if obj["metadata"].get("deletionTimestamp"):
        return "Terminating"
    phase = status.get("phase") or "Pending"
    if phase == "Pending" and any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated"
                                  for c in status.get("conditions") or []):
        return "SchedulingGated"  # as kubectl's own printer says it
    return str(status.get("reason") or {"Succeeded": "Completed", "Failed": "Error"}.get(phase, phase))


def _pod_restarts(obj: dict[str, Any], now: datetime) -> int:
    return sum(int(c.get("restartCount", 0)) for c in obj.get("status", {}).get("containerStatuses") or [])


def _svc_external(obj: dict[str, Any], now: datetime) -> str:
    return "<none>"


def _svc_ports(obj: dict[str, Any], now: datetime) -> str:
    ports = obj.get("spec", {}).get("ports") or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


_COMPUTED: Final[dict[str, Callable[[dict[str, Any], datetime], Any]]] = {
    "#job-status": _job_status,
    "#completions": _completions,
    "#duration": _duration,
    "#data": _data,
    "#involved": _involved,
    "#wl-flavors": _wl_flavors,
    "#wl-reason": _wl_reason,
    "#wl-eta": _wl_eta,
    "#node-status": _node_status,
    "#node-roles": _node_roles,
    "#node-pool": _node_pool,
    "#pod-ready": _pod_ready,
    "#pod-status": _pod_status,
    "#pod-restarts": _pod_restarts,
    "#svc-external": _svc_external,
    "#svc-ports": _svc_ports,
}


def _cell(column: Column, obj: dict[str, Any], now: datetime) -> Any:
    if column.json_path.startswith("#"):
        return _COMPUTED[column.json_path](obj, now)
    values = evaluate(obj, column.json_path)
    if not values:
        return None
    value = values[0] if len(values) == 1 else ",".join(str(v) for v in values)
    if column.type == "date":
        return _age(value, now)
    if column.type == "integer" and isinstance(value, int | str) and str(value).lstrip("-").isdigit():
        return int(value)
    if isinstance(value, dict | list):
        return str(value)
    return value


_TYPES: Final = {"date": "string", "integer": "integer", "number": "number", "boolean": "boolean"}


def table(
    info: KindInfo, objects: list[dict[str, Any]], resource_version: str, *,
    now: datetime | None = None, include_object: str = "Metadata",
) -> dict[str, Any]:
    """A Table of ``objects`` with ``info``'s columns (Name first), as the API server serves it."""
    moment = now or datetime.now(UTC)
    columns = info.columns or (Column("Age", ".metadata.creationTimestamp", "date"),)
    definitions = [{
        "name": "Name", "type": "string", "format": "name", "priority": 0,
        "description": "Name must be unique within a namespace.",
    }] + [{
        "name": c.name, "type": _TYPES.get(c.type, "string"), "format": c.format, "priority": c.priority,
        "description": c.description or c.name,
    } for c in columns]
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": [obj["metadata"]["name"]] + [_cell(c, obj, moment) for c in columns]}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"],
            }
        rows.append(row)
    return {
        "kind": "Table", "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": definitions, "rows": rows,
    }
