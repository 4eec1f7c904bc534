"""Reading manifests for apply and delete: files, directories or stdin, ${VAR} placeholders checked."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from flexq.api import MAX_INPUT_BYTES, InputError, decode_input, find_placeholders, substitute

__all__ = ["Manifest", "read_manifests"]

_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True, slots=True)
class Manifest:
    source: str
    text: str


def _read_bytes(name: str) -> bytes:
    if name == "-":
        data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        return data
    path = Path(name)
    try:
        with path.open("rb") as fh:
            return fh.read(MAX_INPUT_BYTES + 1)
    except FileNotFoundError:
        raise InputError(name, "no such file or directory") from None
    except OSError as exc:
        raise InputError(name, f"cannot read: {exc.strerror or exc}") from None


def _expand(names: list[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        path = Path(name)
        if name != "-" and path.is_dir():
            out.extend(str(p) for p in sorted(path.iterdir()) if p.suffix in _SUFFIXES and p.is_file())
        else:
            out.append(name)
    return out


def read_manifests(names: list[str], env: Mapping[str, str]) -> list[Manifest]:
    """Read every named input, substitute ``env``, refuse unresolved ``${VAR}`` placeholders."""
    manifests: list[Manifest] = []
    for name in _expand(names):
        source = "stdin" if name == "-" else name
        text = decode_input(_read_bytes(name), source)
        if env:
            text = substitute(text, env)
        unresolved = find_placeholders(text)
        if unresolved:
            listed = ", ".join(f"${{{p.name}}} (line {p.line})" for p in unresolved)
            names_only = sorted({p.name for p in unresolved})
            raise InputError(
                source,
                f"unresolved placeholder{'s' if len(unresolved) > 1 else ''}: {listed}.\n"
                f"Substitute them first (`envsubst < FILE | flexq apply -f -`), or pass "
                + " ".join(f"--env {n}=VALUE" for n in names_only) + " or --env-file FILE.",
            )
        manifests.append(Manifest(source, text))
    return manifests
