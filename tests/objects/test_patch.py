from __future__ import annotations

from typing import Any

import pytest

from flexq.objects.patch import (
    PatchError,
    apply_json_patch,
    create_three_way_merge_patch,
    json_merge,
    strategic_merge,
)


def test_json_merge() -> None:
    assert json_merge({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": None, "e": 4}, "f": [1]}) == {
        "a": 1, "b": {"d": 3, "e": 4}, "f": [1]}


def test_strategic_merge_by_key() -> None:
    pod = {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}], "finalizers": ["f1"]}
    patch: dict[str, Any] = {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}],
                             "finalizers": ["f2"]}
    out = strategic_merge(pod, patch)
    assert out["containers"] == [{"name": "a", "image": "x"}, {"name": "b", "image": "z"}, {"name": "c", "image": "w"}]
    assert out["finalizers"] == ["f1", "f2"]
    deleted = strategic_merge(pod, {"containers": [{"name": "a", "$patch": "delete"}],
                                    "$setElementOrder/containers": [{"name": "b"}]})
    assert deleted["containers"] == [{"name": "b", "image": "y"}]
    replaced = strategic_merge({"data": {"a": "1", "b": "2"}}, {"data": {"$patch": "replace", "c": "3"}})
    assert replaced == {"data": {"c": "3"}}


def test_json_patch() -> None:
    doc = {"a": [1, 2], "b": {"c": 1}}
    out = apply_json_patch(doc, [
        {"op": "add", "path": "/a/-", "value": 3},
        {"op": "replace", "path": "/b/c", "value": 2},
        {"op": "move", "from": "/b/c", "path": "/d"},
        {"op": "test", "path": "/d", "value": 2},
        {"op": "remove", "path": "/a/0"},
    ])
    assert out == {"a": [2, 3], "b": {}, "d": 2}
    assert doc == {"a": [1, 2], "b": {"c": 1}}, "the input is not mutated"
    with pytest.raises(PatchError, match="test failed"):
        apply_json_patch(doc, [{"op": "test", "path": "/a/0", "value": 9}])
    with pytest.raises(PatchError, match="does not exist"):
        apply_json_patch(doc, [{"op": "remove", "path": "/nope"}])


def test_three_way_merge_removes_what_was_applied_before() -> None:
    original = {"spec": {"a": 1, "b": 2}}
    modified = {"spec": {"a": 1, "c": 3}}
    current = {"spec": {"a": 1, "b": 2, "defaulted": True}, "status": {"x": 1}}
    patch = create_three_way_merge_patch(original, modified, current)
    assert patch == {"spec": {"c": 3, "b": None}}
    assert json_merge(current, patch) == {"spec": {"a": 1, "c": 3, "defaulted": True}, "status": {"x": 1}}
    assert create_three_way_merge_patch(modified, modified, json_merge(current, patch)) == {}


def test_label_and_field_selectors() -> None:
    from flexq.objects.selectors import SelectorError, field_selector, label_selector

    obj = {"metadata": {"name": "a", "labels": {"app": "x", "tier": "web"}}, "involvedObject": {"kind": "CQ"}}
    assert label_selector("app=x,tier in (web, db),!legacy")(obj)
    assert not label_selector("app!=x")(obj)
    assert not label_selector("tier notin (web)")(obj)
    assert label_selector("tier")(obj) and not label_selector("gone")(obj)
    assert field_selector("metadata.name=a,involvedObject.kind==CQ")(obj)
    assert not field_selector("metadata.name!=a")(obj)
    with pytest.raises(SelectorError):
        label_selector("a b c")
