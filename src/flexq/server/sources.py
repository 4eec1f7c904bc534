"""Manifests handed to flexq's own endpoints (apply, forecast) as text, each with where it came from."""

from __future__ import annotations

from pydantic import BaseModel, Field

from flexq.api import MAX_INPUT_BYTES, Document, InputError, load_documents

__all__ = ["ApplySource", "read_sources"]


class ApplySource(BaseModel):
    text: str = Field(description="YAML or JSON text, one or more documents")
    source: str = Field(default="-", description="where the text came from, for error messages")


def read_sources(sources: list[ApplySource], nothing: str) -> list[Document]:
    """Every document of ``sources``; :class:`InputError` for a source over the size limit, an unreadable one, or
    (saying ``nothing``) none at all."""
    docs: list[Document] = []
    for src in sources:
        if len(src.text.encode()) > MAX_INPUT_BYTES:
            raise InputError(src.source, f"input is more than {MAX_INPUT_BYTES // (1024 * 1024)} MiB")
        docs.extend(load_documents(src.text, src.source))
    if not docs:
        raise InputError(", ".join(s.source for s in sources) or "-", nothing)
    return docs
