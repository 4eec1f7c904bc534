"""A RayJob's script and environment on this machine: ConfigMap volumes and ``runtimeEnvYAML``.

The ConfigMaps a pod template mounts (``/app`` in the guide) are written into a directory of the job's
own, and the entrypoint's references to the mount path are rewritten to it (``python /app/train.py``
becomes ``python <dir>/app/train.py``): the path is rewritten, not mapped, since nothing here can mount.

``runtimeEnvYAML`` is honoured for ``env_vars``; ``pip`` packages are not downloaded (this machine's job
runs offline): a package already installed is used as installed, with a warning when the pinned version
differs; ``jax[tpu]``/``jax[cuda*]`` become the installed CPU JAX, with a warning; anything else not
installed fails the job with a message that says what to install.

A job bound for an existing Ray cluster (a node pool made with ``--ray-address``) runs in that cluster's
environment, not this machine's: its ``runtimeEnvYAML`` goes to the cluster as KubeRay passes it (``pip``,
``conda``, ``py_modules``, ...: the cluster installs them), with its ``env_vars`` and, as ``working_dir``, the
job's ConfigMap files.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from flexq.errors import FlexqError
from flexq.runtime.beneath import makedirs_beneath, write_beneath

__all__ = ["EnvironmentError_", "JobEnvironment", "prepare"]

_REQ = re.compile(r"^\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(?:(==|>=|<=|~=|!=|>|<)\s*([^\s;]+))?")


class EnvironmentError_(FlexqError, ValueError):
    """The job cannot run here; the message says why and what to do."""


@dataclass
class JobEnvironment:
    entrypoint: str
    env_vars: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)
    runtime_env: dict[str, Any] = field(default_factory=dict)
    """For a job bound for an existing Ray cluster: the rest of its ``runtimeEnvYAML`` (all but ``env_vars``
    and ``working_dir``), passed to the cluster as given."""


def _volumes(template: Mapping[str, Any]) -> dict[str, str]:
    """mountPath -> ConfigMap name, for the ConfigMap volumes a pod template mounts."""
    spec = template.get("spec") or {}
    by_volume = {v.get("name"): (v.get("configMap") or {}).get("name") for v in spec.get("volumes") or []
                 if v.get("configMap")}
    out: dict[str, str] = {}
    for container in spec.get("containers") or []:
        for mount in container.get("volumeMounts") or []:
            name = by_volume.get(mount.get("name"))
            if name:
                out[str(mount.get("mountPath"))] = str(name)
    return out


def _pip(packages: list[Any], warnings: list[str]) -> None:
    for raw in packages:
        match = _REQ.match(str(raw))
        if match is None:
            raise EnvironmentError_(f"runtimeEnvYAML: cannot read pip requirement {raw!r}")
        name, extras, op, version = match.group(1), match.group(2) or "", match.group(3), match.group(4)
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            raise EnvironmentError_(
                f"runtimeEnvYAML asks for pip package {raw!r}, which is not installed here, and flexq runs "
                f"jobs offline: install it into flexq's environment (pip install '{name}') and resubmit") from None
        if name == "jax" and extras and ("tpu" in extras or "cuda" in extras):
            warnings.append(f"runtimeEnvYAML: {raw} -> jax {installed} on the CPU (the accelerator is emulated)")
        elif op == "==" and version != installed:
            warnings.append(f"runtimeEnvYAML: {raw} -> using the installed {name} {installed} "
                            "(packages are not downloaded)")


def prepare(job: Mapping[str, Any], configmaps: Mapping[str, Mapping[str, str]], workdir: Path,
            remote: bool = False) -> JobEnvironment:
    """Materialise the job's ConfigMap volumes under ``workdir``; translate its runtime environment for this
    machine, or (``remote``) keep it for the existing Ray cluster the job goes to."""
    spec = job.get("spec") or {}
    cluster = spec.get("rayClusterSpec") or {}
    templates = [(cluster.get("headGroupSpec") or {}).get("template") or {}]
    templates += [g.get("template") or {} for g in cluster.get("workerGroupSpecs") or []]
    mounts: dict[str, str] = {}
    for template in templates:
        mounts.update(_volumes(template))
    entrypoint = str(spec.get("entrypoint") or "")
    env = JobEnvironment(entrypoint)
    for mount, name in sorted(mounts.items(), key=lambda m: -len(m[0])):
        data = configmaps.get(name)
        if data is None:
            raise EnvironmentError_(f'configmap "{name}" (mounted at {mount}) not found: create it first, as the '
                                    "guide does with kubectl create configmap")
        folder = mount.strip("/").replace("/", "_")
        if folder in ("", ".", "..") or "\0" in folder:
            raise EnvironmentError_(f"volume mount {mount!r} of configmap {name!r}: not a path a folder can be made at")
        target = workdir / folder
        if target.is_symlink() or target.is_file():  # an earlier run's files: made afresh, never written through
            target.unlink()
        elif target.exists():
            shutil.rmtree(target)
        workdir.mkdir(parents=True, exist_ok=True)
        makedirs_beneath(workdir, folder)
        for key, text in data.items():
            if not key or "/" in key or "\0" in key or key in (".", ".."):  # the API refuses them; never a path here
                raise EnvironmentError_(f"configmap {name!r} key {key!r} (mounted at {mount}): not a file name")
            try:
                write_beneath(workdir, f"{folder}/{key}", text.encode())
            except OSError as exc:
                raise EnvironmentError_(f"configmap {name!r} key {key!r} (mounted at {mount}): it cannot be written "
                                        f"in the job's folder: {exc.strerror or exc}") from None
        env.files[mount] = target
        env.entrypoint = re.sub(rf"(?<![\w/]){re.escape(mount.rstrip('/'))}(?=/|\s|$)", str(target), env.entrypoint)
    raw = spec.get("runtimeEnvYAML")
    if raw:
        try:
            runtime = yaml.safe_load(raw) or {}
        except yaml.YAMLError as exc:
            raise EnvironmentError_(f"runtimeEnvYAML is not valid YAML: {exc}") from None
        if not isinstance(runtime, dict):
            raise EnvironmentError_("runtimeEnvYAML must be a mapping (pip, env_vars, ...)")
        env.env_vars.update({str(k): str(v) for k, v in (runtime.get("env_vars") or {}).items()})
        if remote:
            env.runtime_env = {str(k): v for k, v in runtime.items() if k not in ("env_vars", "working_dir")}
            if "working_dir" in runtime:
                env.warnings.append("runtimeEnvYAML: working_dir is replaced by the job's ConfigMap files")
            return env
        pip = runtime.get("pip")
        if isinstance(pip, dict):
            pip = pip.get("packages") or []
        if pip:
            _pip(list(pip), env.warnings)
        for unsupported in sorted(set(runtime) - {"pip", "env_vars", "working_dir"}):
            env.warnings.append(f"runtimeEnvYAML: {unsupported} is ignored here")
    return env
