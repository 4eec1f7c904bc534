"""Controllers of the live server: the queue controller runs the scheduler against the store."""

from flexq.controller.event_expiry import DEFAULT_EVENT_TTL, EventExpiry
from flexq.controller.job_sync import finished
from flexq.controller.metrics import Sample, Tally
from flexq.controller.queue import InLine, QueueController
from flexq.controller.ray_runs import RayRuntime
from flexq.controller.steps import PHASES, StepStats

__all__ = [
    "DEFAULT_EVENT_TTL",
    "PHASES",
    "EventExpiry",
    "InLine",
    "QueueController",
    "RayRuntime",
    "Sample",
    "StepStats",
    "Tally",
    "finished",
]
