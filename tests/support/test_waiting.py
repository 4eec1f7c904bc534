"""The waits tests share: what they retry, what they return, and what a timeout says."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import httpx
import pytest

from tests.support import eventually, eventually_value


def test_eventually_retries_what_is_not_there_yet_and_what_it_is_also_told() -> None:
    def flaky() -> Callable[[], int]:
        """A check that finds nothing, then loses its server, then answers its third try."""
        tries = itertools.count()

        def check() -> int:
            n = next(tries)
            if n == 0:
                raise KeyError("not yet")
            if n == 1:
                raise httpx.ConnectError("the server restarts")
            return n

        return check

    with pytest.raises(httpx.ConnectError):  # not retried unless told
        eventually(flaky(), timeout=5, every=0.01)
    assert eventually(flaky(), timeout=5, every=0.01, also=(httpx.HTTPError,)) == 2


def test_eventually_value_names_what_it_waited_for_and_what_was_seen() -> None:
    with pytest.raises(AssertionError, match=r"^waited 0\.05s for the job to run; status: Pending$"):
        eventually_value(lambda: False, 0.05, 0.01, what="the job to run", state=lambda: "status: Pending")
    with pytest.raises(AssertionError, match=r"^nothing came within 0\.05s$"):
        eventually_value(lambda: None, 0.05, 0.01)
    assert eventually_value(lambda: {"ready": True}, 1, 0.01) == {"ready": True}
