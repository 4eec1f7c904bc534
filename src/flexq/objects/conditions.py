"""``metav1.Condition`` lists: set one, keeping lastTransitionTime unless the status flips; a Node's state from its
Ready condition."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["NODE_BOOTING", "find_condition", "node_state", "set_condition"]

NODE_BOOTING: Final = "NodeBooting"
"""The reason of the Ready condition (False) flexq writes on a node still booting."""


def node_state(node: Mapping[str, Any]) -> str:
    """``ready``, ``booting`` (not ready yet, its Ready condition False for :data:`NODE_BOOTING`, or none written
    yet) or ``not_ready`` (NotReady after it was ready: any other Ready condition not True)."""
    ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    if ready is None or (ready.get("status") != "True" and ready.get("reason") == NODE_BOOTING):
        return "booting"
    return "ready" if ready.get("status") == "True" else "not_ready"


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
