"""``flexq ARGS`` for tests, forked from a process that has imported flexq once (:mod:`tests.forkserver`)
instead of started afresh: the same command, its own process, a fraction of the CPU. :func:`popen` is
:class:`subprocess.Popen`'s part the suite uses, :func:`run` is :func:`subprocess.run`'s.

``FLEXQ_TEST_FORKS=0`` starts every command as its own interpreter again (``python -m flexq.cli.main``), as does a
machine where the fork server cannot start."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from tests.forkserver import HEADER

__all__ = ["Forked", "popen", "run", "stop_fork_server"]

ROOT = Path(__file__).resolve().parents[1]
PIPE, DEVNULL = subprocess.PIPE, subprocess.DEVNULL


class _ForkServer:
    """The session's fork server, started at its first use."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="flexq-forks-")
        self.path = os.path.join(self.folder, "socket")
        self.process = subprocess.Popen([sys.executable, "-m", "tests.forkserver", self.path], cwd=ROOT,
                                        stdin=DEVNULL, stdout=PIPE, stderr=None)
        assert self.process.stdout is not None
        ready = self.process.stdout.readline()
        if ready.strip() != b"ready":
            self.stop()
            raise RuntimeError("the fork server did not start")

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], cwd: str, fds: list[int], session: bool) -> int:
        header = json.dumps({"argv": list(argv), "env": dict(env), "cwd": cwd, "session": session}).encode()
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(self.path)
            socket.send_fds(conn, [HEADER.pack(len(header)) + header], fds)
            conn.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := conn.recv(64):
                answer += chunk
        if not answer:
            raise RuntimeError("the fork server did not start the command")
        return int(answer)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        for name in os.listdir(self.folder):
            os.unlink(os.path.join(self.folder, name))
        os.rmdir(self.folder)


_server: list[_ForkServer] = []
_lock = threading.Lock()


def _fork_server() -> _ForkServer | None:
    if os.environ.get("FLEXQ_TEST_FORKS") == "0":
        return None
    with _lock:
        if not _server:
            _server.append(_ForkServer())
        return _server[0]


def stop_fork_server() -> None:
    """Stop the session's fork server (the commands it started go on)."""
    with _lock:
        while _server:
            _server.pop().stop()


class Forked:
    """A forked command, as :class:`subprocess.Popen` shows one: ``pid``, ``returncode``, its pipes, ``poll``,
    ``wait``, ``communicate``, signals."""

    def __init__(self, args: list[str], pid: int, status: int, pipes: tuple[IO[bytes] | None, ...]) -> None:
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self._status = status
        self.stdin, self.stdout, self.stderr = pipes

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._status], [], [], 0)[0]:
            self._read_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._status], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            self._read_status()
        assert self.returncode is not None
        return self.returncode

    def _read_status(self) -> None:
        text = b""
        while chunk := os.read(self._status, 64):
            text += chunk
        os.close(self._status)
        self.returncode = int(text) if text.strip() else -signal.SIGKILL

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, input: bytes | None = None, timeout: float | None = None) -> tuple[bytes, bytes]:
        """What the command wrote to its stdout and stderr pipes until it ended, ``input`` fed to its stdin."""
        out: dict[str, bytes] = {}
        threads = [threading.Thread(target=_drain, args=(stream, name, out), daemon=True)
                   for name, stream in (("out", self.stdout), ("err", self.stderr)) if stream is not None]
        if self.stdin is not None:
            threads.append(threading.Thread(target=_feed, args=(self.stdin, input or b""), daemon=True))
        for thread in threads:
            thread.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        self.wait(timeout)
        for thread in threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return out.get("out", b""), out.get("err", b"")

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *_: object) -> None:
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        self.wait()


def _drain(stream: IO[bytes], name: str, out: dict[str, bytes]) -> None:
    out[name] = stream.read()
    stream.close()


def _feed(stream: IO[bytes], data: bytes) -> None:
    try:
        stream.write(data)
    except BrokenPipeError:
        pass
    finally:
        with contextlib.suppress(BrokenPipeError):
            stream.close()


def _end(spec: int | IO[Any] | None, reading: bool) -> tuple[int, int | None, bool]:
    """(the child's end, the test's end or None, whether the child's end is ours to close) for a stream spec."""
    if spec == PIPE:
        r, w = os.pipe()
        return (r, w, True) if reading else (w, r, True)
    if spec is None or spec == DEVNULL:
        return os.open(os.devnull, os.O_RDONLY if reading else os.O_WRONLY), None, True
    if isinstance(spec, int):
        return spec, None, False
    return spec.fileno(), None, False


def popen(args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
          stdin: int | IO[Any] | None = None, stdout: int | IO[Any] | None = None,
          stderr: int | IO[Any] | None = None, start_new_session: bool = False) -> Forked | subprocess.Popen[bytes]:
    """``flexq ARGS`` started, forked where it can be (``stdin`` etc. as Popen takes them: PIPE, DEVNULL, None, a
    file or a descriptor; None means DEVNULL for stdin and this process's own streams otherwise)."""
    argv = [sys.executable, "-m", "flexq.cli.main", *args]
    server = _fork_server()
    if server is None:
        return subprocess.Popen(argv, env=env, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr,
                                start_new_session=start_new_session)
    ends = [_end(stdin, True), _end(stdout if stdout is not None else 1, False),
            _end(stderr if stderr is not None else 2, False)]
    status_r, status_w = os.pipe()
    try:
        pid = server.spawn(list(args), dict(os.environ if env is None else env), os.fspath(cwd or os.getcwd()),
                           [end[0] for end in ends] + [status_w], start_new_session)
    except BaseException:
        os.close(status_r)
        for _child, ours, _ in ends:
            if ours is not None:
                os.close(ours)
        raise
    finally:
        os.close(status_w)
        for child, _, close in ends:
            if close:
                os.close(child)
    modes = ("wb", "rb", "rb")
    pipes = tuple(os.fdopen(ours, mode) if ours is not None else None
                  for (_, ours, _), mode in zip(ends, modes, strict=True))
    return Forked(argv, pid, status_r, pipes)


def run(args: Sequence[str], *, input: str | bytes | None = None, env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None, timeout: float | None = None,
        text: bool = False) -> subprocess.CompletedProcess[Any]:
    """``flexq ARGS`` run to its end with its output captured, as ``subprocess.run(..., capture_output=True)``: a
    timeout kills it and raises :class:`subprocess.TimeoutExpired`."""
    data = input.encode() if isinstance(input, str) else input
    process = popen(args, env=env, cwd=cwd, stdin=PIPE if data is not None else DEVNULL, stdout=PIPE, stderr=PIPE)
    try:
        out, err = process.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    code = process.wait()
    if text:
        return subprocess.CompletedProcess(process.args, code, out.decode(), err.decode())
    return subprocess.CompletedProcess(process.args, code, out, err)
