"""A step's Events are recorded together, and each commit of the step holds the Events of the workloads it holds:
those written before a hand-over to the API's writers (a breathe) are committed with them, the rest at the step's
end. A workload's status and its Events are still committed together or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from flexq.api.kinds import resolve
from flexq.store import ChangeType
from tests.support import controller_on_store, queued_job


@pytest.mark.parametrize("how", ["sync", "start"])
def test_each_commit_of_a_step_holds_the_events_of_its_workloads(tmp_path: Path, how: str) -> None:
    """``sync``: a step in a batch that breathes at every workload; ``start``: the first step of a controller
    starting, which reads everything afresh and writes without a batch (each workload's write commits alone)."""
    store, service, controller = controller_on_store(tmp_path, cpu=3)
    commits: list[list[tuple[ChangeType, str, str, str]]] = []
    try:
        for n in range(8):
            service.create(resolve("job.batch"), "default", queued_job(f"j{n}"))
        store.subscribe(lambda changes: commits.append(
            [(c.type, c.key.resource, c.key.name, str(c.obj.get("reason", ""))) for c in changes]))
        store.breathe_every = 0.0  # every breathe commits: one a workload
        controller.sync() if how == "sync" else controller.resync()
        step = [row for commit in commits for row in commit]
        born = [name for kind, resource, name, _ in step if resource == "workloads" and kind is ChangeType.ADDED]
        assert len(born) == 8 and len(commits) >= 8, "the step did not commit at each breathe"
        at: dict[str, int] = {}  # the commit each workload, and each Event on a workload or its job, is in
        jobs = {name.split("-")[1]: name for name in born}
        for n, commit in enumerate(commits):
            for _, resource, name, reason in commit:
                if resource == "workloads":
                    at[name] = n
                elif resource == "events":
                    involved = name.rpartition(".")[0]
                    at[f"{jobs.get(involved, involved)} {reason}"] = n
        noted = {what: n for what, n in at.items() if " " in what}
        assert noted and all(at[what.partition(" ")[0]] == n for what, n in noted.items()), commits
        reasons = sorted(what.partition(" ")[2] for what in noted)
        admitted = [wl for wl in controller.scheduler.workloads() if wl.admission is not None]
        assert len(admitted) == 2, "a step admits one head a cycle, two cycles a step"
        assert reasons == sorted(["CreatedWorkload"] * 8 + ["QuotaReserved", "Admitted", "Started"] * 2)
    finally:
        store.close()


def test_a_step_commits_the_quota_it_takes_before_the_statuses_of_those_waiting(tmp_path: Path) -> None:
    """The workloads a step admits are written and committed first (a watcher sees the admission, the job starts),
    then the rest of the step's writes: here the workloads made for the other jobs, waiting for quota."""
    store, service, controller = controller_on_store(tmp_path, cpu=3)
    commits: list[list[tuple[ChangeType, str, str]]] = []
    try:
        for n in range(8):
            service.create(resolve("job.batch"), "default", queued_job(f"j{n}"))
        store.subscribe(lambda changes: commits.append([(c.type, c.key.resource, c.key.name) for c in changes]))
        controller.sync()
        admitted = sorted(wl.name for wl in controller.scheduler.workloads() if wl.admission is not None)
        waiting = sorted(wl.name for wl in controller.scheduler.workloads() if wl.admission is None)
        assert len(admitted) == 2 and len(waiting) == 6
        written = [sorted(name for _, resource, name in commit if resource == "workloads") for commit in commits]
        written = [names for names in written if names]
        assert written[0] == admitted, f"the step's first commit of workloads: {written}"
        assert sorted(name for names in written[1:] for name in names) == waiting, written
    finally:
        store.close()
