"""Capability paths to a job's Ray dashboard: ``/ui/ray/<namespace>/<rayjob>/~<capability>/...``.

Ray's dashboard is served through the server (:mod:`flexq.server.rayproxy`) in a sandbox (``Content-Security-Policy:
sandbox``): an opaque origin, so that its scripts (Ray's, or whatever a job's process serves on its cluster's
dashboard port) can neither read the dashboard's cookies nor call flexq's API with them. A browser sends no
``SameSite=Strict`` cookie from such a page either, so the page's own scripts, styles and API calls are authorized
by their path instead: the dashboard gives a caller allowed to see a job's Ray dashboard a capability for that job
alone, valid for :data:`LIFETIME` seconds, which Ray's relative URLs keep in every request. A capability is a MAC
of the namespace, the job's name and its expiry, under a key derived from the administrator's token (which every
process of a server reads, and which nothing it serves ever shows).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path
from typing import Final

from flexq.auth import read_token

__all__ = ["LIFETIME", "MARK", "capability", "capability_key", "capability_path", "valid"]

LIFETIME: Final = 12 * 3600
"""Seconds a capability is valid (as long as the dashboard's session cookie)."""
MARK: Final = "~"
"""What starts a capability's path segment."""
_PREFIX: Final = "/ui/ray/"
_MAC_BYTES: Final = 18


def capability_key(home: Path) -> bytes | None:
    """The key capabilities are made and checked with, from the administrator's token under ``home`` (None where
    there is none to read)."""
    token = read_token(home)
    if token is None:
        return None
    return hmac.new(token.encode(), b"flexq: ray dashboard capabilities", hashlib.sha256).digest()


def _mac(key: bytes, namespace: str, name: str, expiry: int) -> str:
    digest = hmac.new(key, f"{namespace}\0{name}\0{expiry}".encode(), hashlib.sha256).digest()[:_MAC_BYTES]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def capability(key: bytes, namespace: str, name: str, now: float) -> str:
    """The path segment (``~EXPIRY.MAC``) that opens the Ray dashboard of RayJob ``namespace/name`` until ``now`` +
    :data:`LIFETIME`."""
    expiry = int(now) + LIFETIME
    return f"{MARK}{expiry:x}.{_mac(key, namespace, name, expiry)}"


def capability_path(path: str) -> tuple[str, str, str] | None:
    """The namespace, the job's name and the capability segment of a path under ``/ui/ray/`` that carries one, or
    None."""
    if not path.startswith(_PREFIX):
        return None
    parts = path[len(_PREFIX):].split("/", 3)
    if len(parts) < 3 or not parts[0] or not parts[1] or not parts[2].startswith(MARK):
        return None
    return parts[0], parts[1], parts[2]


def valid(key: bytes, segment: str, namespace: str, name: str, now: float) -> bool:
    """Whether ``segment`` is a capability for RayJob ``namespace/name`` that has not expired at ``now``."""
    expiry_text, _, mac = segment.removeprefix(MARK).partition(".")
    try:
        expiry = int(expiry_text, 16)
    except ValueError:
        return False
    return now < expiry and hmac.compare_digest(mac, _mac(key, namespace, name, expiry))
