"""Bearer tokens, kept under ``FLEXQ_HOME/auth`` (mode 0600) as their SHA-256 digests.

The administrator's token is made at the server's first start and written, in clear, to
``FLEXQ_HOME/auth/admin.token`` (0600) so that the administrator's own CLI, ``flexq env`` and the kubeconfig
they write can use it. Other tokens are shown once, when created (``flexq token create``), and only their
digests are kept. The book is re-read when its file changes, so a token created or revoked by one server
process is known to every process on the same ``FLEXQ_HOME``.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from flexq.auth.identity import Identity, Role
from flexq.config import write_private
from flexq.errors import FlexqError

__all__ = ["TOKEN_FILE", "TokenBook", "TokenError", "TokenInfo", "TokensUnwritable", "UnknownToken", "read_token"]

TOKEN_FILE: Final = "admin.token"
_BOOK: Final = "tokens.json"
_PREFIX: Final = "fq_"
_NAME: Final = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")


class TokenError(FlexqError):
    """A token request that cannot be honoured (a bad name or namespace, an unknown token)."""


class UnknownToken(TokenError):
    """No token has the name given."""


class TokensUnwritable(TokenError):
    """The book of tokens could not be written (a full disk, a read-only ``FLEXQ_HOME``): nothing was changed, the
    tokens are as they were. ``path``: the book; ``cause``: the system's words."""

    def __init__(self, path: Path, cause: str) -> None:
        self.path = path
        self.cause = cause
        super().__init__(f"the tokens could not be written: {cause} ({path}): nothing was changed; free space there "
                         "and try again")


@dataclass(frozen=True, slots=True)
class TokenInfo:
    name: str
    role: Role
    namespace: str | None
    created: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role.value, "namespace": self.namespace, "created": self.created}


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with mode 0600 in a folder of mode 0700, whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    write_private(path, text)


def read_token(home: Path) -> str | None:
    """The administrator's token from ``home``, if this user can read it."""
    try:
        text = (home / "auth" / TOKEN_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None


class TokenBook:
    """The tokens a server accepts, by digest."""

    def __init__(self, home: Path) -> None:
        self.folder = home / "auth"
        self._path = self.folder / _BOOK
        self._lock = threading.Lock()
        self._entries: dict[str, TokenInfo] = {}
        self._stamp: tuple[int, int] | None = None

    # --- the file ---------------------------------------------------------------------------------

    def _reload(self) -> None:
        try:
            st = self._path.stat()
        except FileNotFoundError:
            self._entries, self._stamp = {}, None
            return
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return
        raw = json.loads(self._path.read_text(encoding="utf-8"))
        self._entries = {e["sha256"]: TokenInfo(e["name"], Role(e["role"]), e.get("namespace"), e["created"])
                         for e in raw.get("tokens", [])}
        self._stamp = stamp

    def _save(self, before: dict[str, TokenInfo]) -> None:
        """Write the book; where it cannot be written, put ``before`` back (what the file still says) and raise
        :class:`TokensUnwritable`."""
        rows = [{"sha256": digest, **info.to_json()} for digest, info in self._entries.items()]
        try:
            _write_private(self._path, json.dumps({"tokens": rows}, indent=1) + "\n")
            st = self._path.stat()
        except OSError as exc:
            self._entries = before
            raise TokensUnwritable(self._path, exc.strerror or str(exc)) from None
        self._stamp = (st.st_mtime_ns, st.st_size)

    # --- the API ----------------------------------------------------------------------------------

    def ensure_admin(self) -> str:
        """The administrator's token, made (and written to ``admin.token``) if there is none yet."""
        with self._lock:
            self._reload()
            existing = read_token(self.folder.parent)
            if existing is not None and _digest(existing) in self._entries:
                return existing
            token = _PREFIX + secrets.token_urlsafe(32)
            before = self._entries
            self._entries = {d: i for d, i in self._entries.items() if i.name != "admin"}
            self._entries[_digest(token)] = TokenInfo("admin", Role.ADMIN, None, _now())
            self._save(before)
            _write_private(self.folder / TOKEN_FILE, token + "\n")
            return token

    def create(self, role: Role, namespace: str | None, name: str | None = None) -> tuple[str, TokenInfo]:
        """A new token for ``role``; returns it (shown once) and what is kept of it."""
        if role is Role.DEVELOPER and not namespace:
            raise TokenError("a developer token needs --namespace: the namespace its jobs live in")
        if role is Role.ADMIN and namespace:
            raise TokenError("an admin token is not bound to a namespace: drop --namespace")
        if namespace is not None and not _NAME.match(namespace):
            raise TokenError(f"--namespace {namespace!r}: not a valid namespace name (RFC 1123 label)")
        with self._lock:
            self._reload()
            taken = {i.name for i in self._entries.values()}
            if name is None:
                base = f"{role.value}-{namespace}" if namespace else role.value
                name = next(f"{base}-{n}" for n in range(1, len(taken) + 2) if f"{base}-{n}" not in taken)
            elif not _NAME.match(name):
                raise TokenError(f"--name {name!r}: lowercase letters, digits, '-' and '.', at most 63")
            elif name in taken:
                raise TokenError(f"a token named {name!r} exists already (flexq token revoke {name} first)")
            token = _PREFIX + secrets.token_urlsafe(32)
            info = TokenInfo(name, role, namespace, _now())
            before = dict(self._entries)
            self._entries[_digest(token)] = info
            self._save(before)
            return token, info

    def revoke(self, name: str) -> TokenInfo:
        with self._lock:
            self._reload()
            for digest, info in self._entries.items():
                if info.name == name:
                    if name == "admin":
                        raise TokenError("the administrator's token cannot be revoked (delete "
                                         f"{self.folder / TOKEN_FILE} and restart the server for a new one)")
                    before = dict(self._entries)
                    del self._entries[digest]
                    self._save(before)
                    return info
            raise UnknownToken(f'no token named "{name}"')

    def list(self) -> list[TokenInfo]:
        with self._lock:
            self._reload()
            return sorted(self._entries.values(), key=lambda i: i.name)

    def identify(self, token: str) -> Identity | None:
        """The caller a presented token names, or None for a token this server never issued."""
        with self._lock:
            self._reload()
            info = self._entries.get(_digest(token))
        return None if info is None else Identity(info.name, info.role, info.namespace)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
