"""The manifest reader and validator on generated input: a clear refusal naming the field, never a crash."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexq.api.documents import format_path, load_documents
from flexq.api.fields import unknown_fields
from flexq.api.kinds import by_gvk
from flexq.api.object_errors import ApiError, InputError, InvalidObject
from flexq.api.validation import validate_document
from tests.fuzz.strategies import JSON, KEYS, manifests

FUZZ = settings(max_examples=2500, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])


def _read(text: str) -> None:
    try:
        docs = load_documents(text, "f.yaml")
    except InputError as exc:
        assert exc.source == "f.yaml" and exc.message
        return
    for doc in docs:
        try:
            info = validate_document(doc)
        except InvalidObject as exc:
            assert exc.errors and all(e.path and e.message for e in exc.errors), exc
            continue
        unknown_fields(info.model, doc.obj)


@pytest.mark.long
@FUZZ
@given(manifests())
def test_generated_objects(obj: dict[str, Any]) -> None:
    _read(json.dumps(obj))


@pytest.mark.long
@FUZZ
@given(st.one_of(st.text(max_size=300), JSON.map(lambda v: yaml.safe_dump(v, allow_unicode=True)),
                 st.binary(max_size=200).map(lambda b: b.decode("latin-1"))))
def test_generated_text(text: str) -> None:
    try:
        _read(text)
    except ApiError:
        raise AssertionError("refusals are InputError or InvalidObject") from None


@pytest.mark.long
@settings(FUZZ, max_examples=600)  # what varies is the number and its path; the manifest around them matters little
@given(manifests(), st.lists(KEYS.filter(bool), min_size=1, max_size=3),
       st.sampled_from(["9223372036854775808", "-9223372036854775809", ".inf", "-.inf", ".nan", "1.0e+400"]))
def test_a_number_no_64_bits_hold_is_refused_naming_its_field(obj: dict[str, Any], path: list[str],
                                                             number: str) -> None:
    node = obj
    for key in path[:-1]:
        node[key] = {}
        node = node[key]
    node[path[-1]] = "<number>"
    try:
        load_documents(json.dumps(obj), "f.yaml")
    except InputError:  # unreadable without the number (a number of its own, an unpaired surrogate)
        return
    text = json.dumps(obj).replace('"<number>"', number)
    try:
        load_documents(text, "f.yaml")
    except InputError as exc:
        assert exc.line == 1 and exc.message.startswith(f"{format_path(path)}: "), exc
    else:
        raise AssertionError(f"{number} at {format_path(path)} was read")


def test_a_known_kind_resolves() -> None:
    assert by_gvk("kueue.x-k8s.io/v1beta2", "ClusterQueue").plural == "clusterqueues"
