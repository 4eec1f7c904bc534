"""gcloud's ``--format`` for the few projections scripts use: ``get(a.b)``, ``value(a.b,c)``, yaml, json."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from flexq.errors import FlexqError

__all__ = ["FormatError", "render"]


class FormatError(FlexqError, ValueError):
    pass


def _lookup(obj: Any, path: str) -> Any:
    node = obj
    for part in path.strip().split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return None
    return node


def _scalar(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)  # gcloud prints Python's True/False
    if isinstance(value, list):
        return ";".join(_scalar(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def render(obj: Any, fmt: str | None) -> str:
    if not fmt or fmt == "yaml":
        return yaml.safe_dump(obj, sort_keys=True, default_flow_style=False)
    if fmt == "json":
        return json.dumps(obj, indent=2, sort_keys=True) + "\n"
    match = re.fullmatch(r"\s*(get|value)\((.*)\)\s*", fmt)
    if match is None:
        raise FormatError(f"unsupported --format {fmt!r}: use yaml, json, get(FIELD) or value(FIELD,...)")
    fields = [f for f in match.group(2).split(",") if f.strip()]
    separator = " " if match.group(1) == "get" else "\t"
    return separator.join(_scalar(_lookup(obj, f)) for f in fields) + "\n"
