"""The live server's forecasts run in a process forked for them: the same forecasts as on the server's own thread,
the child's CPU counted, nothing left behind, and a forecasting thread stopped mid-run stops its child."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from flexq.controller.forecasts import FORECAST_GAP, SHARE, LiveForecasts, pause, run_apart
from flexq.forecast import Forecast, Lookahead, ensemble
from flexq.sim import Simulation, load_scenario

GUIDE = Path(__file__).resolve().parents[2] / "examples" / "guide"

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform: forecasts run in-process")


def _paused(at: float) -> Simulation:
    sim = Simulation(load_scenario(GUIDE / "scenario-race.yaml"))
    sim.run_to(at)
    return sim


def test_a_forecast_apart_is_the_forecast_made_in_process() -> None:
    sim = _paused(150.0)
    here = ensemble(Lookahead(sim.plane, 150.0))
    children: list[int] = []
    apart, cpu = run_apart(Lookahead(sim.plane, 150.0), children.append)
    assert here and apart == here
    assert cpu > 0.0, "the child's CPU is counted"
    with pytest.raises(ChildProcessError):
        os.waitpid(children[0], os.WNOHANG)  # the child was waited for: no zombie left


def test_the_thread_publishes_what_the_child_foresaw() -> None:
    sim = _paused(150.0)
    got: list[dict[str, Forecast]] = []
    forecasts = LiveForecasts(lambda: Lookahead(sim.plane, 150.0), got.append, apart=True)
    forecasts.once(apart=True)
    assert got == [ensemble(Lookahead(sim.plane, 150.0))]
    assert forecasts.made == 1 and forecasts.cpu > 0.0


def test_stopping_the_thread_kills_a_child_still_running() -> None:
    sim = _paused(150.0)
    pids: list[int] = []

    def slow() -> Lookahead:
        ahead = Lookahead(sim.plane, 150.0)
        ahead.run = lambda: time.sleep(60) or {}  # type: ignore[method-assign,func-returns-value]
        return ahead

    forecasts = LiveForecasts(slow, lambda _f: None, apart=True)
    runner = threading.Thread(target=forecasts.once, kwargs={"apart": True})
    runner.start()
    deadline = time.monotonic() + 30
    while not forecasts.child and time.monotonic() < deadline:
        time.sleep(0.05)
    pids.append(forecasts.child)
    assert pids[0], "the child started"
    began = time.monotonic()
    forecasts.stop(timeout=0)
    runner.join(timeout=30)
    assert not runner.is_alive() and time.monotonic() - began < 30, "the child was killed, not waited out"
    assert forecasts.made == 0, "a killed forecast publishes nothing"
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)


def test_the_forecasting_process_yields_to_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child runs at a lower priority than the server that forked it: a forecast is advice."""
    import flexq.controller.forecasts as forecasts

    monkeypatch.setattr(forecasts, "ensemble", lambda _ahead: {"niceness": os.nice(0)})
    told, _ = run_apart(Lookahead(_paused(150.0).plane, 150.0))
    assert told == {"niceness": min(19, os.nice(0) + 10)}


def test_the_forecasting_process_holds_none_of_the_servers_sockets(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server killed mid-forecast must be able to listen on its port again at once: the child it forked holds no
    descriptor of the server's (here a listening socket and a file), only the standard streams and its answer."""
    import flexq.controller.forecasts as forecasts

    monkeypatch.setattr(forecasts, "ensemble",
                        lambda _ahead: {"fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd"))})
    with socket.create_server(("127.0.0.1", 0)) as listening, open(__file__, "rb") as held:
        told, _ = run_apart(Lookahead(_paused(150.0).plane, 150.0))
        fds = told["fds"]
        assert listening.fileno() not in fds and held.fileno() not in fds
    assert len([fd for fd in fds if fd > 2]) <= 2, f"the answer and the listing's own, no more: {fds}"


PAUSES: dict[tuple[float, float, bool], float] = {
    (0.2, 0.2, True): 0.2 / SHARE - 0.2,  # a quiet machine: its wall time is its CPU
    (3.0, 0.2, True): FORECAST_GAP,  # a busy one: the niced child waited for a core, which cost the server nothing
    (2.0, 0.5, True): 0.5 / SHARE - 2.0,
    (3.0, 0.2, False): 3.0 / SHARE - 3.0,  # in process, all of its time held the server's interpreter
    (0.01, 0.01, True): FORECAST_GAP,
}


@pytest.mark.parametrize(("took", "cpu", "apart"), list(PAUSES))
def test_the_pause_after_a_forecast_keeps_its_share_of_the_cpu_or_of_the_interpreter(took: float, cpu: float,
                                                                                     apart: bool) -> None:
    assert pause(took, cpu, apart=apart) == pytest.approx(PAUSES[took, cpu, apart])
