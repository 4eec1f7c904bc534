"""The suite's fork server: one process that has imported flexq's CLI and server once, and forks a child for each
``flexq ARGS`` a test runs (``python -m tests.forkserver SOCKET``; see :mod:`tests.forks`).

A child is the command as ``python -m flexq.cli.main ARGS`` runs it: its own process (its pid is the command's),
standard streams, working directory, environment and arguments the test's, ``flexq.cli.main.main()`` run, non-daemon
threads joined and exit handlers run before it exits with the command's code. What it is spared is the interpreter's
start and the imports, most of a short command's CPU and a fifth of a server's start.

Each request comes on the socket as a length-prefixed JSON header (``argv``, ``env``, ``cwd``, ``session``) with four
file descriptors: the child's stdin, stdout and stderr, and a pipe on which its exit code is written (as
:attr:`subprocess.Popen.returncode` says it: negative for a signal) once it is reaped. The answer is the child's pid.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import io
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import traceback
from typing import Any, TextIO

HEADER = struct.Struct("!I")
PRELOAD = ("flexq.cli.main", "flexq.cli.serve", "flexq.cli.kubectl", "flexq.server.run", "httpx", "rich.console",
           "rich.table")
"""What every child would import first: the CLI with its commands' modules, and the server."""


def _die_with_parent() -> None:
    """The fork server goes when the test session does (Linux's PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 4)
    while len(data) < HEADER.size:
        data += conn.recv(1 << 16)
    (size,) = HEADER.unpack_from(data)
    while len(data) < HEADER.size + size:
        chunk = conn.recv(1 << 16)
        if not chunk:
            raise EOFError("the request was cut short")
        data += chunk
    return json.loads(data[HEADER.size:HEADER.size + size]), list(fds)


def _stream(fd: int, like: TextIO, *, reading: bool = False) -> TextIO:
    """A standard stream on ``fd`` as Python opens one at start-up (buffered, line-buffered on a terminal; stderr
    always line-buffered), with the encoding and error handler the server's own had."""
    raw: Any = io.FileIO(fd, "r" if reading else "w", closefd=False)
    buffered: Any = io.BufferedReader(raw) if reading else io.BufferedWriter(raw)
    line = os.isatty(fd) or fd == 2
    return io.TextIOWrapper(buffered, encoding=like.encoding, errors=like.errors, line_buffering=line)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _child(request: dict[str, Any], fds: list[int], keep_out: list[int]) -> None:
    """Become the command (never returns)."""
    code = 1
    try:
        current = threading.current_thread()  # its thread id is the child's own (Python 3.11 keeps the parent's)
        if hasattr(current, "_set_native_id"):
            current._set_native_id()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in keep_out:
            os.close(fd)
        if request.get("session"):
            os.setsid()
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.stdin = _stream(0, sys.__stdin__ or sys.stdin, reading=True)
        sys.stdout = _stream(1, sys.__stdout__ or sys.stdout)
        sys.stderr = _stream(2, sys.__stderr__ or sys.stderr)
        import flexq.cli.main as cli

        sys.argv = [cli.__file__ or "flexq", *request["argv"]]
        sys.modules["__main__"].__package__ = "flexq.cli"  # usage lines say python -m flexq.cli.main, as run so
        try:
            cli.main()
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc.code)
        except BaseException:  # as the interpreter would: the traceback on stderr, exit 1
            traceback.print_exc()
            code = 1
        threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads, as at the interpreter's exit
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)


def _reap(waiting: dict[int, int]) -> None:
    """Write each ended child's exit code to its status pipe."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = waiting.pop(pid, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.write(fd, f"{os.waitstatus_to_exitcode(status)}\n".encode())
            os.close(fd)


def serve(path: str) -> None:
    _die_with_parent()
    for name in PRELOAD:
        __import__(name)
    import flexq.cli.main as cli

    list(cli.click_app().commands.values())  # the CLI's commands, all built once here rather than in every child
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    waiting: dict[int, int] = {}
    while True:
        try:
            readable, _, _ = select.select([listener, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in readable:
            os.read(wake_r, 4096)
        if listener in readable:
            conn, _ = listener.accept()
            with conn:
                try:
                    request, fds = _receive(conn)
                except (OSError, EOFError, ValueError):
                    continue
                pid = os.fork()
                if pid == 0:
                    _child(request, fds, [listener.fileno(), conn.fileno(), wake_r, wake_w, *waiting.values()])
                for fd in fds[:3]:
                    os.close(fd)
                waiting[pid] = fds[3]
                with contextlib.suppress(OSError):
                    conn.sendall(f"{pid}".encode())
        _reap(waiting)


if __name__ == "__main__":
    serve(sys.argv[1])
