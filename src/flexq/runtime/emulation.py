"""What a Ray node must look like for a job to find the accelerators it asks for, on a CPU machine.

A TPU slice is emulated as Ray's TPU accelerator manager expects to find one on GKE: the ``TPU``
resource (chips of the whole slice), the GKE TPU environment (``TPU_NAME``, ``TPU_WORKER_ID``,
``TPU_ACCELERATOR_TYPE`` such as ``v6e-16``, ``TPU_TOPOLOGY``), from which Ray itself derives the
``TPU-v6e-16-head`` and ``accelerator_type:TPU-V6E`` resources, and JAX on the CPU with 4 devices a
process (``JAX_PLATFORMS=cpu``, ``XLA_FLAGS=--xla_force_host_platform_device_count=4``). GPUs become the
``GPU`` resource. Enough logical CPUs are declared for the slice's bundles (each asks ``CPU: 1``).

Where the machine has the accelerator itself (``/dev/accel*`` for TPU chips, ``/dev/nvidia<N>`` for GPUs),
nothing is emulated: Ray finds the TPU chips on its own, and the GPUs it is given are real.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from flexq.capacity import CATALOG, MachineType

__all__ = ["Accelerators", "Hardware", "accelerators_for", "hardware"]


@dataclass(frozen=True, slots=True)
class Hardware:
    """The accelerators this machine really has."""

    gpus: int = 0
    tpu_chips: int = 0


def hardware(dev: Path = Path("/dev")) -> Hardware:
    """Count the GPUs (``nvidia0``, ``nvidia1`` ...) and TPU chips (``accel0`` ...) the kernel exposes."""
    try:
        names = [p.name for p in dev.iterdir()]
    except OSError:
        return Hardware()
    return Hardware(gpus=sum(1 for n in names if re.fullmatch(r"nvidia\d+", n)),
                    tpu_chips=sum(1 for n in names if re.fullmatch(r"accel\d+", n)))


@dataclass(frozen=True, slots=True)
class Accelerators:
    resources: dict[str, float] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    num_cpus: int = 4
    num_gpus: int = 0
    description: str = "CPU only"


def _tpu_machine(accelerator_label: str) -> MachineType | None:
    return next((m for m in CATALOG.values() if m.tpu_accelerator == accelerator_label), None)


def accelerators_for(worker_groups: Sequence[tuple[Mapping[str, str], Mapping[str, int], int]],
                     head_cpus: int = 2, machine_has: Hardware | None = None) -> Accelerators:
    """``worker_groups``: (nodeSelector, per-pod requests in thousandths, pods) for each worker group;
    ``machine_has``: the real accelerators (detected when not given)."""
    real = hardware() if machine_has is None else machine_has
    tpu_chips = 0
    gpus = 0
    cpus = head_cpus
    topology = ""
    machine: MachineType | None = None
    for selector, requests, pods in worker_groups:
        chips = requests.get("google.com/tpu", 0) // 1000
        if chips:
            tpu_chips += chips * pods
            topology = selector.get("cloud.google.com/gke-tpu-topology", topology)
            machine = _tpu_machine(selector.get("cloud.google.com/gke-tpu-accelerator", "")) or machine
        gpus += requests.get("nvidia.com/gpu", 0) // 1000 * pods
        cpus += max(1, pods)
    if tpu_chips and real.tpu_chips:
        # Real TPU chips: Ray's TPU accelerator manager finds them and the slice's environment itself.
        return Accelerators(num_cpus=max(8, cpus + 4),
                            description=f"{real.tpu_chips} real TPU chip(s) on this host")
    if tpu_chips:
        generation = machine.tpu_generation if machine else "v6e"
        return Accelerators(
            resources={"TPU": float(tpu_chips)},
            env={"TPU_NAME": "flexq-emulated-slice", "TPU_WORKER_ID": "0",
                 "TPU_ACCELERATOR_TYPE": f"{generation}-{tpu_chips}", "TPU_TOPOLOGY": topology or "",
                 "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=4"},
            num_cpus=max(8, cpus + 4),
            description=f"TPU {generation} {topology or ''} slice ({tpu_chips} chips) emulated on the CPU",
        )
    if gpus and real.gpus >= gpus:
        return Accelerators(num_cpus=max(4, cpus), num_gpus=gpus, description=f"{gpus} real GPU(s)")
    if gpus:
        return Accelerators(num_cpus=max(4, cpus), num_gpus=gpus,
                            description=f"{gpus} GPU(s) emulated as Ray GPU resources")
    return Accelerators(num_cpus=max(4, cpus))
