"""Virtual time: scenarios, the runner that replays them through the scheduler."""

from flexq.sim.arrivals import Submission, read_text
from flexq.sim.generator import load_generator_file
from flexq.sim.policies import LOWER_BOUND, ORACLE, PolicyRun, compare_policies, policy_name, policy_run
from flexq.sim.progress import SimProgress
from flexq.sim.report import ratio, summarize, write_report
from flexq.sim.runner import SimResult, Simulation, run_scenario
from flexq.sim.scenario import Scenario, load_capacity, load_scenario, parse_capacity

__all__ = [
    "LOWER_BOUND",
    "ORACLE",
    "PolicyRun",
    "Scenario",
    "SimProgress",
    "SimResult",
    "Simulation",
    "Submission",
    "compare_policies",
    "load_capacity",
    "load_generator_file",
    "load_scenario",
    "parse_capacity",
    "policy_name",
    "policy_run",
    "ratio",
    "read_text",
    "run_scenario",
    "summarize",
    "write_report",
]
