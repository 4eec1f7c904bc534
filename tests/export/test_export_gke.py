"""`flexq export gke`: the guide's setup applied to flexq comes back out as the guide wrote it.

The guide's gcloud commands (from cluster.sh) and manifests go in; the export must give back the same
objects (same fields; namespaced objects say their namespace), the same gcloud flags, and objects that
Kueue's and KubeRay's CRD schemas accept.
"""

from __future__ import annotations

import re
import shlex
import time
from pathlib import Path
from typing import Any

import yaml

from tests import admin
from tests.conftest import GUIDE, Server, guide_text
from tests.export.crds import errors, has_schema
from tests.queues import queue_yaml

GUIDE_ENV = {"CLUSTER_NAME": "tpu-cluster", "GKE_VERSION": "1.34", "ZONE": "us-east5-b", "PROJECT_ID": "demo",
             "ONDEMAND_NODEPOOL": "on-demand-pool", "DWS_NODEPOOL": "dws-pool"}


def _commands(text: str) -> list[tuple[tuple[str, ...], frozenset[str]]]:
    """Every `gcloud container ... create` of a script: its words, and its flags as a set."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words[:2] == ["gcloud", "container"] and "create" in words:
            out.append((tuple(w for w in words if not w.startswith("--")),
                        frozenset(w for w in words if w.startswith("--"))))
    return out


def _substitute(text: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), m.group(0)), text)


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def _setup_guide(flexq: Any, server: Server) -> None:
    script = _substitute((GUIDE / "cluster.sh").read_text(), GUIDE_ENV)
    for words, flags in _commands(script):
        result = flexq(*words[1:], *sorted(flags))
        assert result.code == 0, (words, result.err)
    assert flexq("apply", "-f", "-", input=guide_text("dws-tpu-queue.yaml")).code == 0
    made = flexq("create", "configmap", "jax-train-script", "--from-file=train.py", cwd=GUIDE)
    assert made.code == 0, made.err
    for job in ("1", "2"):
        assert flexq("apply", "-f", "-", input=guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID=job)).code == 0
    # Wait until Kueue's part has started a job: admission changes its pod templates, which must not leak out.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        job = admin.get(f"{server.url}/apis/ray.io/v1/namespaces/default/rayjobs/rayjob-tpu-v6e-dws-1").json()
        if job["spec"].get("suspend") is False:
            return
        time.sleep(0.2)
    raise AssertionError("job 1 was never admitted")


def _guide_objects() -> list[dict[str, Any]]:
    objects = list(yaml.safe_load_all(guide_text("dws-tpu-queue.yaml")))
    objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "jax-train-script"},
                    "data": {"train.py": (GUIDE / "train.py").read_text()}})
    objects += [yaml.safe_load(guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID=job)) for job in ("1", "2")]
    for obj in objects:
        if obj["kind"] in ("LocalQueue", "ConfigMap", "RayJob"):
            obj["metadata"].setdefault("namespace", "default")
    return objects


def test_export_gives_back_the_guide(flexq: Any, server: Server, tmp_path: Path) -> None:
    _setup_guide(flexq, server)
    out = tmp_path / "gke"
    result = flexq("export", "gke", "--out", str(out))
    assert result.code == 0, result.err
    assert sorted(p.name for p in out.iterdir()) == ["cluster.sh", "jobs.yaml", "kueue.yaml"]

    exported = [o for name in ("kueue.yaml", "jobs.yaml") for o in yaml.safe_load_all((out / name).read_text())]
    assert {_key(o): o for o in exported} == {_key(o): o for o in _guide_objects()}
    for obj in exported:
        version = obj["apiVersion"].rpartition("/")[2]
        if has_schema(obj["kind"], version):
            assert errors(obj) == [], _key(obj)

    script = (out / "cluster.sh").read_text()
    assert 'PROJECT_ID="${PROJECT_ID:-demo}"' in script
    guide = _commands(_substitute((GUIDE / "cluster.sh").read_text(), GUIDE_ENV))
    commands = _commands(_substitute(script, {"PROJECT_ID": "demo"}))
    # The export names the project on every command (the guide leaves it to gcloud's configuration for pools).
    assert all("--project=demo" in flags for _, flags in commands)
    # The cluster first, then its node pools, in the order the server lists them (by name, as Kubernetes does).
    mine = [(w, f - {"--project=demo"}) for w, f in commands]
    theirs = [(w, f - {"--project=demo"}) for w, f in guide]
    assert mine[0] == theirs[0] and sorted(mine[1:], key=str) == sorted(theirs[1:], key=str)
    assert "controllerManager.featureGates[0].name=ElasticJobsViaWorkloadSlices" in script
    assert script.rstrip().endswith("kubectl apply -f jobs.yaml")


def test_export_options_and_refusals(flexq: Any, tmp_path: Path) -> None:
    made = flexq("container", "clusters", "create", "tpu-cluster", "--location=us-east5-b")
    assert made.code == 0, made.err
    assert flexq("apply", "-f", "-", input=guide_text("dws-tpu-queue.yaml")).code == 0
    extra = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: racing}
spec:
  cohortName: team
  queueingStrategy: BestEffortFIFO
  concurrentAdmissionPolicy: {migration: {mode: TryPreferredFlavors}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default-cpu, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: urgent}
value: 1000
"""
    assert flexq("apply", "-f", "-", input=extra).code == 0
    out = tmp_path / "gke"
    result = flexq("export", "gke", "--out", str(out), "--project", "p1", "--zone", "europe-west4-a",
                   "--kueue-version", "v1beta1")
    assert result.code == 0, result.err
    queues = {_key(o): o for o in yaml.safe_load_all((out / "kueue.yaml").read_text())}
    racing = queues["ClusterQueue", "", "racing"]
    # Only v1beta2 holds a concurrent-admission policy; a default written by hand stays, the others go.
    assert racing["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert racing["spec"]["queueingStrategy"] == "BestEffortFIFO"
    assert not {"preemption", "stopPolicy", "flavorFungibility"} & set(racing["spec"])
    assert queues["ClusterQueue", "", "cluster-queue"]["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert queues["WorkloadPriorityClass", "", "urgent"]["value"] == 1000
    for obj in queues.values():
        assert errors(obj) == [], _key(obj)
    script = (out / "cluster.sh").read_text()
    assert 'PROJECT_ID="${PROJECT_ID:-p1}"' in script and "--location=europe-west4-a" in script
    assert "featureGates[0].name=ConcurrentAdmission" in script
    assert "no jobs to submit" in script

    # The schemas do refuse what Kueue would refuse: a misspelt field, a bad enum value.
    bad = dict(racing, spec={**racing["spec"], "queueingStrategy": "Fastest", "cohortname": "x"})
    assert len(errors(bad)) == 2

    before = {p.name: p.read_text() for p in out.iterdir()}
    refused = flexq("export", "gke", "--out", str(out), "--kueue-version", "v2")
    assert refused.code == 1 and "--kueue-version 'v2'" in refused.err and "Traceback" not in refused.err
    assert {p.name: p.read_text() for p in out.iterdir()} == before
    not_dir = flexq("export", "gke", "--out", str(out / "cluster.sh"))
    assert not_dir.code == 1 and "not a directory" in not_dir.err
    other = flexq("export", "gke", "--out", str(tmp_path / "x"), "--cluster", "nope")
    assert other.code == 1 and "--cluster nope: no such cluster" in other.err
    assert not (tmp_path / "x").exists()


TAS = Path(__file__).parents[2] / "examples" / "tas"


def test_export_carries_topologies(flexq: Any, tmp_path: Path) -> None:
    for args in (("container", "clusters", "create", "tas-cluster", "--location=us-east5-b"),
                 ("container", "node-pools", "create", "tas-pool", "--cluster=tas-cluster",
                  "--machine-type=n2-standard-16", "--num-nodes=8")):
        made = flexq(*args)
        assert made.code == 0, made.err
    custom = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: racks}
spec:
  levels: [{nodeLabel: example.com/rack}, {nodeLabel: kubernetes.io/hostname}]
"""
    for text in ((TAS / "tas-queue.yaml").read_text(), custom):
        applied = flexq("apply", "-f", "-", input=text)
        assert applied.code == 0, applied.err
    out = tmp_path / "gke"
    result = flexq("export", "gke", "--out", str(out))
    assert result.code == 0, result.err

    exported = list(yaml.safe_load_all((out / "kueue.yaml").read_text()))
    written = [*yaml.safe_load_all((TAS / "tas-queue.yaml").read_text()), yaml.safe_load(custom)]
    # Each as its author wrote it, in the version it was applied in; the Topology before the flavor naming it.
    assert {_key(o): o for o in exported} == {_key(o): o for o in written}
    kinds = [o["kind"] for o in exported]
    assert kinds.index("Topology") < kinds.index("ResourceFlavor")
    for obj in exported:
        assert errors(obj) == [], _key(obj)
    # Kueue v0.19's schema refuses what its API server would: a misspelt level field, no levels.
    topology = next(o for o in exported if _key(o) == ("Topology", "", "gke-default"))
    assert len(errors({**topology, "spec": {"levels": [{"nodelabel": "x"}]}})) == 2
    assert len(errors({**topology, "spec": {"levels": []}})) == 1

    script = (out / "cluster.sh").read_text()
    assert "gcloud container node-pools create tas-pool" in script
    assert ("# Topology gke-default places pods by the node labels cloud.google.com/gce-topology-block, "
            "cloud.google.com/gce-topology-subblock, kubernetes.io/hostname: GKE sets them on each node") in script
    assert "# label the nodes with example.com/rack yourself" in script
    # TAS is on by default in Kueue v0.19: no feature gate to set.
    assert "featureGates" not in script


def test_export_keeps_a_cluster_queues_workload_defaults_and_says_kueue_drops_them(flexq: Any, tmp_path: Path) -> None:
    """KEP-7029's ``spec.workloadDefaults`` (an alpha here, not in Kueue's releases): kept as written, and cluster.sh
    says a released Kueue drops it."""
    assert flexq("container", "clusters", "create", "c", "--location=us-east5-b").code == 0
    docs = list(yaml.safe_load_all(queue_yaml(("default-flavor", None))))
    next(d for d in docs if d["kind"] == "ClusterQueue")["spec"]["workloadDefaults"] = {
        "maximumExecutionTimeSeconds": 600}
    assert flexq("apply", "-f", "-", input=yaml.safe_dump_all(docs)).code == 0
    out = tmp_path / "gke"
    result = flexq("export", "gke", "--out", str(out))
    assert result.code == 0, result.err
    queue = next(o for o in yaml.safe_load_all((out / "kueue.yaml").read_text()) if o["kind"] == "ClusterQueue")
    assert queue["spec"]["workloadDefaults"] == {"maximumExecutionTimeSeconds": 600}
    assert ("# ClusterQueue cq: spec.workloadDefaults (a default maximum execution time, KEP-7029) is not in Kueue's "
            "releases yet") in (out / "cluster.sh").read_text()
