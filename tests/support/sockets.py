"""Sockets as a test sees them: a program that took a port (:class:`Listener`, :func:`listening`), and how long a
server takes to close a connection that sends its request a little at a time (:func:`seconds_until_closed`)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterable, Iterator

__all__ = ["Listener", "listening", "seconds_until_closed"]


class Listener:
    """What a program that took a port would see: every byte sent to ``127.0.0.1:port``."""

    def __init__(self, port: int, answer_at_once: bool = False) -> None:
        self.answer_at_once = answer_at_once
        """Answer (in plain HTTP) what first comes, not only a whole request: a TLS client's hello fails at once."""
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.received = bytearray()
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            with conn:
                conn.settimeout(1)
                with contextlib.suppress(OSError):
                    while chunk := conn.recv(65536):
                        self.received += chunk
                        if b"\r\n\r\n" in self.received or self.answer_at_once:
                            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                                         b"content-length: 13\r\n\r\n{\"items\": []}")
                            break

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


@contextlib.contextmanager
def listening(port: int, answer_at_once: bool = False) -> Iterator[Listener]:
    listener = Listener(port, answer_at_once)
    try:
        yield listener
    finally:
        listener.close()


def seconds_until_closed(sock: socket.socket, parts: Iterable[bytes], every: float) -> float | None:
    """Send each of ``parts`` (an empty one: nothing) and wait up to ``every`` seconds after each for the server to
    close the connection; the seconds from the first send until it did, or None where it did not."""
    started = time.monotonic()
    sock.settimeout(every)
    for part in parts:
        try:
            if part:
                sock.sendall(part)
            if sock.recv(4096) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue
        except OSError:
            return time.monotonic() - started
    return None
