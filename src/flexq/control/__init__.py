"""The control plane: the scheduler, the capacity driver and their timers, driven alike by the live server's
queue controller (real time) and the simulator (virtual time), and what it knows of jobs' run times."""

from flexq.control.answer_times import AnswerTimes
from flexq.control.kueue_metrics import (
    ATTEMPT_BUCKETS,
    SHORT_WAIT_BUCKETS,
    WAIT_BUCKETS,
    Histogram,
    KueueCounts,
    KueueState,
    eviction_labels,
    kueue_state,
)
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

__all__ = [
    "ATTEMPT_BUCKETS",
    "LIMIT_CAUSE",
    "SETTLE_PASSES",
    "SHORT_WAIT_BUCKETS",
    "TIMEOUT_REASON",
    "WAIT_BUCKETS",
    "AnswerTimes",
    "Basis",
    "CapacityChanged",
    "CheckSet",
    "ControlPlane",
    "Histogram",
    "Input",
    "JobDeleted",
    "JobFinished",
    "JobHooks",
    "JobQueued",
    "JobResized",
    "JobStarted",
    "KueueCounts",
    "KueueState",
    "PodsReady",
    "PodsReadyTimer",
    "QueuesReconfigured",
    "RunTime",
    "RunTimes",
    "eviction_labels",
    "kueue_state",
]
