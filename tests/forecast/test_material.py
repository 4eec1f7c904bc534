"""Which new forecasts are written: those that say something the last one did not."""

from __future__ import annotations

import dataclasses

import pytest

from flexq.control import Basis
from flexq.controller.forecasts import material
from flexq.forecast import Forecast

LAST = Forecast("default/w", "cq", made=1000.0, start=1000.0 + 3600, flavors=("on-demand",))

CASES = {
    "the same again, a minute later": (dataclasses.replace(LAST, made=1060.0), False),
    "20 s later than said": (dataclasses.replace(LAST, start=4620.0), False),
    "5 minutes later than said (more than 5% of an hour)": (dataclasses.replace(LAST, start=4600.0 + 300), True),
    "40 s later, 10 minutes ahead (above 30 s and 5%)": (dataclasses.replace(LAST, made=3990.0, start=4640.0), True),
    "another flavor": (dataclasses.replace(LAST, flavors=("dws",)), True),
    "an estimate now": (dataclasses.replace(LAST, basis=Basis.ESTIMATED), True),
    "no start any more": (dataclasses.replace(LAST, start=None, basis=Basis.UNKNOWN), True),
    "only its likely range moved": (dataclasses.replace(LAST, likely=(4000.0, 5200.0)), False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_forecast_is_written_again_when_it_says_something_new(case: str) -> None:
    new, expected = CASES[case]
    assert material(LAST, new) is expected


def test_a_first_forecast_is_always_written() -> None:
    assert material(None, LAST)
