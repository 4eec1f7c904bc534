"""Rebuild kueue.json and kuberay.json.gz from the CRD YAML of Kueue's and KubeRay's repositories.

    python tests/data/crds/extract.py KUEUE_CHECKOUT KUBERAY_CHECKOUT

Keeps each served version's ``openAPIV3Schema`` of the kinds flexq exports, without ``description``
texts (the schemas' rules are kept whole), keyed ``Kind/version``.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import yaml

KUEUE = ("resourceflavors", "clusterqueues", "localqueues", "admissionchecks", "provisioningrequestconfigs",
         "workloadpriorityclasses", "cohorts", "topologies")
KUBERAY = ("rayjobs", "rayclusters")


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not (k == "description" and isinstance(v, str))}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def extract(files: list[Path]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in files:
        crd = yaml.safe_load(path.read_text())
        kind = crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version.get("served"):
                out[f"{kind}/{version['name']}"] = _strip(version["schema"]["openAPIV3Schema"])
    return out


def main() -> None:
    kueue, kuberay = Path(sys.argv[1]), Path(sys.argv[2])
    here = Path(__file__).parent
    bases = kueue / "config/components/crd/bases"
    (here / "kueue.json").write_text(json.dumps(
        extract([bases / f"kueue.x-k8s.io_{n}.yaml" for n in KUEUE]), separators=(",", ":"), sort_keys=True))
    bases = kuberay / "ray-operator/config/crd/bases"
    text = json.dumps(extract([bases / f"ray.io_{n}.yaml" for n in KUBERAY]), separators=(",", ":"), sort_keys=True)
    # KubeRay's schemas repeat the whole pod template for the head and the workers: 700 kB, 40 kB compressed.
    (here / "kuberay.json.gz").write_bytes(gzip.compress(text.encode(), mtime=0))


if __name__ == "__main__":
    main()
