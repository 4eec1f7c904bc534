"""One step from a document to a stored-form object: validate, convert to the storage version, default."""

from __future__ import annotations

import copy
from typing import Any

from flexq.api.defaults import apply_defaults
from flexq.api.documents import Document
from flexq.api.kinds import KindInfo
from flexq.api.validation import validate_document
from flexq.api.versions import convert

__all__ = ["normalize"]


def normalize(doc: Document) -> tuple[KindInfo, dict[str, Any]]:
    """Validate ``doc`` (raising InvalidObject) and return its kind and its storage form (a copy)."""
    info = validate_document(doc)
    obj = convert(info, copy.deepcopy(doc.obj), info.storage_version)
    apply_defaults(info.kind, obj)
    return info, obj
