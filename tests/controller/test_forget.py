"""Kueue's assume / forget: an admission whose write fails is forgotten, never run, and made again from the store."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from flexq.api.kinds import resolve
from flexq.clock import RealClock
from flexq.controller.queue import QueueController
from flexq.jobs.webhook import job_webhook
from flexq.objects.service import ObjectService
from flexq.store import Store
from flexq.store.refusals import Key, StoreError
from tests.conftest import guide_text
from tests.support import wait_until


class FailingStore(Store):
    """A store whose first write of an admitted Workload's status fails (as a full disk would make it)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.failed = threading.Event()

    def _fail_admission(self, key: Key, obj: dict[str, Any]) -> None:
        conditions = (obj.get("status") or {}).get("conditions") or []
        admitted = any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions)
        if key.resource == "workloads" and admitted and not self.failed.is_set():
            self.failed.set()
            raise StoreError("database or disk is full")

    def update(self, key: Key, obj: dict[str, Any], *, subresource: str | None = None,
               keep_status: bool = True, echo: bool = True, current: dict[str, Any] | None = None) -> dict[str, Any]:
        if subresource == "status":
            self._fail_admission(key, obj)
        return super().update(key, obj, subresource=subresource, keep_status=keep_status, echo=echo, current=current)

    def create(self, key: Key, obj: dict[str, Any], *, echo: bool = True, uid: str | None = None) -> dict[str, Any]:
        self._fail_admission(key, obj)  # a workload stored with its first status: admitted at once
        return super().create(key, obj, echo=echo, uid=uid)


class Runs:
    """The runtime's face to the controller, recording what it is asked to start."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.clusters = self
        self.batch = self

    def start(self, namespace: str, name: str, *_: Any) -> None:
        self.started.append(f"{namespace}/{name}")

    def suspend(self, namespace: str, name: str) -> None: ...

    def stop(self, namespace: str, name: str, **_: Any) -> None: ...

    def queued(self, namespace: str, name: str) -> None: ...

    def resume(self) -> None: ...

    def stop_all(self) -> None: ...


def _create(service: ObjectService, text: str) -> None:
    for doc in yaml.safe_load_all(text):
        info = resolve(doc["kind"])
        service.create(info, doc["metadata"].get("namespace", "default") if info.namespaced else "", doc)


def test_an_admission_whose_write_fails_is_forgotten_not_run(tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    store = FailingStore(tmp_path / "flexq.db")
    service = ObjectService(store, hooks=[job_webhook])
    runs = Runs()
    controller = QueueController(service, RealClock(), runtime=runs)  # type: ignore[arg-type]
    controller.start()
    try:
        _create(service, guide_text("dws-tpu-queue.yaml"))
        _create(service, guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID="1"))
        key = Key("kueue.x-k8s.io", "workloads", "default", "")

        def admitted() -> bool:
            workloads = store.list_objects(key.group, key.resource, "default")[0]
            return any(c["type"] == "Admitted" and c["status"] == "True"
                       for wl in workloads for c in (wl.get("status") or {}).get("conditions") or [])

        wait_until(admitted, timeout=20, every=0.05)
        wait_until(lambda: runs.started == ["default/rayjob-tpu-v6e-dws-1"], timeout=20, every=0.05)
        time.sleep(0.5)  # nothing more comes
        admissions = sum(int(e.get("count") or 1) for e in store.list_objects("", "events", "default")[0]
                         if e["reason"] == "Admitted" and e["involvedObject"]["kind"] == "Workload")
    finally:
        controller.stop()
        store.close()
    assert store.failed.is_set(), "the fault was not met"
    assert runs.started == ["default/rayjob-tpu-v6e-dws-1"], "the job was started for the admission not written"
    assert "reads its state back from the store" in caplog.text
    assert admissions == 1, "the admission that was not written was recorded"
