"""An authenticated caller: a user name, a role and, for developers, the one namespace they work in."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

__all__ = ["ANONYMOUS", "Identity", "Role"]


class Role(enum.StrEnum):
    ADMIN = "admin"
    """The cluster administrator: everything."""
    DEVELOPER = "developer"
    """An AI developer: jobs and ConfigMaps in one namespace, read access to the queues."""


@dataclass(frozen=True, slots=True)
class Identity:
    user: str
    role: Role
    namespace: str | None = None

    @property
    def groups(self) -> list[str]:
        return ["system:authenticated", f"flexq:{self.role.value}s"]


ANONYMOUS: Final = Identity("system:anonymous", Role.ADMIN)
"""The caller with no token on a server in single-user (loopback, anonymous) mode: acts as administrator."""
