"""Errors of the object layer.

::

    ApiError                      anything refused while reading or validating objects
    ├── InputError                the input itself is unusable: not text, too large, malformed YAML,
    │                             unresolved ${VAR} placeholders
    └── InvalidObject             a document parsed but is not a valid object; carries FieldErrors

Each carries its data in fields (``source``, ``line``, ``errors``); ``str()`` is the message a user
reads, naming the file, the document, the line where known, and the field path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flexq.errors import FlexqError

__all__ = ["ApiError", "FieldError", "InputError", "InvalidObject"]


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem at one field: ``spec.resourceGroups[0].flavors[2].resources[0].nominalQuota``."""

    path: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.path}: {self.message}" if self.path else f"{where}{self.message}"


class ApiError(FlexqError):
    """Base of the object layer's errors."""


class InputError(ApiError):
    """The input cannot be read as objects at all."""

    def __init__(self, source: str, message: str, line: int | None = None) -> None:
        self.source = source
        self.message = message
        self.line = line
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {message}")


@dataclass
class InvalidObject(ApiError):
    """A document that is not a valid object."""

    source: str
    document: int
    kind: str
    name: str
    errors: list[FieldError] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        what = f"{self.kind or 'object'} {self.name!r}" if self.name else (self.kind or "object")
        head = f"{self.source}: document {self.document + 1} ({what}) is invalid"
        return head + "".join(f"\n  {err}" for err in self.errors)
