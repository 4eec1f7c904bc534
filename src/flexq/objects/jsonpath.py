"""The JSONPath subset that printer columns use: ``.a.b``, ``[0]``, ``[*]``, ``[?(@.type=='X')]``."""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = ["evaluate"]

_TOKEN: Final = re.compile(
    r"\.(?P<field>[A-Za-z0-9_\-$]+)"
    r"|\[(?P<index>-?\d+|\*)\]"
    r"|\[\?\(@\.(?P<fpath>[A-Za-z0-9_.\-]+)\s*(?P<op>==|!=)\s*['\"](?P<value>[^'\"]*)['\"]\)\]"
)


def evaluate(obj: Any, path: str) -> list[Any]:
    """Every value ``path`` selects in ``obj`` (empty when nothing matches)."""
    nodes = [obj]
    pos = 0
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if m is None:
            raise ValueError(f"unsupported JSONPath {path!r} at {pos}")
        pos = m.end()
        nxt: list[Any] = []
        for node in nodes:
            if m.group("field") is not None:
                if isinstance(node, dict) and m.group("field") in node:
                    nxt.append(node[m.group("field")])
            elif m.group("index") is not None:
                if isinstance(node, list):
                    if m.group("index") == "*":
                        nxt.extend(node)
                    else:
                        i = int(m.group("index"))
                        if -len(node) <= i < len(node):
                            nxt.append(node[i])
            elif isinstance(node, list):
                for item in node:
                    found = evaluate(item, "." + m.group("fpath"))
                    equal = bool(found) and str(found[0]) == m.group("value")
                    if equal == (m.group("op") == "=="):
                        nxt.append(item)
        nodes = nxt
    return [n for n in nodes if n is not None]
