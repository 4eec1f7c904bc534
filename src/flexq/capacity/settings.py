"""How capacity behaves: node pools, the emulated cloud behind them, the autoscaler's and fallback's timing."""

from __future__ import annotations

from dataclasses import dataclass

from flexq.capacity.cloud import EmulatedCloud
from flexq.capacity.pools import NodePoolSpec

__all__ = ["CapacityConfig"]


@dataclass(frozen=True, slots=True)
class CapacityConfig:
    """``spec.capacity``: node pools, the emulated cloud behind them, and how the autoscaler behaves."""

    pools: tuple[NodePoolSpec, ...]
    cloud: EmulatedCloud
    provisioning_timeout: float = 300.0
    fallback: bool = True
    fallback_cooldown: float = 1800.0
    scale_down_after: float = 600.0
