"""A pod set's ``topologyAssignment`` in both of Kueue's forms.

v1beta1 lists the domains: ``{levels, domains: [{values, count}]}``. v1beta2 packs them into slices:
``{levels, slices: [{domainCount, valuesPerLevel: [{universal} | {individual: {prefix?, suffix?, roots}}],
podCounts: {universal} | {individual}}]}``. flexq stores v1beta2 (one slice; a level whose domains all share a value
written ``universal``) and converts for v1beta1 readers; either form is read back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["Domains", "assignment_domains", "from_v1beta1", "to_v1beta1", "to_v1beta2"]

Domains = tuple[tuple[str, ...], tuple[tuple[tuple[str, ...], int], ...]]
"""(levels, ((values, count), ...))"""


def to_v1beta2(levels: Sequence[str], domains: Sequence[tuple[Sequence[str], int]]) -> dict[str, Any]:
    """The v1beta2 form of a topology assignment."""
    if not domains:
        return {"levels": list(levels), "slices": []}
    values_per_level: list[dict[str, Any]] = []
    for i in range(len(levels)):
        column = [values[i] for values, _ in domains]
        values_per_level.append({"universal": column[0]} if len(set(column)) == 1 else
                                {"individual": {"roots": column}})
    counts = [count for _, count in domains]
    pod_counts: dict[str, Any] = {"universal": counts[0]} if len(set(counts)) == 1 else {"individual": counts}
    return {"levels": list(levels),
            "slices": [{"domainCount": len(domains), "valuesPerLevel": values_per_level, "podCounts": pod_counts}]}


def assignment_domains(raw: Any) -> Domains | None:
    """The levels and domains of a stored ``topologyAssignment`` in either form (None: absent or unreadable)."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("levels"), list):
        return None
    levels = tuple(str(level) for level in raw["levels"])
    if isinstance(raw.get("domains"), list):
        return levels, tuple((tuple(str(v) for v in d.get("values") or []), int(d.get("count", 0)))
                             for d in raw["domains"] if isinstance(d, Mapping))
    out: list[tuple[tuple[str, ...], int]] = []
    for piece in raw.get("slices") or []:
        n = int(piece.get("domainCount", 0))
        columns = [_column(level, n) for level in piece.get("valuesPerLevel") or []]
        counts = piece.get("podCounts") or {}
        per = counts["individual"] if "individual" in counts else [int(counts.get("universal", 0))] * n
        out += [(tuple(column[i] for column in columns), int(per[i])) for i in range(n)]
    return levels, tuple(out)


def _column(level: Mapping[str, Any], n: int) -> list[str]:
    if "universal" in level:
        return [str(level["universal"])] * n
    individual = level.get("individual") or {}
    prefix, suffix = str(individual.get("prefix") or ""), str(individual.get("suffix") or "")
    return [f"{prefix}{root}{suffix}" for root in individual.get("roots") or []]


def to_v1beta1(raw: Any) -> Any:
    """A stored (v1beta2) ``topologyAssignment`` in v1beta1's form (unchanged when it cannot be read)."""
    read = assignment_domains(raw)
    if read is None:
        return raw
    levels, domains = read
    return {"levels": list(levels), "domains": [{"values": list(values), "count": count} for values, count in domains]}


def from_v1beta1(raw: Any) -> Any:
    """A v1beta1 ``topologyAssignment`` in v1beta2's form (unchanged when it cannot be read)."""
    read = assignment_domains(raw)
    if read is None:
        return raw
    return to_v1beta2(*read)
