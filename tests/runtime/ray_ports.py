"""What a Ray cluster's processes listen on: every TCP and UDP socket in the listening state held by the processes
of the sessions that carry the cluster's temp dir (``TMPDIR``) in their environment, read from ``/proc``."""

from __future__ import annotations

import ipaddress
from pathlib import Path

_LOOPBACK_V4 = ipaddress.ip_network("127.0.0.0/8")


def _address(hex_address: str) -> tuple[str, int]:
    """``/proc/net``'s ``0100007F:1F90`` (little-endian words) as ``("127.0.0.1", 8080)``."""
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(words)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped), int(port, 16)
    return str(ip), int(port, 16)


def _listening_inodes() -> dict[int, tuple[str, int]]:
    """Socket inode -> (address, port) of every listening TCP socket and bound UDP socket of the machine."""
    found: dict[int, tuple[str, int]] = {}
    for table, state in (("tcp", "0A"), ("tcp6", "0A"), ("udp", "07"), ("udp6", "07")):
        path = Path("/proc/net") / table
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == state:
                found[int(fields[9])] = _address(fields[1])
    return found


def _sessions_of(temp_dirs: set[str]) -> set[int]:
    marks = {f"TMPDIR={t}".encode() for t in temp_dirs}
    sessions = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = set((entry / "environ").read_bytes().split(b"\0"))
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if environ & marks:
            sessions.add(int(fields[3]))
    return sessions


def listening(temp_dirs: set[str]) -> dict[tuple[str, int], str]:
    """(address, port) -> command of each socket the clusters of ``temp_dirs`` listen on."""
    sessions = _sessions_of(temp_dirs)
    inodes = _listening_inodes()
    found: dict[tuple[str, int], str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[-1].split()[3]) not in sessions:
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:80]
            links = [link.readlink().name for link in (entry / "fd").iterdir()]
        except OSError:
            continue
        for link in links:
            if link.startswith("socket:[") and int(link[8:-1]) in inodes:
                found[inodes[int(link[8:-1])]] = command
    return found


def beyond_loopback(sockets: dict[tuple[str, int], str]) -> dict[tuple[str, int], str]:
    """Those of ``sockets`` another machine could reach."""
    return {where: command for where, command in sockets.items()
            if not (ipaddress.ip_address(where[0]) in _LOOPBACK_V4 or where[0] == "::1")}
