"""The server's CPU per Job on Kueue's configs, in one process and without HTTP: what the store, the API's object
service and the queue controller spend on each Job's life, measured apart from the network and the machine's load.

    python bench/server_cpu_bench.py [--config baseline|large-scale] [--jobs 3000] [--batch 50]
                                     [--profile api|controller]

The config's queue objects (Kueue's baseline by default; its large-scale config has 1,000 ClusterQueues) are
created through the object service, then Jobs in batches of ``--batch``: each batch is created as the API creates
them, the controller steps, and every Job whose workload is admitted is finished with the status patch Kueue's perf
runner sends (a merge patch of the Job's status), and the controller steps again. The run goes on until every Job
is finished. It reports the CPU seconds of each side (the API's creates and patches, the controller's steps) per
Job, and the writes the store made per Job; ``--profile`` adds that side's top functions (cProfile, cumulative).
Unlike ``live_baseline.py`` the figures do not depend on the load generator or on how the two share the machine:
use them to compare one change against another. One count does follow the machine's speed: the queues' status
writes (``queue_status_writes_per_job``, part of ``writes_per_job``), as the controller writes changed counts at
most every 0.1 s of the clock, so a run that takes longer writes them more often; ``wall_s`` says how long it took.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import pstats
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flexq.api.kinds import resolve
from flexq.capacity.gke_pools import node_pool_webhook
from flexq.clock import RealClock
from flexq.controller.queue import QueueController
from flexq.jobs.webhook import job_webhook
from flexq.objects.service import ObjectService
from flexq.sim.generator import load_generator_file
from flexq.store import Change, ChangeType, Store

HERE = Path(__file__).parent
JOB = resolve("job.batch")
_QUEUES = ("clusterqueues", "localqueues")


def _kind(obj: dict[str, Any]) -> str:
    group = obj["apiVersion"].rpartition("/")[0]
    return f"{obj['kind'].lower()}.{group}" if group else obj["kind"].lower()


def _finish_patch() -> dict[str, Any]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"status": {"succeeded": 1, "conditions": [
        {"type": "Complete", "status": "True", "lastTransitionTime": stamp, "reason": "ByTest"}]}}


def _settle(controller: QueueController) -> None:
    """Steps until one leaves nothing to schedule, as the live loop runs them back to back."""
    controller.sync()
    while controller.more:
        controller.sync()


def run(jobs_wanted: int, batch: int, profile: str | None, config: str = "baseline") -> dict[str, Any]:
    path = HERE / "kueue" / f"{config}.yaml"
    docs, submissions = load_generator_file(path, str(path))
    jobs = [s.document.obj for s in sorted(submissions, key=lambda s: s.at)][:jobs_wanted]
    with tempfile.TemporaryDirectory(prefix="flexq-cpu-") as tmp:
        store = Store(Path(tmp) / "flexq.db")
        service = ObjectService(store, hooks=[job_webhook, node_pool_webhook])
        for doc in docs:
            obj = doc.obj
            service.create(resolve(_kind(obj)), obj["metadata"].get("namespace"), obj)
        controller = QueueController(service, RealClock())
        controller.resync()
        rv0 = store.current_rv()
        queue_writes = 0

        def count(changes: list[Change]) -> None:
            nonlocal queue_writes
            queue_writes += sum(1 for c in changes if c.type is ChangeType.MODIFIED and c.key.resource in _QUEUES)

        store.subscribe(count)
        began = time.monotonic()
        spent = {"api": 0.0, "controller": 0.0}
        profiler = cProfile.Profile() if profile else None
        finished: set[str] = set()
        pending = list(jobs)

        @contextlib.contextmanager
        def side(name: str) -> Iterator[None]:
            """CPU time spent in the block, counted to ``name`` (and profiled, where that side is)."""
            began = time.process_time()
            if profiler is not None and profile == name:
                profiler.enable()
            try:
                yield
            finally:
                if profiler is not None and profile == name:
                    profiler.disable()
                spent[name] += time.process_time() - began

        while len(finished) < len(jobs):
            with side("api"):
                for job in pending[:batch]:
                    service.create(JOB, job["metadata"]["namespace"], json.loads(json.dumps(job)))
            pending = pending[batch:]
            with side("controller"):
                _settle(controller)
            admitted = [wl for wl in controller.scheduler.workloads() if wl.admission is not None
                        and wl.owner.startswith("Job ") and wl.owner not in finished]
            if not admitted and not pending:
                raise RuntimeError("no workload admitted and no Job left to create: the run is stuck")
            with side("api"):
                for wl in admitted:
                    namespace, _, name = wl.owner.partition(" ")[2].partition("/")
                    service.patch(JOB, namespace, name, "application/merge-patch+json", _finish_patch(),
                                  subresource="status")
                    finished.add(wl.owner)
            with side("controller"):
                _settle(controller)
        writes = store.current_rv() - rv0
        wall = time.monotonic() - began
        store.close()
    result: dict[str, Any] = {
        "config": config, "jobs": len(jobs), "batch": batch,
        "api_ms_per_job": round(1000 * spent["api"] / len(jobs), 3),
        "controller_ms_per_job": round(1000 * spent["controller"] / len(jobs), 3),
        "writes_per_job": round(writes / len(jobs), 2),
        "queue_status_writes_per_job": round(queue_writes / len(jobs), 2),
        "wall_s": round(wall, 2),
    }
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
        result["profile"] = out.getvalue()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", choices=["baseline", "large-scale"], default="baseline")
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--profile", choices=["api", "controller"],
                        help="print the top functions of the API's object service or of the controller")
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()
    result = run(args.jobs, args.batch, args.profile, args.config)
    profile = result.pop("profile", None)
    print(json.dumps(result))
    if profile is not None:
        print(profile)
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
