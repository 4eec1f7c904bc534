"""A forecast in words, and as a Workload's status shows it: made at the edge, from the times a forecast holds."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flexq.control import Basis
from flexq.durations import format_seconds
from flexq.forecast.lookahead import HORIZON, Forecast, Step, StepKind
from flexq.scheduler import TIMES_OF_DAY, worded

__all__ = ["CONDITION", "describe", "forecast_status"]

CONDITION = "Forecast"
"""The Workload condition that carries a waiting workload's forecast (True: a start is foreseen)."""

_SURE = {
    Basis.DECLARED: "",
    Basis.LIMIT: "; at the latest: run times taken at their limits (activeDeadlineSeconds, max-exec-time-seconds)",
    Basis.ESTIMATED: "; an estimate: run times not declared are taken from the jobs that finished in their queues",
    Basis.UNKNOWN: "; at the latest: jobs whose run time is unknown are running, and may end sooner",
}


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%SZ")


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(int(t), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _step(step: Step) -> str:
    at = _clock(step.at)
    match step.kind:
        case StepKind.QUOTA:
            return f"quota frees when {step.what} ends, expected {at}"
        case StepKind.PROVISIONING:
            return f"ProvisioningRequest {step.what} provisioned, expected {at}"
        case StepKind.NODES:
            return f"nodes of {step.what} asked for at {at}"
        case StepKind.FALLBACK:
            return f"flavor {step.what} cannot deliver at {at}: it moves on"


def describe(forecast: Forecast, *, relative: bool = True) -> str:
    """What a workload waits for and when it is expected to start, in one line (``relative``: with how long from
    when the forecast was made; a status written now and read later says the time only)."""
    steps = "; ".join(_step(s) for s in forecast.steps)
    if forecast.start is None:
        if forecast.blocked_by:
            return (f"no start foreseen: it waits behind {forecast.blocked_by}, whose run time is unknown "
                    "(its job can say it with the flexq.dev/expected-run-time annotation)")
        why = f": {worded(forecast.why, TIMES_OF_DAY, forecast.made)}" if forecast.why else ""
        return f"no start foreseen within {format_seconds(HORIZON)}{why}" + (f" ({steps})" if steps else "")
    wait = forecast.start - forecast.made
    where = f" on {', '.join(forecast.flavors)}" if forecast.flavors else ""
    after = f" (in {format_seconds(wait)})" if relative else ""
    when = "at the next scheduling pass" if wait < 1 else f"at {_clock(forecast.start)}{after}"
    then = f"{steps}; then starts" if steps else "expected to start"
    return f"{then} {when}{where}{_likely(forecast)}{_SURE[forecast.basis]}"


def _likely(forecast: Forecast) -> str:
    """Where the start is likely to fall, where an ensemble says it and the range spans a minute or more."""
    if forecast.likely is None or forecast.likely[1] - forecast.likely[0] < 60:
        return ""
    earliest, latest = forecast.likely
    return f"; likely between {_clock(earliest)} and {_clock(latest)}"


def forecast_status(forecast: Forecast) -> dict[str, Any]:
    """``status.forecast`` of a waiting Workload: its expected start (absent when none is foreseen), where, how sure
    (with estimated run times, the range its start likely falls in), what it waits for, and what its run would
    cost."""
    out: dict[str, Any] = {"madeAt": _rfc3339(forecast.made), "basis": forecast.basis.word}
    if forecast.start is not None:
        out["start"] = _rfc3339(forecast.start)
        out["waitSeconds"] = round(max(0.0, forecast.start - forecast.made))
    if forecast.likely is not None:
        out["earliestStart"], out["latestStart"] = (_rfc3339(t) for t in forecast.likely)
    if forecast.flavors:
        out["flavors"] = list(forecast.flavors)
    out["message"] = describe(forecast, relative=False)
    if forecast.cost is not None:
        out["cost"] = {"usd": round(forecast.cost, 2)}
    return out
