"""A progress bar for long simulations: virtual time reached, per policy, on stderr."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from flexq.durations import format_seconds
from flexq.sim.scenario import Scenario

__all__ = ["SimProgress"]


class SimProgress:
    """``with SimProgress(scenario) as bar: run_scenario(scenario, bar.callback("name"))``; silent if disabled."""

    def __init__(self, scenario: Scenario, enabled: bool = True) -> None:
        last = max((s.at for s in scenario.submissions), default=0.0)
        self.total = max(scenario.until if scenario.until is not None else last, 1.0)
        self.enabled = enabled
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[reached]}"),
            TimeElapsedColumn(), console=Console(stderr=True), transient=True) if enabled else None
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> SimProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()

    def labelled(self, label: str, t: float) -> None:
        if self._progress is None:
            return
        task = self._tasks.get(label)
        if task is None:
            task = self._tasks[label] = self._progress.add_task(label, total=self.total, reached="")
        self._progress.update(task, completed=min(t, self.total), reached=f"t={format_seconds(t)}")

    def callback(self, label: str) -> Callable[[float], None] | None:
        if self._progress is None:
            return None
        return lambda t: self.labelled(label, t)
