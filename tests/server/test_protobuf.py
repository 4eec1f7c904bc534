import pytest

from flexq.server.protobuf import MAGIC, ProtobufError, decode_delete_options, decode_object


def _field(number: int, payload: bytes) -> bytes:
    return bytes([number << 3 | 2, len(payload)]) + payload


def _entry(key: str, value: str) -> bytes:
    return _field(1, key.encode()) + _field(2, value.encode())


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _field(1, api_version.encode()) + _field(2, kind.encode())
    return MAGIC + _field(1, type_meta) + _field(2, raw)


def test_config_map() -> None:
    meta = _field(1, b"jax-train-script") + _field(3, b"default") + _field(11, _entry("app", "demo"))
    raw = _field(1, meta) + _field(2, _entry("train.py", "print(1)\n")) + _field(2, _entry("b", ""))
    obj = decode_object(_envelope("v1", "ConfigMap", raw))
    assert obj == {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "jax-train-script", "namespace": "default", "labels": {"app": "demo"}},
                   "data": {"train.py": "print(1)\n", "b": ""}}


def test_delete_options_and_refusals() -> None:
    raw = _field(2, _field(2, b"42")) + _field(4, b"Background")
    assert decode_delete_options(_envelope("v1", "DeleteOptions", raw)) == {
        "preconditions": {"resourceVersion": "42"}, "propagationPolicy": "Background"}
    with pytest.raises(ProtobufError, match="not accepted as protobuf"):
        decode_object(_envelope("v1", "Pod", b""))
    with pytest.raises(ProtobufError, match="magic"):
        decode_object(b"{}")
    with pytest.raises(ProtobufError, match="truncated"):
        decode_object(MAGIC + b"\x0a\x7f")


def test_rules_review() -> None:
    """``kubectl auth can-i --list``'s body: the namespace whose rules to list."""
    raw = _field(1, b"") + _field(2, _field(1, b"team-a"))
    assert decode_object(_envelope("authorization.k8s.io/v1", "SelfSubjectRulesReview", raw)) == {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "metadata": {},
        "spec": {"namespace": "team-a"}}
