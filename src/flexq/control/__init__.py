"""The control plane: the scheduler, the capacity driver and their timers, driven alike by the live server's
queue controller (real time) and the simulator (virtual time)."""

from flexq.control.plane import SETTLE_PASSES, ControlPlane
from flexq.control.vocabulary import CheckSet, Input, JobDeleted, JobFinished, JobHooks, JobQueued, JobResized

__all__ = ["SETTLE_PASSES", "CheckSet", "ControlPlane", "Input", "JobDeleted", "JobFinished", "JobHooks", "JobQueued",
           "JobResized"]
