"""copy_json: every dict and list copied, scalars shared, the copy equal to the original and independent of it."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from flexq.api.jsoncopy import copy_json

DOC: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": "1"}},
                       "data": {"k": "v"}, "list": [1, 2.5, None, True, {"deep": [["x"]]}],
                       "when": datetime.date(2026, 12, 2)}


@pytest.mark.parametrize("value", [DOC, [DOC, [DOC]], {}, [], "text", 3, None])
def test_the_copy_is_equal_and_shares_no_dict_or_list(value: Any) -> None:
    copied = copy_json(value)
    assert copied == value

    def containers(v: Any) -> list[Any]:
        if isinstance(v, dict):
            return [v, *(c for x in v.values() for c in containers(x))]
        if isinstance(v, list):
            return [v, *(c for x in v for c in containers(x))]
        return []

    originals = {id(c) for c in containers(value)}
    assert not originals & {id(c) for c in containers(copied)}


def test_changing_the_copy_leaves_the_original() -> None:
    copied = copy_json(DOC)
    copied["metadata"]["labels"]["x"] = "2"
    copied["list"][4]["deep"][0].append("y")
    assert DOC["metadata"]["labels"]["x"] == "1" and DOC["list"][4]["deep"] == [["x"]]
    assert copied["when"] is DOC["when"]  # immutable values are shared
