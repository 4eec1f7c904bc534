"""Waiting for what happens on its own time: a server's controllers, a Ray cluster, a log that grows."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

NOT_YET: tuple[type[BaseException], ...] = (AssertionError, KeyError, StopIteration, ValueError)
"""What a check raises while what it looks for has not happened (or is not there) yet: ValueError too, for a check
that unpacks what it expects (``(request,) = items``) before all of it is there."""


def eventually(check: Callable[[], T], timeout: float = 20.0, every: float = 0.2, *,
               also: tuple[type[BaseException], ...] = ()) -> T:
    """What ``check`` returns once it stops raising :data:`NOT_YET` (or what ``also`` names: a client's connection
    errors while a server restarts); its last error after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    retried = NOT_YET + also
    while True:
        try:
            return check()
        except retried:
            if time.monotonic() > deadline:
                raise
            time.sleep(every)


def eventually_value(check: Callable[[], T | None], timeout: float = 20.0, every: float = 0.3, *, what: str = "",
                     state: Callable[[], str] | None = None) -> T:
    """What ``check`` returns once it returns something (not None, not False) without raising :data:`NOT_YET`;
    ``AssertionError`` after ``timeout`` seconds, naming ``what`` it waited for and ``state()`` (what the test sees
    then) where given."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
        except NOT_YET:
            if time.monotonic() > deadline:
                raise
        else:
            if result is not None and result is not False:
                return result
            if time.monotonic() > deadline:
                waited = f"waited {timeout:g}s for {what}" if what else f"nothing came within {timeout:g}s"
                raise AssertionError(f"{waited}; {state()}" if state is not None else waited)
        time.sleep(every)


def wait_until(predicate: Callable[[], object], timeout: float = 5.0, every: float = 0.01) -> None:
    """Return once ``predicate()`` is true; ``AssertionError`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s")
        time.sleep(every)
