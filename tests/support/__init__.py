"""What tests share: waiting for what a live server does (:func:`eventually`), reading its workloads and nodes, running
the CLI against it, fluent builders of the Jobs tests submit (:func:`job`) and of the scheduler's workloads and queues
(:func:`workload`, :func:`cluster_queue`, :func:`scheduler`), a stepped queue controller on a store of
its own, and the guide's jobs in scenarios. A test module imports these from here, never another test module's private
helpers (``tests/test_support_use.py``)."""

from tests.support.builders import JobBuilder, job
from tests.support.controllers import CountedScheduler, controller_on_store, queued_job
from tests.support.live import (
    assert_done,
    cli,
    cli_ok,
    condition,
    flavors,
    get_rayjob,
    guide_setup,
    nodes,
    serve_capacity,
    serve_kueue_config,
    workloads,
)
from tests.support.scheduling import QueueBuilder, WorkloadBuilder, cluster_queue, milli, scheduler, workload
from tests.support.waiting import eventually, eventually_value, wait_until

__all__ = ["CountedScheduler", "JobBuilder", "QueueBuilder", "WorkloadBuilder", "assert_done", "cli", "cli_ok",
           "cluster_queue", "condition", "controller_on_store", "eventually", "eventually_value", "flavors",
           "get_rayjob", "guide_setup", "job", "milli", "nodes", "queued_job", "scheduler", "serve_capacity",
           "serve_kueue_config", "wait_until", "workload", "workloads"]
