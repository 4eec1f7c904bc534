from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flexq.runtime.emulation import Hardware, accelerators_for, hardware
from flexq.runtime.environment import EnvironmentError_, prepare
from flexq.runtime.rayjob import parse_metrics
from tests.conftest import GUIDE, guide_text

JOB = yaml.safe_load(guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID="1"))


def test_the_guides_slice_is_emulated_as_ray_expects() -> None:
    selector = {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice", "cloud.google.com/gke-tpu-topology": "4x4"}
    acc = accelerators_for([(selector, {"cpu": 8000, "google.com/tpu": 4000, "memory": 1}, 4)],
                           machine_has=Hardware())
    assert acc.resources == {"TPU": 16.0}
    assert acc.env["TPU_ACCELERATOR_TYPE"] == "v6e-16" and acc.env["TPU_TOPOLOGY"] == "4x4"
    assert acc.env["JAX_PLATFORMS"] == "cpu" and "device_count=4" in acc.env["XLA_FLAGS"]
    assert acc.env["TPU_NAME"] and acc.env["TPU_WORKER_ID"] == "0"
    assert acc.num_cpus >= 8, "each of the slice's 4 bundles also asks for a CPU"
    gpu = accelerators_for([({}, {"nvidia.com/gpu": 8000}, 2)], machine_has=Hardware())
    assert gpu.num_gpus == 16 and not gpu.resources and "emulated" in gpu.description
    assert accelerators_for([], machine_has=Hardware()).description == "CPU only"


def test_real_accelerators_are_not_emulated(tmp_path: Path) -> None:
    for name in ("nvidia0", "nvidia1", "nvidiactl", "accel0", "accel1", "accel2", "accel3", "null"):
        (tmp_path / name).touch()
    assert hardware(tmp_path) == Hardware(gpus=2, tpu_chips=4)
    assert hardware(tmp_path / "missing") == Hardware()
    selector = {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice", "cloud.google.com/gke-tpu-topology": "4x4"}
    tpu = accelerators_for([(selector, {"google.com/tpu": 4000}, 4)], machine_has=Hardware(tpu_chips=4))
    assert tpu.resources == {} and tpu.env == {} and "real TPU" in tpu.description
    gpu = accelerators_for([({}, {"nvidia.com/gpu": 1000}, 2)], machine_has=Hardware(gpus=2))
    assert gpu.num_gpus == 2 and gpu.description == "2 real GPU(s)"
    short = accelerators_for([({}, {"nvidia.com/gpu": 1000}, 4)], machine_has=Hardware(gpus=2))
    assert "emulated" in short.description, "more GPUs asked than the machine has: emulated"


def test_configmap_mounted_at_app_and_entrypoint_rewritten(tmp_path: Path) -> None:
    env = prepare(JOB, {"jax-train-script": {"train.py": (GUIDE / "train.py").read_text()}}, tmp_path)
    assert env.entrypoint == f"python {tmp_path / 'app'}/train.py"
    assert (tmp_path / "app" / "train.py").read_text() == (GUIDE / "train.py").read_text()
    assert any("jax[tpu]==0.8.2 -> jax" in w and "emulated" in w for w in env.warnings), env.warnings
    assert any("pandas==2.3.3 -> using the installed pandas" in w for w in env.warnings), env.warnings


def test_missing_configmap_and_uninstallable_packages_fail_clearly(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentError_, match=r'configmap "jax-train-script" .* not found'):
        prepare(JOB, {}, tmp_path)
    job = dict(JOB, spec={**JOB["spec"], "runtimeEnvYAML": "pip:\n  - surely-not-a-package-xyz==1.0\n"})
    with pytest.raises(EnvironmentError_, match=r"surely-not-a-package-xyz.*not installed here.*offline"):
        prepare(job, {"jax-train-script": {"train.py": "print(1)"}}, tmp_path)


def test_a_job_bound_for_an_existing_ray_cluster_takes_its_runtime_env_there(tmp_path: Path) -> None:
    """KubeRay passes runtimeEnvYAML to the cluster: its packages are the cluster's to install, not checked here."""
    runtime = ("pip: ['jax[tpu]==0.8.2', surely-not-a-package-xyz==1.0]\nenv_vars: {GREETING: hello}\n"
               "py_modules: [s3://bucket/mod.zip]\nworking_dir: /somewhere\n")
    job = dict(JOB, spec={**JOB["spec"], "runtimeEnvYAML": runtime})
    env = prepare(job, {"jax-train-script": {"train.py": "print(1)"}}, tmp_path, remote=True)
    assert env.runtime_env == {"pip": ["jax[tpu]==0.8.2", "surely-not-a-package-xyz==1.0"],
                               "py_modules": ["s3://bucket/mod.zip"]}
    assert env.env_vars == {"GREETING": "hello"}
    assert env.warnings == ["runtimeEnvYAML: working_dir is replaced by the job's ConfigMap files"]
    assert prepare(job, {"jax-train-script": {}}, tmp_path / "plain", remote=True).files, "the files still go"
    assert prepare(JOB, {"jax-train-script": {}}, tmp_path / "guide").runtime_env == {}, "on this machine: none"


def test_the_runtime_env_is_submitted_with_the_jobs_files_and_env_vars(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    import ray.job_submission

    from flexq.runtime.remote import RemoteRayCluster

    submitted: list[dict[str, object]] = []

    class Client:
        def __init__(self, url: str) -> None:
            assert url == "http://head:8265"

        def submit_job(self, **kwargs: object) -> None:
            submitted.append(kwargs)

    monkeypatch.setattr(ray.job_submission, "JobSubmissionClient", Client)
    RemoteRayCluster("http://head:8265").submit("python app/train.py", "sub-1", {"A": "1"}, tmp_path,
                                                threading.Event(), {"pip": ["pandas"], "env_vars": {"B": "2"}})
    assert submitted == [{"entrypoint": "python app/train.py", "submission_id": "sub-1",
                          "runtime_env": {"pip": ["pandas"], "env_vars": {"A": "1"}, "working_dir": str(tmp_path)}}]


def test_metrics_from_train_report_lines() -> None:
    log = ("(RayTrainWorker pid=1) Reporting training result 1: TrainingReport(checkpoint=None, metrics={'loss': "
           "9.68, 'epoch': 0}, validation=False) from rank 0\n"
           "(RayTrainWorker pid=1) Reporting training result 5: TrainingReport(checkpoint=None, metrics={'loss': "
           "4.8e-07, 'epoch': 40}, validation=False) from rank 0\n")
    assert parse_metrics(log) == {"loss": 4.8e-07, "epoch": 40, "report": 5}
    assert parse_metrics("no reports") is None
