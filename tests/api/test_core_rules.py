"""The API server's rules for names, paths and sizes: ConfigMap keys, a pod template's volume paths (in every kind
that holds one), the size of a ConfigMap and of annotations; each refusal names the field, in the API server's
words."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from flexq.api.core_rules import config_key_errors, go_quote
from flexq.api.object_errors import InvalidObject
from flexq.api.validation import validate_object

KEY_REGEX = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
             "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")


def _errors(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """The (field, message) of each error ``obj`` gets; [] when it is valid."""
    try:
        validate_object(obj)
    except InvalidObject as exc:
        return [(e.path, e.message) for e in exc.errors]
    return []


def _config_map(data: dict[str, str] | None = None, binary: dict[str, str] | None = None,
                annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "c", **({"annotations": annotations} if annotations is not None else {})}
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
    if data is not None:
        obj["data"] = data
    if binary is not None:
        obj["binaryData"] = binary
    return obj


@pytest.mark.parametrize(("key", "problems"), [
    pytest.param("key.name", [], id="a dotted name"),
    pytest.param("KEY_NAME-1", [], id="capitals, digits, '_' and '-'"),
    pytest.param(".hidden", [], id="one leading dot"),
    pytest.param("k" * 253, [], id="253 characters"),
    pytest.param("../../x", [KEY_REGEX, "must not start with '..'"], id="climbing out"),
    pytest.param("a/b", [KEY_REGEX], id="a slash"),
    pytest.param("/etc/passwd", [KEY_REGEX], id="absolute"),
    pytest.param(".", ["must not be '.'"], id="dot"),
    pytest.param("..", ["must not be '..'"], id="dot dot"),
    pytest.param("..a", ["must not start with '..'"], id="starting with dot dot"),
    pytest.param("a\x00b", [KEY_REGEX], id="a NUL byte"),
    pytest.param("", [KEY_REGEX], id="empty"),
    pytest.param("k" * 254, ["must be no more than 253 characters"], id="254 characters"),
    pytest.param("." * 253, ["must not start with '..'"], id="253 dots"),
    pytest.param("é", [KEY_REGEX], id="not ASCII"),
])
def test_config_map_keys_are_checked_as_is_config_map_key_checks_them(key: str, problems: list[str]) -> None:
    assert config_key_errors(key) == problems
    shown = go_quote(key)
    assert _errors(_config_map({key: "v"})) == [(f"data[{key}]", f"Invalid value: {shown}: {p}") for p in problems]
    assert _errors(_config_map(binary={key: "dg=="})) == [
        (f"binaryData[{key}]", f"Invalid value: {shown}: {p}") for p in problems]


def test_a_key_in_data_and_binary_data_is_refused() -> None:
    assert _errors(_config_map({"k": "v"}, {"k": "dg=="})) == [
        ("data[k]", 'Invalid value: "k": duplicate of key present in binaryData')]


MIB = 1024 * 1024


@pytest.mark.parametrize(("obj", "refused"), [
    pytest.param(_config_map({"a": "x" * MIB}), False, id="1 MiB of data"),
    pytest.param(_config_map({"a": "x" * (MIB // 2), "b": "x" * (MIB // 2) + "x"}), True, id="a byte over, in two"),
    pytest.param(_config_map({"a": "x" * 2_400_000}), True, id="2.4 MB of data"),
    pytest.param(_config_map({"a": "é" * (MIB // 2 + 1)}), True, id="counted in bytes, not characters"),
    pytest.param(_config_map(binary={"a": base64.b64encode(b"x" * MIB).decode()}), False,
                 id="1 MiB of binaryData, counted decoded"),
    pytest.param(_config_map({"a": "x"}, {"b": base64.b64encode(b"x" * MIB).decode()}), True,
                 id="data and binaryData together"),
])
def test_a_config_map_holds_at_most_one_mebibyte(obj: dict[str, Any], refused: bool) -> None:
    assert _errors(obj) == ([("[]", "Too long: must have at most 1048576 bytes")] if refused else [])


KIB = 1024


@pytest.mark.parametrize(("annotations", "refused"), [
    pytest.param({"a": "x" * (256 * KIB - 1)}, False, id="256 KiB with the key"),
    pytest.param({"a": "x" * (256 * KIB)}, True, id="a byte over"),
    pytest.param({f"k{i}": "x" * KIB for i in range(256)}, True, id="over, in many"),
])
def test_annotations_hold_at_most_256_kib_on_every_kind(annotations: dict[str, str], refused: bool) -> None:
    expected = [("metadata.annotations", "Too long: must have at most 262144 bytes")] if refused else []
    assert _errors(_config_map({"k": "v"}, annotations=annotations)) == expected
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
              "metadata": {"name": "f", "annotations": annotations}}
    assert _errors(flavor) == expected


# --- volume paths ------------------------------------------------------------------------------------------------


def _pod_spec(mounts: list[dict[str, Any]] | None = None, volumes: list[dict[str, Any]] | None = None,
              ) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "i", "volumeMounts": mounts or []}], "volumes": volumes or [],
            "restartPolicy": "Never"}


def _cm_volume(*items: dict[str, Any]) -> dict[str, Any]:
    return {"name": "v", "configMap": {"name": "code", "items": list(items)}}


MOUNT = "spec.containers[0].volumeMounts[0]"
ITEM = "spec.volumes[0].configMap.items[0]"
SPEC_CASES = [
    pytest.param(_pod_spec([{"name": "v", "mountPath": "/app", "subPath": "x/y"}], [_cm_volume()]), [],
                 id="a valid mount"),
    pytest.param(_pod_spec([{"name": "v", "mountPath": "/app/../x"}]), [],
                 id="a mountPath with '..' (the runtime resolves it under the container's root)"),
    pytest.param(_pod_spec([{"name": "v", "mountPath": "/app", "subPath": "../x"}]),
                 [(f"{MOUNT}.subPath", "Invalid value: \"../x\": must not contain '..'")], id="subPath climbing out"),
    pytest.param(_pod_spec([{"name": "v", "mountPath": "/app", "subPath": "a/../../b"}]),
                 [(f"{MOUNT}.subPath", "Invalid value: \"a/../../b\": must not contain '..'")],
                 id="subPath with '..' inside"),
    pytest.param(_pod_spec([{"name": "v", "mountPath": "/app", "subPath": "/etc"}]),
                 [(f"{MOUNT}.subPath", 'Invalid value: "/etc": must be a relative path')], id="subPath absolute"),
    pytest.param(_pod_spec([{"name": "v", "mountPath": "/app", "subPathExpr": "/$(POD)/.."}]),
                 [(f"{MOUNT}.subPathExpr", 'Invalid value: "/$(POD)/..": must be a relative path'),
                  (f"{MOUNT}.subPathExpr", "Invalid value: \"/$(POD)/..\": must not contain '..'")],
                 id="subPathExpr absolute and climbing out"),
    pytest.param(_pod_spec([{"name": "v", "mountPath": "/app", "subPath": "a", "subPathExpr": "b"}]),
                 [(f"{MOUNT}.subPathExpr", 'Invalid value: "b": subPathExpr and subPath are mutually exclusive')],
                 id="subPath and subPathExpr"),
    pytest.param(_pod_spec([{"name": "v"}, {"mountPath": "/a"}, {"name": "w", "mountPath": "/a"}]),
                 [(f"{MOUNT}.mountPath", "Required value"),
                  ("spec.containers[0].volumeMounts[1].name", "Required value"),
                  ("spec.containers[0].volumeMounts[2].mountPath", 'Invalid value: "/a": must be unique')],
                 id="mounts without a path or name, and a path twice"),
    pytest.param(_pod_spec([{"name": "v", "mountPath": 7}]),
                 [(f"{MOUNT}.mountPath", "Invalid value: 7: must be a string")], id="a mountPath not a string"),
    pytest.param(_pod_spec(volumes=[_cm_volume({"key": "k", "path": "x/y.py"})]), [], id="a valid item"),
    pytest.param(_pod_spec(volumes=[_cm_volume({"key": "k", "path": "/etc/cron.d/x"})]),
                 [(f"{ITEM}.path", 'Invalid value: "/etc/cron.d/x": must be a relative path')], id="item absolute"),
    pytest.param(_pod_spec(volumes=[_cm_volume({"key": "k", "path": "../../x"})]),
                 [(f"{ITEM}.path", "Invalid value: \"../../x\": must not contain '..'")], id="item climbing out"),
    pytest.param(_pod_spec(volumes=[_cm_volume({"key": "k", "path": "..data"})]),
                 [(f"{ITEM}.path", "Invalid value: \"..data\": must not start with '..'")],
                 id="item starting with '..'"),
    pytest.param(_pod_spec(volumes=[_cm_volume({"path": ""})]),
                 [(f"{ITEM}.key", "Required value"), (f"{ITEM}.path", "Required value")], id="item without either"),
    pytest.param(_pod_spec(volumes=[{"name": "v", "configMap": {"name": "c", "items": "x"}}]),
                 [("spec.volumes[0].configMap.items", 'Invalid value: "x": must be a list')], id="items not a list"),
    pytest.param(_pod_spec(volumes=[{"name": "s", "secret": {"secretName": "s", "items": [
        {"key": "k", "path": "ok"}, {"key": "k", "path": "a/.."}]}}]),
                 [("spec.volumes[0].secret.items[1].path", "Invalid value: \"a/..\": must not contain '..'")],
                 id="secret item"),
    pytest.param(_pod_spec(volumes=[{"name": "d", "downwardAPI": {"items": [
        {"path": "/labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}]),
                 [("spec.volumes[0].downwardAPI.items[0].path", 'Invalid value: "/labels": must be a relative path')],
                 id="downwardAPI item"),
    pytest.param(_pod_spec(volumes=[{"name": "p", "projected": {"sources": [
        {"configMap": {"name": "c", "items": [{"key": "k", "path": "../c"}]}},
        {"secret": {"name": "s", "items": [{"key": "k", "path": "/s"}]}},
        {"downwardAPI": {"items": [{"path": ".."}]}},
        {"serviceAccountToken": {"path": "../token"}}]}}]),
                 [("spec.volumes[0].projected.sources[0].configMap.items[0].path",
                   "Invalid value: \"../c\": must not contain '..'"),
                  ("spec.volumes[0].projected.sources[1].secret.items[0].path",
                   'Invalid value: "/s": must be a relative path'),
                  ("spec.volumes[0].projected.sources[2].downwardAPI.items[0].path",
                   "Invalid value: \"..\": must not contain '..'"),
                  ("spec.volumes[0].projected.sources[2].downwardAPI.items[0].path",  # both, as the API server says
                   "Invalid value: \"..\": must not start with '..'"),
                  ("spec.volumes[0].projected.sources[3].serviceAccountToken.path",
                   "Invalid value: \"../token\": must not contain '..'")],
                 id="projected sources"),
]


@pytest.mark.parametrize(("spec", "expected"), SPEC_CASES)
def test_pod_volume_paths_stay_below_their_roots(spec: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
    assert _errors(pod) == expected


def _rayjob(head: dict[str, Any], worker: dict[str, Any], submitter: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "r"},
            "spec": {"entrypoint": "python /app/x.py", "submitterPodTemplate": {"spec": submitter},
                     "rayClusterSpec": {"headGroupSpec": {"template": {"spec": head}},
                                        "workerGroupSpecs": [{"groupName": "w", "template": {"spec": worker}}]}}}


BAD_ITEM = _pod_spec([{"name": "v", "mountPath": "/app"}], [_cm_volume({"key": "k", "path": "../../x"})])
BAD_MOUNT = _pod_spec([{"name": "v", "mountPath": "/app", "subPath": "/etc"}], [_cm_volume()])
GOOD = _pod_spec([{"name": "v", "mountPath": "/app"}], [_cm_volume()])
CLIMBS = "Invalid value: \"../../x\": must not contain '..'"
ABSOLUTE = 'Invalid value: "/etc": must be a relative path'


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                  "spec": {"template": {"spec": BAD_ITEM}}},
                 [("spec.template.spec.volumes[0].configMap.items[0].path", CLIMBS)], id="Job"),
    pytest.param(_rayjob(BAD_ITEM, GOOD, GOOD),
                 [("spec.rayClusterSpec.headGroupSpec.template.spec.volumes[0].configMap.items[0].path", CLIMBS)],
                 id="RayJob head"),
    pytest.param(_rayjob(GOOD, BAD_MOUNT, GOOD),
                 [("spec.rayClusterSpec.workerGroupSpecs[0].template.spec.containers[0].volumeMounts[0].subPath",
                   ABSOLUTE)], id="RayJob worker group"),
    pytest.param(_rayjob(GOOD, GOOD, BAD_ITEM),
                 [("spec.submitterPodTemplate.spec.volumes[0].configMap.items[0].path", CLIMBS)],
                 id="RayJob submitter"),
    pytest.param({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"},
                  "spec": {"headGroupSpec": {"template": {"spec": GOOD}},
                           "workerGroupSpecs": [{"groupName": "a", "template": {"spec": GOOD}},
                                                {"groupName": "b", "template": {"spec": BAD_MOUNT}}]}},
                 [("spec.workerGroupSpecs[1].template.spec.containers[0].volumeMounts[0].subPath", ABSOLUTE)],
                 id="RayCluster worker group"),
])
def test_every_pod_template_is_checked(obj: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert _errors(obj) == expected


@pytest.mark.parametrize(("text", "quoted"), [
    pytest.param("../../x", '"../../x"', id="plain"),
    pytest.param('a"b\\c', '"a\\"b\\\\c"', id="quote and backslash"),
    pytest.param("a\x00b\n\t", '"a\\x00b\\n\\t"', id="control characters"),
    pytest.param("é\u200b", '"é\\u200b"', id="printable kept, a format character escaped"),
])
def test_values_are_quoted_as_go_quotes_them(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted
