from pathlib import Path

import pytest

from flexq.api.envsubst import find_placeholders, read_env_file, substitute
from flexq.api.object_errors import InputError


def test_find_placeholders_with_lines_ignoring_comments() -> None:
    text = "a: ${ONE}\n# ${COMMENTED}\nb: x # ${TRAILING}\nc: '${QUOTED} # not a comment'\nd: $PLAIN\n"
    found = find_placeholders(text)
    assert [(p.name, p.line) for p in found] == [("ONE", 1), ("QUOTED", 4)]


def test_substitute_only_given_variables() -> None:
    text = "a: ${A}\nb: $A\nc: ${B}\nd: $HOME"
    assert substitute(text, {"A": "x"}) == "a: x\nb: x\nc: ${B}\nd: $HOME"


def test_read_env_file(tmp_path: Path) -> None:
    path = tmp_path / "env.sh"
    path.write_text(
        "# comment\nexport PROJECT_ID=$(gcloud config get project)\nexport ZONE=\"us-east5-b\"\n"
        "REGION='us-east5'\nPOOL=${ZONE}-pool\n"
    )
    values, warnings = read_env_file(path)
    assert values == {"ZONE": "us-east5-b", "REGION": "us-east5", "POOL": "us-east5-b-pool"}
    assert len(warnings) == 1 and "PROJECT_ID" in warnings[0] and ":2:" in warnings[0]


def test_read_env_file_rejects_garbage(tmp_path: Path) -> None:
    path = tmp_path / "bad.env"
    path.write_text("GOOD=1\nthis is not an assignment\n")
    with pytest.raises(InputError) as info:
        read_env_file(path)
    assert info.value.line == 2
