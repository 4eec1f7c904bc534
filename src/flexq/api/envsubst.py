"""``${VAR}`` placeholders: find the unresolved ones, substitute given values, read env files.

flexq refuses to apply text that still holds ``${VAR}`` placeholders (the guide's manifests must go
through ``envsubst`` first, or through ``flexq apply --env/--env-file``). Substitution replaces only the
variables it is given, like ``envsubst '$A $B'``, so a ``$VAR`` meant for a shell inside an object is
left alone; ``${VAR}`` forms still unresolved afterwards are reported with their lines.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from flexq.api.object_errors import InputError

__all__ = ["Placeholder", "find_placeholders", "read_env_file", "substitute"]

_BRACED: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ANY: Final = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_ASSIGN: Final = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


@dataclass(frozen=True, slots=True)
class Placeholder:
    name: str
    line: int


def find_placeholders(text: str) -> list[Placeholder]:
    """Every ``${VAR}`` in ``text`` outside YAML comments, in order, with 1-based lines."""
    found: list[Placeholder] = []
    for number, line in enumerate(text.splitlines(), start=1):
        code = _strip_comment(line)
        found.extend(Placeholder(m.group(1), number) for m in _BRACED.finditer(code))
    return found


def _strip_comment(line: str) -> str:
    # A '#' starts a comment at the line's start or after whitespace, outside quotes.
    quote: str | None = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def substitute(text: str, values: Mapping[str, str]) -> str:
    """Replace ``$VAR`` and ``${VAR}`` for the variables in ``values``; leave the rest as written."""

    def repl(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return values[name] if name in values else match.group(0)

    return _ANY.sub(repl, text)


def read_env_file(path: Path) -> tuple[dict[str, str], list[str]]:
    """Read ``KEY=VALUE`` lines (``export`` allowed, shell quoting honoured, ``${EARLIER}`` expanded).

    Returns the values and warnings for lines that were skipped because they need a shell to evaluate
    (command substitution such as ``$(gcloud config get project)``).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), f"cannot read env file: {exc}") from None
    values: dict[str, str] = {}
    warnings: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _ASSIGN.match(line)
        if match is None:
            raise InputError(str(path), f"expected KEY=VALUE, got {raw!r}", number)
        key, rest = match.group(1), match.group(2)
        if "$(" in rest or "`" in rest:
            warnings.append(f"{path}:{number}: {key} skipped: its value needs a shell to evaluate")
            continue
        try:
            parts = shlex.split(rest, comments=True)
        except ValueError as exc:
            raise InputError(str(path), f"{key}: {exc}", number) from None
        values[key] = substitute(" ".join(parts), values)
    return values, warnings
