import pytest

from flexq.api.documents import MAX_INPUT_BYTES, decode_input, load_documents
from flexq.api.object_errors import InputError
from tests.conftest import guide_text


def test_guide_queue_file_has_seven_documents_with_lines() -> None:
    docs = load_documents(guide_text("dws-tpu-queue.yaml"), "dws-tpu-queue.yaml")
    assert [d.obj["kind"] for d in docs] == [
        "ResourceFlavor", "ResourceFlavor", "ResourceFlavor", "ClusterQueue", "LocalQueue",
        "AdmissionCheck", "ProvisioningRequestConfig",
    ]
    cq = docs[3]
    assert cq.line == 25
    assert cq.lines["spec.resourceGroups[0].flavors[2].resources[0].nominalQuota"] == 53
    assert cq.line_of("spec.resourceGroups[0].flavors[2].resources[0].nominalQuota.nothing") == 53


def test_empty_documents_are_skipped_and_lists_expanded() -> None:
    text = ("---\n---\napiVersion: v1\nkind: List\nitems:\n"
            "- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: a\n")
    docs = load_documents(text, "x")
    assert len(docs) == 1 and docs[0].obj["metadata"]["name"] == "a"


def test_timestamps_stay_strings() -> None:
    (doc,) = load_documents("a: 2024-01-01\n", "x")
    assert doc.obj["a"] == "2024-01-01"


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("a: [1, 2\n", 2, "malformed YAML"),
        ("a: 1\n  b: 2\n", 2, "malformed YAML"),
        ("a: 1\na: 2\n", 2, 'key "a" appears twice'),
        ("- 1\n- 2\n", 1, "expected a mapping"),
        ("key: value\n\tbad: tab\n", 2, "malformed YAML"),
    ],
)
def test_malformed(text: str, line: int, fragment: str) -> None:
    with pytest.raises(InputError) as info:
        load_documents(text, "f.yaml")
    assert info.value.line == line
    assert fragment in str(info.value)
    assert str(info.value).startswith(f"f.yaml:{line}:")


def test_binary_and_oversized_input_refused() -> None:
    with pytest.raises(InputError, match="binary data"):
        decode_input(b"\x7fELF\x00\x01\x02", "stdin")
    with pytest.raises(InputError, match="not UTF-8"):
        decode_input(b"\xff\xfe\xfa garbage", "stdin")
    with pytest.raises(InputError, match="MiB"):
        decode_input(b"a" * (MAX_INPUT_BYTES + 1), "big.yaml")
    assert decode_input(b"kind: x\n", "ok") == "kind: x\n"
