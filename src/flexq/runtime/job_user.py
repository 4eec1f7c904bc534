"""Who a job's processes run as, and what they are given: never the server's secrets.

A job (a Ray cluster, a Pod's commands) runs code its submitter wrote, a developer's too. The server keeps the
administrator's token (``FLEXQ_HOME/auth``), its CA's key (``tls/ca.key``) and the store; a job must reach none of
them, nor the server's environment (``FLEXQ_TOKEN``, a PostgreSQL password in ``FLEXQ_STORE``):

- where the server runs as root, its jobs run as an unprivileged user of their own (``--run-as USER``; by default
  ``flexq-jobs``, made at the first start where it can be, else ``nobody``), without root's groups, with their
  working directories given to that user and ``FLEXQ_HOME`` searchable but not readable by it (0711; the secrets
  0700 and 0600 inside);
- everywhere, a job's environment is the server's without what could carry a credential (:func:`job_environment`).

A server not run as root cannot run its jobs as another user: they run as its own user, who can read its files.
On such a machine a developer's token keeps the developer to their namespace through the API, not from the files
of the user that runs the server (docs/concepts/security.md says so).

The user is configured once, when the server starts (:func:`configure`); the local runtime's parts that start
processes ask :func:`job_user` for it.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from flexq.errors import FlexqError

__all__ = ["DEFAULT_USER", "JobUser", "JobUserError", "configure", "job_environment", "job_user"]

DEFAULT_USER: Final = "flexq-jobs"
_SECRET: Final = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|API_KEY|PRIVATE_KEY)", re.IGNORECASE)
_DROPPED_PREFIXES: Final = ("FLEXQ_", "CLOUDSDK_", "KUBECONFIG", "PGPASS", "GOOGLE_APPLICATION_CREDENTIALS",
                            "AWS_", "SSH_AUTH_SOCK")


class JobUserError(FlexqError):
    """``--run-as`` names a user that cannot run jobs (unknown, or asked of a server that is not root)."""


def job_environment(base: Mapping[str, str]) -> dict[str, str]:
    """``base`` without the variables that may carry the server's credentials (flexq's own, gcloud's, kubectl's,
    PostgreSQL's, cloud keys, and any whose name says token, secret, password or credential)."""
    return {k: v for k, v in base.items() if not k.startswith(_DROPPED_PREFIXES) and not _SECRET.search(k)}


@dataclass(frozen=True, slots=True)
class JobUser:
    """The user a job's processes run as. ``uid`` None: the server's own user (nothing to switch)."""

    name: str
    uid: int | None = None
    gid: int | None = None
    note: str = ""
    """Why jobs run as the server's own user, where a separate one was wanted (for the banner)."""
    home: Path | None = None
    """The server's ``FLEXQ_HOME``, under which jobs' working directories lie (``runtime/...``)."""
    searchable: tuple[Path, ...] = ()
    """Folders this user was let search (an ACL entry) to reach the interpreter (for the banner)."""

    @property
    def separate(self) -> bool:
        return self.uid is not None

    def spawn_options(self) -> dict[str, Any]:
        """``subprocess.Popen`` arguments that start a process as this user, with its group only."""
        if self.uid is None:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def give(self, folder: Path) -> None:
        """Make ``folder`` (and what is in it) this user's, and the folders from ``FLEXQ_HOME`` down to it searchable
        (0711) so that the user reaches it, and nothing else of them."""
        if self.uid is None or self.gid is None:
            return
        if self.home is not None:
            _grant_search(self.uid, self.home)  # again: a folder above may have been chmod'ed since the start
            with contextlib.suppress(ValueError):
                step = self.home
                for part in folder.parent.relative_to(self.home).parts:
                    step = step / part
                    step.chmod(0o711)
        os.chown(folder, self.uid, self.gid)
        for root, dirs, files in os.walk(folder):
            for name in [*dirs, *files]:
                with contextlib.suppress(FileNotFoundError):
                    os.chown(os.path.join(root, name), self.uid, self.gid, follow_symlinks=False)


_CURRENT: JobUser | None = None


def job_user() -> JobUser:
    """The user this process's jobs run as (the server's own until :func:`configure` says otherwise)."""
    return _CURRENT if _CURRENT is not None else _own()


def _own() -> JobUser:
    try:
        return JobUser(pwd.getpwuid(os.geteuid()).pw_name)
    except KeyError:
        return JobUser(str(os.geteuid()))


def _create(name: str) -> bool:
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    try:
        done = subprocess.run([useradd, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                               "--shell", "/usr/sbin/nologin", name], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _can_run(user: JobUser) -> bool:
    """Whether ``user`` can start this installation's interpreter and import flexq (every folder above it
    searchable by that user)."""
    try:
        done = subprocess.run([sys.executable, "-c", "import flexq"], cwd="/", env=job_environment(os.environ),
                              capture_output=True, timeout=60, check=False, **user.spawn_options())
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


_ACL_XATTR: Final = "system.posix_acl_access"
_ACL_UNDEFINED: Final = 0xFFFFFFFF


def _acl_granting_search(mode: int, uid: int, existing: bytes | None = None) -> bytes | None:
    """A POSIX access ACL (the kernel's xattr form): ``existing`` (or one equal to ``mode``) with search permission
    for user ``uid`` added, and in the mask; None where it grants that already."""
    entries: dict[tuple[int, int], int] = {}
    if existing and len(existing) >= 4 and (len(existing) - 4) % 8 == 0:
        for at in range(4, len(existing), 8):
            tag, perm, ident = (int.from_bytes(existing[at:at + 2], "little"),
                                int.from_bytes(existing[at + 2:at + 4], "little"),
                                int.from_bytes(existing[at + 4:at + 8], "little"))
            entries[(tag, ident)] = perm
    else:
        entries = {(0x01, _ACL_UNDEFINED): (mode >> 6) & 7,  # the owner
                   (0x04, _ACL_UNDEFINED): (mode >> 3) & 7,  # the owning group
                   (0x20, _ACL_UNDEFINED): mode & 7}  # others
    mask = entries.get((0x10, _ACL_UNDEFINED), (mode >> 3) & 7)
    if entries.get((0x02, uid), 0) & 1 and mask & 1:
        return None
    entries[(0x02, uid)] = entries.get((0x02, uid), 0) | 1  # the job user: search
    entries[(0x10, _ACL_UNDEFINED)] = mask | 1
    return (2).to_bytes(4, "little") + b"".join(
        tag.to_bytes(2, "little") + perm.to_bytes(2, "little") + ident.to_bytes(4, "little")
        for (tag, ident), perm in sorted(entries.items()))


def _grant_search(uid: int, home: Path | None) -> list[Path]:
    """Let user ``uid`` search (not list) the folders above this installation's interpreter, its libraries, flexq
    and ``FLEXQ_HOME`` (where the jobs' working directories are) that others may not search (a pyenv under
    ``/root``): an ACL entry for that user alone on each (kept with the entries already there). Returns the folders
    changed; on a file system without ACLs nothing changes."""
    import flexq

    targets = {Path(os.path.realpath(sys.executable)), Path(sys.prefix), Path(sys.base_prefix),
               Path(os.path.realpath(flexq.__file__))}
    if home is not None:
        targets.add(home.resolve() / "runtime")
    granted: list[Path] = []
    for folder in sorted({parent for target in targets for parent in target.parents}):
        try:
            st = os.stat(folder)
            mode = st.st_mode
            if mode & 0o001 or st.st_uid == uid:
                continue
            existing = os.getxattr(folder, _ACL_XATTR) if _ACL_XATTR in os.listxattr(folder) else None
            acl = _acl_granting_search(mode, uid, existing)
            if acl is None:
                continue
            os.setxattr(folder, _ACL_XATTR, acl)
        except OSError:
            continue
        granted.append(folder)
    return granted


def configure(run_as: str | None, home: Path | None = None) -> JobUser:
    """Settle who this server's jobs run as (see the module's text) and return it; ``home``: the server's
    ``FLEXQ_HOME``. Raises :class:`JobUserError` for a ``run_as`` that cannot be honoured."""
    global _CURRENT
    own = _own()
    if os.geteuid() != 0:
        if run_as not in (None, own.name):
            raise JobUserError(f"--run-as {run_as}: only a server run as root can run its jobs as another user")
        _CURRENT = own
        return own
    if run_as == "root":
        _CURRENT = JobUser("root", note="--run-as root: jobs run as root and can read the server's secrets")
        return _CURRENT
    name = run_as or DEFAULT_USER
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        if run_as is not None and run_as != DEFAULT_USER:
            raise JobUserError(f"--run-as {run_as}: no such user on this machine") from None
        entry = pwd.getpwnam(name) if _create(name) else pwd.getpwnam("nobody")
    if entry.pw_uid == 0:
        raise JobUserError(f"--run-as {name}: that user is root (use --run-as root to say so)")
    granted = _grant_search(entry.pw_uid, home)
    user = JobUser(entry.pw_name, entry.pw_uid, entry.pw_gid, home=home, searchable=tuple(granted))
    if not _can_run(user):
        user = JobUser("root", note=f"the job user {entry.pw_name} cannot run {sys.executable} (a folder above it is "
                                    "not searchable by other users): jobs run as root and can read the server's "
                                    "secrets; install flexq where other users can run it")
    _CURRENT = user
    return user
