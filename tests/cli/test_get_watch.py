"""``flexq get --watch`` prints the list, then each change, as ``kubectl get -w`` does; ``flexq get`` and
``flexq describe`` take a job's workload as ``workload rayjob/NAME`` or ``workload job/NAME``."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
from typing import Any

from tests.conftest import Server
from tests.support import eventually_value

QUEUES = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: first}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default-flavor, resources: [{name: cpu, nominalQuota: 8}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: user-queue, namespace: default}
spec: {clusterQueue: first}
"""

SECOND = QUEUES.split("---")[1].replace("name: first", "name: second")

JOBS = """apiVersion: batch/v1
kind: Job
metadata:
  name: sample
  labels: {kueue.x-k8s.io/queue-name: user-queue}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: busybox, command: [sh, -c, "true"], resources: {requests: {cpu: "1"}}}
---
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: train
  labels: {kueue.x-k8s.io/queue-name: user-queue}
spec:
  entrypoint: python -c "print(1)"
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers:
          - {name: ray-head, image: rayproject/ray:2.53.0, resources: {requests: {cpu: "1"}}}
"""


class _Watch:
    """``flexq get ARGS --watch`` running, its output lines read as they come."""

    def __init__(self, server: Server, *args: str) -> None:
        # Stopped as a user stops it, with Ctrl-C (SIGINT): which a suite run in the background (a shell's `&`) would
        # have its commands ignore.
        self.process = subprocess.Popen([sys.executable, "-m", "flexq.cli.main", "get", *args, "--watch"],
                                        env=server.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def _drain(self) -> None:
        while not self.lines.empty():
            self.seen.append(self.lines.get())

    def wait_for(self, start: str, words: int = 0) -> str:
        """The first line that starts with ``start`` (and has at least ``words`` words)."""
        def found() -> str | None:
            self._drain()
            return next((line for line in self.seen if line.startswith(start) and len(line.split()) >= words), None)
        return eventually_value(found, timeout=15)

    def count(self, end: str) -> int:
        self._drain()
        return sum(line.endswith(end) for line in self.seen)

    def stop(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGINT)
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        err = self.process.stderr.read() if self.process.stderr else ""
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return code, err


def test_get_watch_lists_then_prints_each_change(flexq: Any, server: Server) -> None:
    assert flexq("apply", "-f", "-", input=QUEUES).code == 0
    table = _Watch(server, "clusterqueues")
    names = _Watch(server, "cq", "-o", "name")
    one = _Watch(server, "cq", "second", "-o", "yaml")
    try:
        header = table.wait_for("NAME")
        assert "COHORT" in header and "PENDING WORKLOADS" in header, header
        first = table.wait_for("first")
        assert names.wait_for("clusterqueue.kueue.x-k8s.io/first")
        assert flexq("apply", "-f", "-", input=SECOND).code == 0
        second = table.wait_for("second", words=len(first.split()))  # once the controller has written its status
        assert second.split()[1:] == first.split()[1:], (first, second)
        assert names.wait_for("clusterqueue.kueue.x-k8s.io/second")
        assert one.wait_for("  name: second")
        assert not any("name: first" in line for line in one.seen), "the named object only"
        assert flexq("delete", "cq", "second").code == 0
        eventually_value(lambda: names.count("/second") >= 2 or None, timeout=15)  # its deletion, a line too
        assert [x for x in table.seen if x.startswith("NAME")] == [header], "one header"
    finally:
        results = [w.stop() for w in (table, names, one)]
    for code, err in results:
        assert code == 0 and "Traceback" not in err, err


def test_get_watch_takes_one_kind(flexq: Any) -> None:
    refused = flexq("get", "cq,lq", "--watch")
    assert refused.code == 1 and "single resource type" in refused.err and "Traceback" not in refused.err


def test_a_jobs_workload_by_the_job(flexq: Any) -> None:
    assert flexq("apply", "-f", "-", input=QUEUES).code == 0
    assert flexq("apply", "-f", "-", input=JOBS).code == 0

    def workload_of(ref: str) -> str | None:
        got = flexq("get", "workload", ref, "-o", "name")
        return got.out.strip() or None if got.code == 0 else None

    for ref, prefix in (("job/sample", "job-sample-"), ("rayjob/train", "rayjob-train-")):
        name = eventually_value(lambda ref=ref: workload_of(ref))
        assert name.startswith(f"workload.kueue.x-k8s.io/{prefix}"), name
        described = flexq("describe", "workload", ref)
        assert described.code == 0, described.err
        assert described.out.splitlines()[0] == f"Name:         {name.partition('/')[2]}", described.out
        short = flexq("describe", f"wl/{ref}")
        assert short.code == 0 and short.out.splitlines()[0] == described.out.splitlines()[0]
    missing = flexq("describe", "workload", "job/nope")
    assert missing.code != 0 and "Traceback" not in missing.err and "nope" in missing.err, missing.err
