"""Kueue's and KubeRay's CRD schemas (tests/data/crds), as validators that refuse unknown fields."""

from __future__ import annotations

import copy
import gzip
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

DATA = Path(__file__).resolve().parents[1] / "data" / "crds"


@cache
def _schemas() -> dict[str, Any]:
    kueue = json.loads((DATA / "kueue.json").read_text())
    kuberay = json.loads(gzip.decompress((DATA / "kuberay.json.gz").read_bytes()))
    return {**kueue, **kuberay}


def _strict(schema: Any) -> Any:
    """The schema with unknown fields refused, as the API server's strict field validation refuses them
    (a structural CRD prunes them; ``x-kubernetes-preserve-unknown-fields`` keeps them)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if isinstance(out.get("pattern"), str):
            # Go's regexp takes flags anywhere (`^(?i)...`); Python only at the start.
            out["pattern"] = re.sub(r"^\^(\(\?[a-z]+\))", r"\1^", out["pattern"])
        if "properties" in out and "additionalProperties" not in out \
                and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@cache
def validator(kind: str, version: str) -> jsonschema.protocols.Validator:
    schema = _strict(copy.deepcopy(_schemas()[f"{kind}/{version}"]))
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    return cls(schema)  # type: ignore[no-any-return]


def has_schema(kind: str, version: str) -> bool:
    return f"{kind}/{version}" in _schemas()


def errors(obj: dict[str, Any]) -> list[str]:
    """Each way ``obj`` breaks its kind's CRD schema, as ``path: message``."""
    version = str(obj["apiVersion"]).rpartition("/")[2]
    found = validator(str(obj["kind"]), version).iter_errors(obj)
    return [f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in found]
