"""Who a job's processes run as, and what they are given: never the server's secrets.

A job (a Ray cluster, a Pod's commands) runs code its submitter wrote, a developer's too. The server keeps the
administrator's token (``FLEXQ_HOME/auth``), its CA's key (``tls/ca.key``) and the store; a job must reach none of
them, nor the server's environment (``FLEXQ_TOKEN``, a PostgreSQL password in ``FLEXQ_STORE``):

- where the server runs as root, each namespace's jobs run as a user of that namespace's own: a uid from the range
  ``--job-uids`` (by default 1500000000-1500065535, skipping any uid this machine's users have), given to the
  namespace at its first job and kept in ``FLEXQ_HOME/runs/uids.json``, its group the uid's own number, with the
  group ``flexq-jobs`` (made at the first start where it can be, else ``nogroup``) as its only other group. No team
  can then read or write another's working directories (0700, each its namespace's user's) nor signal its processes.
  ``--run-as USER`` runs every namespace's jobs as that one user instead (as teams that share everything want);
  ``FLEXQ_HOME`` is searchable but not readable by the job users (0711; the secrets 0700 and 0600 inside);
- everywhere, a job's environment is the server's without what could carry a credential (:func:`job_environment`).

A server not run as root cannot run its jobs as another user: they run as its own user, who can read its files.
On such a machine a developer's token keeps the developer to their namespace through the API, not from the files
of the user that runs the server (docs/concepts/security.md says so).

The user is configured once, when the server starts (:func:`configure`); the local runtime's parts that start
processes ask :func:`job_user` for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import grp
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from flexq.config import write_private
from flexq.errors import FlexqError

__all__ = ["DEFAULT_UIDS", "DEFAULT_USER", "JobUser", "JobUserError", "choose_uids", "configure", "job_environment",
           "job_user", "parse_uid_range"]

DEFAULT_USER: Final = "flexq-jobs"
DEFAULT_UIDS: Final = range(1_500_000_000, 1_500_065_536)
"""The uids namespaces' job users are given, where ``--job-uids`` does not say."""
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
    groups: tuple[int, ...] = ()
    """The user's groups besides ``gid`` (a namespace's user: the shared job group, which the ACLs name)."""
    per_namespace: bool = False
    """Each namespace's jobs run as a user of its own (:func:`job_user` with a namespace gives it)."""

    @property
    def separate(self) -> bool:
        return self.uid is not None

    def credentials(self) -> tuple[int, int, tuple[int, ...]] | None:
        """(uid, gid, groups) to start a process as; None: the server's own user."""
        if self.uid is None or self.gid is None:
            return None
        return self.uid, self.gid, self.groups

    def spawn_options(self) -> dict[str, Any]:
        """``subprocess.Popen`` arguments that start a process as this user, with its own groups only."""
        if self.uid is None:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}

    def give(self, folder: Path) -> None:
        """Make ``folder`` (and what is in it) this user's and 0700, and the folders from ``FLEXQ_HOME`` down to it
        searchable (0711) so that the user reaches it, and nothing else of them. The walk opens each folder without
        following links (a link the job put there is changed itself, never what it points at)."""
        if self.uid is None or self.gid is None:
            return
        if self.home is not None:
            _grant_search(self.home, *self._acl_target())  # again: a folder above may have been chmod'ed since
            with contextlib.suppress(ValueError):
                step = self.home
                for part in folder.parent.relative_to(self.home).parts:
                    step = step / part
                    step.chmod(0o711)
        os.chown(folder, self.uid, self.gid, follow_symlinks=False)
        os.chmod(folder, 0o700, follow_symlinks=False)
        for _root, dirs, files, fd in os.fwalk(folder, follow_symlinks=False):
            for name in [*dirs, *files]:
                with contextlib.suppress(FileNotFoundError):
                    os.chown(name, self.uid, self.gid, dir_fd=fd, follow_symlinks=False)

    def _acl_target(self) -> tuple[int, int]:
        """(tag, id) of the ACL entry that lets this user search: its shared group's, else its own."""
        if self.groups:
            return _ACL_GROUP, self.groups[0]
        return _ACL_USER, int(self.uid if self.uid is not None else os.geteuid())


_CURRENT: JobUser | None = None
_UIDS: range = DEFAULT_UIDS
_TAKEN: dict[str, int] = {}
_TAKEN_LOCK = threading.Lock()


def job_user(namespace: str | None = None) -> JobUser:
    """The user the jobs of ``namespace`` run as (the server's own until :func:`configure` says otherwise); without a
    namespace, the configured user (a namespace's user where each has its own is asked for by namespace)."""
    user = _CURRENT if _CURRENT is not None else _own()
    if not user.per_namespace or namespace is None:
        return user
    uid = _uid_of(namespace, user.home)
    return dataclasses.replace(user, name=f"{namespace} (uid {uid})", uid=uid, gid=uid, per_namespace=False)


_CHOSEN: range | None = None


def choose_uids(uids: range) -> None:
    """``--job-uids``: the range :func:`configure` gives namespaces' users from, where it is not told another."""
    global _CHOSEN
    _CHOSEN = uids


def parse_uid_range(text: str) -> range:
    """``START-END`` (both taken) -> a range of uids; ValueError with the reason otherwise."""
    low, sep, high = text.partition("-")
    if not sep or not low.strip().isascii() or not low.strip().isdigit() or not high.strip().isascii() \
            or not high.strip().isdigit():
        raise ValueError(f"{text!r}: give the uids as START-END, e.g. 1500000000-1500065535")
    start, end = int(low), int(high)
    if not 1000 <= start <= end < 2**32 - 1:
        raise ValueError(f"{text!r}: the uids must lie between 1000 and 4294967294, the first not above the last")
    return range(start, end + 1)


def _uids_file(home: Path | None) -> Path | None:
    return None if home is None else home / "runs" / "uids.json"


def _uid_of(namespace: str, home: Path | None) -> int:
    """The uid of ``namespace``'s jobs: kept from the first time it was asked (in ``FLEXQ_HOME/runs/uids.json``),
    else the next free uid of the range (not in the machine's user database, not another namespace's)."""
    with _TAKEN_LOCK:
        path = _uids_file(home)
        if not _TAKEN and path is not None:
            with contextlib.suppress(OSError, ValueError):
                loaded = json.loads(path.read_text(encoding="utf-8"))
                _TAKEN.update({str(k): int(v) for k, v in dict(loaded).items()})
        if namespace in _TAKEN:
            return _TAKEN[namespace]
        used = set(_TAKEN.values())
        uid = next((uid for uid in _UIDS if uid not in used and _free_uid(uid)), None)
        if uid is None:
            raise JobUserError(f"no uid is left for the jobs of namespace {namespace}: the range {_UIDS.start}-"
                               f"{_UIDS.stop - 1} is used up (--job-uids)")
        _TAKEN[namespace] = uid
        if path is not None:
            write_private(path, json.dumps(_TAKEN, sort_keys=True))
        return uid


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
_ACL_USER: Final = 0x02
_ACL_GROUP: Final = 0x08


def _acl_granting_search(mode: int, uid: int, existing: bytes | None = None, tag: int = _ACL_USER) -> bytes | None:
    """A POSIX access ACL (the kernel's xattr form): ``existing`` (or one equal to ``mode``) with search permission
    for user ``uid`` (or, ``tag`` :data:`_ACL_GROUP`, group ``uid``) added, and in the mask; None where it grants that
    already."""
    entries: dict[tuple[int, int], int] = {}
    if existing and len(existing) >= 4 and (len(existing) - 4) % 8 == 0:
        for at in range(4, len(existing), 8):
            kind, perm, ident = (int.from_bytes(existing[at:at + 2], "little"),
                                int.from_bytes(existing[at + 2:at + 4], "little"),
                                int.from_bytes(existing[at + 4:at + 8], "little"))
            entries[(kind, ident)] = perm
    else:
        entries = {(0x01, _ACL_UNDEFINED): (mode >> 6) & 7,  # the owner
                   (0x04, _ACL_UNDEFINED): (mode >> 3) & 7,  # the owning group
                   (0x20, _ACL_UNDEFINED): mode & 7}  # others
    mask = entries.get((0x10, _ACL_UNDEFINED), (mode >> 3) & 7)
    if entries.get((tag, uid), 0) & 1 and mask & 1:
        return None
    entries[(tag, uid)] = entries.get((tag, uid), 0) | 1  # the job user (or group): search
    entries[(0x10, _ACL_UNDEFINED)] = mask | 1
    return (2).to_bytes(4, "little") + b"".join(
        tag.to_bytes(2, "little") + perm.to_bytes(2, "little") + ident.to_bytes(4, "little")
        for (tag, ident), perm in sorted(entries.items()))


def _grant_search(home: Path | None, tag: int, ident: int) -> list[Path]:
    """Let the user (``tag`` :data:`_ACL_USER`) or group (:data:`_ACL_GROUP`) ``ident`` search (not list) the folders
    above this installation's interpreter, its libraries, flexq and ``FLEXQ_HOME`` (where the jobs' working
    directories are) that others may not search (a pyenv under ``/root``): an ACL entry for it alone on each (kept
    with the entries already there). Returns the folders changed; on a file system without ACLs nothing changes."""
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
            if mode & 0o001 or (tag == _ACL_USER and st.st_uid == ident):
                continue
            existing = os.getxattr(folder, _ACL_XATTR) if _ACL_XATTR in os.listxattr(folder) else None
            acl = _acl_granting_search(mode, ident, existing, tag)
            if acl is None:
                continue
            os.setxattr(folder, _ACL_XATTR, acl)
        except OSError:
            continue
        granted.append(folder)
    return granted


def configure(run_as: str | None, home: Path | None = None, uids: range | None = None) -> JobUser:
    """Settle who this server's jobs run as (see the module's text) and return it; ``home``: the server's
    ``FLEXQ_HOME``; ``uids``: the range namespaces' users are given (``--job-uids``). Raises :class:`JobUserError`
    for a ``run_as`` that cannot be honoured."""
    global _CURRENT, _UIDS
    own = _own()
    _TAKEN.clear()
    _UIDS = uids if uids is not None else _CHOSEN if _CHOSEN is not None else DEFAULT_UIDS
    if os.geteuid() != 0:
        if run_as not in (None, own.name):
            raise JobUserError(f"--run-as {run_as}: only a server run as root can run its jobs as another user")
        _CURRENT = own
        return own
    if run_as == "root":
        _CURRENT = JobUser("root", note="--run-as root: jobs run as root and can read the server's secrets")
        return _CURRENT
    if run_as is None:
        return _per_namespace(home)
    try:
        entry = pwd.getpwnam(run_as)
    except KeyError:
        if run_as != DEFAULT_USER or not _create(run_as):
            raise JobUserError(f"--run-as {run_as}: no such user on this machine") from None
        entry = pwd.getpwnam(run_as)
    if entry.pw_uid == 0:
        raise JobUserError(f"--run-as {run_as}: that user is root (use --run-as root to say so)")
    granted = _grant_search(home, _ACL_USER, entry.pw_uid)
    user = JobUser(entry.pw_name, entry.pw_uid, entry.pw_gid, home=home, searchable=tuple(granted))
    _CURRENT = user if _can_run(user) else _cannot_run(entry.pw_name)
    return _CURRENT


def _cannot_run(name: str) -> JobUser:
    return JobUser("root", note=f"the job user {name} cannot run {sys.executable} (a folder above it is not searchable "
                                "by other users): jobs run as root and can read the server's secrets; install flexq "
                                "where other users can run it")


def _per_namespace(home: Path | None) -> JobUser:
    """Each namespace's jobs as a user of its own, all of them in the shared group (``flexq-jobs``'s, made where it
    can be, else ``nogroup``), which the ACLs above the interpreter name."""
    global _CURRENT
    try:
        gid = grp.getgrnam(DEFAULT_USER).gr_gid
    except KeyError:
        if _create(DEFAULT_USER):
            gid = grp.getgrnam(DEFAULT_USER).gr_gid
        else:
            try:
                gid = grp.getgrnam("nogroup").gr_gid
            except KeyError:
                gid = 65534
    granted = _grant_search(home, _ACL_GROUP, gid)
    probe = next((uid for uid in _UIDS if _free_uid(uid)), None)
    if probe is None:
        raise JobUserError(f"--job-uids {_UIDS.start}-{_UIDS.stop - 1}: every uid of the range is a user of this "
                           "machine already")
    user = JobUser("a user of each namespace's own", probe, probe, home=home, searchable=tuple(granted),
                   groups=(gid,), per_namespace=True)
    _CURRENT = user if _can_run(user) else _cannot_run(f"of uid {probe}")
    return _CURRENT


def _free_uid(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return True
    return False
