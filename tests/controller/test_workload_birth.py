"""A job's Workload is stored once, with its first status (pending, or admitted at once), not created bare and then
given a status: one write and one watch event fewer a job. The uid it was given before it was stored is the one it
keeps; a job deleted before its workload was stored leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

from flexq.api.kinds import resolve
from flexq.store import ChangeType
from tests.support import controller_on_store, queued_job


def _conditions(obj: dict[str, object]) -> dict[str, str]:
    status = obj.get("status")
    rows = status.get("conditions") if isinstance(status, dict) else None
    return {c["type"]: c["status"] for c in rows or []}


def test_a_workload_is_stored_once_with_its_first_status(tmp_path: Path) -> None:
    store, service, controller = controller_on_store(tmp_path, cpu=1)
    try:
        before = store.current_rv()
        for name in ("a", "b", "gone"):
            service.create(resolve("job.batch"), "default", queued_job(name))
        service.delete(resolve("job.batch"), "default", "gone")
        controller.sync()
        writes: dict[str, list[tuple[ChangeType, dict[str, str]]]] = {}
        for change in store.changes(before):
            if change.key.resource == "workloads":
                job = change.key.name.split("-")[1]
                writes.setdefault(job, []).append((change.type, _conditions(change.obj)))
        assert set(writes) == {"a", "b"}, "a workload stored for a job deleted before it was"
        [(kind_a, a)], [(kind_b, b)] = writes["a"], writes["b"]
        assert kind_a is kind_b is ChangeType.ADDED
        assert a.get("Admitted") == "True" and a.get("QuotaReserved") == "True"
        assert b.get("QuotaReserved") == "False" and "Admitted" not in b
        for wl in controller.scheduler.workloads():
            stored = store.get(controller.state.wl_key(wl))
            assert stored["metadata"]["uid"] == wl.uid
        events = store.list_objects("", "events", "default")[0]
        created = sorted(e["involvedObject"]["name"] for e in events if e["reason"] == "CreatedWorkload")
        assert created == ["a", "b"]
        assert not controller.state.unborn
    finally:
        store.close()
