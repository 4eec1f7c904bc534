"""Two pytest runs over the same test files, each file run once, by whichever run claims it first (a pytest plugin,
which tests/conftest.py registers where ``FLEXQ_TEST_CLAIMS`` is set; elsewhere ``pytest -p tests.claims``).

make test runs the Ray tests one at a time beside the rest of the suite; once the rest is done, a second run of the Ray
tests starts on the core it leaves, from the other end of their list. Before a file's first test, a run claims the
file: it creates a file named for it in the folder ``FLEXQ_TEST_CLAIMS`` names, which only one run can do (``O_EXCL``);
the files the other run claimed it leaves out, without a report. ``FLEXQ_TEST_FROM_END`` set: the run takes the files
in the opposite order (each file's tests in their own order). Without ``FLEXQ_TEST_CLAIMS`` the plugin does nothing.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

__all__ = ["CLAIMS", "FROM_END", "Claims", "pytest_collection_modifyitems", "pytest_runtest_protocol"]

CLAIMS = "FLEXQ_TEST_CLAIMS"
FROM_END = "FLEXQ_TEST_FROM_END"


class Claims:
    """The files this run claimed and those the other run did, as this run has found out."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._known: dict[Path, bool] = {}

    def mine(self, path: Path) -> bool:
        """Whether this run runs ``path``: claimed now if nobody has claimed it yet."""
        known = self._known.get(path)
        if known is None:
            name = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:32]
            try:
                fd = os.open(self.folder / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                known = False
            else:
                os.write(fd, f"{os.getpid()} {path}\n".encode())
                os.close(fd)
                known = True
            self._known[path] = known
        return known


_claims: dict[str, Claims] = {}


def _of_this_run() -> Claims | None:
    folder = os.environ.get(CLAIMS)
    if not folder:
        return None
    claims = _claims.get(folder)
    if claims is None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        claims = _claims[folder] = Claims(Path(folder))
    return claims


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With ``FLEXQ_TEST_FROM_END``: the files in the opposite order, each file's tests kept in theirs."""
    if not os.environ.get(FROM_END):
        return
    files = list(dict.fromkeys(item.path for item in items))
    rank = {path: i for i, path in enumerate(reversed(files))}
    items.sort(key=lambda item: rank[item.path])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """A test of a file the other run claimed is left out: nothing is run or reported, and what the tests before it
    set up is torn down as far as the next test needs (as its own teardown would have)."""
    claims = _of_this_run()
    if claims is None or claims.mine(item.path):
        return None
    item.session._setupstate.teardown_exact(nextitem)
    return True
