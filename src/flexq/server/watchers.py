"""What the watches of one server share: each caller's count of open watches (capped), the bytes committed to each
resource (how far behind a watch that waits for its client is), and what they send, encoded once for all of them.

A thousand watches of the same ConfigMaps from ``resourceVersion=0`` each began with a copy of its own of every object
(parsed, framed, joined, then copied again into its transport): thirty times the data each. Here a watch's initial
list is a :class:`Listing` made once, in a thread, and shared by every watch of the same selection that starts while
it is fresh; each sends it in slices of it, as its client takes them. A change's frame is made once for every watch
of its resource (:class:`Frames`).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from flexq.store import Change, Key

__all__ = ["FRAMES_HELD", "LISTING_AGE", "LISTING_FRESH", "WATCHES_PER_USER", "Frames", "Listing", "ListingKey",
           "Listings", "Tally", "TallyKey", "WatchSlots", "Watches"]

WATCHES_PER_USER: Final = 200
"""Watches one caller may have open at once, in one server process; past that a watch is answered 429."""
LISTING_FRESH: Final = 2.0
"""Seconds a listing is served to the watches that start after it, even where its resource changed since (they then
read the changes after it from the change log, as a watch from its resourceVersion would)."""
LISTING_AGE: Final = 30.0
"""Seconds a listing is served at the most, even where nothing of its resource changed: a watch that took an older
one would read the changes after it from a change log that may have been compacted since (410 Expired)."""
FRAMES_HELD: Final = 16 * 2**20
"""Bytes of change frames kept for the watches that have yet to send them, the newest."""

TallyKey = tuple[str, str, str | None]
"""(group, resource, namespace); None: every namespace (and a cluster-scoped resource's objects)."""
ListingKey = tuple[str, str, str | None, str, str, str, bool]
"""(group, resource, namespace, version, label selector, field selector, as a Table)."""
FrameKey = tuple[int, Key, str, bool]
"""(resourceVersion, object, version, as a Table)."""


class Tally:
    """The characters of the changes committed to each resource (and to each of its namespaces) since the server
    started: a watch that notes it when it reads the changes knows how much it has yet to send, without reading them.
    :meth:`add` may be called from any thread."""

    def __init__(self) -> None:
        self._sizes: dict[TallyKey, int] = {}
        self._lock = threading.Lock()

    def add(self, changes: Iterable[Change]) -> None:
        with self._lock:
            sizes = self._sizes
            for change in changes:
                group, resource, namespace = change.key.group, change.key.resource, change.key.namespace
                size = len(change.text)
                sizes[group, resource, None] = sizes.get((group, resource, None), 0) + size
                if namespace:
                    sizes[group, resource, namespace] = sizes.get((group, resource, namespace), 0) + size

    def read(self, key: TallyKey) -> int:
        return self._sizes.get(key, 0)


class WatchSlots:
    """Open watches per caller, at most ``per_user`` each (as the API server's priority and fairness bounds what one
    user may hold). Used from the event loop alone."""

    def __init__(self, per_user: int = WATCHES_PER_USER) -> None:
        self.per_user = per_user
        self._open: dict[str, int] = {}

    def take(self, user: str) -> bool:
        """One more watch for ``user``; False (and nothing taken) where they hold :attr:`per_user` already."""
        held = self._open.get(user, 0)
        if held >= self.per_user:
            return False
        self._open[user] = held + 1
        return True

    def give(self, user: str) -> None:
        held = self._open.get(user, 0) - 1
        if held > 0:
            self._open[user] = held
        else:
            self._open.pop(user, None)

    def held(self, user: str) -> int:
        return self._open.get(user, 0)


@dataclass(frozen=True, slots=True, weakref_slot=True)
class Listing:
    """A watch's initial list: the ADDED frames of every object selected, at resourceVersion ``rv``. ``mark``: the
    tally of its resource when it was read (before: a change made meanwhile counts as yet to send); ``made``: when
    (monotonic seconds)."""

    rv: int
    mark: int
    made: float
    data: bytes


class Listings:
    """The listings watches are sending, by selection: a watch that starts takes the newest where it is fresh (made
    less than :data:`LISTING_FRESH` seconds ago, or nothing of its resource committed since and made less than
    :data:`LISTING_AGE` seconds ago), else a new one is made; one made for several watches at once is made once. A
    listing is kept while a watch sends it, and :data:`LISTING_FRESH` seconds after it was last taken (the kernel
    takes a few megabytes of each watch's stream at once, so that the watches of a burst may each have sent it
    before the next starts)."""

    def __init__(self, tally: Tally, fresh: float = LISTING_FRESH) -> None:
        self.tally = tally
        self.fresh = fresh
        self._live: weakref.WeakValueDictionary[ListingKey, Listing] = weakref.WeakValueDictionary()
        self._kept: dict[ListingKey, tuple[float, Listing]] = {}
        self._making: dict[ListingKey, asyncio.Future[Listing]] = {}
        self._pruning: asyncio.TimerHandle | None = None

    async def get(self, key: ListingKey | None, tally_key: TallyKey, make: Callable[[], Listing]) -> Listing:
        """The listing for ``key`` (None: one of the caller's own, not shared), ``make`` run in a thread where there
        is none fresh."""
        if key is None:
            return await asyncio.to_thread(make)
        found = self._live.get(key)
        now = time.monotonic()
        if found is not None and (now - found.made < self.fresh or (
                now - found.made < LISTING_AGE and self.tally.read(tally_key) == found.mark)):
            self._keep(key, found, now)
            return found
        making = self._making.get(key)
        if making is None:
            making = asyncio.ensure_future(asyncio.to_thread(make))
            self._making[key] = making
            making.add_done_callback(functools.partial(self._made, key))
        return await asyncio.shield(making)

    def _made(self, key: ListingKey, future: asyncio.Future[Listing]) -> None:
        self._making.pop(key, None)
        if not future.cancelled() and future.exception() is None:
            self._live[key] = future.result()
            self._keep(key, future.result(), time.monotonic())

    def _keep(self, key: ListingKey, listing: Listing, now: float) -> None:
        self._kept[key] = (now + self.fresh, listing)
        if self._pruning is None:
            self._pruning = asyncio.get_running_loop().call_later(self.fresh, self._prune)

    def _prune(self) -> None:
        self._pruning = None
        now = time.monotonic()
        self._kept = {key: kept for key, kept in self._kept.items() if kept[0] > now}
        if self._kept:
            soonest = min(until for until, _ in self._kept.values())
            self._pruning = asyncio.get_running_loop().call_later(max(0.0, soonest - now), self._prune)


class Frames:
    """Frames of changes, made once for every watch that sends them; the newest kept, up to ``most`` bytes."""

    def __init__(self, most: int = FRAMES_HELD) -> None:
        self.most = most
        self._frames: OrderedDict[FrameKey, bytes] = OrderedDict()
        self._size = 0

    def get(self, key: FrameKey, make: Callable[[], bytes]) -> bytes:
        found = self._frames.get(key)
        if found is not None:
            return found
        made = make()
        if len(made) <= self.most // 4:
            self._frames[key] = made
            self._size += len(made)
            while self._size > self.most:
                _, dropped = self._frames.popitem(last=False)
                self._size -= len(dropped)
        return made


class Watches:
    """All of the above, for one server process's watches."""

    def __init__(self, per_user: int = WATCHES_PER_USER) -> None:
        self.tally = Tally()
        self.slots = WatchSlots(per_user)
        self.listings = Listings(self.tally)
        self.frames = Frames()
