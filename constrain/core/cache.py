"""A bounded, thread-safe cache of computed masks and memos, shared by the guides of one compilation.

Masks are computed lazily per state, and a long generation through a wide automaton
visits states without end, so an unbounded cache grows without end too (a 128k
vocabulary's packed mask is 16 KB). This keeps the most recently used ``size`` entries.
Per-call guide objects are shallow copies of one compiled guide: they share this object,
and so one lock, rather than each holding a lock of its own over a shared dict.
A grammar's parser memos are kept in these too (sized by ``Limits.max_memo_entries``):
their values are pure functions of their keys, so a dropped entry is recomputed equal.

Reads take no lock: under the GIL one ``OrderedDict`` lookup is atomic against another
thread's store or eviction, and a miss only means the value is computed again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Generic, Hashable, TypeVar

from .sharing import Shared

__all__ = ["BoundedCache"]

V = TypeVar("V")


class BoundedCache(Shared, Generic[V]):
    """At most ``size`` values by key, least recently stored dropped first."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a cache holds at least one entry, not {size}")
        self.size = size
        self._entries: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()
        #: The value stored for a key, or None: the dict's own lookup, bound once. Hot paths ask
        #: it by the hundred thousand in a walk (a parser memo per terminal a token may end in),
        #: and through a method each read cost a Python frame: the bundled SQL grammar's cold
        #: walk of 60 queries spent 870 ms in masks with it, 760 without (thread CPU time).
        self.get: Callable[[Hashable], V | None] = self._entries.get

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        del state["get"]  # bound to this dict: bound again to the copy's own (``__setstate__``)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.get = self._entries.get

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, key: Hashable, value: V) -> V:
        """Store ``value`` (or keep the one another thread stored first) and return what is stored."""
        with self._lock:
            value = self._entries.setdefault(key, value)
            self._entries.move_to_end(key)
            self._evict()
        return value

    def store(self, key: Hashable, value: V) -> None:
        """Store ``value``, replacing what is stored: for values a later computation refines."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            self._evict()

    def _evict(self) -> None:
        """Drop the least recently stored entries past ``size`` (called under the lock)."""
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
