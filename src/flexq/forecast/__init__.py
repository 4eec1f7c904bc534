"""When will my job start: the live state forked into virtual time and run forward on the same control plane."""

from flexq.forecast.lookahead import HORIZON, Forecast, Step, StepKind, forecast, waiting
from flexq.forecast.snapshot import Fork, fork

__all__ = ["HORIZON", "Forecast", "Fork", "Step", "StepKind", "forecast", "fork", "waiting"]
