"""bench/execution_bench.py's manifests: the warm cluster is the guide's job's cluster at a fixed size, queued as
the guide's job is, and the job on it is the guide's (entrypoint, runtime environment) naming that cluster; both
are valid. (The timed runs themselves need Ray and take minutes: ``make bench`` runs them.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import yaml

from flexq.api.validation import validate_object
from tests.conftest import guide_text

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("execution_bench", ROOT / "bench" / "execution_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["execution_bench"] = module
    spec.loader.exec_module(module)
    return module


def test_the_warm_cluster_and_the_job_on_it() -> None:
    bench = _bench()
    guide = yaml.safe_load(guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID="0"))
    cluster, job = bench.warm_cluster(), bench.selecting_job("probe-0")
    assert validate_object(cluster).kind == "RayCluster" and validate_object(job).kind == "RayJob"
    assert cluster["metadata"]["labels"] == guide["metadata"]["labels"]
    assert "enableInTreeAutoscaling" not in cluster["spec"]
    groups = cluster["spec"]["workerGroupSpecs"]
    assert [(g["minReplicas"], g["replicas"], g["maxReplicas"]) for g in groups] == [(1, 1, 1)]
    assert groups[0]["template"] == guide["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]
    assert job["spec"] == {"entrypoint": guide["spec"]["entrypoint"], "runtimeEnvYAML": guide["spec"]["runtimeEnvYAML"],
                           "clusterSelector": {"ray.io/cluster": "warm"}}
