"""One step from a document to a stored-form object: validate, convert to the storage version, default."""

from __future__ import annotations

from typing import Any

from flexq.api.defaults import apply_defaults
from flexq.api.documents import Document
from flexq.api.fields import strict_errors
from flexq.api.jsoncopy import copy_json
from flexq.api.kinds import KindInfo
from flexq.api.object_errors import InvalidObject
from flexq.api.validation import validate_document
from flexq.api.versions import convert

__all__ = ["normalize", "storage_form"]


def normalize(doc: Document, *, strict: bool = False) -> tuple[KindInfo, dict[str, Any]]:
    """Validate ``doc`` (raising InvalidObject) and return its kind and its storage form (a copy). ``strict``: a field
    its kind does not declare is refused, as ``flexq apply`` refuses it (else it is kept as written)."""
    info = validate_document(doc)
    if strict:
        errors = strict_errors(info.model, doc)
        if errors:
            meta = doc.obj.get("metadata")
            name = meta.get("name", "") if isinstance(meta, dict) else ""
            raise InvalidObject(doc.source, doc.index, info.kind, str(name or ""), errors)
    return info, storage_form(info, doc.obj)


def storage_form(info: KindInfo, obj: dict[str, Any], *, copy: bool = True) -> dict[str, Any]:
    """``obj``, an object of ``info``'s kind already validated, in its storage version with its defaults (a copy;
    without ``copy``, ``obj`` itself where it is in that version: for an object handed over by its maker)."""
    out = convert(info, copy_json(obj) if copy else obj, info.storage_version)
    apply_defaults(info.kind, out)
    return out
