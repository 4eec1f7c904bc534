"""Unknown fields with the real kubectl (fieldValidation Strict / Warn / Ignore) and with `flexq apply`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests import admin
from tests.conftest import Server

TYPO = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: typo-cq
spec:
  namespaceSelector: {}
  resourceGroup:
  - coveredResources: [cpu]
"""


def _stored(server: Server) -> dict[str, Any] | None:
    got = admin.get(f"{server.url}/apis/kueue.x-k8s.io/v1beta2/clusterqueues/typo-cq")
    return got.json() if got.status_code == 200 else None


def test_kubectl_strict_by_default_then_warn_and_ignore(kubectl: Any, server: Server) -> None:
    refused = kubectl("apply", "-f", "-", input=TYPO)
    assert refused.code != 0
    assert 'strict decoding error: unknown field "spec.resourceGroup"' in refused.err, refused.err
    assert _stored(server) is None, "a ClusterQueue without its quota is not stored silently"

    warned = kubectl("apply", "--validate=warn", "-f", "-", input=TYPO)
    assert warned.code == 0, warned.err
    assert 'unknown field "spec.resourceGroup"' in warned.err and "Warning" in warned.err
    stored = _stored(server)
    assert stored is not None and "resourceGroup" not in stored["spec"], "dropped, as the API server prunes"

    ignored = kubectl("create", "--validate=false", "-f", "-", input=TYPO.replace("typo-cq", "typo-cq-2"))
    assert ignored.code == 0 and "unknown field" not in ignored.err, ignored.err


def test_flexq_apply_names_the_file_and_line(flexq: Any, server: Server, tmp_path: Path) -> None:
    path = tmp_path / "cq.yaml"
    path.write_text(TYPO)
    refused = flexq("apply", "-f", str(path))
    assert refused.code == 1 and "Traceback" not in refused.err
    assert f"{path}: document 1 (ClusterQueue 'typo-cq') is invalid" in refused.err
    assert 'line 7: spec.resourceGroup: unknown field "spec.resourceGroup"' in refused.err, refused.err
    assert _stored(server) is None
    warned = flexq("apply", "--validate", "warn", "-f", str(path))
    assert warned.code == 0 and f'Warning: {path}: ClusterQueue: unknown field "spec.resourceGroup"' in warned.err
    bad = flexq("apply", "--validate", "loose", "-f", str(path))
    assert bad.code == 2 and "--validate" in bad.err
