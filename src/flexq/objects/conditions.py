"""``metav1.Condition`` lists: set one, keeping lastTransitionTime unless the status flips."""

from __future__ import annotations

from typing import Any

__all__ = ["find_condition", "set_condition"]


def find_condition(status: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def set_condition(
    status: dict[str, Any], type_: str, value: bool, reason: str, message: str, *,
    now: str, observed_generation: int | None = None,
) -> None:
    """Set condition ``type_`` in ``status["conditions"]`` (in place)."""
    conditions: list[dict[str, Any]] = list(status.get("conditions") or [])
    text = "True" if value else "False"
    old = next((c for c in conditions if c.get("type") == type_), None)
    new: dict[str, Any] = {
        "type": type_, "status": text, "reason": reason, "message": message,
        "lastTransitionTime": old["lastTransitionTime"] if old and old.get("status") == text else now,
    }
    if observed_generation is not None:
        new["observedGeneration"] = observed_generation
    if old is None:
        conditions.append(new)
    else:
        conditions[conditions.index(old)] = new
    status["conditions"] = conditions
