"""The control plane: the scheduler, the capacity driver and their timers, driven alike by the live server's
queue controller (real time) and the simulator (virtual time), and what it knows of jobs' run times."""

from flexq.control.plane import SETTLE_PASSES, ControlPlane
from flexq.control.run_times import Basis, RunTime, RunTimes
from flexq.control.vocabulary import (
    CapacityChanged,
    CheckSet,
    Input,
    JobDeleted,
    JobFinished,
    JobHooks,
    JobQueued,
    JobResized,
    JobStarted,
    QueuesReconfigured,
)

__all__ = ["SETTLE_PASSES", "Basis", "CapacityChanged", "CheckSet", "ControlPlane", "Input", "JobDeleted",
           "JobFinished", "JobHooks", "JobQueued", "JobResized", "JobStarted", "QueuesReconfigured", "RunTime",
           "RunTimes"]
