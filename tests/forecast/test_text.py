"""A forecast in words and in a Workload's status: where an estimate's runs disagree, the range its start likely
falls in is said beside the start."""

from __future__ import annotations

import dataclasses

import pytest

from flexq.control import Basis
from flexq.forecast import Forecast, describe, forecast_status

AT = 1_700_000_000.0  # 22:13:20Z
SURE = Forecast("default/w", "cq", made=AT, start=AT + 1800, flavors=("default-cpu", "dws"))
GUESS = dataclasses.replace(SURE, basis=Basis.ESTIMATED, likely=(AT + 1200, AT + 2700))

# forecast -> (its line of text, status.forecast's range fields)
CASES: dict[str, tuple[Forecast, str, dict[str, str]]] = {
    "declared: no range": (
        SURE, "expected to start at 22:43:20Z (in 30m) on default-cpu, dws", {}),
    "estimated: its likely range, then that it is an estimate": (
        GUESS, "expected to start at 22:43:20Z (in 30m) on default-cpu, dws; likely between 22:33:20Z and "
               "22:58:20Z; an estimate: run times not declared are taken from the jobs that finished in their queues",
        {"earliestStart": "2023-11-14T22:33:20Z", "latestStart": "2023-11-14T22:58:20Z"}),
    "estimated, the runs agreeing within a minute: no range said": (
        dataclasses.replace(GUESS, likely=(AT + 1790, AT + 1830)),
        "expected to start at 22:43:20Z (in 30m) on default-cpu, dws; an estimate: run times not declared are "
        "taken from the jobs that finished in their queues",
        {"earliestStart": "2023-11-14T22:43:10Z", "latestStart": "2023-11-14T22:43:50Z"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_forecast_in_words_and_in_a_status(case: str) -> None:
    made, line, fields = CASES[case]
    assert describe(made) == line
    status = forecast_status(made)
    assert {k: status[k] for k in ("earliestStart", "latestStart") if k in status} == fields
    assert status["message"] == describe(made, relative=False)
    assert status["start"] == "2023-11-14T22:43:20Z" and status["basis"] == made.basis.word
