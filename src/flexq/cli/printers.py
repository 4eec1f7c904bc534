"""Output as kubectl prints it: tables from the server's Table rows, describe, YAML and JSON."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import yaml
from rich import box
from rich.table import Table

from flexq.api import KindInfo
from flexq.objects import human_duration

__all__ = ["columns", "describe", "render_table", "rich_table", "table_cells", "to_json", "to_yaml"]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def columns(rows: list[list[str]], gap: str = "   ", indent: str = "") -> str:
    """Rows as left-aligned text columns, ``gap`` between them, no trailing blanks: the one table printer."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join((indent + gap.join(c.ljust(widths[i]) for i, c in enumerate(r))).rstrip() for r in rows)


def rich_table(*headers: str, title: str | None = None) -> Table:
    """The same columns for a live terminal (``flexq top``, ``flexq simulate``'s policies): bold headers; with a
    title, a rule under them."""
    if title is None:
        return Table(*headers, box=None, header_style="bold")
    return Table(*headers, title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD)


def render_table(
    tables: list[tuple[KindInfo, dict[str, Any]]], *, wide: bool, all_namespaces: bool, qualify: bool,
) -> str:
    """Render one or more Tables (one per kind), as ``kubectl get`` does, separated by blank lines."""
    blocks: list[str] = []
    for info, tbl in tables:
        header, rows = table_cells(info, tbl, wide=wide, all_namespaces=all_namespaces, qualify=qualify)
        if not rows:
            continue
        blocks.append(columns([header, *rows]))
    return "\n\n".join(blocks)


def table_cells(info: KindInfo, tbl: dict[str, Any], *, wide: bool, all_namespaces: bool,
                qualify: bool = False) -> tuple[list[str], list[list[str]]]:
    """A Table's header and rows as the text ``kubectl get`` shows (``wide``: every column)."""
    shown = [(i, c) for i, c in enumerate(tbl["columnDefinitions"]) if wide or c.get("priority", 0) == 0]
    header = [c["name"].upper() for _, c in shown]
    rows: list[list[str]] = []
    for row in tbl["rows"]:
        cells = [_cell(row["cells"][i]) for i, _ in shown]
        if qualify:
            resource = f"{info.singular}.{info.group}" if info.group else info.singular
            cells[0] = f"{resource}/{cells[0]}"
        if all_namespaces and info.namespaced:
            cells.insert(0, row.get("object", {}).get("metadata", {}).get("namespace", ""))
        rows.append(cells)
    if all_namespaces and info.namespaced:
        header.insert(0, "NAMESPACE")
    return header, rows


def to_yaml(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=True, default_flow_style=False, allow_unicode=True)


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=4, sort_keys=False)


def _title(key: str) -> str:
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", key)
    return words[:1].upper() + words[1:]


def _describe_value(lines: list[str], key: str, value: Any, indent: int) -> None:
    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            lines.append(f"{pad}{_title(key)}:")
            return
        lines.append(f"{pad}{_title(key)}:")
        _describe_map(lines, value, indent + 1)
    elif isinstance(value, list):
        lines.append(f"{pad}{_title(key)}:")
        for item in value:
            if isinstance(item, dict):
                _describe_map(lines, item, indent + 1)
            else:
                lines.append(f"{pad}  {_cell(item)}")
    else:
        lines.append(f"{pad}{_title(key)}:\t{_cell(value)}")


def _describe_map(lines: list[str], obj: dict[str, Any], indent: int) -> None:
    for key in obj:
        _describe_value(lines, key, obj[key], indent)


def _align(lines: list[str]) -> list[str]:
    """Line up values after the key column within each run of sibling lines, as kubectl's tabwriter."""
    out: list[str] = []
    width = max((len(line.split("\t")[0]) for line in lines if "\t" in line), default=0)
    for line in lines:
        if "\t" in line:
            key, value = line.split("\t", 1)
            out.append(f"{key.ljust(width)}  {value}".rstrip())
        else:
            out.append(line)
    return out


def _labels(values: dict[str, str] | None, pad: int) -> str:
    if not values:
        return "<none>"
    return ("\n" + " " * pad).join(f"{k}={v}" for k, v in sorted(values.items()))


def describe(info: KindInfo, obj: dict[str, Any], events: list[dict[str, Any]], now: datetime | None = None) -> str:
    """``kubectl describe`` for any kind: metadata, spec and status as titled fields, then Events."""
    moment = now or datetime.now(UTC)
    meta = obj.get("metadata", {})
    head = [
        f"Name:\t{meta.get('name', '')}",
        *([f"Namespace:\t{meta.get('namespace', '')}"] if info.namespaced else []),
        f"Labels:\t{_labels(meta.get('labels'), 14)}",
        f"Annotations:\t{_labels({k: v for k, v in (meta.get('annotations') or {}).items() if k != 'kubectl.kubernetes.io/last-applied-configuration'}, 14)}",  # noqa: E501
        f"API Version:\t{obj.get('apiVersion', '')}",
        f"Kind:\t{obj.get('kind', '')}",
    ]
    lines: list[str] = []
    shown_meta = {k: v for k, v in meta.items() if k in ("creationTimestamp", "generation", "resourceVersion", "uid")}
    _describe_value(lines, "metadata", shown_meta, 0)
    for key, value in obj.items():
        if key not in ("apiVersion", "kind", "metadata"):
            _describe_value(lines, key, value, 0)
    text = "\n".join(_align(head)) + "\n" + "\n".join(_align(lines))
    return text + "\n" + _events(events, moment)


def _events(events: list[dict[str, Any]], now: datetime) -> str:
    if not events:
        return "Events:  <none>"
    rows = [["Type", "Reason", "Age", "From", "Message"], ["----", "------", "----", "----", "-------"]]
    for ev in sorted(events, key=lambda e: e.get("lastTimestamp") or ""):
        age = ""
        stamp = ev.get("lastTimestamp")
        if isinstance(stamp, str):
            seen = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
            age = human_duration((now - seen).total_seconds())
            count = int(ev.get("count") or 1)
            if count > 1:
                age = f"{age} (x{count})"
        rows.append([ev.get("type", ""), ev.get("reason", ""), age,
                     (ev.get("source") or {}).get("component", ""), ev.get("message", "")])
    return "Events:\n" + columns(rows, gap="  ", indent="  ")
