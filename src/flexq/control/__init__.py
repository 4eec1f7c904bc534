"""The control plane: the scheduler, the capacity driver and their timers, driven alike by the live server's
queue controller (real time) and the simulator (virtual time), and what it knows of jobs' run times."""

from flexq.control.plane import SETTLE_PASSES, ControlPlane
from flexq.control.pods_ready import LIMIT_CAUSE, TIMEOUT_REASON, PodsReadyTimer
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
    PodsReady,
    QueuesReconfigured,
)

__all__ = ["LIMIT_CAUSE", "SETTLE_PASSES", "TIMEOUT_REASON", "Basis", "CapacityChanged", "CheckSet", "ControlPlane",
           "Input", "JobDeleted", "JobFinished", "JobHooks", "JobQueued", "JobResized", "JobStarted", "PodsReady",
           "PodsReadyTimer", "QueuesReconfigured", "RunTime", "RunTimes"]
