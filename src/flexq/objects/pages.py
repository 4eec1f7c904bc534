"""Lists in pages, as the API server serves them: ``limit`` and ``continue``.

A list with ``limit=N`` returns at most N objects, in the store's order (namespace, then name), with an opaque
``continue`` token and, where no selector filters the list, ``remainingItemCount``. The token names the list's
resourceVersion and the last object returned; the pages after the first are of the same list, as it was at that
resourceVersion: the objects a paged list selected are kept for a while (:data:`KEEP_SECONDS`, at most
:data:`KEEP_LISTS` lists), and a list whose resource has not changed since is read again. A token whose list is
neither is refused as the API server refuses one whose resourceVersion was compacted: 410 Expired, with a token
that continues from the same place in the current list (an inconsistent one). The token is the API server's own
shape (base64 of ``{"v": "meta.k8s.io/v1", "rv": RV, "start": KEY}``), so clients that peek into it read it.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from flexq.objects.service import BadRequest

__all__ = ["KEEP_LISTS", "KEEP_SECONDS", "ContinueExpired", "ListPages", "Page", "decode_continue",
           "encode_continue"]

KEEP_SECONDS: Final = 300.0
"""How long the objects of a paged list are kept for its next pages (etcd, under the API server, compacts its
history every five minutes)."""
KEEP_LISTS: Final = 16
"""How many paged lists are kept at once (the oldest goes first)."""
_TOKEN_VERSION: Final = "meta.k8s.io/v1"
_EXPIRED: Final = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list."
)


class ContinueExpired(BadRequest):
    """A ``continue`` token whose list can no longer be served as it was: 410 Expired, with ``token``, which
    continues from the same place in the list as it is now."""

    def __init__(self, token: str) -> None:
        self.token = token
        super().__init__(_EXPIRED, 410, "Expired")


@dataclass(frozen=True, slots=True)
class Page:
    items: list[dict[str, Any]]
    resource_version: int
    continue_token: str  # "" on the last page
    remaining: int | None  # objects after this page, where known (no selector)


Position = tuple[str, str]
"""An object's place in a list: (namespace, name); "" for a cluster-scoped object's namespace."""


def _position(obj: dict[str, Any]) -> Position:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


def encode_continue(resource_version: int, after: Position) -> str:
    """The token for the objects after ``after`` in the list at ``resource_version`` (-1: in the list as it is
    when the token is used)."""
    key = f"{after[0]}/{after[1]}" if after[0] else after[1]
    data = json.dumps({"v": _TOKEN_VERSION, "rv": resource_version, "start": key + "\x00"},
                      separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, Position]:
    """(resourceVersion, the position after which the list goes on) of a token; :class:`BadRequest` in the API
    server's words for one this server did not give."""

    def invalid(why: str) -> BadRequest:
        return BadRequest(f"invalid continue token: continue key is not valid: {why}")

    try:
        data = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise invalid("illegal base64 data") from None
    try:
        decoded = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise invalid(str(exc)) from None
    if not isinstance(decoded, dict) or decoded.get("v") != _TOKEN_VERSION:
        version = decoded.get("v", "") if isinstance(decoded, dict) else ""
        raise invalid(f'server does not recognize this encoded version "{version}"')
    rv, start = decoded.get("rv"), decoded.get("start")
    if not isinstance(rv, int) or isinstance(rv, bool) or rv == 0 or rv < -1:
        raise invalid(f"incorrect encoded start resourceVersion (version {_TOKEN_VERSION})")
    if not isinstance(start, str) or not start.rstrip("\x00"):
        raise invalid(f"encoded start key empty (version {_TOKEN_VERSION})")
    key = start.removesuffix("\x00")
    namespace, _, name = key.rpartition("/")
    return rv, (namespace, name)


Lister = Callable[[], tuple[list[dict[str, Any]], int]]
"""The list as it is now (its objects, selected, in the store's order; and the resourceVersion read at)."""
Unchanged = Callable[[int], bool]
"""Whether the listed resource is as it was at a resourceVersion (False where that cannot be told)."""


class ListPages:
    """The lists that paged reads continue, kept for a while: one per resource, namespace, selectors and
    resourceVersion."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._lists: OrderedDict[tuple[Any, ...], tuple[float, list[dict[str, Any]]]] = OrderedDict()

    def page(self, what: tuple[Any, ...], limit: int, token: str, listed: Lister, unchanged: Unchanged,
             counted: bool) -> Page:
        """A page of the list ``what`` names (resource, namespace, selectors): the first, or the one ``token``
        continues to; at most ``limit`` objects (0: all). ``counted``: the list is not filtered by a selector, so
        the objects left after the page are told."""
        after: Position | None = None
        if token:
            rv, after = decode_continue(token)
            items = self._kept((*what, rv)) if rv > 0 else None
            if items is None and rv > 0 and unchanged(rv):
                items = listed()[0]
            if items is None:
                if rv > 0:
                    raise ContinueExpired(encode_continue(-1, after))
                items, rv = listed()
        else:
            items, rv = listed()
        start = 0 if after is None else bisect.bisect_right(items, after, key=_position)
        end = len(items) if limit <= 0 else min(len(items), start + limit)
        if end == len(items):
            return Page(items[start:end], rv, "", None)
        self._keep((*what, rv), items)
        return Page(items[start:end], rv, encode_continue(rv, _position(items[end - 1])),
                    len(items) - end if counted else None)

    def _kept(self, key: tuple[Any, ...]) -> list[dict[str, Any]] | None:
        with self._lock:
            self._expire()
            kept = self._lists.get(key)
            return kept[1] if kept is not None else None

    def _keep(self, key: tuple[Any, ...], items: list[dict[str, Any]]) -> None:
        with self._lock:
            self._expire()
            self._lists[key] = (self._clock(), items)
            self._lists.move_to_end(key)
            while len(self._lists) > KEEP_LISTS:
                self._lists.popitem(last=False)

    def _expire(self) -> None:
        now = self._clock()
        while self._lists:
            key, (since, _) = next(iter(self._lists.items()))
            if now - since <= KEEP_SECONDS:
                break
            del self._lists[key]
