"""When will my job start: the live state forked into virtual time and run forward on the same control plane."""

from flexq.forecast.capacity_change import CapacityChangeError, reshape
from flexq.forecast.lookahead import (
    HORIZON,
    Forecast,
    Lookahead,
    Step,
    StepKind,
    ensemble,
    flavor_lookaheads,
    forecast,
    samples_for,
    under_each_flavor,
    waiting,
    waits,
)
from flexq.forecast.snapshot import Fork, fork
from flexq.forecast.text import CONDITION, describe, forecast_status

__all__ = ["CONDITION", "HORIZON", "CapacityChangeError", "Forecast", "Fork", "Lookahead", "Step", "StepKind",
           "describe", "ensemble", "flavor_lookaheads", "forecast", "forecast_status", "fork", "reshape",
           "samples_for", "under_each_flavor", "waiting", "waits"]
