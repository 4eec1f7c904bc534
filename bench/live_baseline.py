"""Kueue's scheduler-performance configs through flexq's Kubernetes API, in real time.

    python bench/live_baseline.py [--config large-scale] [--scale 0.1] [--profile] [--out DIR]

As Kueue's own perf runner does it, against ``flexq server --runtime none`` started here in a process of its own (a
fresh FLEXQ_HOME, a free loopback port):

- the queue objects of the generator config (bench/kueue/) are created through the API;
- a load generator (``live_generator.py``, in a process of its own so that the watch stream does not hold up its
  creates; over keep-alive HTTP connections) creates the batch/v1 Jobs on the config's schedule (each one its interval
  after the one before, every set of every queue at once from the start);
- a runner watches Workloads and, ``runtimeMs`` after a workload is seen admitted, marks its Job finished by patching
  the Job's status (its ``Complete`` condition, which is how flexq tells a finished Job); a workload evicted before then
  has its timer cancelled, and runs its full time again once admitted again.

The run ends when every workload is seen Finished (or at ``--timeout``). The report (``bench/results/live-
<config>.json`` and ``.md``) gives the wall time against the packing bound (per cohort, its cpu-seconds of work over its
nominal cpu, and no job ends before its arrival plus its run time), the average and p99 time to admission per class
(from the create request sent to the Admitted condition seen), creations per second achieved against scheduled (how late
the latest one was sent, and whether the generator kept the schedule: none over a second late), the CPU seconds of each
process (the server's, the generator's, this one's) and the server's per Job, peak RSS and store size, and the machine's
load. ``--virtual`` adds the same config in virtual time (``flexq simulate``) for comparison: its averages, when it
ends, and how many finished in each span of the timeline.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import json
import math
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import yaml
from live_report import markdown, release_phases, timeline
from live_steps import controller_steps

from flexq.api.kinds import resolve
from flexq.api.quantity import Quantity
from flexq.auth import read_token
from flexq.sim.generator import load_generator_file

HERE = Path(__file__).parent
KUEUE_FIGURES = {"baseline": 351.0, "large-scale": 1179.0}
"""Kueue's own wall time on each config (seconds), as its perf tests publish it."""


def scaled_config(name: str, scale: float, into: Path) -> Path:
    """The generator config with every workloads set's count scaled (at least one round each)."""
    config = yaml.safe_load((HERE / "kueue" / f"{name}.yaml").read_text())
    for cohort in config["cohorts"]:
        for queues in cohort["queuesSets"]:
            for workloads in queues.get("workloadsSets", []):
                workloads["count"] = max(1, math.ceil(workloads.get("count", 0) * scale))
    path = into / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def url_of(obj: dict[str, Any], *, name: str | None = None, sub: str = "") -> str:
    info = resolve(f"{obj['kind'].lower()}.{obj['apiVersion'].rpartition('/')[0]}" if "/" in obj["apiVersion"]
                   else obj["kind"].lower())
    version = obj["apiVersion"].rpartition("/")[2]
    root = f"/apis/{info.group}/{version}" if info.group else "/api/v1"
    ns = f"/namespaces/{obj['metadata']['namespace']}" if info.namespaced else ""
    tail = f"/{name}" if name else ""
    return f"{root}{ns}/{info.plural}{tail}{sub}"


def packing_bound(objects: list[dict[str, Any]], jobs: list[tuple[float, dict[str, Any], float]]) -> float:
    """No schedule ends earlier: a cohort runs its cpu-seconds on its nominal cpu, a job ends after arrival + run."""
    cohort_of: dict[str, str] = {}
    capacity: dict[str, float] = collections.defaultdict(float)
    for obj in objects:
        if obj["kind"] == "ClusterQueue":
            cohort = obj["spec"].get("cohortName") or obj["metadata"]["name"]
            cohort_of[obj["metadata"]["name"]] = cohort
            for group in obj["spec"]["resourceGroups"]:
                for flavor in group["flavors"]:
                    for res in flavor["resources"]:
                        if res["name"] == "cpu":
                            capacity[cohort] += float(Quantity.parse(res["nominalQuota"]).value)
    work: dict[str, float] = collections.defaultdict(float)
    last_end = 0.0
    for at, job, runtime in jobs:
        cpu = float(Quantity.parse(job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"])
                    .value)
        work[cohort_of[job["metadata"]["namespace"]]] += cpu * runtime
        last_end = max(last_end, at + runtime)
    return max([last_end] + [w / capacity[c] for c, w in work.items() if capacity[c] > 0])


def class_of(job_name: str) -> str:
    return job_name.rsplit("-", 3)[0]  # <className>-<set>-<round>-<index>


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``flexq server --runtime none`` in a process of its own (under py-spy with ``profile``)."""

    def __init__(self, home: Path, profile: Path | None, db: Path | None = None, workers: int = 0) -> None:
        """``db``: a SQLite file shared with other servers (``--shared``); else the server's own. ``workers``: the
        server's --workers."""
        self.port = free_port()
        self.home = home
        self.db = db or home / "flexq.db"
        cmd = [sys.executable, "-m", "flexq.cli.main", "server", "--runtime", "none", "--port", str(self.port),
               "--tls-port", "0", "--home", str(home)]  # HTTPS on any free port: not --port + 1, maybe taken
        if db is not None:
            cmd += ["--store", f"sqlite:///{db}", "--shared", "--lease-duration", "5s"]
        if workers:
            cmd += ["--workers", str(workers)]
        if profile is not None:
            spy = Path(sys.executable).parent / "py-spy"
            cmd = [str(spy) if spy.exists() else "py-spy", "record", "--format", "raw", "--rate", "200", "--gil",
                   "--subprocesses", "-o", str(profile), "--", *cmd]
        home.mkdir(parents=True)
        self.log = open(home / "server.log", "wb")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}"

    def token(self) -> str:
        """The administrator's token (what flexq's CLI presents), once the server has made it."""
        token = read_token(self.home)
        if token is None:
            raise FileNotFoundError(f"no administrator's token under {self.home} yet")
        return token

    def ready(self, timeout: float = 60.0) -> str:
        """Wait until the server answers its ``/healthz`` (``timeout`` seconds at most; an exited server at once);
        return the administrator's token."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                token = self.token()
                if httpx.get(f"{self.base}/healthz", timeout=1).status_code == 200:
                    return token
            except (httpx.HTTPError, FileNotFoundError):
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise
                time.sleep(0.1)

    def pid(self) -> int:
        """The server's own process (py-spy's child when profiling)."""
        pid = self.process.pid
        for _ in range(50):
            children = Path(f"/proc/{pid}/task/{pid}/children")
            kids = children.read_text().split() if children.exists() else []
            name = Path(f"/proc/{pid}/comm").read_text().strip() if Path(f"/proc/{pid}/comm").exists() else ""
            if not name.startswith("py-spy"):
                return pid
            if kids:
                pid = int(kids[0])
            else:
                time.sleep(0.1)
        return pid

    def usage(self) -> tuple[float, float]:
        """CPU seconds and peak RSS (MiB) of the server so far: its process and its API workers, all together."""
        processes = self.processes()
        return sum(cpu for cpu, _ in processes.values()), max(rss for _, rss in processes.values())

    def processes(self) -> dict[str, tuple[float, float]]:
        """CPU seconds and peak RSS (MiB) of each of the server's processes: the owner, then its API workers."""
        pid = self.pid()
        kids = [int(k) for task in Path(f"/proc/{pid}/task").iterdir() for k in (task / "children").read_text().split()]
        found = {"server": _usage(pid)}
        workers = [k for k in kids if b"flexq.server.worker" in Path(f"/proc/{k}/cmdline").read_bytes()]
        for index, kid in enumerate(workers):
            found[f"worker {index}"] = _usage(kid)
        return found

    def store_mb(self) -> float:
        return sum(p.stat().st_size for p in self.db.parent.glob(self.db.name + "*")) / 2**20

    def store_tables(self) -> dict[str, list[float]]:
        """Rows and MiB of bodies per resource in the objects table, and in the change log."""
        db = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            rows = db.execute("SELECT resource, COUNT(*), SUM(LENGTH(body)) FROM objects GROUP BY resource").fetchall()
            log = db.execute("SELECT COUNT(*), SUM(LENGTH(body)) FROM changes").fetchone()
        finally:
            db.close()
        found = {r: [n, round((size or 0) / 2**20, 1)] for r, n, size in rows if n > 100}
        found["(change log)"] = [log[0], round((log[1] or 0) / 2**20, 1)]
        return found

    def store_files(self) -> dict[str, float]:
        """MiB of the database file, of its free pages, and of its write-ahead log."""
        db = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            page = db.execute("PRAGMA page_size").fetchone()[0]
            free = db.execute("PRAGMA freelist_count").fetchone()[0]
        finally:
            db.close()
        wal = self.db.parent / (self.db.name + "-wal")
        return {"file": round(self.db.stat().st_size / 2**20, 1),
                "free pages": round(free * page / 2**20, 1),
                "write-ahead log": round(wal.stat().st_size / 2**20 if wal.exists() else 0.0, 1)}

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):  # it may have exited already (it could not start)
            os.kill(self.pid(), signal.SIGTERM)  # under py-spy: the server ends, then py-spy writes its stacks
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


class Run:
    """The runner and the watcher (this process, one HTTP session), and the load generator's figures."""

    def __init__(self, base: str, jobs: list[tuple[float, dict[str, Any], float]], concurrency: int) -> None:
        self.base = base
        self.jobs = jobs
        self.runtime = {f"{j['metadata']['namespace']}/{j['metadata']['name']}": r for _, j, r in jobs}
        self.concurrency = concurrency
        self.sent: dict[str, float] = {}
        self.late: list[float] = []
        self.answered: list[float] = []
        self.refused: list[str] = []
        self.admitted: dict[str, float] = {}
        self.running: dict[str, asyncio.TimerHandle] = {}
        self.finished: set[str] = set()
        self.finished_at: list[float] = []
        """When each workload was seen Finished, in seconds from the first creation."""
        self.finish_sent: dict[str, float] = {}
        self.finish_answered: dict[str, float] = {}
        self.release: list[float] = []
        """Seconds from each finishing patch sent to its workload seen Finished (the quota held meanwhile)."""
        self.release_sent: list[float] = []
        """When each of those patches was sent, in seconds from the first creation."""
        self.finish_errors: list[str] = []
        self.generator_cpu: float | None = None
        """The load generator's CPU seconds (its own process)."""
        self.started = asyncio.Event()
        self.done = asyncio.Event()
        self.t0 = 0.0
        self.last_finished = 0.0
        self.tasks: set[asyncio.Task[None]] = set()

    async def setup(self, session: aiohttp.ClientSession, objects: list[dict[str, Any]]) -> str:
        for obj in objects:
            async with session.post(self.base + url_of(obj), json=obj) as r:
                if r.status != 201:
                    raise RuntimeError(f"creating {obj['kind']} {obj['metadata']['name']}: {r.status} {await r.text()}")
        queues = [o["metadata"]["name"] for o in objects if o["kind"] == "ClusterQueue"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the controller has read the configuration: every queue is Active
            async with session.get(self.base + "/apis/kueue.x-k8s.io/v1beta2/clusterqueues") as r:
                body = await r.json()
            active = {i["metadata"]["name"] for i in body["items"] if any(
                c["type"] == "Active" and c["status"] == "True" for c in (i.get("status") or {}).get("conditions", []))}
            if active >= set(queues):
                return str(body["metadata"]["resourceVersion"])
            await asyncio.sleep(0.2)
        raise RuntimeError("the ClusterQueues did not become Active within 60 s")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def generate(self, token: str, into: Path) -> None:
        """The creates, by ``live_generator.py`` in a process of its own; ``t0`` is its first creation's time."""
        plan, result = into / "generator-plan.json", into / "generator-result.json"
        plan.write_text(json.dumps({"base": self.base, "token": token, "concurrency": self.concurrency,
                                    "jobs": [[at, job] for at, job, _ in self.jobs]}))
        process = await asyncio.create_subprocess_exec(sys.executable, str(HERE / "live_generator.py"), str(plan),
                                                       str(result), stdout=asyncio.subprocess.PIPE)
        assert process.stdout is not None
        try:
            self.t0 = float(await process.stdout.readline())
            self.started.set()
            await process.wait()
        finally:
            if process.returncode is None:
                process.terminate()
                await process.wait()
            self.started.set()
            if result.exists():
                found = json.loads(result.read_text())
                self.sent, self.late, self.answered = found["sent"], found["late"], found["answered"]
                self.refused, self.generator_cpu = found["refused"], found["cpu_s"]

    async def watch(self, session: aiohttp.ClientSession, rv: str) -> None:
        path = "/apis/kueue.x-k8s.io/v1beta2/workloads"
        while not self.done.is_set():
            url = f"{self.base}{path}?watch=true&resourceVersion={rv}&timeoutSeconds=3600"
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=None)) as r:
                async for line in r.content:
                    event = json.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":  # 410 Gone: relist, as an informer does
                        async with session.get(self.base + path) as listed:
                            body = await listed.json()
                        for item in body["items"]:
                            self.observe(session, item)
                        rv = body["metadata"]["resourceVersion"]
                        break
                    rv = obj["metadata"]["resourceVersion"]
                    self.observe(session, obj)
                    if self.done.is_set():
                        return

    def observe(self, session: aiohttp.ClientSession, wl: dict[str, Any]) -> None:
        owner: dict[str, Any] = next(iter(wl["metadata"].get("ownerReferences") or []), {})
        if owner.get("kind") != "Job":
            return
        key = f"{wl['metadata']['namespace']}/{owner['name']}"
        conditions = {c["type"]: c["status"] for c in (wl.get("status") or {}).get("conditions") or []}
        if conditions.get("Finished") == "True":
            if key not in self.finished:
                self.finished.add(key)
                self.last_finished = time.monotonic()
                self.finished_at.append(self.last_finished - self.t0)
                if key in self.finish_sent:
                    self.release.append(self.last_finished - self.finish_sent[key])
                    self.release_sent.append(self.finish_sent[key] - self.t0)
                if len(self.finished) == len(self.jobs):
                    self.done.set()
            return
        if conditions.get("Admitted") == "True":
            if key not in self.running:
                self.admitted.setdefault(key, time.monotonic())
                loop = asyncio.get_running_loop()
                self.running[key] = loop.call_later(self.runtime[key], lambda: self._spawn(self.finish(session, key)))
        elif key in self.running:  # evicted before it ended: it runs its full time once admitted again
            self.running.pop(key).cancel()

    async def finish(self, session: aiohttp.ClientSession, key: str) -> None:
        namespace, name = key.split("/")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        patch = {"status": {"succeeded": 1, "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": stamp, "reason": "ByTest"}]}}
        self.finish_sent[key] = time.monotonic()
        for attempt in range(3):  # the patch says the same each time: a connection lost under it is tried again
            try:
                async with session.patch(f"{self.base}/apis/batch/v1/namespaces/{namespace}/jobs/{name}/status",
                                         data=json.dumps(patch),
                                         headers={"content-type": "application/merge-patch+json"}) as r:
                    self.finish_answered[key] = time.monotonic() - self.finish_sent[key]
                    if r.status != 200:
                        self.finish_errors.append(f"{key}: {r.status} {(await r.read())[:200]!r}")
                    return
            except aiohttp.ClientConnectionError as e:
                if attempt == 2:
                    self.finish_errors.append(f"{key}: {e!r}")


async def drive(server: Server, objects: list[dict[str, Any]], jobs: list[tuple[float, dict[str, Any], float]],
                concurrency: int, timeout: float, into: Path) -> Run:
    run = Run(server.base, jobs, concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency + 8)
    async with aiohttp.ClientSession(connector=connector, read_bufsize=2**22) as session:
        deadline = time.monotonic() + 60
        while True:
            try:
                async with session.get(server.base + "/healthz") as r:
                    if r.status == 200:
                        break
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline or server.process.poll() is not None:
                raise RuntimeError("the server did not start")
            await asyncio.sleep(0.1)
        session.headers["Authorization"] = f"Bearer {server.token()}"  # as flexq's CLI: the administrator's token
        rv = await run.setup(session, objects)
        watcher = asyncio.ensure_future(run.watch(session, rv))
        generator = asyncio.ensure_future(run.generate(server.token(), into))
        await run.started.wait()
        if generator.done() and generator.exception() is not None:
            raise RuntimeError("the load generator did not start") from generator.exception()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.done.wait(), timeout)
        run.done.set()
        for task in (watcher, *run.tasks):
            task.cancel()
        generator.cancel()  # it stops the generator's process (at once if the run timed out) and reads its figures
        await asyncio.gather(watcher, generator, *run.tasks, return_exceptions=True)
    return run


def wait_leading(server: Server) -> None:
    """Until the server leads the controllers (it was first on the shared file)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError), urllib.request.urlopen(urllib.request.Request(
                server.base + "/flexq/v1/leader", headers={"Authorization": f"Bearer {server.token()}"}),
                timeout=2) as answer:
            if json.loads(answer.read()).get("leading"):
                return
        if server.process.poll() is not None:
            raise RuntimeError("the leading server exited")
        time.sleep(0.2)
    raise RuntimeError("the first server did not lead within 60 s")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


@dataclasses.dataclass(frozen=True)
class Virtual:
    """The same config in virtual time (``flexq simulate``): what the live run is compared with."""

    averages: dict[str, float]
    """Average seconds from submission to first admission, per class."""
    finished: list[float]
    """When each workload finished, in seconds from the first submission, in order."""


def virtual_run(path: Path) -> Virtual:
    """The same config in virtual time."""
    from flexq.sim.runner import run_scenario
    from flexq.sim.scenario import load_scenario

    result = run_scenario(load_scenario(path))
    first: dict[str, float] = {}
    finished: list[float] = []
    for event in result.events:
        if event["event"] == "Admitted":
            first.setdefault(event["workload"], event["t"])
        elif event["event"] == "Finished":
            finished.append(event["t"])
    waits: dict[str, list[float]] = collections.defaultdict(list)
    for wl in result.workloads:
        if wl.key in first:
            waits[class_of(wl.owner.rpartition("/")[2])].append(first[wl.key] - result.submitted[wl.key])
    return Virtual({c: round(statistics.fmean(w), 3) for c, w in sorted(waits.items())}, sorted(finished))


ON_SCHEDULE_S = 1.0
"""The generator reached the config's schedule when no create was sent later than this after its time."""


def report(name: str, scale: float, run: Run, bound: float, cpu: dict[str, float], rss: float, store: float,
           load: tuple[float, float], virtual: Virtual | None) -> dict[str, Any]:
    """``cpu``: the CPU seconds of the server's process and of the benchmark's (the watcher and the runner)."""
    waits: dict[str, list[float]] = collections.defaultdict(list)
    for key, at in run.admitted.items():
        waits[class_of(key.rpartition("/")[2])].append(at - run.sent[key])
    wall = run.last_finished - run.t0 if len(run.finished) == len(run.jobs) else None
    span = max(at for at, _, _ in run.jobs)
    created = len(run.answered) - len(run.refused)
    return {
        "config": name, "scale": scale, "jobs": len(run.jobs), "finished": len(run.finished),
        "wall_s": round(wall, 2) if wall is not None else None, "bound_s": round(bound, 2),
        "ratio": round(wall / bound, 3) if wall is not None else None,
        "kueue_s": KUEUE_FIGURES.get(name) if scale == 1 else None,
        "admission": {c: {"count": len(w), "avg_s": round(statistics.fmean(w), 3),
                          "p99_s": round(percentile(w, .99), 3),
                          **({"virtual_avg_s": virtual.averages[c]} if virtual and c in virtual.averages else {})}
                      for c, w in sorted(waits.items())},
        "creations": {"scheduled_per_s": round(len(run.jobs) / span, 1) if span else None,
                      "achieved_per_s": round(created / max(run.answered), 1) if run.answered else None,
                      "created": created, "refused": len(run.refused), "max_late_s": round(max(run.late, default=0), 3),
                      "p99_late_s": round(percentile(run.late, .99), 3) if run.late else None,
                      "on_schedule": bool(run.late) and max(run.late) <= ON_SCHEDULE_S,
                      "examples_refused": run.refused[:3]},
        "finish_errors": run.finish_errors[:3],
        "release_s": {"avg": round(statistics.fmean(run.release), 3) if run.release else None,
                      "p50": round(percentile(run.release, .5), 3) if run.release else None,
                      "p99": round(percentile(run.release, .99), 3) if run.release else None,
                      "patch_answer_avg": round(statistics.fmean(run.finish_answered.values()), 3)
                      if run.finish_answered else None, **release_phases(run)},
        "virtual_wall_s": round(virtual.finished[-1], 2) if virtual and virtual.finished else None,
        "timeline": timeline(run, virtual=virtual.finished if virtual else None),
        "server": {"cpu_s": round(cpu["server"], 1), "peak_rss_mb": round(rss, 1), "store_mb": round(store, 1)},
        "cpu_s": {"server": round(cpu["server"], 1),
                  "generator": round(run.generator_cpu, 1) if run.generator_cpu is not None else None,
                  "runner": round(cpu["runner"], 1)},
        "server_cpu_ms_per_job": round(cpu["server"] / len(run.jobs) * 1000, 2),
        "load": {"before": load[0], "after": load[1], "cores": os.cpu_count()},
    }


def keep_store(db: Path, to: Path) -> None:
    """A copy of the stopped server's database (its write-ahead log folded in) at ``to``, to study."""
    to.unlink(missing_ok=True)
    source = sqlite3.connect(str(db))
    try:
        source.execute("VACUUM INTO ?", (str(to),))
    finally:
        source.close()


def _usage(pid: int) -> tuple[float, float]:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    hwm = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmHWM"))
    return cpu, int(hwm.split()[1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", choices=["baseline", "large-scale"], default="baseline")
    parser.add_argument("--scale", type=float, default=1.0, help="the share of each workloads set's count to run")
    parser.add_argument("--concurrency", type=int, default=32, help="create requests in flight at most")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds after the first creation to give up")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--virtual", action="store_true", help="also run the config in virtual time to compare")
    parser.add_argument("--profile", type=Path, help="run the server under py-spy (the thread holding the "
                        "interpreter lock, 200 samples a second); write its raw stacks here")
    parser.add_argument("--split", action="store_true",
                        help="two servers on one SQLite file (--shared): the client talks to one, the other leads "
                             "the controllers")
    parser.add_argument("--workers", type=int, default=0, help="the server's API worker processes (--workers)")
    parser.add_argument("--keep-store", type=Path, help="copy the server's SQLite file here after the run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="flexq-live-") as tmp:
        path = scaled_config(args.config, args.scale, Path(tmp))
        docs, submissions = load_generator_file(path, str(path))
        objects = [d.obj for d in docs]
        jobs = [(s.at, s.document.obj, float(s.run_for or 0)) for s in submissions]
        bound = packing_bound(objects, jobs)
        virtual = virtual_run(path) if args.virtual else None
        load_before = round(os.getloadavg()[0], 2)
        leader = Server(Path(tmp) / "leader", None, Path(tmp) / "shared.db") if args.split else None
        if leader is not None:
            wait_leading(leader)
        server = Server(Path(tmp) / "home", args.profile, leader.db if leader is not None else None, args.workers)
        try:
            runner_before = sum(os.times()[:2])
            run = asyncio.run(drive(server, objects, jobs, args.concurrency, args.timeout, Path(tmp)))
            runner_cpu = sum(os.times()[:2]) - runner_before
            # The threads' CPU is scraped before the process's is read, so that their sum is within the whole.
            steps = controller_steps((leader or server).base, len(jobs), (leader or server).token())
            processes = server.processes()
            cpu, rss = server.usage()
            if leader is not None:
                lead_cpu, lead_rss = leader.usage()
                cpu, rss = cpu + lead_cpu, max(rss, lead_rss)
            store = server.store_mb()
            tables = server.store_tables()
            files = server.store_files()
        finally:
            try:
                server.stop()
            finally:
                if leader is not None:
                    leader.stop()
        if args.keep_store is not None:
            keep_store(server.db, args.keep_store)
        result = report(args.config, args.scale, run, bound, {"server": cpu, "runner": runner_cpu}, rss, store,
                        (load_before, round(os.getloadavg()[0], 2)), virtual)
        result["server"]["store_tables"] = tables
        result["server"]["store_files"] = files
        result["controller_steps"] = steps
        result["split"] = args.split
        result["workers"] = args.workers
        result["cpu_s"]["server_processes"] = {name: round(c, 1) for name, (c, _) in processes.items()}
    args.out.mkdir(parents=True, exist_ok=True)
    stem = (f"live-{args.config}" + ("-split" if args.split else "")
            + (f"-workers{args.workers}" if args.workers else "") + ("" if args.scale == 1 else f"-{args.scale:g}"))
    (args.out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / f"{stem}.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
