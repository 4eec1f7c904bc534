"""Two pytest runs sharing their test files through :mod:`tests.claims`: every test runs once, each file whole in one
run, its fixtures set up and torn down there."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.claims import CLAIMS, FROM_END, Claims
from tests.conftest import ROOT

FILES = {
    "a/__init__.py": "",
    "a/conftest.py": """
import os, pytest
@pytest.fixture(scope="package", autouse=True)
def package_a():
    print(f"setup package-a {os.getpid()}", file=open(os.environ["LOG"], "a"))
    yield
    print(f"teardown package-a {os.getpid()}", file=open(os.environ["LOG"], "a"))
""",
    "b/__init__.py": "",
}
TEST = """
import os, time, pytest
@pytest.fixture(scope="module", autouse=True)
def module():
    print(f"setup {__name__} {os.getpid()}", file=open(os.environ["LOG"], "a"))
    yield
    print(f"teardown {__name__} {os.getpid()}", file=open(os.environ["LOG"], "a"))
@pytest.mark.parametrize("n", range(3))
def test_it(n):
    time.sleep(0.1)
    print(f"ran {__name__}[{n}] {os.getpid()}", file=open(os.environ["LOG"], "a"))
"""
MODULES = ["a.test_one", "a.test_two", "b.test_three", "b.test_four", "a.test_five"]


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    for name, text in FILES.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)
    for module in MODULES:
        (tree / (module.replace(".", "/") + ".py")).write_text(TEST)
    return tree


def _run(tree: Path, log: Path, claims: Path, from_end: bool) -> subprocess.Popen[str]:
    env = {**os.environ, "LOG": str(log), CLAIMS: str(claims), "PYTHONPATH": str(ROOT)}
    env.pop(FROM_END, None)
    if from_end:
        env[FROM_END] = "1"
    return subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.claims",
                             "--rootdir", str(tree), str(tree)], cwd=tree, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _lines(log: Path) -> list[tuple[str, str, str]]:
    return [(w[0], w[1], w[2]) for w in (line.split() for line in log.read_text().splitlines())]


def test_two_runs_share_the_files_each_test_runs_once_with_its_fixtures(tmp_path: Path) -> None:
    tree, log = _tree(tmp_path), tmp_path / "log"
    runs = [_run(tree, log, tmp_path / "claims", from_end) for from_end in (False, True)]
    outputs = [run.communicate(timeout=120)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    lines = _lines(log)
    ran = Counter(what for verb, what, _ in lines if verb == "ran")
    assert ran == Counter(f"{m}[{n}]" for m in MODULES for n in range(3)), ran
    by = {what: pid for verb, what, pid in lines}
    for module in MODULES:  # a file whole in one run, its module fixture set up and torn down by that run
        pids = {pid for verb, what, pid in lines if what.startswith(module)}
        assert len(pids) == 1, (module, lines)
        assert (("setup", module, by[module]) in lines) and (("teardown", module, by[module]) in lines), lines
    pids = {pid for *_, pid in lines}
    assert len(pids) == 2, "both runs ran some of the files"
    for pid in pids:  # each run set up what it used before its tests and tore it down once, after them
        active: set[str] = set()
        for verb, what, p in lines:
            if p != pid:
                continue
            if verb == "setup":
                assert what not in active, (pid, lines)
                active.add(what)
            elif verb == "teardown":
                assert what in active, (pid, lines)
                active.remove(what)
            else:  # a test runs with its module's fixture, and package a's where it is in package a
                module = what.split("[")[0]
                assert {module, *(["package-a"] if module.startswith("a.") else [])} <= active, (pid, lines)
        assert not active, (pid, lines)


def test_a_run_that_finds_every_file_claimed_runs_nothing_and_passes(tmp_path: Path) -> None:
    tree, log, claims = _tree(tmp_path), tmp_path / "log", tmp_path / "claims"
    first = _run(tree, log, claims, from_end=False)
    assert first.communicate(timeout=120)[0] and first.returncode == 0
    second = _run(tree, log, claims, from_end=True)
    output = second.communicate(timeout=120)[0]
    assert second.returncode == 0, output
    assert {pid for *_, pid in _lines(log)} == {str(first.pid)}, "the second run ran nothing"


def test_a_file_claimed_elsewhere_is_left_out_and_what_came_before_it_is_torn_down(tmp_path: Path) -> None:
    tree, log, claims = _tree(tmp_path), tmp_path / "log", tmp_path / "claims"
    claims.mkdir()
    assert Claims(claims).mine(tree / "a" / "test_two.py")  # the last file of package a: then package b's
    run = _run(tree, log, claims, from_end=False)
    output = run.communicate(timeout=120)[0]
    assert run.returncode == 0, output
    lines = [(verb, what) for verb, what, _ in _lines(log)]
    assert not any(what.startswith("a.test_two") for _, what in lines), lines
    assert lines.index(("teardown", "package-a")) < lines.index(("setup", "b.test_four")), lines
    assert Counter(what for verb, what in lines if verb == "ran") == Counter(
        f"{m}[{n}]" for m in MODULES if m != "a.test_two" for n in range(3))


def test_from_the_end_the_files_come_in_the_opposite_order(tmp_path: Path) -> None:
    tree, log = _tree(tmp_path), tmp_path / "log"
    run = _run(tree, log, tmp_path / "claims", from_end=True)
    output = run.communicate(timeout=120)[0]
    assert run.returncode == 0, output
    order = list(dict.fromkeys(what.split("[")[0] for verb, what, _ in _lines(log) if verb == "ran"))
    assert order == list(reversed(_collected(tree))), order


def _collected(tree: Path) -> list[str]:
    """The test modules of ``tree`` in pytest's own order."""
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                          "--rootdir", str(tree), str(tree)], cwd=tree, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True).stdout
    modules = [line.split("::")[0].removesuffix(".py").replace("/", ".") for line in out.splitlines() if "::" in line]
    assert len(set(modules)) == len(MODULES), out
    return list(dict.fromkeys(modules))
