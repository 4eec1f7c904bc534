"""The control plane: the scheduler, the capacity driver and their timers, driven alike by the live server's
queue controller (real time) and the simulator (virtual time)."""

from flexq.control.plane import SETTLE_PASSES, ControlPlane

__all__ = ["SETTLE_PASSES", "ControlPlane"]
