"""The machine catalog: what each GKE machine type offers, how its nodes are labelled, what it costs.

Prices are USD per node-hour, approximate list prices for us-central1 / us-east5 as published on Google
Cloud's pricing pages (cloud.google.com/compute/vm-instance-pricing, .../compute/gpus-pricing,
cloud.google.com/tpu/pricing; TPU prices there are per chip-hour, multiplied here by the chips of a host).
Flex-start (Dynamic Workload Scheduler) prices follow the DWS pricing page
(cloud.google.com/products/dws/pricing), which advertises discounts of up to 53% over on-demand; the
discount used for each family is in ``flex_start_discount``. They are a model for comparing plans, not a
bill: override them in a scenario's ``spec.capacity.prices`` where your contract differs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final

from flexq.errors import FlexqError

__all__ = ["CATALOG", "MachineType", "UnknownMachineType", "machine_type", "slice_hosts"]

GI: Final = 2**30


@dataclass(frozen=True, slots=True)
class MachineType:
    name: str
    vcpus: int
    memory_gib: int
    on_demand_hourly: float
    flex_start_discount: float = 0.0
    tpu_chips: int = 0
    tpu_accelerator: str = ""
    """The ``cloud.google.com/gke-tpu-accelerator`` label value (``tpu-v6e-slice``)."""
    tpu_generation: str = ""
    """Ray's accelerator type (``TPU-V6E``) and the prefix of TPU_ACCELERATOR_TYPE (``v6e``)."""
    gpus: int = 0
    gpu_accelerator: str = ""
    """The ``cloud.google.com/gke-accelerator`` label value (``nvidia-h100-80gb``)."""
    boot_seconds: float = 90.0
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def flex_start_hourly(self) -> float:
        return round(self.on_demand_hourly * (1 - self.flex_start_discount), 4)

    def allocatable(self) -> dict[str, int]:
        """What pods can request on one node, in thousandths (a little is kept for the system, as GKE does)."""
        out = {"cpu": self.vcpus * 1000 - 100, "memory": (self.memory_gib * GI - GI // 2) * 1000, "pods": 110_000}
        if self.tpu_chips:
            out["google.com/tpu"] = self.tpu_chips * 1000
        if self.gpus:
            out["nvidia.com/gpu"] = self.gpus * 1000
        return out


class UnknownMachineType(FlexqError, LookupError):
    def __init__(self, name: str) -> None:
        self.name = name
        known = ", ".join(sorted(CATALOG))
        super().__init__(f"unknown machine type {name!r}; known: {known}")


def _tpu(name: str, chips: int, accelerator: str, generation: str, per_chip: float, vcpus: int, memory: int,
         discount: float, boot: float) -> MachineType:
    return MachineType(name, vcpus, memory, round(per_chip * chips, 4), discount, chips, accelerator, generation,
                       boot_seconds=boot)


CATALOG: Final[dict[str, MachineType]] = {m.name: m for m in (
    # TPU v6e (Trillium): 4 chips a host; $2.70 per chip-hour on demand.
    _tpu("ct6e-standard-4t", 4, "tpu-v6e-slice", "v6e", 2.70, 180, 720, 0.53, 180.0),
    # TPU v5e: 4 chips a host; $1.20 per chip-hour.
    _tpu("ct5lp-hightpu-4t", 4, "tpu-v5-lite-podslice", "v5litepod", 1.20, 112, 192, 0.47, 180.0),
    # TPU v5p: 4 chips a host; $4.20 per chip-hour.
    _tpu("ct5p-hightpu-4t", 4, "tpu-v5p-slice", "v5p", 4.20, 208, 448, 0.47, 240.0),
    MachineType("a3-highgpu-8g", 208, 1872, 88.49, 0.53, gpus=8, gpu_accelerator="nvidia-h100-80gb",
                boot_seconds=300.0),
    MachineType("g2-standard-4", 4, 16, 0.71, 0.35, gpus=1, gpu_accelerator="nvidia-l4", boot_seconds=120.0),
    MachineType("n2-standard-16", 16, 64, 0.777, 0.0, boot_seconds=60.0),
    MachineType("n2-standard-32", 32, 128, 1.554, 0.0, boot_seconds=60.0),
)}


def machine_type(name: str) -> MachineType:
    try:
        return CATALOG[name]
    except KeyError:
        raise UnknownMachineType(name) from None


def slice_hosts(machine: MachineType, topology: str | None) -> int:
    """Hosts in one TPU slice of ``topology`` (``4x4`` = 16 chips = 4 hosts of 4 chips); 1 otherwise."""
    if not topology or not machine.tpu_chips:
        return 1
    try:
        chips = math.prod(int(d) for d in topology.lower().split("x"))
    except ValueError:
        raise ValueError(f"invalid TPU topology {topology!r}: expected dimensions like 4x4 or 2x2x4") from None
    if chips % machine.tpu_chips:
        raise ValueError(f"TPU topology {topology} ({chips} chips) is not a whole number of "
                         f"{machine.name} hosts ({machine.tpu_chips} chips each)")
    return max(1, chips // machine.tpu_chips)
