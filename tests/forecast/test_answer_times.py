"""A forecast expects ProvisioningRequests to be answered when the answers seen so far say, never when the emulated
cloud has drawn: a request in flight after the median of its pool's past answers that took longer than it has
waited, a new one after the median of them all; with fewer than three answers, after the pool's model (a random
delay's median)."""

from __future__ import annotations

import math
import shutil
import statistics
from pathlib import Path

import pytest

from flexq.capacity import CapacitySpec, EmulatedCloud
from flexq.control import AnswerTimes
from flexq.forecast import StepKind, forecast
from flexq.sim import Simulation, load_scenario

GUIDE = Path(__file__).resolve().parents[2] / "examples" / "guide"


def test_answers_learned_by_pool_and_expected_for_what_has_waited_so_long() -> None:
    times = AnswerTimes()
    for i, (asked, answered) in enumerate([(0, 600), (10, 1210), (20, 3020), (30, 90)]):
        times.accepted(f"r{i}", asked)
        times.answered(f"r{i}", "dws", answered)
    times.accepted("lost", 5)
    times.ended("lost")
    times.answered("lost", "dws", 50)  # ended before: nothing to learn
    times.answered("never-asked", "dws", 70)
    assert times.answers("dws") == 4 and times.answers("other") == 0
    assert times.typical("dws") == statistics.median([600, 1200, 3000, 60])
    assert times.remaining("dws", 0) == statistics.median([600, 1200, 3000, 60])
    assert times.remaining("dws", 1000) == statistics.median([1200, 3000]) - 1000
    assert times.remaining("dws", 5000) == times.typical("dws"), "past every answer: as a new request"
    copied = times.copy()
    copied.answered("r9", "dws", 1)
    copied.accepted("r9", 0)
    assert times.asked_at("r9") is None and copied.asked_at("r9") == 0


def test_too_few_answers_say_nothing() -> None:
    times = AnswerTimes()
    for i in range(2):
        times.accepted(f"r{i}", 0)
        times.answered(f"r{i}", "dws", 100)
    assert times.typical("dws") is None and times.remaining("dws", 10) is None


# spec -> the delay a forecast may expect of a new request in pool "dws" (machine "m")
CLOUD_CASES: dict[str, tuple[CapacitySpec, dict[tuple[str, str], float], float | None]] = {
    "fixed": (CapacitySpec(queued_delay=600.0), {}, 600.0),
    "never": (CapacitySpec(queued_delay=None), {}, None),
    "exponential: its median": (CapacitySpec(queued_delay=("exponential", 1800.0)), {}, 1800 * math.log(2)),
    "uniform: its middle": (CapacitySpec(queued_delay=("uniform", 600.0, 1800.0)), {}, 1200.0),
    "learned answers win": (CapacitySpec(queued_delay=("exponential", 1800.0)), {("dws", "m"): 300.0}, 300.0),
}


@pytest.mark.parametrize("case", sorted(CLOUD_CASES))
def test_the_cloud_as_a_forecast_may_know_it(case: str) -> None:
    spec, learned, want = CLOUD_CASES[case]
    by_machine = EmulatedCloud({"m": spec}, seed=3)
    foreseen = by_machine.foreseeable(learned)
    assert foreseen.queued_delay("dws", "m", "any-request") == want
    assert foreseen.queued_delay("dws", "m", "another-request") == want, "no draw: the same for every request"
    assert foreseen.spec("dws", "m").available == spec.available


def _scenario(tmp_path: Path, delay: str, jobs: int, every: str) -> Path:
    for f in GUIDE.iterdir():
        if f.is_file():
            shutil.copy(f, tmp_path)
    text = (GUIDE / "scenario-capacity.yaml").read_text()
    text = text.replace("dws-pool: {queuedDelay: 30m}", f"dws-pool: {{queuedDelay: {delay}}}")
    text = text.replace("on-demand-pool: {available: 4, bootTime: 3m}", "on-demand-pool: {available: 0}")
    submits = "".join(f"    - at: {i}{every[-1]}\n      file: rayjob-tpu-v6e-dws.yaml\n"
                      f"      env: {{JOB_ID: \"{i}\"}}\n      runFor: 10m\n" for i in range(jobs))
    start = text.index("  submit:\n")
    text = text[:start] + "  submit:\n" + submits + "  until: 30d\n"
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def _requests(sim: Simulation) -> dict[str, tuple[float, float | None]]:
    """Request name -> (accepted at, provisioned at)."""
    out: dict[str, tuple[float, float | None]] = {}
    for e in sim.result.events:
        if e["event"] == "ProvisioningRequest" and e["state"] == "Accepted":
            out[e["request"]] = (float(e["t"]), None)
        elif e["event"] == "ProvisioningRequest" and e["state"] == "Provisioned":
            out[e["request"]] = (out[e["request"]][0], float(e["t"]))
    return out


def test_a_request_in_flight_is_expected_at_the_models_median_not_the_clouds_draw(tmp_path: Path) -> None:
    sim = Simulation(load_scenario(_scenario(tmp_path, "{exponential: 30m}", 1, "0s")))
    sim.run_to(60)
    made = forecast(sim.plane, 60)
    sim.run_to(None)
    sim.finish()
    (asked, answered), = _requests(sim).values()
    (expected,) = made.values()
    assert expected.start == pytest.approx(asked + 1800 * math.log(2))
    assert [s.kind for s in expected.steps] == [StepKind.PROVISIONING]
    assert answered is not None and abs(answered - expected.start) > 60, "the cloud drew another delay"


def test_after_three_answers_a_pool_is_expected_as_it_answered(tmp_path: Path) -> None:
    """Four jobs a day apart, DWS answering at random: at the fourth's request, the first three answers (each
    longer than the fourth has waited or not) say when it will be answered."""
    path = _scenario(tmp_path, "{exponential: 30m}", 4, "1d")
    sim = Simulation(load_scenario(path))
    pause = 3 * 86400 + 30
    sim.run_to(pause)
    made = forecast(sim.plane, pause)
    sim.run_to(None)
    sim.finish()
    requests = sorted(_requests(sim).values())
    past = [answered - asked for asked, answered in requests[:3] if answered is not None]
    asked = requests[3][0]
    age = pause - asked
    longer = [p for p in past if p > age]
    want = asked + (statistics.median(longer) if longer else age + statistics.median(past))
    assert len(past) == 3 and [f.start for f in made.values()] == [pytest.approx(want)]


ROOM = """
apiVersion: flexq.dev/v1alpha1
kind: Scenario
metadata: {{name: room}}
spec:
  env: {{ONDEMAND_NODEPOOL: on-demand-pool, DWS_NODEPOOL: dws-pool}}
  include: [{guide}/dws-tpu-queue.yaml]
  capacity:
    pools:
      - {{name: default-pool, machineType: n2-standard-32, numNodes: 2, autoscaling: false}}
      - {{name: on-demand-pool, machineType: ct6e-standard-4t, tpuTopology: 4x4, maxNodes: 4}}
      - {{name: dws-pool, machineType: ct6e-standard-4t, tpuTopology: 4x4, maxNodes: 4, flexStart: true,
         queuedProvisioning: true}}
    cloud:
      on-demand-pool: {{available: 0}}
      dws-pool: {{queuedDelay: 20m}}
  submit:
{submits}
"""


def test_a_wait_for_room_in_the_pool_is_not_the_clouds_answer(tmp_path: Path) -> None:
    """Room for one DWS slice, answers after 20 minutes: the cloud answers four requests at once, and three of them
    then wait for room in the pool, one slice's run after another. What the forecast learns is the cloud's 20
    minutes: the wait for room is the queue's, which the forecast runs forward itself. Counted twice (the room's
    wait learned as the cloud's, then run forward again), a later job's start is foreseen hours late."""
    jobs = [(f"{i}", f"{i}s") for i in range(4)] + [("late", "3h")]
    submits = "".join(f"    - at: {at}\n      file: {GUIDE}/rayjob-tpu-v6e-dws.yaml\n"
                      f"      env: {{JOB_ID: \"{name}\"}}\n      runFor: 30m\n" for name, at in jobs)
    path = tmp_path / "room.yaml"
    path.write_text(ROOM.format(guide=GUIDE, submits=submits))
    pause = 3 * 3600.0 + 60
    sim = Simulation(load_scenario(path))
    sim.run_to(pause)
    learned = sim.plane.answer_times.copy()
    made = forecast(sim.plane, pause)
    sim.run_to(None)
    sim.finish()
    rooms = [e for e in sim.result.events if "waits for room" in e.get("reason", "")]
    assert len(rooms) >= 3, "requests waited for room in the pool"
    assert learned.answers("dws-pool") >= 3 and learned.typical("dws-pool") == pytest.approx(1200)
    starts = {e["workload"]: float(e["t"]) for e in sim.result.events if e["event"] == "Started"}
    late = next(k for k in made if "-late-" in k)
    assert made[late].start == pytest.approx(starts[late], abs=1e-3)
    assert any(s.kind is StepKind.PROVISIONING for s in made[late].steps)
