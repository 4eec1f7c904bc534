"""The Kubernetes API's answers as JSON: orjson's encoding, and the standard library's where orjson refuses."""

from __future__ import annotations

import json

from flexq.server.k8s import _Json


def test_an_answer_is_compact_json_that_reads_back_as_the_object() -> None:
    obj = {"kind": "Job", "metadata": {"name": "train", "labels": {"team": "ä"}}, "spec": {"parallelism": 2}}
    answer = _Json(obj, status_code=201)
    assert answer.status_code == 201 and answer.media_type == "application/json"
    assert answer.body == json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def test_an_integer_beyond_64_bits_is_written_whole() -> None:
    assert json.loads(_Json({"n": 2**70}).body) == {"n": 2**70}
