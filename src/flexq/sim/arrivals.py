"""What every traffic source of a scenario produces: submissions, and the errors and file reading they share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flexq.api import Document, InputError, decode_input, find_placeholders, substitute
from flexq.durations import DurationError, parse_duration

__all__ = ["ScenarioError", "Submission", "fill", "read_text", "seconds"]


class ScenarioError(InputError):
    """A scenario that cannot be run; names the file, the line and the field."""


@dataclass(frozen=True, slots=True)
class Submission:
    """A job that arrives at ``at`` (seconds) and runs ``run_for`` seconds once admitted (``None``: forever)."""

    at: float
    document: Document
    run_for: float | None
    ready_after: float | None = 0.0
    """How long after it starts its pods are all ready (Kueue's ``PodsReady``); None: never (a bad image, say)."""


def read_text(path: Path, source: str) -> str:
    """The text of ``path``; a missing or unreadable file is a :class:`ScenarioError` of ``source`` (the file that
    names it, or the file itself)."""
    named = "" if source == str(path) else f"{path}: "
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ScenarioError(source, f"{named}no such file") from None
    except OSError as exc:
        raise ScenarioError(source, f"{named}cannot read: {exc.strerror}") from None
    return decode_input(data, str(path))


def fill(text: str, env: Mapping[str, str], source: str, line: int | None = None, hint: str = "") -> str:
    """Substitute ``env`` into ``text``; refuse text that still holds ``${VAR}`` placeholders."""
    text = substitute(text, env)
    unresolved = find_placeholders(text)
    if unresolved:
        listed = ", ".join(f"${{{p.name}}} (line {p.line})" for p in unresolved)
        hint = hint or "set them in spec.env or the entry's env"
        raise ScenarioError(source, f"unresolved placeholders: {listed}; {hint}", line)
    return text


def seconds(value: Any) -> float:
    """A duration (``90s``, ``10m``, ``2h``, ``7d``) or a number of seconds, possibly written as text."""
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return parse_duration(value)
        if number != number or number in (float("inf"), float("-inf")):
            raise DurationError(f"invalid duration {value!r}: use forms like 90s, 10m, 2h, 7d")
        return parse_duration(number)
    return parse_duration(value)
